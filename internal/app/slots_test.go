package app_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/vector"
)

// A collection created with a slot count is split into that many hash
// slots, dealt out evenly over the shards; every document lives on the
// shard its slot's owner names, GET shows the map, and answers are brute
// force. The slot count is fixed: a create naming another is a conflict,
// one naming none is the existing collection.
func TestSlottedCollectionPlacesBySlots(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 1, Dim: 4, Docs: 10, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	a, _, _ := routerOver(t, dc)

	code, raw := a.do(http.MethodPut, "/v1/collections/s", map[string]any{"dimension": 4, "metric": "dot", "slots": 16})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.JSONEq(t, `{"name":"s","dimension":4,"metric":"dot","quantization":"none","index":"flat","float32":"in_memory","created":true,"slots":16}`, string(raw))
	code, raw = a.do(http.MethodPut, "/v1/collections/s", map[string]any{"dimension": 4, "metric": "dot", "slots": 32})
	require.Equal(t, http.StatusConflict, code, "%s", raw)
	require.Contains(t, string(raw), "exists with 16 slots")
	code, raw = a.do(http.MethodPut, "/v1/collections/s", map[string]any{"dimension": 4, "metric": "dot"})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	for _, bad := range []any{0, 4097, "16", 1.5} {
		code, raw = a.do(http.MethodPut, "/v1/collections/bad", map[string]any{"slots": bad})
		require.Equal(t, http.StatusBadRequest, code, "slots %v: %s", bad, raw)
	}

	m := &model{settings: catalog.Settings{Dim: 4, Metric: vector.DotProduct}.Normalize(), docs: map[string][]float32{}}
	even := placement.Even(dc.Names, 16)
	want := map[string]uint64{}
	rng := rand.New(rand.NewPCG(3, 4))
	var vs []map[string]any
	for i := range 300 {
		id := fmt.Sprintf("d-%d", i)
		v := randomVector(rng, 4)
		vs = append(vs, map[string]any{"id": id, "vector": v})
		m.docs[id] = v
		want[even.Home(id)]++
	}
	for i := 0; i < len(vs); i += 100 {
		code, raw = a.do(http.MethodPost, "/v1/collections/s/vectors", map[string]any{"vectors": vs[i : i+100]})
		require.Equal(t, http.StatusOK, code, "%s", raw)
	}

	code, raw = a.do(http.MethodGet, "/v1/collections/s", nil)
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var st struct {
		Slots        int    `json:"slots"`
		SlotMapEpoch uint64 `json:"slot_map_epoch"`
		DocCount     uint64 `json:"doc_count"`
		Shards       []struct {
			Name     string `json:"name"`
			Slots    int    `json:"slots"`
			DocCount uint64 `json:"doc_count"`
		} `json:"shards"`
	}
	require.NoError(t, json.Unmarshal(raw, &st))
	require.Equal(t, 16, st.Slots)
	require.Equal(t, uint64(1), st.SlotMapEpoch)
	require.Equal(t, uint64(300), st.DocCount)
	for _, sh := range st.Shards {
		require.Equal(t, even.Counts(dc.Names)[sh.Name], sh.Slots, sh.Name)
		require.Equal(t, want[sh.Name], sh.DocCount, "%s holds the documents of its slots", sh.Name)
	}
	for i := range 10 {
		q := randomVector(rng, 4)
		code, ans := a.search("s", q, 10)
		require.Equal(t, http.StatusOK, code)
		require.False(t, ans.ScatterGather.Degraded)
		requireBruteForce(t, m, q, 10, ans.Items, fmt.Sprintf("query %d", i))
		for _, it := range ans.Items {
			require.Equal(t, even.Home(it.ID), it.Shard, "hit %s", it.ID)
		}
	}
}
