package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNativeEdits: PATCH merges a payload into a document's, PUT replaces
// its vector keeping its payload; an absent document is a 404 and bad
// bodies are 400s that reach no shard.
func TestNativeEdits(t *testing.T) {
	e := newEnv(t, envConfig{})
	res := e.do(http.MethodPost, "/v1/collections/trawl/vectors",
		`{"vectors": [{"id": "ed-1", "vector": [1, 0, 0, 0, 0, 0, 0, 0], "payload": {"a": 1, "b": "x"}}]}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	res = e.do(http.MethodPatch, "/v1/collections/trawl/vectors/ed-1", `{"payload": {"b": "y", "c": [true]}}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.JSONEq(t, `{"id": "ed-1", "status": "ok"}`, string(res.body))
	res = e.do(http.MethodPut, "/v1/vectors/ed-1", `{"vector": [0, 0, 0, 0, 0, 0, 0, 2]}`, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.JSONEq(t, `{"id": "ed-1", "status": "ok"}`, string(res.body))
	res = e.do(http.MethodGet, "/v1/vectors/ed-1?deadline_ms=2000", "", nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.JSONEq(t, `{"id": "ed-1", "vector": [0, 0, 0, 0, 0, 0, 0, 1], "payload": {"a": 1, "b": "y", "c": [true]}, "shard": "`+
		jsonField(t, res.body, "shard")+`"}`, string(res.body))

	for _, method := range []string{http.MethodPatch, http.MethodPut} {
		body := map[string]string{http.MethodPatch: `{"payload": {"a": 2}}`, http.MethodPut: `{"vector": [1, 1, 0, 0, 0, 0, 0, 0]}`}[method]
		res = e.do(method, "/v1/vectors/ed-absent", body, nil)
		require.Equal(t, http.StatusNotFound, res.status, "%s", res.body)
		require.JSONEq(t, `{"id": "ed-absent", "status": "error", "outcome": "failed",
			"error": {"code": "not_found", "message": "No point with id ed-absent found"}}`, string(res.body))
	}
	e.RequireAbsent("ed-absent")

	for _, tc := range []struct{ method, body, msg string }{
		{http.MethodPatch, `{}`, `missing "payload"`},
		{http.MethodPatch, `{"payload": 3}`, `payload: is an integer, want a JSON object`},
		{http.MethodPatch, `{"payload": {}, "vector": [1]}`, `unknown field "vector"`},
		{http.MethodPut, `{"vector": [1, 2]}`, `vector has 2 dimensions, want 8`},
		{http.MethodPut, `{}`, `give exactly one of "vector" or "vector_b64"`},
		{http.MethodPut, `{"vector": [1, 0, 0, 0, 0, 0, 0, 0], "payload": {}}`, `unknown field "payload"`},
	} {
		rpcs := e.ShardRPCs()
		res = e.do(tc.method, "/v1/vectors/ed-1", tc.body, nil)
		msg := requireError(t, res, http.StatusBadRequest, "invalid_argument", false)
		require.Contains(t, msg, tc.msg)
		require.Equal(t, rpcs, e.ShardRPCs(), "a refused edit reached a shard")
	}
}

// jsonField is one string member of a JSON object.
func jsonField(t *testing.T, b []byte, name string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	s, _ := m[name].(string)
	return s
}
