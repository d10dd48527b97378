package qdrant_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// The Qdrant routes' contract: each endpoint's exact JSON, in the shapes
// of Qdrant's OpenAPI document (1.x), with trawl's scatter_gather beside
// result. Qdrant's "time" and scatter_gather's elapsed_ms vary and are
// zeroed before comparing.

const (
	uuidA = "8a1e0c4a-7b4f-4c1e-9d2a-0123456789ab"
	sgOK  = `"scatter_gather":{"degraded":false,"shards_total":3,"shards_queried":3,"unavailable_shards":[],"shard_errors":{},"coverage":1,"exact":true,"elapsed_ms":0,"deadline_ms":2000,"shard_deadline_ms":1995}`
)

// normalised zeroes the varying members ("time" and elapsed_ms, top
// level only) and compacts the body, keeping member order.
func normalised(t testing.TB, b []byte) string {
	t.Helper()
	c := apitest.CompactJSON(t, b)
	c = timeRE.ReplaceAllString(c, `${1}"time":0`)
	return elapsedRE.ReplaceAllString(c, `"elapsed_ms":0`)
}

var (
	timeRE    = regexp.MustCompile(`([,{])"time":[0-9.e-]+`)
	elapsedRE = regexp.MustCompile(`"elapsed_ms":[0-9]+`)
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// unit is an apitest.Dim-long basis vector, as JSON.
func unit(i int) string {
	v := make([]string, apitest.Dim)
	for j := range v {
		v[j] = "0"
	}
	v[i] = "1"
	return "[" + strings.Join(v, ",") + "]"
}

// seedQdrant writes three points of the contract: two integer ids and a
// UUID, on basis vectors, with payloads a test filter can single out.
func seedQdrant(t *testing.T, e *apitest.Env) {
	t.Helper()
	res := e.Do(http.MethodPut, "/collections/trawl/points?wait=true", `{"points": [
		{"id": 1, "vector": `+unit(0)+`, "payload": {"suite": "contract", "color": "red", "n": 1}},
		{"id": 2, "vector": `+unit(1)+`, "payload": {"suite": "contract", "color": "blue", "n": 2}},
		{"id": "`+strings.ToUpper(uuidA)+`", "vector": `+unit(2)+`, "payload": {"suite": "contract", "color": "red", "n": 3}}]}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, `{"result":{"operation_id":null,"status":"completed"},"status":"ok","time":0}`, normalised(t, res.Body))
}

func TestQdrantContract(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	seedQdrant(t, e)
	suite := `{"must": [{"key": "suite", "match": {"value": "contract"}}]}`
	red := `{"must": [{"key": "suite", "match": {"value": "contract"}}, {"key": "color", "match": {"value": "red"}}]}`
	point1 := `{"id":1,"payload":{"suite":"contract","color":"red","n":1},"vector":null}`
	point2 := `{"id":2,"payload":{"suite":"contract","color":"blue","n":2},"vector":null}`
	pointA := `{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":null}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
		degradedHeader           bool // X-Trawl-Degraded: false is set
	}{
		{name: "root", method: http.MethodGet, path: "/", status: 200,
			want: `{"title":"trawl - scatter-gather vector search router (Qdrant-compatible REST subset)","version":"1.18.0"}`},
		{name: "collections", method: http.MethodGet, path: "/collections", status: 200,
			want: `{"result":{"collections":[{"name":"trawl"}]},"status":"ok","time":0}`},
		{name: "exists", method: http.MethodGet, path: "/collections/trawl/exists", status: 200,
			want: `{"result":{"exists":true},"status":"ok","time":0}`},
		{name: "exists not", method: http.MethodGet, path: "/collections/other/exists", status: 200,
			want: `{"result":{"exists":false},"status":"ok","time":0}`},
		{name: "aliases, none", method: http.MethodGet, path: "/aliases", status: 200,
			want: `{"result":{"aliases":[]},"status":"ok","time":0}`},
		{name: "collection aliases, none", method: http.MethodGet, path: "/collections/trawl/aliases", status: 200,
			want: `{"result":{"aliases":[]},"status":"ok","time":0}`},
		{name: "create idempotent", method: http.MethodPut, path: "/collections/trawl",
			body: `{"vectors": {"size": 8, "distance": "Cosine"}, "hnsw_config": {"m": 16}, "shard_number": 6}`, status: 200,
			want: `{"result":true,"status":"ok","time":0}`},
		{name: "collection info", method: http.MethodGet, path: "/collections/trawl", status: 200, degradedHeader: true,
			want: `{"result":{"status":"green","optimizer_status":"ok","indexed_vectors_count":0,"points_count":303,"segments_count":3,` +
				`"config":{"params":{"vectors":{"size":8,"distance":"Cosine","on_disk":false},"shard_number":3,"replication_factor":2,"write_consistency_factor":1,"on_disk_payload":false},` +
				`"hnsw_config":{"m":0,"ef_construct":0,"full_scan_threshold":0},"optimizer_config":{"default_segment_number":0,"flush_interval_sec":0},"quantization_config":null},` +
				`"payload_schema":{}},"status":"ok","time":0,` + sgOK + `}`},
		{name: "get point", method: http.MethodGet, path: "/collections/trawl/points/1", status: 200, degradedHeader: true,
			want: `{"result":{"id":1,"payload":{"suite":"contract","color":"red","n":1},"vector":` + unit(0) + `},"status":"ok","time":0,` +
				`"scatter_gather":{"degraded":false,"shards_total":3,"shards_queried":1,"unavailable_shards":[],"shard_errors":{},"coverage":1,"exact":true,"elapsed_ms":0,"deadline_ms":2000,"shard_deadline_ms":1995}}`},
		{name: "get point by uuid", method: http.MethodGet, path: "/collections/trawl/points/" + strings.ReplaceAll(uuidA, "-", ""), status: 200, degradedHeader: true,
			want: `{"result":{"id":"` + uuidA + `","payload":{"suite":"contract","color":"red","n":3},"vector":` + unit(2) + `},"status":"ok","time":0,` +
				`"scatter_gather":{"degraded":false,"shards_total":3,"shards_queried":1,"unavailable_shards":[],"shard_errors":{},"coverage":1,"exact":true,"elapsed_ms":0,"deadline_ms":2000,"shard_deadline_ms":1995}}`},
		{name: "get point missing", method: http.MethodGet, path: "/collections/trawl/points/404", status: 404, degradedHeader: true,
			want: `{"status":{"error":"Not found: Point with id 404 does not exists!"},"time":0,` +
				`"scatter_gather":{"degraded":false,"shards_total":3,"shards_queried":1,"unavailable_shards":[],"shard_errors":{},"coverage":1,"exact":true,"elapsed_ms":0,"deadline_ms":2000,"shard_deadline_ms":1995}}`},
		{name: "retrieve", method: http.MethodPost, path: "/collections/trawl/points",
			body: `{"ids": [2, "` + uuidA + `", 404, 2], "with_payload": {"include": ["n"]}}`, status: 200, degradedHeader: true,
			// Three ids on three home shards (the collection's slot map):
			// shards_queried counts those asked.
			want: `{"result":[{"id":2,"payload":{"n":2},"vector":null},{"id":"` + uuidA + `","payload":{"n":3},"vector":null}],"status":"ok","time":0,` +
				`"scatter_gather":{"degraded":false,"shards_total":3,"shards_queried":3,"unavailable_shards":[],"shard_errors":{},"coverage":1,"exact":true,"elapsed_ms":0,"deadline_ms":2000,"shard_deadline_ms":1995}}`},
		{name: "search", method: http.MethodPost, path: "/collections/trawl/points/search",
			body: `{"vector": ` + unit(0) + `, "limit": 2, "filter": ` + red + `, "with_payload": ["color"]}`, status: 200, degradedHeader: true,
			want: `{"result":[{"id":1,"version":0,"score":1,"payload":{"color":"red"}},{"id":"` + uuidA + `","version":0,"score":0,"payload":{"color":"red"}}],"status":"ok","time":0,` + sgOK + `}`},
		{name: "search offset, threshold, exclude, vector", method: http.MethodPost, path: "/collections/trawl/points/search",
			body:   `{"vector": ` + unit(2) + `, "limit": 1, "offset": 0, "score_threshold": 0.5, "filter": ` + suite + `, "with_payload": {"exclude": ["suite", "n"]}, "with_vector": true, "params": {"hnsw_ef": 128, "exact": true}}`,
			status: 200, degradedHeader: true,
			want: `{"result":[{"id":"` + uuidA + `","version":0,"score":1,"payload":{"color":"red"},"vector":` + unit(2) + `}],"status":"ok","time":0,` + sgOK + `}`},
		{name: "search batch", method: http.MethodPost, path: "/collections/trawl/points/search/batch",
			body:   `{"searches": [{"vector": ` + unit(1) + `, "limit": 1, "filter": ` + suite + `}, {"vector": ` + unit(0) + `, "limit": 1, "offset": 1, "filter": ` + red + `}]}`,
			status: 200, degradedHeader: true,
			want: `{"result":[[{"id":2,"version":0,"score":1}],[{"id":"` + uuidA + `","version":0,"score":0}]],"status":"ok","time":0,` + sgOK + `}`},
		{name: "query vector", method: http.MethodPost, path: "/collections/trawl/points/query",
			body: `{"query": ` + unit(1) + `, "limit": 1, "filter": ` + suite + `, "with_payload": true}`, status: 200, degradedHeader: true,
			want: `{"result":{"points":[{"id":2,"version":0,"score":1,"payload":{"suite":"contract","color":"blue","n":2}}]},"status":"ok","time":0,` + sgOK + `}`},
		{name: "query nearest id", method: http.MethodPost, path: "/collections/trawl/points/query",
			body: `{"query": {"nearest": 1}, "limit": 2, "filter": ` + red + `}`, status: 200, degradedHeader: true,
			want: `{"result":{"points":[{"id":"` + uuidA + `","version":0,"score":0}]},"status":"ok","time":0,` + sgOK + `}`},
		{name: "query batch", method: http.MethodPost, path: "/collections/trawl/points/query/batch",
			body:   `{"searches": [{"query": ` + unit(1) + `, "limit": 1, "filter": ` + suite + `}, {"query": {"nearest": 1}, "limit": 2, "filter": ` + red + `, "with_payload": ["n"]}]}`,
			status: 200, degradedHeader: true,
			want: `{"result":[{"points":[{"id":2,"version":0,"score":1}]},{"points":[{"id":"` + uuidA + `","version":0,"score":0,"payload":{"n":3}}]}],"status":"ok","time":0,` + sgOK + `}`},
		{name: "scroll", method: http.MethodPost, path: "/collections/trawl/points/scroll",
			body: `{"filter": ` + suite + `, "limit": 2}`, status: 200, degradedHeader: true,
			want: `{"result":{"points":[` + point1 + `,` + point2 + `],"next_page_offset":"` + uuidA + `"},"status":"ok","time":0,` + sgOK + `}`},
		{name: "scroll from offset", method: http.MethodPost, path: "/collections/trawl/points/scroll",
			body: `{"filter": ` + suite + `, "limit": 2, "offset": "` + uuidA + `"}`, status: 200, degradedHeader: true,
			want: `{"result":{"points":[` + pointA + `],"next_page_offset":null},"status":"ok","time":0,` + sgOK + `}`},
		{name: "count", method: http.MethodPost, path: "/collections/trawl/points/count",
			body: `{"filter": ` + red + `, "exact": false}`, status: 200, degradedHeader: true,
			want: `{"result":{"count":2},"status":"ok","time":0,` + sgOK + `}`},
		{name: "count all, no body", method: http.MethodPost, path: "/collections/trawl/points/count", status: 200, degradedHeader: true,
			want: `{"result":{"count":303},"status":"ok","time":0,` + sgOK + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A deadline that holds under -race on a loaded machine.
			sep := "?"
			if strings.Contains(tc.path, "?") {
				sep = "&"
			}
			res := e.Do(tc.method, tc.path+sep+"deadline_ms=2000", tc.body, nil)
			require.Equal(t, tc.status, res.Status, "%s", res.Body)
			require.Equal(t, "application/json", res.Header.Get("Content-Type"))
			require.Equal(t, tc.want, normalised(t, res.Body))
			if tc.degradedHeader {
				require.Equal(t, "false", res.Header.Get("X-Trawl-Degraded"))
			}
		})
	}

	// Deletes, by filter then by ids, and what they leave.
	res := e.Do(http.MethodPost, "/collections/trawl/points/delete?wait=true&ordering=weak", `{"filter": `+red+`}`, nil)
	require.Equal(t, `{"result":{"operation_id":null,"status":"completed"},"status":"ok","time":0}`, normalised(t, res.Body))
	e.EventuallyAbsent("1", uuidA)
	res = e.Do(http.MethodPost, "/collections/trawl/points/count?deadline_ms=2000", `{"filter": `+suite+`}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), `{"result":{"count":1},"status":"ok"`)
	res = e.Do(http.MethodPost, "/collections/trawl/points/delete", `{"points": [2, 3]}`, nil)
	require.Equal(t, `{"result":{"operation_id":null,"status":"completed"},"status":"ok","time":0}`, normalised(t, res.Body))
	e.EventuallyAbsent("2")
	res = e.Do(http.MethodGet, "/collections/trawl?deadline_ms=2000", "", nil)
	require.Contains(t, string(res.Body), `"points_count":300`)
}

// TestQdrantBadInput: everything trawl refuses answers Qdrant's error
// envelope with exactly this message and status, reaches no shard and
// stores nothing.
func TestQdrantBadInput(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	v8 := unit(0)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"unknown collection", http.MethodPost, "/collections/other/points/search", `{"vector": ` + v8 + `, "limit": 1}`, 404,
			"Not found: Collection `other` doesn't exist!"},
		{"unknown collection info", http.MethodGet, "/collections/other", ``, 404, "Not found: Collection `other` doesn't exist!"},
		{"create manhattan", http.MethodPut, "/collections/other", `{"vectors": {"size": 8, "distance": "Manhattan"}}`, 400,
			"Bad request: vectors.distance Manhattan is not supported: trawl scores Cosine, Dot and Euclid"},
		{"create too large", http.MethodPut, "/collections/other", `{"vectors": {"size": 16384, "distance": "Cosine"}}`, 400,
			"Bad request: vectors.size is 16384, want 1..8192"},
		{"create product quantization", http.MethodPut, "/collections/other", `{"vectors": {"size": 8, "distance": "Dot"}, "quantization_config": {"product": {"compression": "x4"}}}`, 400,
			`Bad request: quantization_config.product is not supported: trawl quantizes to int8 codes only ({"scalar": {"type": "int8"}})`},
		{"create bad name", http.MethodPut, "/collections/no%20spaces", `{"vectors": {"size": 8, "distance": "Dot"}}`, 400,
			`Bad request: invalid collection: name "no spaces": only letters, digits, '_', '.' and '-' are allowed`},
		{"create bad timeout", http.MethodPut, "/collections/other?timeout=soon", `{"vectors": {"size": 8, "distance": "Dot"}}`, 400,
			`Bad request: invalid timeout: "soon" is not an integer number of seconds ≥ 1`},
		{"create named vectors on disk", http.MethodPut, "/collections/nd", `{"vectors": {"text": {"size": 8, "distance": "Cosine", "on_disk": true}}}`, 400,
			`Bad request: vectors.text.on_disk true is not supported: a named vector's rows are kept in memory`},
		{"create sparse vectors", http.MethodPut, "/collections/trawl", `{"vectors": {"size": 8, "distance": "Cosine"}, "sparse_vectors": {"s": {"modifier": "IDF"}}}`, 400,
			`Bad request: sparse_vectors.s.modifier is "IDF", want "none" or "idf"`},
		{"upsert wrong size", http.MethodPut, "/collections/trawl/points", `{"points": [{"id": 1, "vector": [1, 2]}]}`, 400,
			"Bad request: points[0]: vector has 2 dimensions, want 8"},
		{"upsert second point bad", http.MethodPut, "/collections/trawl/points", `{"points": [{"id": 1, "vector": ` + v8 + `}, {"id": -4, "vector": ` + v8 + `}]}`, 400,
			"Bad request: points[1]: id -4 is not an unsigned 64-bit integer"},
		{"upsert named vector", http.MethodPut, "/collections/trawl/points", `{"points": [{"id": 1, "vector": {"text": ` + v8 + `}}]}`, 400,
			"Bad request: points[0]: vector: the collection has no named vectors: it holds one unnamed vector per point (got an object with text)"},
		{"upsert sparse vector", http.MethodPut, "/collections/trawl/points", `{"points": [{"id": 1, "vector": {"s": {"indices": [1], "values": [0.5]}}}]}`, 400,
			`Bad request: points[0]: vector: a sparse vector is given by the name of one of the collection's sparse vectors: "using": "NAME" in points/query, {"name", "vector"} in a search, {"NAME": {"indices", "values"}} in a point`},
		{"upsert multivector", http.MethodPut, "/collections/trawl/points", `{"points": [{"id": 1, "vector": [` + v8 + `]}]}`, 400,
			"Bad request: points[0]: vector: multivectors are not supported: trawl stores one vector per point"},
		{"upsert string integer id", http.MethodPut, "/collections/trawl/points", `{"points": [{"id": "7", "vector": ` + v8 + `}]}`, 400,
			`Bad request: points[0]: id "7" is a string; an integer id is sent as a number (7)`},
		{"upsert repeated id", http.MethodPut, "/collections/trawl/points", `{"batch": {"ids": [5, 5], "vectors": [` + v8 + `, ` + v8 + `]}}`, 400,
			"Bad request: points[1]: id 5 repeats points[0]"},
		{"upsert bad payload", http.MethodPut, "/collections/trawl/points", `{"points": [{"id": 1, "vector": ` + v8 + `, "payload": [1]}]}`, 400,
			"Bad request: points[0]: payload: is an array, want a JSON object"},
		{"upsert shard key", http.MethodPut, "/collections/trawl/points", `{"points": [{"id": 1, "vector": ` + v8 + `}], "shard_key": "a"}`, 400,
			"Bad request: shard_key is not supported: trawl places points by a hash of their id over every shard"},
		{"search sparse", http.MethodPost, "/collections/trawl/points/search", `{"vector": {"name": "s", "vector": {"indices": [1], "values": [1]}}, "limit": 1}`, 400,
			`Bad request: vector.name: the collection has no sparse vector "s" (its sparse vectors: none)`},
		{"search named", http.MethodPost, "/collections/trawl/points/search", `{"vector": {"name": "text", "vector": ` + v8 + `}, "limit": 1}`, 400,
			`Bad request: vector: the collection has no named vectors: it holds one unnamed vector per point (got the name "text")`},
		{"search unsupported filter", http.MethodPost, "/collections/trawl/points/search", `{"vector": ` + v8 + `, "limit": 1, "filter": {"must": [{"key": "a", "geo_radius": {}}]}}`, 400,
			"Bad request: filter.must[0].geo_radius.center: is missing"},
		{"search limit", http.MethodPost, "/collections/trawl/points/search", `{"vector": ` + v8 + `, "limit": 990, "offset": 11}`, 400,
			"Bad request: limit 990 and offset 11: want limit at least 1 and limit + offset at most 1000"},
		{"search unknown member", http.MethodPost, "/collections/trawl/points/search", `{"vector": ` + v8 + `, "limit": 1, "top": 3}`, 400,
			`Bad request: bad JSON: json: unknown field "top"`},
		{"search nested payload key", http.MethodPost, "/collections/trawl/points/search", `{"vector": ` + v8 + `, "limit": 1, "with_payload": ["meta.title"]}`, 400,
			`Bad request: with_payload key 0 ("meta.title"): want a top-level payload key (trawl selects whole top-level keys, not nested paths)`},
		{"search named with_vector", http.MethodPost, "/collections/trawl/points/search", `{"vector": ` + v8 + `, "limit": 1, "with_vector": ["text"]}`, 400,
			"Bad request: with_vector: the collection has no named vectors: it holds one unnamed vector per point; use true or false"},
		{"batch names the search", http.MethodPost, "/collections/trawl/points/search/batch", `{"searches": [{"vector": ` + v8 + `, "limit": 1}, {"vector": [1], "limit": 1}]}`, 400,
			"Bad request: searches[1]: vector has 1 dimensions, want 8"},
		{"query fusion", http.MethodPost, "/collections/trawl/points/query", `{"query": {"fusion": "rrf"}}`, 400,
			`Bad request: query.fusion needs prefetch: a fusion fuses the results of prefetches`},
		{"query prefetch", http.MethodPost, "/collections/trawl/points/query", `{"prefetch": [{"query": ` + v8 + `, "with_payload": true}], "query": ` + v8 + `}`, 400,
			`Bad request: prefetch[0]: bad JSON: json: unknown field "with_payload"`},
		{"query using", http.MethodPost, "/collections/trawl/points/query", `{"query": ` + v8 + `, "using": "text"}`, 400,
			`Bad request: using: the collection has no named vectors: it holds one unnamed vector per point (got "text")`},
		{"query mmr", http.MethodPost, "/collections/trawl/points/query", `{"query": {"nearest": ` + v8 + `, "mmr": {"diversity": 0.5}}}`, 400,
			"Bad request: query.mmr is not supported: trawl serves plain nearest-vector queries"},
		{"query none", http.MethodPost, "/collections/trawl/points/query", `{"limit": 3}`, 400,
			`Bad request: query is missing: trawl serves nearest-vector queries (a vector, a point id, or {"nearest": ...}); list points with points/scroll`},
		{"scroll bad offset", http.MethodPost, "/collections/trawl/points/scroll", `{"offset": 1.5}`, 400,
			"Bad request: offset: id 1.5 is not an unsigned 64-bit integer"},
		{"scroll limit", http.MethodPost, "/collections/trawl/points/scroll", `{"limit": 0}`, 400,
			"Bad request: limit is 0, want 1..10000"},
		{"count bad filter", http.MethodPost, "/collections/trawl/points/count", `{"filter": {"must": {"key": "", "match": {"value": 1}}}}`, 400,
			"Bad request: filter.must.key: is empty"},
		{"delete neither", http.MethodPost, "/collections/trawl/points/delete", `{}`, 400,
			`Bad request: give exactly one of "points" (ids) or "filter"`},
		{"delete empty filter", http.MethodPost, "/collections/trawl/points/delete", `{"filter": {}}`, 400,
			"Bad request: filter has no conditions, which would delete every point; trawl refuses that (delete by ids, or give the filter a condition)"},
		{"retrieve bad id", http.MethodPost, "/collections/trawl/points", `{"ids": [1, true]}`, 400,
			"Bad request: ids[1]: id is a boolean, want an unsigned integer or a UUID string"},
		{"bad timeout", http.MethodPost, "/collections/trawl/points/count?timeout=0.5", `{}`, 400,
			`Bad request: invalid timeout: "0.5" is not an integer number of seconds ≥ 1`},
		{"bad wait", http.MethodPut, "/collections/trawl/points?wait=yes", `{"points": [{"id": 1, "vector": ` + v8 + `}]}`, 400,
			`Bad request: wait is "yes", want true or false`},
		{"query batch names the query", http.MethodPost, "/collections/trawl/points/query/batch", `{"searches": [{"query": ` + v8 + `}, {"query": [1]}]}`, 400,
			"Bad request: searches[1]: query: vector has 1 dimensions, want 8"},
		{"query batch empty", http.MethodPost, "/collections/trawl/points/query/batch", `{"searches": []}`, 400,
			"Bad request: searches has 0 entries, want 1..256"},
		{"index no schema", http.MethodPut, "/collections/trawl/index", `{"field_name": "color"}`, 400,
			"Bad request: Can't auto-detect field type, please specify `field_schema` in the request"},
		{"alias action empty", http.MethodPost, "/collections/aliases", `{"actions": [{"delete_alias": {"alias_name": "a"}}, {}]}`, 400,
			"Bad request: actions[1]: want exactly one of create_alias, delete_alias or rename_alias"},
		{"method", http.MethodPost, "/collections/trawl", `{}`, 405,
			"POST is not allowed on /collections/trawl (trawl serves a subset of Qdrant's API)"},
		{"update on_disk", http.MethodPatch, "/collections/trawl", `{"vectors": {"": {"on_disk": true}}}`, 400,
			"Bad request: vectors.on_disk cannot change: the float32 vectors stay in memory, where the collection was created to keep them"},
		{"aliases method", http.MethodPost, "/aliases", `{}`, 405,
			"POST is not allowed on /aliases (trawl serves a subset of Qdrant's API)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, rpcs := e.StoreState(), e.ShardRPCs()
			res := e.Do(tc.method, tc.path, tc.body, map[string]string{"Content-Type": "application/json"})
			require.Equal(t, tc.status, res.Status, "%s", res.Body)
			want := `{"status":{"error":` + string(mustJSON(t, tc.msg)) + `},"time":0}`
			require.Equal(t, want, normalised(t, res.Body))
			if tc.name != "unknown collection" {
				// A name the router's catalog lacks is looked up again
				// (it may have been created through another router):
				// catalog reads, never a data request.
				require.Equal(t, rpcs, e.ShardRPCs(), "a shard RPC was made for bad input")
			}
			require.Equal(t, store, e.StoreState())
		})
	}
}

// TestQdrantDegraded: a count, a scroll, a facet and a search missing a shard say
// so in scatter_gather and X-Trawl-Degraded, and ?allow_partial=false
// refuses them in Qdrant's envelope with the block beside it.
func TestQdrantDegraded(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	e.StopShard("shard-1")
	for _, tc := range []struct{ name, path, body string }{
		{"count", "/collections/trawl/points/count", `{}`},
		{"scroll", "/collections/trawl/points/scroll", `{"limit": 5}`},
		{"search", "/collections/trawl/points/search", `{"vector": ` + unit(0) + `, "limit": 5}`},
		{"query", "/collections/trawl/points/query", `{"query": ` + unit(0) + `}`},
		{"facet", "/collections/trawl/facet", `{"key": "color"}`},
		{"scroll order_by", "/collections/trawl/points/scroll", `{"order_by": "n", "limit": 5}`},
		{"query groups", "/collections/trawl/points/query/groups", `{"query": ` + unit(0) + `, "group_by": "color"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.Do(http.MethodPost, tc.path+"?deadline_ms=500", tc.body, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			require.Equal(t, "true", res.Header.Get("X-Trawl-Degraded"))
			var a struct {
				Result        json.RawMessage `json:"result"`
				ScatterGather struct {
					Degraded          bool              `json:"degraded"`
					UnavailableShards []string          `json:"unavailable_shards"`
					ShardErrors       map[string]string `json:"shard_errors"`
				} `json:"scatter_gather"`
			}
			require.NoError(t, json.Unmarshal(res.Body, &a))
			require.True(t, a.ScatterGather.Degraded)
			require.Equal(t, []string{"shard-1"}, a.ScatterGather.UnavailableShards)
			require.Equal(t, map[string]string{"shard-1": "unavailable"}, a.ScatterGather.ShardErrors)

			res = e.Do(http.MethodPost, tc.path+"?deadline_ms=500&allow_partial=false", tc.body, nil)
			require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
			require.Equal(t, "true", res.Header.Get("X-Trawl-Degraded"))
			var top map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(res.Body, &top))
			require.ElementsMatch(t, []string{"status", "time", "scatter_gather"}, apitest.Keys(top))
			require.Contains(t, string(top["status"]), "Service unavailable: 1 of 3 shards unavailable and allow_partial is false")
		})
	}
	res := e.Do(http.MethodGet, "/collections/trawl?deadline_ms=500", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), `"status":"yellow"`)
	require.Equal(t, "true", res.Header.Get("X-Trawl-Degraded"))
}

// TestQdrantTimeout: Qdrant's timeout (seconds) is the deadline, clamped
// to the maximum; deadline_ms wins when both are given.
func TestQdrantTimeout(t *testing.T) {
	e := apitest.New(t, apitest.Config{BuiltinDeadline: true})
	for _, tc := range []struct {
		query string
		want  int
	}{{"", 50}, {"?timeout=2", 2000}, {"?timeout=3600", 10000}, {"?timeout=2&deadline_ms=1200", 1200}} {
		// 50 ms may miss every shard under -race (a 503 then), but
		// scatter_gather says the deadline either way.
		res := e.Do(http.MethodPost, "/collections/trawl/points/count"+tc.query, `{}`, nil)
		var a struct {
			ScatterGather struct {
				DeadlineMS int `json:"deadline_ms"`
			} `json:"scatter_gather"`
		}
		require.NoError(t, json.Unmarshal(res.Body, &a))
		require.Equal(t, tc.want, a.ScatterGather.DeadlineMS, tc.query)
	}
}

// TestQdrantAPIKey: with a key, the Qdrant routes take it as api-key or
// Bearer; without, 401 in Qdrant's envelope. The root stays open.
func TestQdrantAPIKey(t *testing.T) {
	e := apitest.New(t, apitest.Config{APIKey: "s3cret"})
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"none", nil, 401},
		{"wrong", map[string]string{"api-key": "nope"}, 401},
		{"api-key", map[string]string{"api-key": "s3cret"}, 200},
		{"bearer", map[string]string{"Authorization": "Bearer s3cret"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.Do(http.MethodGet, "/collections", "", tc.header)
			require.Equal(t, tc.status, res.Status, "%s", res.Body)
			if tc.status == 401 {
				require.Equal(t, `{"status":{"error":"Unauthorized: missing or wrong API key: send it in the api-key header or as Authorization: Bearer \u003ckey\u003e"},"time":0}`,
					strings.ReplaceAll(normalised(t, res.Body), "<key>", `\u003ckey\u003e`))
			}
		})
	}
	require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/", "", nil).Status)
}
