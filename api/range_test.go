package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
)

// TestCosineNormOutOfRange: under cosine a shard refuses a vector whose
// float32 squared norm underflows to 0 or overflows to +Inf (it cannot be
// normalised), so the router must refuse it too, with a 400, before any
// shard sees it ("bad input never reaches a shard"). Elements like 1e-23
// or 1e20 are finite, non-zero and within float32 range, so the router's
// checkVector lets them through today.
func TestCosineNormOutOfRange(t *testing.T) {
	e := newEnv(t, envConfig{})
	tiny := vec(1e-23) // each square is 1e-46, below the smallest float32
	huge := vec(1e20)  // each square is 1e40, above the largest float32

	for _, c := range []struct {
		name string
		v    []float64
	}{{"tiny", tiny}, {"huge", huge}} {
		t.Run("write "+c.name, func(t *testing.T) {
			store, rpcs := e.storeState(), e.shardRPCs()
			res := e.post("/v1/vectors", map[string]any{"vectors": []any{
				map[string]any{"id": "norm-ok", "vector": vec(1)},
				map[string]any{"id": "norm-" + c.name, "vector": c.v},
			}})
			requireError(t, res, http.StatusBadRequest, "invalid_argument", false)
			require.Equal(t, store, e.storeState())
			require.Equal(t, rpcs, e.shardRPCs(), "BUG: the write reached the shards")
			e.requireAbsent("norm-ok", "norm-"+c.name)
		})
		t.Run("search "+c.name, func(t *testing.T) {
			before, rpcs := e.counters(), e.shardRPCs()
			res := e.post("/v1/search", map[string]any{"vector": c.v})
			requireError(t, res, http.StatusBadRequest, "invalid_argument", false)
			require.Equal(t, rpcs, e.shardRPCs(), "BUG: the query reached the shards")
			require.Empty(t, moved(before, e.counters()), "BUG: bad input counted as a degraded fan-out")
		})
	}
}

// TestDotScoreOverflow: under the dot metric the router accepts any finite
// float32, so a query and a stored vector of large elements score +Inf.
// The answer must still be JSON (the score encoder prints "+Inf", which
// makes encoding/json fail and leaves a 200 with an empty body), or the
// input must be refused up front with a 400.
func TestDotScoreOverflow(t *testing.T) {
	e := newEnv(t, envConfig{Metric: vector.DotProduct})
	big := vec(1e19) // q·x = 8e38 > MaxFloat32
	res := e.post("/v1/vectors", map[string]any{"vectors": []any{map[string]any{"id": "big", "vector": big}}})
	if res.status == http.StatusBadRequest {
		requireError(t, res, http.StatusBadRequest, "invalid_argument", false)
		return
	}
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	res = e.post("/v1/search", map[string]any{"vector": big, "k": 3})
	if res.status == http.StatusBadRequest {
		requireError(t, res, http.StatusBadRequest, "invalid_argument", false)
		return
	}
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.True(t, json.Valid(res.body), "BUG: 200 answer is not JSON: %q", res.body)
}
