package api_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// fake is a router over fake shards (apitest.NewFake), answering in this
// package's response.
func fake(t *testing.T, cfg apitest.FakeConfig) *env {
	t.Helper()
	e := apitest.NewFake(t, cfg)
	return &env{Env: e, t: t}
}

// requireJSON checks an answer's status, content type and exact body.
func requireJSON(t *testing.T, res response, status int, body string) {
	t.Helper()
	require.Equal(t, status, res.status, "body: %s", res.body)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	require.JSONEq(t, body, string(res.body))
}

const (
	docsSettings = `{"dimension": 4, "metric": "dot", "quantization": "int8", "index": "ivf"}`
	docsJSON     = `"name": "docs", "dimension": 4, "metric": "dot", "quantization": "int8", "index": "ivf", "float32": "on_disk"`
)

// TestCollectionLifecycle: the exact answers of create, repeat, conflict,
// list, show and drop, and that a dropped collection is gone from every
// route.
func TestCollectionLifecycle(t *testing.T) {
	e := fake(t, apitest.FakeConfig{})
	requireJSON(t, e.do(http.MethodGet, "/v1/collections", "", nil), 200, `{"collections": []}`)

	requireJSON(t, e.do(http.MethodPut, "/v1/collections/docs", docsSettings, nil), 200, `{`+docsJSON+`, "created": true, "slots": 256}`)
	requireJSON(t, e.do(http.MethodPut, "/v1/collections/docs", docsSettings, nil), 200, `{`+docsJSON+`, "created": false, "slots": 256}`)
	// ivf implies int8: the same settings, said shorter.
	requireJSON(t, e.do(http.MethodPut, "/v1/collections/docs", `{"dimension": 4, "metric": "dot", "index": "ivf"}`, nil), 200,
		`{`+docsJSON+`, "created": false, "slots": 256}`)
	msg := requireError(t, e.do(http.MethodPut, "/v1/collections/docs", `{"dimension": 8, "metric": "dot"}`, nil), 409, "conflict", false)
	require.Contains(t, msg, "collection `docs` exists with other settings")

	requireJSON(t, e.do(http.MethodPut, "/v1/collections/plain", "", nil), 200,
		`{"name": "plain", "dimension": 1536, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory", "created": true, "slots": 256}`)
	requireJSON(t, e.do(http.MethodGet, "/v1/collections", "", nil), 200, `{"collections": [
		{`+docsJSON+`, "state": "ready"},
		{"name": "plain", "dimension": 1536, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory", "state": "ready"}]}`)

	res := e.do(http.MethodPost, "/v1/collections/docs/vectors", `{"vectors": [
		{"id": "a", "vector": [1, 0, 0, 0]}, {"id": "b", "vector": [0, 1, 0, 0], "payload": {"lang": "en"}}, {"id": "c", "vector": [0, 0, 1, 0]}]}`, nil)
	requireJSON(t, res, 200, `{"results": [{"id": "a", "status": "ok"}, {"id": "b", "status": "ok"}, {"id": "c", "status": "ok"}]}`)
	res = e.do(http.MethodGet, "/v1/collections/docs", "", nil)
	require.Equal(t, 200, res.status, "body: %s", res.body)
	// The fake shards' bytes are the vectors' and payloads' (16 a vector,
	// b's payload 13); their index is a ready ivf with no lists.
	slots := map[string]int{"shard-0": 86, "shard-1": 85, "shard-2": 85} // 256 dealt in turn
	shard := func(name string, docs, bytes int) string {
		return `{"name": "` + name + `", "slots": ` + itoa(slots[name]) + `, "answered": true, "doc_count": ` + itoa(docs) + `, "bytes": ` + itoa(bytes) +
			`, "index": {"kind": "ivf", "state": "ready", "lists": 0, "trained_rows": 0, "default_nprobe": 0,
			"nprobe_calibrated": false, "rows": ` + itoa(docs) + `, "bytes": 0, "bytes_per_vector": 0}}`
	}
	perShard := shardDocs(t, e, "docs", "a", "b", "c")
	var shards []string
	total := 0
	for i, ids := range perShard {
		bytes := 16 * len(ids)
		for _, id := range ids {
			if id == "b" {
				bytes += len(`{"lang":"en"}`)
			}
		}
		total += bytes
		shards = append(shards, shard("shard-"+itoa(i), len(ids), bytes))
	}
	requireJSON(t, res, 200, `{`+docsJSON+`, "slots": 256, "slot_map_epoch": 1, "state": "ready", "lacking_shards": [], "degraded": false,
		"doc_count": 3, "bytes": `+itoa(total)+`, "shards": [`+strings.Join(shards, ",")+`]}`)

	requireJSON(t, e.do(http.MethodDelete, "/v1/collections/docs", "", nil), 200, `{"name": "docs", "deleted": true}`)
	requireJSON(t, e.do(http.MethodDelete, "/v1/collections/docs", "", nil), 200, `{"name": "docs", "deleted": false}`)
	requireJSON(t, e.do(http.MethodGet, "/v1/collections", "", nil), 200, `{"collections": [
		{"name": "plain", "dimension": 1536, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory", "state": "ready"}]}`)
	for _, r := range unknownRoutes("docs") {
		msg := requireError(t, e.do(r.method, r.path, r.body, nil), 404, "not_found", false)
		require.Equal(t, "collection `docs` does not exist", msg, "%s %s", r.method, r.path)
	}
}

