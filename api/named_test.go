package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Named dense vectors on /v1: a create of named vectors (shown by GET),
// documents carrying them, searches naming one with using (exact, only
// documents holding it), a get returning them, and bad input refused
// naming the member before any shard is asked.
func TestNativeNamedVectors(t *testing.T) {
	e := newEnv(t, envConfig{})
	res := e.do(http.MethodPut, "/v1/collections/nv", `{"vectors": {"text": {"dimension": 2, "metric": "dot"}, "image": {"dimension": 3, "metric": "l2", "quantization": "int8"}}}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	res = e.do(http.MethodGet, "/v1/collections/nv", "", nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), `"vectors":{"image":{"dimension":3,"metric":"l2","quantization":"int8"},"text":{"dimension":2,"metric":"dot","quantization":"none"}}`)

	res = e.do(http.MethodPost, "/v1/collections/nv/vectors", `{"vectors": [
		{"id": "a", "vectors": {"text": [1, 0], "image": [0, 0, 0]}},
		{"id": "b", "vectors": {"text": [3, 0]}},
		{"id": "c", "vectors": {"image": [1, 1, 1]}, "payload": {"k": 1}},
		{"id": "d"}]}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	search := func(body string) []string {
		t.Helper()
		res := e.do(http.MethodPost, "/v1/collections/nv/search", body, nil)
		require.Equal(t, http.StatusOK, res.status, "%s", res.body)
		var a struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		require.NoError(t, json.Unmarshal(res.body, &a))
		ids := []string{}
		for _, it := range a.Items {
			ids = append(ids, it.ID)
		}
		return ids
	}
	require.Equal(t, []string{"b", "a"}, search(`{"vector": [1, 0], "using": "text", "k": 10}`))
	require.Equal(t, []string{"a", "c"}, search(`{"vector": [0, 0, 0.1], "using": "image", "k": 10}`))
	require.Equal(t, []string{"c"}, search(`{"vector": [0, 0, 0.1], "using": "image", "k": 10, "filter": {"must": [{"key": "k", "match": {"value": 1}}]}}`))

	res = e.do(http.MethodGet, "/v1/collections/nv/vectors/a", "", nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), `"vectors":{"image":[0,0,0],"text":[1,0]}`)

	for _, tc := range []struct{ name, method, path, body, msg string }{
		{"create both", http.MethodPut, "/v1/collections/x", `{"dimension": 4, "vectors": {"t": {"dimension": 2}}}`,
			"dimension: a collection of named vectors (vectors) has no unnamed vector; give each vector's settings under vectors"},
		{"create no dimension", http.MethodPut, "/v1/collections/x", `{"vectors": {"t": {"metric": "dot"}}}`,
			"vectors.t.dimension is missing: want an integer 1..8192"},
		{"write wrong size", http.MethodPost, "/v1/collections/nv/vectors", `{"vectors": [{"id": "e", "vectors": {"text": [1, 2, 3]}}]}`,
			"vectors[0].vectors.text: vector has 3 dimensions, want 2"},
		{"write unknown name", http.MethodPost, "/v1/collections/nv/vectors", `{"vectors": [{"id": "e", "vectors": {"txt": [1, 2]}}]}`,
			`vectors[0].vectors: the collection has no named vector "txt"`},
		{"write unnamed", http.MethodPost, "/v1/collections/nv/vectors", `{"vectors": [{"id": "e", "vector": [1, 2]}]}`,
			`vectors[0]: the collection has no unnamed vector: give the document's named vectors in "vectors"`},
		{"search unknown using", http.MethodPost, "/v1/collections/nv/search", `{"vector": [1, 2], "using": "txt"}`,
			`using: the collection has no named vector "txt"`},
		{"search wrong size", http.MethodPost, "/v1/collections/nv/search", `{"vector": [1, 2, 3], "using": "text"}`,
			"vector has 3 dimensions, want 2"},
		{"search without using", http.MethodPost, "/v1/collections/nv/search", `{"vector": [1, 2]}`,
			"using is missing: the collection's vectors are named (image, text); name the one to search"},
		{"using on an unnamed collection", http.MethodPost, "/v1/collections/trawl/search", `{"vector": [1, 2, 3, 4, 5, 6, 7, 8], "using": "text"}`,
			`using: the collection has no named vector "text"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rpcs := e.ShardRPCs()
			res := e.do(tc.method, tc.path, tc.body, nil)
			require.Equal(t, http.StatusBadRequest, res.status, "%s", res.body)
			var body struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(res.body, &body))
			require.Equal(t, tc.msg, body.Error.Message)
			require.Equal(t, rpcs, e.ShardRPCs(), "a shard RPC was made for bad input")
		})
	}
}
