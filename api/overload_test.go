package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/apitest"
	"github.com/trawl-search/trawl/vector"
)

// A shard whose every replica refuses a read as overloaded
// (RESOURCE_EXHAUSTED) makes the query a 429 overloaded with Retry-After
// and its scatter_gather, not a partial 200: unless the caller allows
// partial answers and the deadline is spent anyway (another shard took
// it all), when the partial answer is the best there is.
func TestOverloadedShardIsRefused(t *testing.T) {
	e := fake(t, apitest.FakeConfig{Collections: []catalog.Spec{{Name: "trawl", Settings: catalog.Settings{Dim: 4, Metric: vector.DotProduct}}}})
	res := e.do(http.MethodPost, "/v1/vectors", `{"vectors": [{"id": "a", "vector": [1, 0, 0, 0]},
		{"id": "b", "vector": [0, 1, 0, 0]}, {"id": "c", "vector": [0, 0, 1, 0]}, {"id": "d", "vector": [0, 0, 0, 1]}]}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	e.Fakes[1].SearchFault(codes.ResourceExhausted, 0)
	const msg = "shard shard-1 is overloaded: every replica asked refused the read (RESOURCE_EXHAUSTED); retry shortly (add replicas if this persists)"
	const q = `{"vector": [1, 1, 1, 1], "k": 4`

	for _, tc := range []struct {
		name, path, body string
		// spent: another shard holds the read until its deadline.
		spent  bool
		status int
		errors map[string]string
	}{
		{name: "time left", path: "/v1/search?deadline_ms=300", body: q + `}`,
			status: http.StatusTooManyRequests, errors: map[string]string{"shard-1": "overloaded"}},
		{name: "time left, batch", path: "/v1/search/batch?deadline_ms=300", body: `{"queries": [` + q + `}]}`,
			status: http.StatusTooManyRequests, errors: map[string]string{"shard-1": "overloaded"}},
		{name: "allow_partial false", path: "/v1/search?deadline_ms=300", body: q + `, "allow_partial": false}`,
			status: http.StatusTooManyRequests, errors: map[string]string{"shard-1": "overloaded"}},
		{name: "deadline spent, allow_partial false", path: "/v1/search?deadline_ms=300", body: q + `, "allow_partial": false}`, spent: true,
			status: http.StatusTooManyRequests, errors: map[string]string{"shard-1": "overloaded", "shard-2": "deadline_exceeded"}},
		{name: "deadline spent, partial allowed", path: "/v1/search?deadline_ms=300", body: q + `}`, spent: true,
			status: http.StatusOK, errors: map[string]string{"shard-1": "overloaded", "shard-2": "deadline_exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.spent {
				e.Fakes[2].SearchFault(codes.OK, time.Hour)
				defer e.Fakes[2].SearchFault(codes.OK, 0)
			}
			path := map[bool]string{false: "search", true: "search_batch"}[tc.path != "/v1/search?deadline_ms=300"]
			degraded0 := e.mustCounter("trawl_scatter_degraded_total", map[string]string{"path": path, "collection": "trawl"})
			rejected0 := e.mustCounter("trawl_admission_rejected_total", map[string]string{"reason": "limit"})
			res := e.do(http.MethodPost, tc.path, tc.body, nil)
			require.Equal(t, "true", res.header.Get("X-Trawl-Degraded"))
			var sg sgJSON
			if tc.status == http.StatusOK {
				var a searchAnswer
				strictDecode(t, res.body, &a)
				require.Equal(t, http.StatusOK, res.status)
				require.NotEmpty(t, a.Items)
				for _, it := range a.Items {
					require.Equal(t, "shard-0", it.Shard, "the partial answer: shard-0's documents")
				}
				sg = a.ScatterGather
			} else {
				require.Equal(t, msg, requireError(t, res, tc.status, "overloaded", true))
				require.Equal(t, "1", res.header.Get("Retry-After"))
				strictDecode(t, members(t, res.body)["scatter_gather"], &sg)
			}
			require.True(t, sg.Degraded)
			require.Equal(t, tc.errors, sg.ShardErrors)
			require.Equal(t, 3-len(tc.errors), sg.ShardsQueried)
			require.Equal(t, degraded0+1, e.mustCounter("trawl_scatter_degraded_total", map[string]string{"path": path, "collection": "trawl"}),
				"a refused fan-out counts as degraded, once")
			require.Equal(t, rejected0, e.mustCounter("trawl_admission_rejected_total", map[string]string{"reason": "limit"}),
				"it is the shard's refusal, not the router's admission")
		})
	}

	e.Fakes[1].SearchFault(codes.OK, 0)
	res = e.do(http.MethodPost, "/v1/search?deadline_ms=300", q+`}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Equal(t, "false", res.header.Get("X-Trawl-Degraded"))
}
