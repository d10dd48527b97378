package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
)

// TestCosineNormOutOfRange: under cosine, a vector whose float32 squared
// norm would underflow (elements near 1e-23) or overflow (near 1e20) is still
// finite, non-zero and has a direction. Router and shard both normalise in
// float64, so it is accepted, stored as a unit vector, and searchable — the
// router never accepts what a shard then refuses.
func TestCosineNormOutOfRange(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, c := range []struct {
		name string
		v    []float64
	}{{"tiny", vec(1e-23)}, {"huge", vec(1e20)}} {
		t.Run(c.name, func(t *testing.T) {
			id := "norm-" + c.name
			res := e.post("/v1/vectors", map[string]any{"vectors": []any{map[string]any{"id": id, "vector": c.v}}})
			require.Equal(t, http.StatusOK, res.status, "%s", res.body)
			res = e.do(http.MethodGet, "/v1/vectors/"+id, "", nil)
			require.Equal(t, http.StatusOK, res.status, "%s", res.body)
			var got struct{ Vector []float64 }
			require.NoError(t, json.Unmarshal(res.body, &got))
			var norm float64
			for _, x := range got.Vector {
				norm += x * x
			}
			require.InDelta(t, 1, norm, 1e-5, "stored as a unit vector")

			before := e.counters()
			res = e.post("/v1/search", map[string]any{"vector": c.v, "k": 1})
			require.Equal(t, http.StatusOK, res.status, "%s", res.body)
			require.Contains(t, string(res.body), `"degraded":false`)
			for k := range moved(before, e.counters()) {
				require.NotContains(t, k, "degraded", "a healthy answer moved %s", k)
			}
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
