package qdrant_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// TestQdrantNamedVectorsBadInput: a request naming a vector wrongly on a
// collection of named vectors is a 400 naming the member, and reaches no
// shard and changes nothing.
func TestQdrantNamedVectorsBadInput(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	res := e.Do(http.MethodPut, "/collections/nv", `{"vectors": {"text": {"size": 4, "distance": "Cosine"}, "image": {"size": 2, "distance": "Euclid"}},
		"sparse_vectors": {"bm": {}}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.Do(http.MethodPut, "/collections/nv/points?wait=true", `{"points": [{"id": 1, "vector": {"text": [1, 0, 0, 0]}}]}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	for _, tc := range []struct {
		name, method, path, body string
		msg                      string
	}{
		{"upsert wrong size", http.MethodPut, "/collections/nv/points", `{"points": [{"id": 2, "vector": {"text": [1, 2, 3]}}]}`,
			"points[0]: vector.text: vector has 3 dimensions, want 4"},
		{"upsert unknown name", http.MethodPut, "/collections/nv/points", `{"points": [{"id": 2, "vector": {"txt": [1, 2, 3, 4]}}]}`,
			`points[0]: vector: the collection has no vector named "txt" (its vectors: "image", "text", "bm" (sparse))`},
		{"upsert unnamed", http.MethodPut, "/collections/nv/points", `{"points": [{"id": 2, "vector": [1, 2, 3, 4]}]}`,
			`points[0]: vector: the collection's vectors are named (image, text): give {"name": [...], ...}`},
		{"upsert zero under cosine", http.MethodPut, "/collections/nv/points", `{"points": [{"id": 2, "vector": {"text": [0, 0, 0, 0]}}]}`,
			"points[0]: vector.text: vector is all zeros, which has no direction under the cosine metric"},
		{"update wrong size", http.MethodPut, "/collections/nv/points/vectors", `{"points": [{"id": 1, "vector": {"image": [1]}}]}`,
			"points[0]: vector.image: vector has 1 dimensions, want 2"},
		{"query unknown using", http.MethodPost, "/collections/nv/points/query", `{"query": [1, 2, 3, 4], "using": "txt"}`,
			`using: the collection has no vector named "txt" (its vectors: "image", "text", "bm" (sparse))`},
		{"query wrong size", http.MethodPost, "/collections/nv/points/query", `{"query": [1, 2, 3], "using": "text"}`,
			"query: vector has 3 dimensions, want 4"},
		{"query without using", http.MethodPost, "/collections/nv/points/query", `{"query": [1, 2, 3, 4]}`,
			"using is missing: the collection's vectors are named (image, text); name the one the query searches"},
		{"prefetch wrong size", http.MethodPost, "/collections/nv/points/query", `{"prefetch": [{"query": [1, 2], "using": "text"}], "query": {"fusion": "rrf"}}`,
			"prefetch[0]: query: vector has 2 dimensions, want 4"},
		{"query by id with a name", http.MethodPost, "/collections/nv/points/query", `{"query": 1, "using": "text"}`,
			"query 0: a query by a stored point's vector (like_id, recommend) is not supported with a named vector"},
		{"search unknown name", http.MethodPost, "/collections/nv/points/search", `{"vector": {"name": "txt", "vector": [1, 2, 3, 4]}, "limit": 1}`,
			`vector.name: the collection has no vector named "txt" (its vectors: "image", "text", "bm" (sparse))`},
		{"search wrong size", http.MethodPost, "/collections/nv/points/search", `{"vector": {"name": "image", "vector": [1, 2, 3, 4]}, "limit": 1}`,
			"vector.vector: vector has 4 dimensions, want 2"},
		{"search unnamed", http.MethodPost, "/collections/nv/points/search", `{"vector": [1, 2, 3, 4], "limit": 1}`,
			`vector: the collection's vectors are named (image, text): give {"name": "...", "vector": [...]}`},
		{"named vector on an unnamed collection", http.MethodPost, "/collections/trawl/points/query", `{"query": [1, 2, 3, 4], "using": "text"}`,
			`using: the collection has no named vectors: it holds one unnamed vector per point (got "text")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, rpcs := e.StoreState(), e.ShardRPCs()
			res := e.Do(tc.method, tc.path, tc.body, map[string]string{"Content-Type": "application/json"})
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			want := `{"status":{"error":` + string(mustJSON(t, "Bad request: "+tc.msg)) + `},"time":0}`
			require.Equal(t, want, normalised(t, res.Body))
			require.Equal(t, rpcs, e.ShardRPCs(), "a shard RPC was made for bad input")
			require.Equal(t, store, e.StoreState())
		})
	}
}

// TestQdrantNamedVectorsBackupRefused: a snapshot (backup) of a
// collection of named vectors is refused rather than taken without them.
func TestQdrantNamedVectorsBackupRefused(t *testing.T) {
	e := apitest.New(t, apitest.Config{BackupDir: t.TempDir()})
	res := e.Do(http.MethodPut, "/collections/nv", `{"vectors": {"text": {"size": 4, "distance": "Dot"}}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.Do(http.MethodPost, "/collections/nv/snapshots", "", nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "collection `nv` holds named vectors (text), which backups do not hold yet: a backup would drop them, so none is taken")
	res = e.Do(http.MethodGet, "/collections/nv/snapshots", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), `"result":[]`)

	// Sparse vectors are not in the format either.
	res = e.Do(http.MethodPut, "/collections/sv", `{"vectors": {"size": 2, "distance": "Dot"}, "sparse_vectors": {"bm": {"modifier": "idf"}}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.Do(http.MethodPost, "/collections/sv/snapshots", "", nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "collection `sv` holds sparse vectors (bm), which backups do not hold yet: a backup would drop them, so none is taken")
}

// TestQdrantNamedVectorsReads: groups, scroll, retrieve and recommend's
// refusal on a collection of named vectors, in Qdrant's shapes.
func TestQdrantNamedVectorsReads(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	res := e.Do(http.MethodPut, "/collections/nv", `{"vectors": {"text": {"size": 2, "distance": "Dot"}, "image": {"size": 2, "distance": "Euclid"}}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.Do(http.MethodPut, "/collections/nv/points?wait=true", `{"points": [
		{"id": 1, "vector": {"text": [1, 0]}, "payload": {"g": "a"}},
		{"id": 2, "vector": {"text": [2, 0], "image": [0, 0]}, "payload": {"g": "a"}},
		{"id": 3, "vector": {"image": [1, 1]}, "payload": {"g": "b"}},
		{"id": 4, "vector": {"text": [0.5, 0]}, "payload": {"g": "b"}}]}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	res = e.Do(http.MethodPost, "/collections/nv/points/query/groups", `{"query": [1, 0], "using": "text", "group_by": "g", "group_size": 1, "limit": 5}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), `"groups":[{"id":"a","hits":[{"id":2,"version":0,"score":2}]},{"id":"b","hits":[{"id":4,"version":0,"score":0.5}]}]`)

	res = e.Do(http.MethodPost, "/collections/nv/points/scroll", `{"limit": 10, "with_vector": true}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), `{"id":2,"payload":{"g":"a"},"vector":{"image":[0,0],"text":[2,0]}}`)
	require.Contains(t, string(res.Body), `{"id":3,"payload":{"g":"b"},"vector":{"image":[1,1]}}`)

	res = e.Do(http.MethodPost, "/collections/nv/points", `{"ids": [1], "with_vector": true}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), `"vector":{"text":[1,0]}`)

	res = e.Do(http.MethodPost, "/collections/nv/points/query", `{"query": {"recommend": {"positive": [1]}}, "using": "text"}`, nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "not supported with a named vector")
}
