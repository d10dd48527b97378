package qdrant_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

const completedBody = `{"result":{"operation_id":null,"status":"completed"},"status":"ok","time":0}`

// payloads reads the seeded points' payloads back through the API:
// id → payload JSON.
func payloads(t *testing.T, e *apitest.Env) string {
	t.Helper()
	res := e.Do(http.MethodPost, "/collections/trawl/points", `{"ids": [1, 2, "`+uuidA+`"], "with_payload": true}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	body := normalised(t, res.Body)
	body = body[:strings.Index(body, `,"status":"ok"`)]
	return strings.TrimPrefix(body, `{"result":`)
}

// TestQdrantPayloadEdits runs each payload edit, by ids and by filter, on
// the seeded points, checking its exact answer and the payloads it
// leaves, read back through the API.
func TestQdrantPayloadEdits(t *testing.T) {
	red := `{"must": [{"key": "color", "match": {"value": "red"}}]}`
	e := apitest.New(t, apitest.Config{})
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
		// after are the three points' payloads (1, 2, uuidA) after the edit.
		after string
	}{
		{name: "set by ids", method: http.MethodPost, path: "/collections/trawl/points/payload?wait=true",
			body: `{"payload": {"color": "green", "tags": ["a", "b"]}, "points": [1, 2]}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"color":"green","n":1,"suite":"contract","tags":["a","b"]},"vector":null},` +
				`{"id":2,"payload":{"color":"green","n":2,"suite":"contract","tags":["a","b"]},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":null}]`},
		{name: "set by filter", method: http.MethodPost, path: "/collections/trawl/points/payload",
			body: `{"payload": {"hot": true}, "filter": ` + red + `}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"color":"red","hot":true,"n":1,"suite":"contract"},"vector":null},` +
				`{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"color":"red","hot":true,"n":3,"suite":"contract"},"vector":null}]`},
		{name: "set under a nested key", method: http.MethodPost, path: "/collections/trawl/points/payload",
			body: `{"payload": {"x": 1}, "points": [2], "key": "meta.inner"}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"suite":"contract","color":"red","n":1},"vector":null},` +
				`{"id":2,"payload":{"color":"blue","meta":{"inner":{"x":1}},"n":2,"suite":"contract"},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":null}]`},
		{name: "set under a key holding a scalar", method: http.MethodPost, path: "/collections/trawl/points/payload",
			body: `{"payload": {"x": 1}, "points": [2], "key": "color"}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"suite":"contract","color":"red","n":1},"vector":null},` +
				`{"id":2,"payload":{"color":{"x":1},"n":2,"suite":"contract"},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":null}]`},
		{name: "overwrite by ids", method: http.MethodPut, path: "/collections/trawl/points/payload",
			body: `{"payload": {"only": "this"}, "points": ["` + uuidA + `"]}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"suite":"contract","color":"red","n":1},"vector":null},` +
				`{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"only":"this"},"vector":null}]`},
		{name: "overwrite by filter", method: http.MethodPut, path: "/collections/trawl/points/payload",
			body: `{"payload": {"only": "red"}, "filter": ` + red + `}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"only":"red"},"vector":null},` +
				`{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"only":"red"},"vector":null}]`},
		{name: "delete keys by ids", method: http.MethodPost, path: "/collections/trawl/points/payload/delete",
			body: `{"keys": ["color", "absent"], "points": [1]}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"n":1,"suite":"contract"},"vector":null},` +
				`{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":null}]`},
		{name: "delete keys by filter", method: http.MethodPost, path: "/collections/trawl/points/payload/delete",
			body: `{"keys": ["n", "suite"], "filter": ` + red + `}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"color":"red"},"vector":null},` +
				`{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"color":"red"},"vector":null}]`},
		{name: "clear by ids", method: http.MethodPost, path: "/collections/trawl/points/payload/clear",
			body: `{"points": [2]}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{"suite":"contract","color":"red","n":1},"vector":null},` +
				`{"id":2,"payload":{},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":null}]`},
		{name: "clear by filter", method: http.MethodPost, path: "/collections/trawl/points/payload/clear",
			body: `{"filter": ` + red + `}`, status: 200, want: completedBody,
			after: `[{"id":1,"payload":{},"vector":null},` +
				`{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null},` +
				`{"id":"` + uuidA + `","payload":{},"vector":null}]`},
		{name: "set on an absent id", method: http.MethodPost, path: "/collections/trawl/points/payload",
			body: `{"payload": {"color": "green"}, "points": [1, 404]}`, status: 404,
			want:  `{"status":{"error":"Not found: No point with id 404 found"},"time":0}`,
			after: seeded},
		{name: "filter matching nothing", method: http.MethodPost, path: "/collections/trawl/points/payload/clear",
			body: `{"filter": {"must": [{"key": "color", "match": {"value": "mauve"}}]}}`, status: 200, want: completedBody,
			after: seeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seedQdrant(t, e) // an upsert: back to the seeded payloads
			res := e.Do(tc.method, tc.path, tc.body, nil)
			require.Equal(t, tc.status, res.Status, "%s", res.Body)
			require.Equal(t, tc.want, normalised(t, res.Body))
			require.Equal(t, tc.after, payloads(t, e))
		})
	}
}

const seeded = `[{"id":1,"payload":{"suite":"contract","color":"red","n":1},"vector":null},` +
	`{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null},` +
	`{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":null}]`