// shardDocs finds which fake shard holds each id of a collection.
func shardDocs(t *testing.T, e *env, coll string, ids ...string) [][]string {
	t.Helper()
	out := make([][]string, len(e.Fakes))
	for _, id := range ids {
		res := e.do(http.MethodGet, "/v1/collections/"+coll+"/vectors/"+id, "", nil)
		require.Equal(t, 200, res.status, "body: %s", res.body)
		for i, f := range e.Fakes {
			if strings.Contains(string(res.body), `"shard":"`+f.Name+`"`) {
				out[i] = append(out[i], id)
			}
		}
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

type route struct{ method, path, body string }

// unknownRoutes are the routes under a collection that must answer 404
// when it does not exist.
func unknownRoutes(coll string) []route {
	p := "/v1/collections/" + coll
	q := `{"vector": [1, 0, 0, 0]}`
	return []route{
		{http.MethodGet, p, ""},
		{http.MethodGet, p + "/", ""},
		{http.MethodPost, p + "/search", q},
		{http.MethodPost, p + "/search/batch", `{"queries": [` + q + `]}`},
		{http.MethodPost, p + "/vectors", `{"vectors": [{"id": "x", "vector": [1, 0, 0, 0]}]}`},
		{http.MethodGet, p + "/vectors/x", ""},
		{http.MethodDelete, p + "/vectors/x", ""},
	}
}

// elapsedMS is the one member of scatter_gather that varies between runs.
var elapsedMS = regexp.MustCompile(`"elapsed_ms":\d+`)

func withoutElapsed(b []byte) string {
	return elapsedMS.ReplaceAllString(string(b), `"elapsed_ms":0`)
}

const sgBlock = `"scatter_gather": {"degraded": false, "shards_total": 3, "shards_queried": 3, "unavailable_shards": [],
	"shard_errors": {}, "coverage": 1, "exact": true, "elapsed_ms": 0, "deadline_ms": 1000, "shard_deadline_ms": 995}`

// TestDocumentRoutesUnderACollection: search, batch, upsert, get and
// delete under /v1/collections/{c}/ act on that collection, in the same
// shapes as the collection-less paths, which act on the default one.
func TestDocumentRoutesUnderACollection(t *testing.T) {
	e := fake(t, apitest.FakeConfig{})
	for _, c := range []string{"docs", "trawl"} {
		requireJSON(t, e.do(http.MethodPut, "/v1/collections/"+c, `{"dimension": 4, "metric": "dot"}`, nil), 200,
			`{"name": "`+c+`", "dimension": 4, "metric": "dot", "quantization": "none", "index": "flat", "float32": "in_memory", "created": true, "slots": 256}`)
	}
	res := e.do(http.MethodPost, "/v1/collections/docs/vectors",
		`{"vectors": [{"id": "a", "vector": [1, 0, 0, 0], "payload": {"n": 1}}, {"id": "b", "vector": [0.5, 0, 0, 0]}]}`, nil)
	requireJSON(t, res, 200, `{"results": [{"id": "a", "status": "ok"}, {"id": "b", "status": "ok"}]}`)
	requireJSON(t, e.do(http.MethodPost, "/v1/vectors", `{"vectors": [{"id": "z", "vector": [0, 0, 0, 1]}]}`, nil), 200,
		`{"results": [{"id": "z", "status": "ok"}]}`)
	home := map[string]string{}
	for i, ids := range shardDocs(t, e, "docs", "a", "b") {
		for _, id := range ids {
			home[id] = e.Fakes[i].Name
		}
	}

	res = e.do(http.MethodGet, "/v1/collections/docs/vectors/a", "", nil)
	requireJSON(t, res, 200, `{"id": "a", "vector": [1, 0, 0, 0], "payload": {"n": 1}, "shard": "`+home["a"]+`"}`)
	res = e.do(http.MethodPost, "/v1/collections/docs/search", `{"vector": [1, 0, 0, 0], "k": 5, "with_payload": true}`, nil)
	require.Equal(t, 200, res.status, "body: %s", res.body)
	require.Equal(t, "false", res.header.Get("X-Trawl-Degraded"))
	require.JSONEq(t, `{"items": [{"id": "a", "score": 1, "shard": "`+home["a"]+`", "payload": {"n": 1}},
		{"id": "b", "score": 0.5, "shard": "`+home["b"]+`", "payload": {}}], `+sgBlock+`}`, withoutElapsed(res.body))
	res = e.do(http.MethodPost, "/v1/collections/docs/search/batch", `{"queries": [{"vector": [1, 0, 0, 0], "k": 1}, {"like_id": "a"}]}`, nil)
	require.Equal(t, 200, res.status, "body: %s", res.body)
	require.JSONEq(t, `{"results": [{"items": [{"id": "a", "score": 1, "shard": "`+home["a"]+`"}]},
		{"items": [{"id": "b", "score": 0.5, "shard": "`+home["b"]+`"}]}], `+sgBlock+`}`, withoutElapsed(res.body))

	// The default collection holds only z; docs' documents are not in it.
	res = e.do(http.MethodPost, "/v1/search", `{"vector": [1, 1, 1, 1]}`, nil)
	require.Equal(t, 200, res.status, "body: %s", res.body)
	require.Regexp(t, `^\{"items":\[\{"id":"z","score":1,"shard":"shard-\d"\}\],`, string(res.body))
	requireError(t, e.do(http.MethodGet, "/v1/vectors/a", "", nil), 404, "not_found", false)

	requireJSON(t, e.do(http.MethodDelete, "/v1/collections/docs/vectors/a", "", nil), 200, `{"id": "a", "status": "ok"}`)
	requireJSON(t, e.do(http.MethodDelete, "/v1/collections/docs/vectors/a", "", nil), 200, `{"id": "a", "status": "not_found"}`)
	requireError(t, e.do(http.MethodGet, "/v1/collections/docs/vectors/a", "", nil), 404, "not_found", false)
	requireJSON(t, e.do(http.MethodGet, "/v1/collections/trawl/vectors/z", "", nil), 200,
		`{"id": "z", "vector": [0, 0, 0, 1], "payload": {}, "shard": "`+jsonString(t, e.do(http.MethodGet, "/v1/vectors/z", "", nil), "shard")+`"}`)

	// Vectors are checked against the collection's own dimension.
	msg := requireError(t, e.do(http.MethodPost, "/v1/collections/docs/search", `{"vector": [1, 0, 0]}`, nil), 400, "invalid_argument", false)
	require.Equal(t, "vector has 3 dimensions, want 4", msg)
}

func jsonString(t *testing.T, res response, member string) string {
	t.Helper()
	m := regexp.MustCompile(`"` + member + `":"([^"]*)"`).FindSubmatch(res.body)
	require.NotNil(t, m, "no %s in %s", member, res.body)
	return string(m[1])
}

// TestBadCollectionRequests: a bad name or bad settings are 400 naming
// what is wrong, and reach no shard.
func TestBadCollectionRequests(t *testing.T) {
	e := fake(t, apitest.FakeConfig{})
	long := strings.Repeat("x", 65)
	for _, tc := range []struct{ method, path, body, msg string }{
		{http.MethodPut, "/v1/collections/" + long, "", `invalid collection: name "` + long + `": want 1..64 characters`},
		{http.MethodPut, "/v1/collections/a%20b", "", `invalid collection: name "a b": only letters, digits, '_', '.' and '-' are allowed`},
		{http.MethodPut, "/v1/collections/a~b", "", `invalid collection: name "a~b": only letters, digits, '_', '.' and '-' are allowed`},
		{http.MethodDelete, "/v1/collections/a~b", "", `invalid collection: name "a~b": only letters, digits, '_', '.' and '-' are allowed`},
		{http.MethodPut, "/v1/collections/ok", `{"dimension": 0}`, "dimension is 0, want an integer 1..8192"},
		{http.MethodPut, "/v1/collections/ok", `{"dimension": "8"}`, "dimension is a string, want an integer 1..8192"},
		{http.MethodPut, "/v1/collections/ok", `{"metric": "Dot"}`, `metric is "Dot", want one of "cosine", "dot", "l2"`},
		{http.MethodPut, "/v1/collections/ok", `{"size": 8}`, `bad JSON: json: unknown field "size"`},
		{http.MethodPut, "/v1/collections/ok", `{} {}`, "bad JSON: trailing data after the request object"},
	} {
		msg := requireError(t, e.do(tc.method, tc.path, tc.body, nil), 400, "invalid_argument", false)
		require.Equal(t, tc.msg, msg, "%s %s", tc.method, tc.path)
	}
	requireJSON(t, e.do(http.MethodGet, "/v1/collections", "", nil), 200, `{"collections": []}`)
	requireError(t, e.do(http.MethodPost, "/v1/collections", "", nil), 405, "method_not_allowed", false)
	requireError(t, e.do(http.MethodPost, "/v1/collections/ok", "", nil), 405, "method_not_allowed", false)
}

// TestCollectionStillCreating: while a shard has not taken a create, the
// create is 503 with Retry-After, the collection shows state creating
// (naming the shard) and its routes are 503; repeating the create once
// the shard is back completes it.
func TestCollectionStillCreating(t *testing.T) {
	e := fake(t, apitest.FakeConfig{})
	e.Fakes[2].HoldBack(true)
	res := e.do(http.MethodPut, "/v1/collections/slow", `{"dimension": 4}`, nil)
	msg := requireError(t, res, 503, "unavailable", false)
	require.Contains(t, msg, "collection `slow` is created but has not reached every shard yet")
	require.Equal(t, "1", res.header.Get("Retry-After"))

	requireJSON(t, e.do(http.MethodGet, "/v1/collections", "", nil), 200, `{"collections": [
		{"name": "slow", "dimension": 4, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory", "state": "creating"}]}`)
	res = e.do(http.MethodGet, "/v1/collections/slow", "", nil)
	empty := func(name, slots string) string {
		return `{"name": "` + name + `", "slots": ` + slots + `, "answered": true, "doc_count": 0, "bytes": 0, "index": {"kind": "flat", "state": "ready",
			"lists": 0, "trained_rows": 0, "default_nprobe": 0, "nprobe_calibrated": false, "rows": 0, "bytes": 0, "bytes_per_vector": 0}}`
	}
	requireJSON(t, res, 200, `{"name": "slow", "dimension": 4, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory",
		"slots": 256, "slot_map_epoch": 1, "state": "creating", "lacking_shards": ["shard-2"], "degraded": true, "doc_count": 0, "bytes": 0, "shards": [`+
		empty("shard-0", "86")+`, `+empty("shard-1", "85")+`, {"name": "shard-2", "slots": 85, "answered": false, "doc_count": 0, "bytes": 0, "index": null}]}`)
	for _, r := range unknownRoutes("slow")[2:] {
		res := e.do(r.method, r.path, r.body, nil)
		msg := requireError(t, res, 503, "unavailable", false)
		require.Contains(t, msg, "collection `slow` is still being created", "%s %s", r.method, r.path)
		require.Equal(t, "1", res.header.Get("Retry-After"), "%s %s", r.method, r.path)
	}

	e.Fakes[2].HoldBack(false)
	requireJSON(t, e.do(http.MethodPut, "/v1/collections/slow", `{"dimension": 4}`, nil), 200,
		`{"name": "slow", "dimension": 4, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory", "created": false, "slots": 256}`)
	requireJSON(t, e.do(http.MethodGet, "/v1/collections", "", nil), 200, `{"collections": [
		{"name": "slow", "dimension": 4, "metric": "cosine", "quantization": "none", "index": "flat", "float32": "in_memory", "state": "ready"}]}`)
	requireJSON(t, e.do(http.MethodPost, "/v1/collections/slow/vectors", `{"vectors": [{"id": "x", "vector": [1, 0, 0, 0]}]}`, nil), 200,
		`{"results": [{"id": "x", "status": "ok"}]}`)
}

// TestCollectionUpdate: PATCH /v1/collections/{collection} switches the
// quantization of a flat collection, restating a setting changes
// nothing, and each setting that cannot change is a 400 naming it.
func TestCollectionUpdate(t *testing.T) {
	e := fake(t, apitest.FakeConfig{})
	requireJSON(t, e.do(http.MethodPut, "/v1/collections/flat", `{"dimension": 4, "metric": "dot"}`, nil), 200,
		`{"name": "flat", "dimension": 4, "metric": "dot", "quantization": "none", "index": "flat", "float32": "in_memory", "created": true, "slots": 256}`)
	const int8JSON = `"name": "flat", "dimension": 4, "metric": "dot", "quantization": "int8", "index": "flat", "float32": "in_memory"`
	requireJSON(t, e.do(http.MethodPatch, "/v1/collections/flat", `{"quantization": "int8"}`, nil), 200, `{`+int8JSON+`, "updated": true}`)
	requireJSON(t, e.do(http.MethodPatch, "/v1/collections/flat", `{"quantization": "int8", "dimension": 4, "float32": "in_memory"}`, nil), 200,
		`{`+int8JSON+`, "updated": false}`)
	requireJSON(t, e.do(http.MethodGet, "/v1/collections", "", nil), 200, `{"collections": [{`+int8JSON+`, "state": "ready"}]}`)
	for _, tc := range []struct{ body, msg string }{
		{`{"dimension": 8}`, "cannot change online: dimension (4, asked 8)"},
		{`{"metric": "l2", "float32": "on_disk"}`, "cannot change online: metric (dot, asked l2), float32 placement (in_memory, asked on_disk)"},
		{`{"index": "ivf"}`, "cannot change online: index (flat, asked ivf)"},
		{`{"slots": 16}`, "slots cannot change online"},
		{`{"quantization": "pq"}`, `quantization is "pq"`},
		{`{"colour": 1}`, "colour"},
	} {
		msg := requireError(t, e.do(http.MethodPatch, "/v1/collections/flat", tc.body, nil), 400, "invalid_argument", false)
		require.Contains(t, msg, tc.msg, tc.body)
	}
	requireError(t, e.do(http.MethodPatch, "/v1/collections/nope", `{"quantization": "int8"}`, nil), 404, "not_found", false)
	requireJSON(t, e.do(http.MethodPatch, "/v1/collections/flat", `{"quantization": "none"}`, nil), 200,
		`{"name": "flat", "dimension": 4, "metric": "dot", "quantization": "none", "index": "flat", "float32": "in_memory", "updated": true}`)
}
