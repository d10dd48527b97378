package app_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/vector"
)

// A router that did not run a move and has not re-read the catalog since
// (its periodic refresh is an hour away) still answers completely once
// the move has settled: the old owner refuses the slot it no longer
// holds (SLOT_MOVED), and the router re-reads the slot map and reads
// again within the same query. Searches, counts
// and gets of the moved slot's ids are complete and exact, no fan-out is
// degraded, and each search counts as one fan-out.
func TestStaleRouterAnswersAfterASettledMove(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 1, Dim: 4, Docs: 10, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	const dim, slots, docs = 4, 16, 600
	a, mover, _ := routerOver(t, dc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err = mover.Coordinator.CreateCollectionSlots(ctx, "m", catalog.Settings{Dim: dim, Metric: vector.DotProduct}, slots)
	require.NoError(t, err)
	m := &model{settings: catalog.Settings{Dim: dim, Metric: vector.DotProduct}.Normalize(), docs: map[string][]float32{}}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < docs; i += 200 {
		var vs []map[string]any
		for j := i; j < i+200; j++ {
			id, v := fmt.Sprintf("d-%d", j), randomVector(rng, dim)
			vs = append(vs, map[string]any{"id": id, "vector": v})
			m.docs[id] = v
		}
		code, raw := a.do(http.MethodPost, "/v1/collections/m/vectors", map[string]any{"vectors": vs})
		require.Equal(t, http.StatusOK, code, "%s", raw)
	}

	// The stale router reads the catalog at start, then not for an hour.
	stale, err := app.New(app.Config{Shards: dc.Specs(), Kernel: vector.Generic(), WarmupTimeout: 10 * time.Second, CatalogRefresh: time.Hour})
	require.NoError(t, err)
	srv := httptest.NewServer(stale.API)
	t.Cleanup(func() { srv.Close(); stale.Close() })
	require.NoError(t, stale.WaitReady(ctx))
	b := httpAPI{t: t, url: srv.URL}
	before, err := stale.Coordinator.Collection(ctx, "m")
	require.NoError(t, err)

	// Move the slot holding the most documents off shard-0, and let it
	// settle: shard-0 drops its rows.
	moved, most := -1, 0
	perSlot := map[int]int{}
	for id := range m.docs {
		perSlot[placement.Slot(id, slots)]++
	}
	for s, n := range perSlot {
		if before.Slots.Owners[s] == "shard-0" && n > most {
			moved, most = s, n
		}
	}
	require.GreaterOrEqual(t, moved, 0)
	res, err := mover.Coordinator.MoveSlot(ctx, "m", moved, "shard-1", coordinator.MoveConfig{Grace: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, most, res.Rows)
	still, err := stale.Coordinator.Collection(ctx, "m")
	require.NoError(t, err)
	require.Equal(t, before.Slots.Ver(), still.Slots.Ver(), "the stale router has not re-read the catalog yet")

	searches0 := metricSum(t, stale.Registry, "trawl_scatter_queries_total", "path", "search")
	degraded0 := metricSum(t, stale.Registry, "trawl_scatter_degraded_total")
	const queries = 10
	// 2 s for -race on two shared cores; TRAWL_STALE_DEADLINE_MS=50 runs
	// it at the default deadline (it passes there without -race).
	deadline := cmp.Or(os.Getenv("TRAWL_STALE_DEADLINE_MS"), "2000")
	for i := range queries {
		q := randomVector(rng, dim)
		code, raw := b.do(http.MethodPost, "/v1/collections/m/search?deadline_ms="+deadline, map[string]any{"vector": q, "k": 10})
		require.Equal(t, http.StatusOK, code, "query %d: %s", i, raw)
		var ans answer
		require.NoError(t, json.Unmarshal(raw, &ans))
		require.False(t, ans.ScatterGather.Degraded, "query %d: %s", i, raw)
		requireBruteForce(t, m, q, 10, ans.Items, fmt.Sprintf("query %d after the move settled", i))
	}
	require.Equal(t, float64(queries), metricSum(t, stale.Registry, "trawl_scatter_queries_total", "path", "search")-searches0,
		"each search is one fan-out, however many reads it took")
	require.Zero(t, metricSum(t, stale.Registry, "trawl_scatter_degraded_total")-degraded0)
	now, err := stale.Coordinator.Collection(ctx, "m")
	require.NoError(t, err)
	require.Equal(t, "shard-1", now.Slots.Owners[moved], "the stale router has the settled map now")

	// A count and gets through another stale router: the count fan-out
	// and the single-shard reads follow the newer map too.
	stale2, err := app.New(app.Config{Shards: dc.Specs(), Kernel: vector.Generic(), WarmupTimeout: 10 * time.Second, CatalogRefresh: time.Hour})
	require.NoError(t, err)
	t.Cleanup(stale2.Close)
	require.NoError(t, stale2.WaitReady(ctx))
	_, err = mover.Coordinator.MoveSlot(ctx, "m", moved, "shard-2", coordinator.MoveConfig{Grace: 300 * time.Millisecond})
	require.NoError(t, err)
	srv2 := httptest.NewServer(stale2.API)
	t.Cleanup(srv2.Close)
	c := httpAPI{t: t, url: srv2.URL}
	code, raw := c.do(http.MethodPost, "/collections/m/points/count?deadline_ms="+deadline, map[string]any{"exact": true})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var cnt struct {
		Result struct {
			Count int `json:"count"`
		} `json:"result"`
		ScatterGather struct {
			Degraded bool `json:"degraded"`
		} `json:"scatter_gather"`
	}
	require.NoError(t, json.Unmarshal(raw, &cnt))
	require.Equal(t, docs, cnt.Result.Count, "%s", raw)
	require.False(t, cnt.ScatterGather.Degraded, "%s", raw)
	for id, v := range m.docs {
		if placement.Slot(id, slots) != moved {
			continue
		}
		code, raw := c.do(http.MethodGet, "/v1/collections/m/vectors/"+id+"?deadline_ms="+deadline, nil)
		require.Equal(t, http.StatusOK, code, "%s: %s", id, raw)
		var doc struct {
			Vector []float32 `json:"vector"`
			Shard  string    `json:"shard"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc))
		require.InDeltaSlice(t, v, doc.Vector, 1e-6, id)
		require.Equal(t, "shard-2", doc.Shard, id)
	}
	require.Zero(t, metricSum(t, stale2.Registry, "trawl_scatter_degraded_total"))
}

// A router whose --shard list lacks a group the slot map gives slots to
// (started before the group was added, or still running after slots
// moved onto it) refuses reads of the collection with 503 naming the
// group, instead of answering without that group's rows as if complete.
func TestRouterMissingASlotOwnerRefusesReads(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Config{Shards: 4, Replicas: 1, Dim: 4, Docs: 10, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	a, _, _ := routerOver(t, dc)
	code, raw := a.do(http.MethodPut, "/v1/collections/m", map[string]any{"dimension": 4, "metric": "dot", "slots": 8})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	three, err := app.New(app.Config{Shards: dc.Specs()[:3], Kernel: vector.Generic(), WarmupTimeout: 10 * time.Second})
	require.NoError(t, err)
	srv := httptest.NewServer(three.API)
	t.Cleanup(func() { srv.Close(); three.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, three.WaitReady(ctx))
	b := httpAPI{t: t, url: srv.URL}
	for _, c := range []struct{ path, body string }{
		{"/v1/collections/m/search?deadline_ms=2000", `{"vector": [1, 0, 0, 0], "k": 3}`},
		{"/collections/m/points/count?deadline_ms=2000", `{"exact": true}`},
	} {
		code, raw := b.do(http.MethodPost, c.path, json.RawMessage(c.body))
		require.Equal(t, http.StatusServiceUnavailable, code, "%s: %s", c.path, raw)
		require.Contains(t, string(raw), "shard-3", c.path)
	}
	require.Zero(t, metricSum(t, three.Registry, "trawl_scatter_queries_total"), "nothing was fanned out")
}
