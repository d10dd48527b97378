package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/apitest"
	"github.com/trawl-search/trawl/vector"
)

const scopedKeyFile = `
# every collection, read and write
admin
ops      *       read
tenant   a,a-*
reader   a       read
`

// scopedFake is a router over fake shards with scopedKeyFile, holding
// the default collection trawl and a, a-1 and b, all 4-D dot.
func scopedFake(t *testing.T) *env {
	t.Helper()
	keys, err := apikey.Parse(strings.NewReader(scopedKeyFile))
	require.NoError(t, err)
	var specs []catalog.Spec
	for _, name := range []string{"trawl", "a", "a-1", "b"} {
		specs = append(specs, catalog.Spec{Name: name, Settings: catalog.Settings{Dim: 4, Metric: vector.DotProduct}.Normalize()})
	}
	e := fake(t, apitest.FakeConfig{Keys: keys, Collections: specs})
	for _, name := range []string{"trawl", "a", "a-1", "b"} {
		res := e.do(http.MethodPost, "/v1/collections/"+name+"/vectors", `{"vectors": [{"id": "d", "vector": [1, 0, 0, 0]}]}`,
			map[string]string{"Authorization": "Bearer admin"})
		require.Equal(t, 200, res.status, "body: %s", res.body)
	}
	return e
}

// access is what a key may do on one collection: none, read or write.
type access int

const (
	none access = iota
	read
	write
)

// TestScopedKeysNative is the 401/403/200 matrix of scoped keys over
// every native route that acts on a collection, through the collection's
// path and, for the default collection, the collection-less one.
func TestScopedKeysNative(t *testing.T) {
	e := scopedFake(t)
	grants := map[string]map[string]access{
		"admin":  {"trawl": write, "a": write, "a-1": write, "b": write, "a-gone": write},
		"ops":    {"trawl": read, "a": read, "a-1": read, "b": read, "a-gone": read},
		"tenant": {"a": write, "a-1": write, "a-gone": write},
		"reader": {"a": read},
	}
	type op struct {
		method, path, body string
		need               access
	}
	ops := func(base, coll string) []op {
		q := `{"vector": [1, 0, 0, 0]}`
		out := []op{
			{http.MethodPost, base + "/search", q, read},
			{http.MethodPost, base + "/search/batch", `{"queries": [` + q + `]}`, read},
			{http.MethodGet, base + "/vectors/d", "", read},
			{http.MethodPost, base + "/vectors", `{"vectors": [{"id": "d", "vector": [1, 0, 0, 0]}]}`, write},
			{http.MethodDelete, base + "/vectors/absent", "", write},
		}
		if coll != "" {
			out = append(out,
				op{http.MethodGet, base, "", read},
				// Equal settings: a 200 no-op.
				op{http.MethodPut, base, `{"dimension": 4, "metric": "dot"}`, write})
		}
		return out
	}
	for _, coll := range []string{"trawl", "a", "a-1", "b", ""} {
		base := "/v1/collections/" + coll
		if coll == "" {
			base = "/v1" // the default collection, trawl
		}
		for _, o := range ops(base, coll) {
			target := coll
			if target == "" {
				target = "trawl"
			}
			for _, key := range []string{"", "unknown", "admin", "ops", "tenant", "reader"} {
				t.Run(fmt.Sprintf("%s %s key=%s", o.method, o.path, key), func(t *testing.T) {
					h := map[string]string{}
					if key != "" {
						h["Authorization"] = "Bearer " + key
					}
					res := e.do(o.method, o.path, o.body, h)
					switch {
					case key == "" || key == "unknown":
						requireError(t, res, 401, "unauthenticated", false)
					case grants[key][target] < o.need:
						msg := requireError(t, res, 403, "forbidden", false)
						verb := map[access]string{read: "read", write: "write"}[o.need]
						require.Equal(t, "this API key does not grant "+verb+" on collection `"+target+"`", msg)
					default:
						require.Equal(t, 200, res.status, "body: %s", res.body)
					}
				})
			}
		}
	}
	// Drops, on names that do not exist (a 200 no-op), so the matrix
	// above keeps its collections.
	for _, tc := range []struct {
		key, coll string
		status    int
	}{
		{"", "a-gone", 401}, {"admin", "a-gone", 200}, {"ops", "a-gone", 403}, {"tenant", "a-gone", 200},
		{"tenant", "b-gone", 403}, {"reader", "a", 403},
	} {
		h := map[string]string{}
		if tc.key != "" {
			h["Authorization"] = "Bearer " + tc.key
		}
		res := e.do(http.MethodDelete, "/v1/collections/"+tc.coll, "", h)
		require.Equal(t, tc.status, res.status, "%s %s: %s", tc.key, tc.coll, res.body)
		if tc.status == 200 {
			requireJSON(t, res, 200, `{"name": "`+tc.coll+`", "deleted": false}`)
		}
	}
	// A tenant creates and drops in its own namespace.
	tenant := map[string]string{"Authorization": "Bearer tenant"}
	requireJSON(t, e.do(http.MethodPut, "/v1/collections/a-new", `{"dimension": 4}`, tenant), 200,
		`{"name": "a-new", "dimension": 4, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory", "created": true, "slots": 256}`)
	requireJSON(t, e.do(http.MethodDelete, "/v1/collections/a-new", "", tenant), 200, `{"name": "a-new", "deleted": true}`)
	requireError(t, e.do(http.MethodPut, "/v1/collections/b-new", `{"dimension": 4}`, tenant), 403, "forbidden", false)
}

// TestScopedKeysListing: GET /v1/collections lists what the key may read.
func TestScopedKeysListing(t *testing.T) {
	e := scopedFake(t)
	entry := func(name string) string {
		return `{"name": "` + name + `", "dimension": 4, "metric": "dot", "quantization": "none", "index": "flat", "float32": "in_memory", "state": "ready"}`
	}
	for key, names := range map[string][]string{
		"admin":  {"a", "a-1", "b", "trawl"},
		"ops":    {"a", "a-1", "b", "trawl"},
		"tenant": {"a", "a-1"},
		"reader": {"a"},
	} {
		var entries []string
		for _, n := range names {
			entries = append(entries, entry(n))
		}
		res := e.do(http.MethodGet, "/v1/collections", "", map[string]string{"Authorization": "Bearer " + key})
		requireJSON(t, res, 200, `{"collections": [`+strings.Join(entries, ",")+`]}`)
	}
	requireError(t, e.do(http.MethodGet, "/v1/collections", "", nil), 401, "unauthenticated", false)
}

// TestScopedKeysClusterStatus: with a key file, /cluster/status needs a
// key scoped to every collection; probes and /metrics stay open.
func TestScopedKeysClusterStatus(t *testing.T) {
	e := scopedFake(t)
	for key, status := range map[string]int{"": 401, "unknown": 401, "admin": 200, "ops": 200, "tenant": 403, "reader": 403} {
		h := map[string]string{}
		if key != "" {
			h["Authorization"] = "Bearer " + key
		}
		res := e.do(http.MethodGet, "/cluster/status", "", h)
		switch status {
		case 401:
			requireError(t, res, 401, "unauthenticated", false)
		case 403:
			msg := requireError(t, res, 403, "forbidden", false)
			require.Equal(t, "/cluster/status shows the whole cluster: it needs an API key scoped to every collection (*)", msg)
		default:
			require.Equal(t, 200, res.status, "body: %s", res.body)
		}
	}
	for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
		require.Equal(t, http.StatusOK, e.do(http.MethodGet, p, "", nil).status, p)
	}
}
