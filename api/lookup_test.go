package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGetWithReplicaDown: a replica answering NotFound while another is
// unreachable is a 503, never a 404; a stored id is still read from the
// live replica.
func TestGetWithReplicaDown(t *testing.T) {
	e := newEnv(t, envConfig{})
	table := e.dc
	missing := ""
	for i := 0; missing == ""; i++ {
		if id := fmt.Sprintf("absent-%d", i); table.Home(id) == "shard-0" {
			missing = id
		}
	}
	stored := ""
	for _, r := range e.dc.Corpus {
		if e.homeOf(r.ID) == "shard-0" {
			stored = r.ID
			break
		}
	}
	rep, ok := e.dc.Replica("shard-0", 1)
	require.True(t, ok)
	rep.Proxy.Stop()

	res := e.do(http.MethodGet, "/v1/vectors/"+stored+"?deadline_ms=1000", "", nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	res = e.do(http.MethodGet, "/v1/vectors/"+missing+"?deadline_ms=1000", "", nil)
	requireError(t, res, http.StatusServiceUnavailable, "unavailable", false)
	res = e.post("/v1/search?deadline_ms=1000", map[string]any{"like_id": missing})
	requireError(t, res, http.StatusServiceUnavailable, "unavailable", false)

	// Both replicas down: a stored id is a 503 too.
	rep0, _ := e.dc.Replica("shard-0", 0)
	rep0.Proxy.Stop()
	e.WaitDown("shard-0")
	res = e.do(http.MethodGet, "/v1/vectors/"+stored+"?deadline_ms=1000", "", nil)
	requireError(t, res, http.StatusServiceUnavailable, "unavailable", false)
}
