package qdrant_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
	"github.com/trawl-search/trawl/shard/store"
)

// TestQdrantCollectionUpdate: PATCH /collections/{name} switches int8
// codes on and off on every replica of every shard (through an alias
// too), accepts the tuning Qdrant clients send around bulk loads as
// no-ops, answers searches equal to the brute force before and after,
// and refuses each change trawl cannot make with a 400 naming its member
// that changes nothing.
func TestQdrantCollectionUpdate(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	do := func(method, path, body string) apitest.Response {
		t.Helper()
		return e.Do(method, path, body, map[string]string{"Content-Type": "application/json"})
	}
	okTrue := `{"result":true,"status":"ok","time":0}`
	res := do(http.MethodPut, "/collections/pq", `{"vectors": {"size": 8, "distance": "Dot"}}`)
	require.Equal(t, http.StatusOK, res.Status, res.String())
	pts := lcCorpus(240, 8)
	res = do(http.MethodPut, "/collections/pq/points?wait=true", upsertBody(t, pts))
	require.Equal(t, http.StatusOK, res.Status, res.String())
	res = do(http.MethodPost, "/collections/aliases", `{"actions": [{"create_alias": {"collection_name": "pq", "alias_name": "live"}}]}`)
	require.Equal(t, http.StatusOK, res.Status, res.String())

	searches := func(t *testing.T) {
		t.Helper()
		for i := range 5 {
			q := pts[i*7].vector
			res := do(http.MethodPost, "/collections/pq/points/search", string(mustJSON(t, map[string]any{"vector": q, "limit": 10})))
			require.Equal(t, http.StatusOK, res.Status, res.String())
			var got struct {
				Result []lcHit `json:"result"`
			}
			require.NoError(t, json.Unmarshal(res.Body, &got))
			requireHits(t, bruteForce(pts, q, "dot", 10, nil), got.Result, "search")
		}
	}
	quantOnEveryReplica := func(t *testing.T, want store.Quantization) {
		t.Helper()
		for _, reps := range e.DC.Replicas {
			for _, r := range reps {
				mem, ok := r.Collections.Store("pq")
				require.True(t, ok)
				require.Eventually(t, func() bool { return mem.Quantization() == want }, apitest.Deadline*5, 10*time.Millisecond,
					"replica %s/%d", r.Shard, r.Index)
			}
		}
	}
	quantInfo := func() string {
		var info struct {
			Result struct {
				Config struct {
					Quantization json.RawMessage `json:"quantization_config"`
				} `json:"config"`
			} `json:"result"`
		}
		res := do(http.MethodGet, "/collections/pq", "")
		require.Equal(t, http.StatusOK, res.Status, res.String())
		require.NoError(t, json.Unmarshal(res.Body, &info))
		return string(info.Result.Config.Quantization)
	}

	searches(t)
	quantOnEveryReplica(t, store.QuantNone)
	res = do(http.MethodPatch, "/collections/live", `{"quantization_config": {"scalar": {"type": "int8", "quantile": 0.99, "always_ram": true}}}`)
	require.Equal(t, http.StatusOK, res.Status, res.String())
	require.Equal(t, okTrue, normalised(t, res.Body))
	quantOnEveryReplica(t, store.QuantInt8)
	require.JSONEq(t, `{"scalar": {"type": "int8"}}`, quantInfo())
	searches(t)

	// What a bulk load sends before and after, and a restatement of the
	// settings held: no-ops.
	for _, body := range []string{
		`{"optimizers_config": {"indexing_threshold": 0}, "hnsw_config": {"m": 0}}`,
		`{"optimizers_config": {"indexing_threshold": 20000}, "hnsw_config": {"m": 16, "ef_construct": 100}, "params": {"on_disk_payload": true}}`,
		`{"vectors": {"": {"on_disk": false, "hnsw_config": {"m": 16}}}, "params": {"replication_factor": 2, "write_consistency_factor": 1}}`,
		`{}`,
	} {
		res = do(http.MethodPatch, "/collections/pq", body)
		require.Equal(t, http.StatusOK, res.Status, "%s: %s", body, res.String())
	}
	quantOnEveryReplica(t, store.QuantInt8)

	for _, tc := range []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"on_disk", "/collections/pq", `{"vectors": {"": {"on_disk": true}}}`, 400,
			"Bad request: vectors.on_disk cannot change: the float32 vectors stay in memory, where the collection was created to keep them"},
		{"size", "/collections/pq", `{"vectors": {"": {"size": 16}}}`, 400, `Bad request: vectors."".size cannot change: it is fixed when the collection is created`},
		{"distance", "/collections/pq", `{"vectors": {"": {"distance": "Cosine"}}}`, 400, `Bad request: vectors."".distance cannot change: it is fixed when the collection is created`},
		{"named vector", "/collections/pq", `{"vectors": {"text": {"on_disk": false}}}`, 400, ""},
		{"product", "/collections/pq", `{"quantization_config": {"product": {"compression": "x16"}}}`, 400,
			`Bad request: quantization_config.product is not supported: trawl quantizes to int8 codes only ({"scalar": {"type": "int8"}})`},
		{"unknown string", "/collections/pq", `{"quantization_config": "Off"}`, 400,
			`Bad request: quantization_config is "Off", want "Disabled" or {"scalar": {"type": "int8"}}`},
		{"two quantizations", "/collections/pq", `{"quantization_config": "Disabled", "vectors": {"": {"quantization_config": {"scalar": {"type": "int8"}}}}}`, 400,
			`Bad request: quantization_config and vectors."".quantization_config ask for different quantizations`},
		{"replication factor", "/collections/pq", `{"params": {"replication_factor": 5}}`, 400,
			"Bad request: params.replication_factor cannot change: each shard has the 2 replicas the deployment runs"},
		{"two refusals at once", "/collections/pq", `{"quantization_config": "Disabled", "vectors": {"": {"on_disk": true}}, "params": {"write_consistency_factor": 2}}`, 400,
			"Bad request: vectors.on_disk cannot change: the float32 vectors stay in memory, where the collection was created to keep them; " +
				"params.write_consistency_factor cannot change: a write is acknowledged once its shard's log commits it"},
		{"read fan-out", "/collections/pq", `{"params": {"read_fan_out_factor": 2}}`, 400, ""},
		{"sparse", "/collections/pq", `{"sparse_vectors": {"s": {}}}`, 400, ""},
		{"unknown member", "/collections/pq", `{"shard_number": 3}`, 400, ""},
		{"not JSON", "/collections/pq", `{`, 400, ""},
		{"absent collection", "/collections/nope", `{"quantization_config": "Disabled"}`, 404, "Not found: Collection `nope` doesn't exist!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(http.MethodPatch, tc.path, tc.body)
			require.Equal(t, tc.status, res.Status, res.String())
			var env struct {
				Status struct {
					Error string `json:"error"`
				} `json:"status"`
			}
			require.NoError(t, json.Unmarshal(res.Body, &env))
			require.NotEmpty(t, env.Status.Error)
			if tc.msg != "" {
				require.Equal(t, tc.msg, env.Status.Error)
			}
			require.JSONEq(t, `{"scalar": {"type": "int8"}}`, quantInfo(), "nothing changed")
		})
	}
	quantOnEveryReplica(t, store.QuantInt8)

	res = do(http.MethodPatch, "/collections/pq", `{"vectors": {"": {"quantization_config": "Disabled"}}}`)
	require.Equal(t, http.StatusOK, res.Status, res.String())
	quantOnEveryReplica(t, store.QuantNone)
	require.Equal(t, "null", quantInfo())
	searches(t)
}
