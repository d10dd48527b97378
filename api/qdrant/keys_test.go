package qdrant_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/apitest"
)

// TestQdrantScopedKeys is the 401/403/200 matrix of scoped keys over the
// Qdrant routes, with the key in api-key or as a Bearer token: a key
// outside its scope is refused before the collection is looked up.
func TestQdrantScopedKeys(t *testing.T) {
	keys, err := apikey.Parse(strings.NewReader("admin\nops * read\ntenant a,a-*\nreader a read\n"))
	require.NoError(t, err)
	var specs []catalog.Spec
	for _, name := range []string{"trawl", "a", "b"} {
		specs = append(specs, catalog.Spec{Name: name, Settings: catalog.Settings{Dim: apitest.Dim}.Normalize()})
	}
	e := apitest.NewFake(t, apitest.FakeConfig{Keys: keys, Collections: specs})
	upsert := `{"points": [{"id": 1, "vector": ` + unit(0) + `}]}`
	for _, name := range []string{"trawl", "a", "b"} {
		res := e.Do(http.MethodPut, "/collections/"+name+"/points?wait=true", upsert, map[string]string{"api-key": "admin"})
		require.Equal(t, 200, res.Status, "%s", res.Body)
	}
	grants := map[string]map[string]apikey.Access{
		"admin":  {"trawl": apikey.Write, "a": apikey.Write, "b": apikey.Write, "absent": apikey.Write},
		"ops":    {"trawl": apikey.Read, "a": apikey.Read, "b": apikey.Read, "absent": apikey.Read},
		"tenant": {"a": apikey.Write},
		"reader": {"a": apikey.Read},
	}
	search := `{"vector": ` + unit(0) + `, "limit": 1}`
	type op struct {
		method, path, body string
		need               apikey.Access
	}
	for _, coll := range []string{"trawl", "a", "b", "absent"} {
		p := "/collections/" + coll
		for _, o := range []op{
			{http.MethodGet, p, "", apikey.Read},
			// A create the handler refuses (size 0): the scope is checked
			// before the body, and nothing is created as the matrix runs.
			{http.MethodPut, p, `{"vectors": {"size": 0, "distance": "Cosine"}}`, apikey.Write},
			{http.MethodGet, p + "/exists", "", apikey.Read},
			{http.MethodPut, p + "/points?wait=true", upsert, apikey.Write},
			{http.MethodPost, p + "/points/delete?wait=true", `{"points": [999]}`, apikey.Write},
			{http.MethodPost, p + "/points", `{"ids": [1]}`, apikey.Read},
			{http.MethodGet, p + "/points/1", "", apikey.Read},
			{http.MethodPost, p + "/points/search", search, apikey.Read},
			{http.MethodPost, p + "/points/search/batch", `{"searches": [` + search + `]}`, apikey.Read},
			{http.MethodPost, p + "/points/query", `{"query": ` + unit(0) + `}`, apikey.Read},
			{http.MethodPost, p + "/points/scroll", `{}`, apikey.Read},
			{http.MethodPost, p + "/points/count", `{}`, apikey.Read},
		} {
			for _, key := range []string{"", "unknown", "admin", "ops", "tenant", "reader"} {
				for _, header := range []string{"api-key", "Authorization"} {
					t.Run(fmt.Sprintf("%s %s key=%s in %s", o.method, o.path, key, header), func(t *testing.T) {
						h := map[string]string{}
						switch {
						case key != "" && header == "api-key":
							h["api-key"] = key
						case key != "":
							h["Authorization"] = "Bearer " + key
						}
						res := e.Do(o.method, o.path, o.body, h)
						switch {
						case key == "" || key == "unknown":
							require.Equal(t, `{"status":{"error":"Unauthorized: missing or wrong API key: send it in the api-key header or as Authorization: Bearer <key>"},"time":0}`,
								strings.ReplaceAll(normalised(t, res.Body), `\u003c`, "<"), "%d", res.Status)
							require.Equal(t, 401, res.Status)
						case grants[key][coll] < o.need:
							require.Equal(t, 403, res.Status, "%s", res.Body)
							require.Equal(t, `{"status":{"error":"Forbidden: this API key does not grant `+o.need.String()+` on collection `+"`"+coll+"`"+`"},"time":0}`,
								normalised(t, res.Body))
						default:
							require.Equal(t, passed(coll, o.method, o.path), res.Status, "%s", res.Body)
						}
					})
				}
			}
		}
	}
}

// passed is a route's status once the key passed its scope.
func passed(coll, method, path string) int {
	switch {
	case method == http.MethodPut && path == "/collections/"+coll:
		return 400 // the matrix's create has size 0
	case strings.HasSuffix(path, "/exists"):
		return 200
	case coll == "absent":
		return 404
	}
	return 200
}
