package qdrant_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// The collection lifecycle through the Qdrant routes, as an application
// drives it: create, fill, search (equal to a brute force), declare
// payload indexes, alias, create again (equal: fine; different: 409),
// delete (404 after), create again (empty). Every answer's JSON is
// exact, but for search hits, which are checked against the brute force.

const notesDim = 384

// lcPoint is a point of the lifecycle corpus.
type lcPoint struct {
	id     int
	vector []float32
	color  string
	tag    string // "" for none
}

// randomVector is a seeded Gaussian vector.
func randomVector(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for j := range v {
		v[j] = float32(rng.NormFloat64())
	}
	return v
}

// lcCorpus is n seeded points of dim dimensions: ids 1..n, colors in
// turn, a tag on every other point.
func lcCorpus(n, dim int) []lcPoint {
	rng := rand.New(rand.NewPCG(7, 0))
	colors := []string{"red", "green", "blue"}
	out := make([]lcPoint, n)
	for i := range out {
		out[i] = lcPoint{id: i + 1, vector: randomVector(rng, dim), color: colors[i%3]}
		if i%2 == 0 {
			out[i].tag = "even"
		}
	}
	return out
}

func upsertBody(t *testing.T, pts []lcPoint) string {
	t.Helper()
	type point struct {
		ID      int            `json:"id"`
		Vector  []float32      `json:"vector"`
		Payload map[string]any `json:"payload"`
	}
	body := struct {
		Points []point `json:"points"`
	}{}
	for _, p := range pts {
		pl := map[string]any{"color": p.color}
		if p.tag != "" {
			pl["tag"] = p.tag
		}
		body.Points = append(body.Points, point{ID: p.id, Vector: p.vector, Payload: pl})
	}
	return string(mustJSON(t, body))
}

type lcHit struct {
	ID    int     `json:"id"`
	Score float64 `json:"score"`
}

// bruteForce scores every point keep passes against q with metric
// ("cosine" or "dot"), best first, ties by id as a string.
func bruteForce(pts []lcPoint, q []float32, metric string, k int, keep func(lcPoint) bool) []lcHit {
	dot := func(a, b []float32) float64 {
		s := 0.0
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	var out []lcHit
	for _, p := range pts {
		if keep != nil && !keep(p) {
			continue
		}
		s := dot(p.vector, q)
		if metric == "cosine" {
			s /= math.Sqrt(dot(p.vector, p.vector) * dot(q, q))
		}
		out = append(out, lcHit{ID: p.id, Score: s})
	}
	slices.SortFunc(out, func(a, b lcHit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(fmt.Sprint(a.ID), fmt.Sprint(b.ID))
	})
	return out[:min(k, len(out))]
}

func requireHits(t *testing.T, want, got []lcHit, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.Equal(t, want[i].ID, got[i].ID, "%s: hit %d", what, i)
		require.InDelta(t, want[i].Score, got[i].Score, 1e-4, "%s: score of %d", what, want[i].ID)
	}
}

