package qdrant_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

const completedBody = `{"result":{"operation_id":null,"status":"completed"},"status":"ok","time":0}`

// payloads reads the seeded points' payloads back through the API:
// id → payload JSON.
func payloads(t *testing.T, e *apitest.Env) string {
	t.Helper()
	res := e.Do(http.MethodPost, "/collections/trawl/points?deadline_ms=2000", `{"ids": [1, 2, "`+uuidA+`"], "with_payload": true}`, nil)
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
			replicasAgree(t, e, "1", "2", uuidA)
		})
	}
}

// replicasAgree waits until every replica of each shard holds the same
// payload for each of ids: followers apply a committed edit moments after
// the leader answered it.
func replicasAgree(t *testing.T, e *apitest.Env, ids ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		held := map[string]int{}
		for _, reps := range e.DC.Replicas {
			for _, id := range ids {
				want, wok := reps[0].Store.Record(id)
				for _, r := range reps[1:] {
					got, ok := r.Store.Record(id)
					if ok != wok || string(got.Payload) != string(want.Payload) {
						return false
					}
				}
				if wok {
					held[id]++
				}
			}
		}
		for _, id := range ids {
			if held[id] != 1 {
				return false // each point is on one shard
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "replicas hold different payloads")
}

const seeded = `[{"id":1,"payload":{"suite":"contract","color":"red","n":1},"vector":null},` +
	`{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null},` +
	`{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":null}]`

// TestQdrantVectorEdits: a vector update replaces the vector and keeps the
// payload, and a search then finds the point exactly; an absent id is a
// 404 that changes nothing, even for the ids of the request that exist;
// deleting the one unnamed vector is refused.
func TestQdrantVectorEdits(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	seedQdrant(t, e)

	res := e.Do(http.MethodPut, "/collections/trawl/points/vectors?wait=true",
		`{"points": [{"id": 2, "vector": `+unit(5)+`}, {"id": "`+uuidA+`", "vector": `+unit(6)+`}]}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, completedBody, normalised(t, res.Body))
	for i, id := range []string{"2", `"` + uuidA + `"`} {
		res = e.Do(http.MethodPost, "/collections/trawl/points/search?deadline_ms=2000", `{"vector": `+unit(5+i)+`, "limit": 1, "with_payload": true, "with_vector": true}`, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		payload := map[string]string{"2": `{"suite":"contract","color":"blue","n":2}`, `"` + uuidA + `"`: `{"suite":"contract","color":"red","n":3}`}[id]
		require.Equal(t, `{"result":[{"id":`+id+`,"version":0,"score":1,"payload":`+payload+`,"vector":`+unit(5+i)+`}],"status":"ok","time":0,`+sgOK+`}`,
			normalised(t, res.Body))
	}

	// Point 1 and an absent point, on different shards: nothing changes.
	res = e.Do(http.MethodPut, "/collections/trawl/points/vectors",
		`{"points": [{"id": 1, "vector": `+unit(7)+`}, {"id": 404, "vector": `+unit(7)+`}]}`, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, `{"status":{"error":"Not found: No point with id 404 found"},"time":0}`, normalised(t, res.Body))
	res = e.Do(http.MethodGet, "/collections/trawl/points/1?deadline_ms=2000", "", nil)
	require.Contains(t, string(res.Body), `"vector":`+unit(0), "a refused vector update changed point 1")

	res = e.Do(http.MethodPost, "/collections/trawl/points/vectors/delete", `{"points": [1], "vector": [""]}`, nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, `{"status":{"error":"Bad request: deleting vectors is not supported: a trawl point has exactly one unnamed vector, which it cannot be without (delete the point instead)"},"time":0}`,
		normalised(t, res.Body))
}

// TestQdrantBatchUpdate: points/batch applies its operations in order —
// a filter sees what the operations before it did — and the state read
// back is the one they leave.
func TestQdrantBatchUpdate(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	seedQdrant(t, e)
	res := e.Do(http.MethodPost, "/collections/trawl/points/batch?wait=true", `{"operations": [
		{"upsert": {"points": [{"id": 10, "vector": `+unit(3)+`, "payload": {"color": "red", "n": 10}}]}},
		{"set_payload": {"payload": {"hot": true}, "filter": {"must": [{"key": "color", "match": {"value": "red"}}]}}},
		{"delete_payload": {"keys": ["n"], "points": [1, 10]}},
		{"update_vectors": {"points": [{"id": 10, "vector": `+unit(4)+`}]}},
		{"delete": {"points": [2]}},
		{"clear_payload": {"points": ["`+uuidA+`"]}},
		{"overwrite_payload": {"payload": {"color": "blue"}, "filter": {"must": [{"key": "hot", "match": {"value": true}}, {"is_empty": {"key": "n"}}]}}},
		{"set_payload": {"payload": {"last": 1}, "points": [10], "key": "meta"}}
	]}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	one := `{"operation_id":null,"status":"completed"}`
	require.Equal(t, `{"result":[`+strings.Repeat(one+",", 7)+one+`],"status":"ok","time":0}`, normalised(t, res.Body))

	res = e.Do(http.MethodPost, "/collections/trawl/points?deadline_ms=2000", `{"ids": [1, 2, "`+uuidA+`", 10], "with_payload": true, "with_vector": true}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	body := normalised(t, res.Body)
	require.Equal(t, `{"result":[`+
		`{"id":1,"payload":{"color":"blue"},"vector":`+unit(0)+`},`+
		`{"id":"`+uuidA+`","payload":{},"vector":`+unit(2)+`},`+
		`{"id":10,"payload":{"color":"blue","meta":{"last":1}},"vector":`+unit(4)+`}]`, body[:strings.Index(body, `,"status":"ok"`)])

	// An operation naming an absent point refuses the whole batch.
	before := payloads(t, e)
	res = e.Do(http.MethodPost, "/collections/trawl/points/batch", `{"operations": [
		{"set_payload": {"payload": {"x": 1}, "points": [1]}},
		{"clear_payload": {"points": [2]}}]}`, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, `{"status":{"error":"Not found: No point with id 2 found"},"time":0}`, normalised(t, res.Body))
	require.Equal(t, before, payloads(t, e))

	// So does one naming a point an earlier operation deleted, though
	// the point is stored when the batch arrives: no shard applies its
	// share (the points live on more than one shard).
	res = e.Do(http.MethodPost, "/collections/trawl/points/batch", `{"operations": [
		{"delete": {"points": [1]}},
		{"set_payload": {"payload": {"x": 1}, "points": [10, "`+uuidA+`", 1]}}]}`, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, `{"status":{"error":"Not found: No point with id 1 found"},"time":0}`, normalised(t, res.Body))
	require.Equal(t, before, payloads(t, e), "nothing deleted, nothing set")
}

// TestQdrantBadEditInput: each edit route's malformed bodies are
// Qdrant-style 400s naming the member, reach no shard and change no
// data.
func TestQdrantBadEditInput(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	seedQdrant(t, e)
	const (
		set     = "POST /collections/trawl/points/payload"
		over    = "PUT /collections/trawl/points/payload"
		delKeys = "POST /collections/trawl/points/payload/delete"
		clear   = "POST /collections/trawl/points/payload/clear"
		vecs    = "PUT /collections/trawl/points/vectors"
		delVecs = "POST /collections/trawl/points/vectors/delete"
		batch   = "POST /collections/trawl/points/batch"
	)
	// The followers apply the seed moments after it is acknowledged.
	require.Eventually(t, func() bool {
		for _, row := range e.StoreState() {
			if row[0] != row[1] {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)
	red := `{"must": [{"key": "color", "match": {"value": "red"}}]}`
	exactlyOne := `give exactly one of \"points\" (ids) or \"filter\"`
	for _, tc := range []struct{ route, name, body, msg string }{
		{set, "neither points nor filter", `{"payload": {"a": 1}}`, exactlyOne},
		{set, "points and filter", `{"payload": {"a": 1}, "points": [1], "filter": ` + red + `}`, exactlyOne},
		{set, "points not a list", `{"payload": {"a": 1}, "points": 1}`, `.points of type []json.RawMessage`},
		{set, "bad id", `{"payload": {"a": 1}, "points": [1, -3]}`, `points[1]: `},
		{set, "no ids", `{"payload": {"a": 1}, "points": []}`, `points has 0 ids, want 1..10000`},
		{set, "unknown member", `{"payload": {"a": 1}, "points": [1], "pointz": [2]}`, `unknown field \"pointz\"`},
		{set, "missing payload", `{"points": [1]}`, `missing \"payload\"`},
		{set, "payload not an object", `{"payload": [1], "points": [1]}`, `payload: is an array, want a JSON object`},
		{set, "key with an empty segment", `{"payload": {"a": 1}, "points": [1], "key": "a..b"}`, `key \"a..b\" has an empty segment`},
		{set, "key with an index", `{"payload": {"a": 1}, "points": [1], "key": "a[0].b"}`, `array indexes`},
		{set, "key not a string", `{"payload": {"a": 1}, "points": [1], "key": 3}`, `.key of type string`},
		{set, "empty filter", `{"payload": {"a": 1}, "filter": {}}`, `filter has no conditions`},
		{set, "bad filter", `{"payload": {"a": 1}, "filter": {"must": [{"key": "a", "match": {}}]}}`, `filter.must[0].match`},
		{set, "shard key", `{"payload": {"a": 1}, "points": [1], "shard_key": "x"}`, `shard_key`},
		{over, "key", `{"payload": {"a": 1}, "points": [1], "key": "a"}`, `key is not supported on an overwrite`},
		{over, "neither points nor filter", `{"payload": {"a": 1}}`, exactlyOne},
		{delKeys, "missing keys", `{"points": [1]}`, `missing \"keys\"`},
		{delKeys, "nested key", `{"keys": ["meta.a"], "points": [1]}`, `keys[0] (\"meta.a\"): want a top-level payload key`},
		{delKeys, "keys not a list", `{"keys": "color", "points": [1]}`, `.keys of type []string`},
		{delKeys, "points and filter", `{"keys": ["color"], "points": [1], "filter": ` + red + `}`, exactlyOne},
		{clear, "neither points nor filter", `{}`, exactlyOne},
		{clear, "empty filter", `{"filter": {"must": []}}`, `filter has no conditions`},
		{clear, "unknown member", `{"points": [1], "keys": ["a"]}`, `unknown field \"keys\"`},
		{vecs, "wrong size", `{"points": [{"id": 1, "vector": [1, 2, 3]}]}`, `points[0]: vector has 3 dimensions, want 8`},
		{vecs, "zero vector", `{"points": [{"id": 1, "vector": [0, 0, 0, 0, 0, 0, 0, 0]}]}`, `points[0]: vector`},
		{vecs, "named vector", `{"points": [{"id": 1, "vector": {"image": ` + unit(1) + `}}]}`, `points[0]: vector`},
		{vecs, "missing vector", `{"points": [{"id": 1}]}`, `points[0]: vector is missing`},
		{vecs, "payload in a point", `{"points": [{"id": 1, "vector": ` + unit(1) + `, "payload": {}}]}`, `points[0]: bad JSON: json: unknown field \"payload\"`},
		{vecs, "repeated id", `{"points": [{"id": 1, "vector": ` + unit(1) + `}, {"id": 1, "vector": ` + unit(2) + `}]}`, `points[1]: id 1 repeats points[0]`},
		{vecs, "no points", `{"points": []}`, `points has 0 entries, want 1..10000`},
		{vecs, "filter", `{"points": [{"id": 1, "vector": ` + unit(1) + `}], "filter": ` + red + `}`, `unknown field \"filter\"`},
		{delVecs, "neither points nor filter", `{"vector": [""]}`, exactlyOne},
		{delVecs, "by ids", `{"points": [1], "vector": [""]}`, `deleting vectors is not supported`},
		{batch, "no operations", `{"operations": []}`, `operations has 0 entries, want 1..256`},
		{batch, "operations not a list", `{"operations": {"upsert": {}}}`, `.operations of type`},
		{batch, "unknown operation", `{"operations": [{"set_payload": {"payload": {"a": 1}, "points": [1]}}, {"upsert_points": {}}]}`,
			`operations[1].upsert_points: unknown operation \"upsert_points\"`},
		{batch, "two operations in one", `{"operations": [{"delete": {"points": [1]}, "clear_payload": {"points": [1]}}]}`,
			`operations[0]: want an object with exactly one operation, got 2 members`},
		{batch, "bad operation body", `{"operations": [{"clear_payload": {"points": [1]}}, {"set_payload": {"points": [1]}}]}`,
			`operations[1].set_payload: missing \"payload\"`},
		{batch, "bad vector", `{"operations": [{"update_vectors": {"points": [{"id": 1, "vector": [1]}]}}]}`,
			`operations[0].update_vectors: points[0]: vector has 1 dimensions, want 8`},
		{batch, "delete vectors", `{"operations": [{"delete_vectors": {"points": [1], "vector": [""]}}]}`,
			`operations[0].delete_vectors: deleting vectors is not supported`},
		{batch, "empty delete filter", `{"operations": [{"delete": {"filter": {}}}]}`, `operations[0].delete: filter has no conditions`},
	} {
		t.Run(tc.route+"/"+tc.name, func(t *testing.T) {
			method, path, _ := strings.Cut(tc.route, " ")
			store, rpcs, before := e.StoreState(), e.ShardRPCs(), payloads(t, e)
			rpcs = e.ShardRPCs() // payloads' own reads
			res := e.Do(method, path, tc.body, nil)
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			body := normalised(t, res.Body)
			require.True(t, strings.HasPrefix(body, `{"status":{"error":"Bad request: `), "%s", body)
			require.Contains(t, body, tc.msg)
			require.Equal(t, rpcs, e.ShardRPCs(), "a refused edit reached a shard")
			require.Equal(t, store, e.StoreState())
			require.Equal(t, before, payloads(t, e))
		})
	}
}