func TestQdrantCollectionLifecycle(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	do := func(method, path, body string) apitest.Response {
		t.Helper()
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		return e.Do(method, path+sep+"deadline_ms=2000", body, map[string]string{"Content-Type": "application/json"})
	}
	exact := func(method, path, body string, status int, want string) apitest.Response {
		t.Helper()
		res := do(method, path, body)
		require.Equal(t, status, res.Status, "%s %s: %s", method, path, res.Body)
		require.Equal(t, want, normalised(t, res.Body), "%s %s", method, path)
		return res
	}
	ok := func(result string) string { return `{"result":` + result + `,"status":"ok","time":0}` }
	okSG := func(result string) string { return `{"result":` + result + `,"status":"ok","time":0,` + sgOK + `}` }
	fails := func(msg string) string { return `{"status":{"error":` + string(mustJSON(t, msg)) + `},"time":0}` }
	completed := ok(`{"operation_id":null,"status":"completed"}`)
	search := func(path, body string) []lcHit {
		t.Helper()
		res := do(http.MethodPost, path, body)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "false", res.Header.Get("X-Trawl-Degraded"))
		var a struct {
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal(res.Body, &a))
		return decodeHits(t, a.Result)
	}

	create := `{"vectors": {"size": 384, "distance": "Cosine"}, "hnsw_config": {"m": 16}, "optimizers_config": {"default_segment_number": 2}, "on_disk_payload": true}`
	exact(http.MethodGet, "/collections/notes/exists", "", 200, ok(`{"exists":false}`))
	exact(http.MethodPut, "/collections/notes", create, 200, ok(`true`))
	exact(http.MethodGet, "/collections", "", 200, ok(`{"collections":[{"name":"notes"},{"name":"trawl"}]}`))
	exact(http.MethodGet, "/collections/notes/exists", "", 200, ok(`{"exists":true}`))
	exact(http.MethodPut, "/collections/notes", `{"vectors": {"size": 384, "distance": "Cosine"}}`, 200, ok(`true`))
	exact(http.MethodPut, "/collections/notes", `{"vectors": {"size": 768, "distance": "Dot"}}`, 409, fails(
		"Wrong input: Collection `notes` already exists! It holds vectors of size 384 and distance Cosine, no quantization, flat index, float32 in memory; "+
			"this create asks for vectors of size 768 and distance Dot, no quantization, flat index, float32 in memory. Delete it first to change its settings"))
	exact(http.MethodPut, "/collections/notes", `{"vectors": {"size": 384, "distance": "Cosine"}, "quantization_config": {"scalar": {"type": "int8"}}}`, 409, fails(
		"Wrong input: Collection `notes` already exists! It holds vectors of size 384 and distance Cosine, no quantization, flat index, float32 in memory; "+
			"this create asks for vectors of size 384 and distance Cosine, scalar int8 quantization, flat index, float32 on disk. Delete it first to change its settings"))
	exact(http.MethodPut, "/collections/trawl", `{"vectors": {"size": 16, "distance": "Cosine"}}`, 409, fails(
		"Wrong input: Collection `trawl` already exists! It holds vectors of size 8 and distance Cosine, no quantization, flat index, float32 in memory; "+
			"this create asks for vectors of size 16 and distance Cosine, no quantization, flat index, float32 in memory. Delete it first to change its settings"))
	// A collection named like a route: the route's method decides.
	exact(http.MethodGet, "/collections/aliases", "", 404, fails("Not found: Collection `aliases` doesn't exist!"))

	pts := lcCorpus(40, notesDim)
	exact(http.MethodPut, "/collections/notes/points?wait=true", upsertBody(t, pts), 200, completed)
	q := randomVector(rand.New(rand.NewPCG(8, 0)), notesDim)
	qJSON := string(mustJSON(t, q))
	red := func(p lcPoint) bool { return p.color == "red" }
	redFilter := `{"must": [{"key": "color", "match": {"value": "red"}}]}`
	requireHits(t, bruteForce(pts, q, "cosine", 10, nil), search("/collections/notes/points/query", `{"query": `+qJSON+`}`), "query")
	requireHits(t, bruteForce(pts, q, "cosine", 5, red), search("/collections/notes/points/search", `{"vector": `+qJSON+`, "limit": 5, "filter": `+redFilter+`}`), "search")
	batch := do(http.MethodPost, "/collections/notes/points/query/batch",
		`{"searches": [{"query": `+qJSON+`, "limit": 3, "filter": `+redFilter+`}, {"query": 7, "limit": 4, "offset": 1}]}`)
	require.Equal(t, http.StatusOK, batch.Status, "%s", batch.Body)
	var lists struct {
		Result []struct {
			Points json.RawMessage `json:"points"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(batch.Body, &lists))
	require.Len(t, lists.Result, 2)
	requireHits(t, bruteForce(pts, q, "cosine", 3, red), decodeHits(t, lists.Result[0].Points), "query batch [0]")
	not7 := func(p lcPoint) bool { return p.id != 7 }
	requireHits(t, bruteForce(pts, pts[6].vector, "cosine", 5, not7)[1:], decodeHits(t, lists.Result[1].Points), "query batch [1], by id with an offset")
	exact(http.MethodPost, "/collections/notes/points/query", `{"query": `+unit(0)+`}`, 400, fails("Bad request: query: vector has 8 dimensions, want 384"))
	exact(http.MethodPost, "/collections/notes/points/count", `{}`, 200, okSG(`{"count":40}`))

	// Payload indexes: recorded, shown with the points holding a value.
	exact(http.MethodPut, "/collections/notes/index?wait=true", `{"field_name": "color", "field_schema": "keyword"}`, 200, completed)
	exact(http.MethodPut, "/collections/notes/index", `{"field_name": "tag", "field_schema": {"type": "keyword", "is_tenant": false}}`, 200, completed)
	exact(http.MethodPut, "/collections/notes/index", `{"field_name": "n", "field_schema": "integer"}`, 200, completed)
	exact(http.MethodDelete, "/collections/notes/index/n?wait=true", "", 200, completed)
	exact(http.MethodDelete, "/collections/notes/index/never", "", 200, completed)
	exact(http.MethodPut, "/collections/nope/index", `{"field_name": "color", "field_schema": "keyword"}`, 404, fails("Not found: Collection `nope` doesn't exist!"))
	exact(http.MethodGet, "/collections/notes", "", 200, `{"result":{"status":"green","optimizer_status":"ok","indexed_vectors_count":0,"points_count":40,"segments_count":3,`+
		`"config":{"params":{"vectors":{"size":384,"distance":"Cosine","on_disk":false},"shard_number":3,"replication_factor":2,"write_consistency_factor":1,"on_disk_payload":false},`+
		`"hnsw_config":{"m":0,"ef_construct":0,"full_scan_threshold":0},"optimizer_config":{"default_segment_number":0,"flush_interval_sec":0},"quantization_config":null},`+
		`"payload_schema":{"color":{"data_type":"keyword","points":40},"tag":{"data_type":"keyword","points":20}}},"status":"ok","time":0,`+sgOK+`}`)

	// Aliases.
	exact(http.MethodPost, "/collections/aliases", `{"actions": [{"create_alias": {"collection_name": "notes", "alias_name": "docs"}}]}`, 200, ok(`true`))
	exact(http.MethodGet, "/aliases", "", 200, ok(`{"aliases":[{"alias_name":"docs","collection_name":"notes"}]}`))
	exact(http.MethodGet, "/collections/notes/aliases", "", 200, ok(`{"aliases":[{"alias_name":"docs","collection_name":"notes"}]}`))
	exact(http.MethodGet, "/collections/trawl/aliases", "", 200, ok(`{"aliases":[]}`))
	exact(http.MethodGet, "/collections/docs/exists", "", 200, ok(`{"exists":true}`))
	requireHits(t, bruteForce(pts, q, "cosine", 10, nil), search("/collections/docs/points/query", `{"query": `+qJSON+`}`), "query through an alias")
	exact(http.MethodPost, "/collections/aliases", `{"actions": [{"rename_alias": {"old_alias_name": "docs", "new_alias_name": "docs2"}}]}`, 200, ok(`true`))
	exact(http.MethodGet, "/aliases", "", 200, ok(`{"aliases":[{"alias_name":"docs2","collection_name":"notes"}]}`))
	exact(http.MethodPost, "/collections/aliases", `{"actions": [{"rename_alias": {"old_alias_name": "docs", "new_alias_name": "x"}}]}`, 404, fails("Not found: Alias docs does not exists!"))
	exact(http.MethodPost, "/collections/aliases", `{"actions": [{"create_alias": {"collection_name": "nope", "alias_name": "x"}}]}`, 404, fails("Not found: Collection `nope` doesn't exist!"))
	exact(http.MethodPost, "/collections/aliases", `{"actions": [{"create_alias": {"collection_name": "notes", "alias_name": "trawl"}}]}`, 409, fails("Wrong input: Collection `trawl` already exists!"))
	exact(http.MethodPut, "/collections/docs2", create, 409, fails("Wrong input: Can't create collection with name docs2. Alias with the same name already exists (it points at `notes`)"))
	exact(http.MethodPost, "/collections/aliases", `{"actions": [{"create_alias": {"collection_name": "notes", "alias_name": "tmp"}}, {"delete_alias": {"alias_name": "tmp"}}, {"delete_alias": {"alias_name": "never"}}]}`, 200, ok(`true`))
	exact(http.MethodGet, "/aliases", "", 200, ok(`{"aliases":[{"alias_name":"docs2","collection_name":"notes"}]}`))

	// Delete: 404 after, its aliases gone; a second delete finds nothing.
	exact(http.MethodDelete, "/collections/docs2", "", 200, ok(`false`))
	exact(http.MethodDelete, "/collections/notes", "", 200, ok(`true`))
	exact(http.MethodGet, "/collections/notes", "", 404, fails("Not found: Collection `notes` doesn't exist!"))
	exact(http.MethodPost, "/collections/notes/points/query", `{"query": `+qJSON+`}`, 404, fails("Not found: Collection `notes` doesn't exist!"))
	exact(http.MethodGet, "/collections/notes/exists", "", 200, ok(`{"exists":false}`))
	exact(http.MethodGet, "/aliases", "", 200, ok(`{"aliases":[]}`))
	exact(http.MethodGet, "/collections", "", 200, ok(`{"collections":[{"name":"trawl"}]}`))
	exact(http.MethodDelete, "/collections/notes", "", 200, ok(`false`))

	// Created again: a new, empty collection without the old declarations.
	exact(http.MethodPut, "/collections/notes", `{"vectors": {"size": 384, "distance": "Dot"}, "quantization_config": {"scalar": {"type": "int8", "quantile": 0.99, "always_ram": true}}}`, 200, ok(`true`))
	exact(http.MethodGet, "/collections/notes", "", 200, `{"result":{"status":"green","optimizer_status":"ok","indexed_vectors_count":0,"points_count":0,"segments_count":3,`+
		`"config":{"params":{"vectors":{"size":384,"distance":"Dot","on_disk":true},"shard_number":3,"replication_factor":2,"write_consistency_factor":1,"on_disk_payload":false},`+
		`"hnsw_config":{"m":0,"ef_construct":0,"full_scan_threshold":0},"optimizer_config":{"default_segment_number":0,"flush_interval_sec":0},"quantization_config":{"scalar":{"type":"int8"}}},`+
		`"payload_schema":{}},"status":"ok","time":0,`+sgOK+`}`)
	require.Empty(t, search("/collections/notes/points/query", `{"query": `+qJSON+`}`))
	exact(http.MethodPut, "/collections/notes/points?wait=true", upsertBody(t, pts[:10]), 200, completed)
	requireHits(t, bruteForce(pts[:10], q, "dot", 3, nil), search("/collections/notes/points/query", `{"query": `+qJSON+`, "limit": 3, "params": {"exact": true}}`), "dot, re-created")
	// The other collection never saw any of it.
	exact(http.MethodPost, "/collections/trawl/points/count", `{}`, 200, okSG(`{"count":300}`))
}

// decodeHits reads a result that is a list of scored points, or a
// QueryResponse's {"points": [...]}.
func decodeHits(t *testing.T, raw json.RawMessage) []lcHit {
	t.Helper()
	var hits []lcHit
	if json.Unmarshal(raw, &hits) == nil {
		return hits
	}
	var qr struct {
		Points []lcHit `json:"points"`
	}
	require.NoError(t, json.Unmarshal(raw, &qr), "%s", raw)
	return qr.Points
}
