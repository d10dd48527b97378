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

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// Qdrant's Query API with prefetch and fusion on a 3-shard cluster: every
// answer equal to a brute-force evaluation of Qdrant's semantics over the
// global lists — filters propagated into the leaves, each prefetch's
// global top list, RRF (1/(pos + k), positions from 0, k = 2 unless
// given) and DBSF (mean ± 3 sample standard deviations) over those lists,
// re-scoring the union of a stage's prefetches, thresholds and limits at
// every level, offset at the root.

// tFilter is a filter of the test trees: its JSON and what it keeps.
type tFilter struct {
	json string
	keep func(rdPoint) bool
}

var tFilters = []tFilter{
	{`{"must": [{"key": "flag", "match": {"value": true}}]}`, func(p rdPoint) bool { return p.payload["flag"] == true }},
	{`{"must_not": [{"key": "meta.kind", "match": {"value": "a"}}]}`, func(p rdPoint) bool {
		return p.payload["meta"].(map[string]any)["kind"] != "a"
	}},
	{`{"must": [{"key": "city", "match": {"any": ["oslo", "rome", "lima"]}}]}`, func(p rdPoint) bool {
		in := func(v any) bool { return v == "oslo" || v == "rome" || v == "lima" }
		switch c := p.payload["city"].(type) {
		case string:
			return in(c)
		case []any:
			return slices.ContainsFunc(c, in)
		}
		return false
	}},
}

// tNode is a stage of a test tree.
type tNode struct {
	vec       []float32 // nil: a fusion
	fusion    string    // "rrf", "dbsf", "rrf60" ({"rrf": {"k": 60}})
	filter    int       // index into tFilters, -1 none
	limit     int       // 0: the default (10)
	threshold *float64
	kids      []*tNode
}

func (n *tNode) body(root bool, offset int, extra string) map[string]any {
	m := map[string]any{}
	switch {
	case n.vec != nil:
		m["query"] = n.vec
	case n.fusion == "rrf60":
		m["query"] = map[string]any{"rrf": map[string]any{"k": 60}}
	default:
		m["query"] = map[string]any{"fusion": n.fusion}
	}
	if n.filter >= 0 {
		m["filter"] = json.RawMessage(tFilters[n.filter].json)
	}
	if n.limit > 0 {
		m["limit"] = n.limit
	}
	if n.threshold != nil {
		m["score_threshold"] = *n.threshold
	}
	if len(n.kids) == 1 && !root {
		m["prefetch"] = n.kids[0].body(false, 0, "") // the single-object form
	} else if len(n.kids) > 0 {
		var ps []any
		for _, k := range n.kids {
			ps = append(ps, k.body(false, 0, ""))
		}
		m["prefetch"] = ps
	}
	if root && offset > 0 {
		m["offset"] = offset
	}
	return m
}

type bHit struct {
	id    int
	score float64
}

func dot64(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func dist64(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

func sortHits(hs []bHit, ascending bool) {
	slices.SortFunc(hs, func(a, b bHit) int {
		c := cmp.Compare(b.score, a.score)
		if ascending {
			c = -c
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(fmt.Sprint(a.id), fmt.Sprint(b.id))
	})
}

// brute evaluates n over pts (a Dot collection, or Euclid with l2) as
// Qdrant documents it, keep being the filters of the stages above.
func brute(n *tNode, pts []rdPoint, keep []func(rdPoint) bool, limit int, l2 bool) []bHit {
	if n.filter >= 0 {
		keep = append(slices.Clip(keep), tFilters[n.filter].keep)
	}
	if limit == 0 {
		limit = 10
	}
	kept := func(p rdPoint) bool {
		for _, k := range keep {
			if !k(p) {
				return false
			}
		}
		return true
	}
	var out []bHit
	switch {
	case len(n.kids) == 0 || n.vec != nil:
		cand := map[int]bool{}
		for _, k := range n.kids {
			for _, h := range brute(k, pts, keep, k.limit, l2) {
				cand[h.id] = true
			}
		}
		for _, p := range pts {
			if (len(n.kids) == 0 || cand[p.id]) && kept(p) {
				s := dot64(n.vec, p.vector)
				if l2 {
					s = dist64(n.vec, p.vector)
				}
				if n.threshold == nil || (!l2 && s >= *n.threshold) || (l2 && s <= *n.threshold) {
					out = append(out, bHit{p.id, s})
				}
			}
		}
		sortHits(out, l2)
	default:
		var lists [][]bHit
		for _, k := range n.kids {
			l := brute(k, pts, keep, k.limit, l2)
			if l2 && k.vec != nil {
				// a distance list: nearer is better, so DBSF reads
				// its negation (order, all RRF reads, is kept)
				l = slices.Clone(l)
				for i := range l {
					l[i].score = -l[i].score
				}
			}
			lists = append(lists, l)
		}
		out = bruteFuse(n.fusion, lists)
		if n.threshold != nil {
			i := slices.IndexFunc(out, func(h bHit) bool { return h.score < *n.threshold })
			if i >= 0 {
				out = out[:i]
			}
		}
	}
	return out[:min(limit, len(out))]
}

// bruteFuse is RRF (in float32, summed in list order as Qdrant does, so
// exact ties stay ties) or DBSF (two-pass, in float64).
func bruteFuse(method string, lists [][]bHit) []bHit {
	sum := map[int]float64{}
	var order []int
	add := func(id int, s float64) {
		if _, ok := sum[id]; !ok {
			order = append(order, id)
		}
		sum[id] += s
	}
	sum32 := map[int]float32{}
	for _, l := range lists {
		switch method {
		case "rrf", "rrf60":
			k := float32(2)
			if method == "rrf60" {
				k = 60
			}
			for pos, h := range l {
				if _, ok := sum32[h.id]; !ok {
					order = append(order, h.id)
				}
				sum32[h.id] += 1 / (float32(pos) + k)
			}
		case "dbsf":
			if len(l) == 1 {
				add(l[0].id, 0.5)
				continue
			}
			var mean, ss float64
			for _, h := range l {
				mean += h.score
			}
			mean /= float64(len(l))
			for _, h := range l {
				ss += (h.score - mean) * (h.score - mean)
			}
			sd := math.Sqrt(ss / float64(len(l)-1))
			for _, h := range l {
				if sd == 0 {
					add(h.id, 0.5)
				} else {
					add(h.id, (h.score-(mean-3*sd))/(6*sd))
				}
			}
		}
	}
	out := make([]bHit, 0, len(order))
	for _, id := range order {
		if strings.HasPrefix(method, "rrf") {
			out = append(out, bHit{id, float64(sum32[id])})
		} else {
			out = append(out, bHit{id, sum[id]})
		}
	}
	sortHits(out, false)
	return out
}

// requireFused checks got against the brute-force list: the same scores
// position by position, each point's own brute-force score equal to the
// one answered, no point twice. Points of exactly tied scores may come in
// another order than the brute force's only where float rounding differs.
func requireFused(t *testing.T, want []bHit, got []lcHit, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	byID := map[int]float64{}
	for _, h := range want {
		byID[h.id] = h.score
	}
	seen := map[int]bool{}
	for i := range want {
		require.Equal(t, want[i].id, got[i].ID, "%s: hit %d", what, i)
		require.InDelta(t, want[i].score, got[i].Score, 1e-4, "%s: score at %d", what, i)
		require.False(t, seen[got[i].ID], "%s: %d twice", what, got[i].ID)
		seen[got[i].ID] = true
	}
}

func randTree(rng *rand.Rand, depth int, root, l2 bool) *tNode {
	n := &tNode{filter: -1}
	if rng.IntN(3) == 0 {
		n.filter = rng.IntN(len(tFilters))
	}
	if !root || rng.IntN(2) == 0 {
		n.limit = []int{3, 5, 10, 20, 40}[rng.IntN(5)]
	}
	leaf := depth == 0 || (!root && rng.IntN(3) == 0)
	if !leaf {
		for range 1 + rng.IntN(3) {
			n.kids = append(n.kids, randTree(rng, depth-1, false, l2))
		}
	}
	if leaf || rng.IntN(3) == 0 {
		n.vec = randomVector(rng, 8)
		if rng.IntN(4) == 0 {
			t := []float64{-1, 0, 0.5, 1}[rng.IntN(4)]
			if l2 {
				t = []float64{3, 3.5, 4, 5}[rng.IntN(4)] // distances: at most
			}
			n.threshold = &t
		}
		return n
	}
	n.fusion = []string{"rrf", "dbsf", "rrf60"}[rng.IntN(3)]
	if rng.IntN(5) == 0 {
		t := map[string]float64{"rrf": 0.4, "dbsf": 0.6, "rrf60": 0.02}[n.fusion]
		n.threshold = &t
	}
	return n
}

func queryHits(t *testing.T, body []byte) []lcHit {
	t.Helper()
	var a struct {
		Result struct {
			Points json.RawMessage `json:"points"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &a), "%s", body)
	return decodeHits(t, a.Result.Points)
}

func TestQdrantQueryPrefetchBruteForce(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	pts := rdCorpus(300)
	for _, coll := range []struct {
		name, distance string
		l2             bool
		trees          int
	}{{"hq", "Dot", false, 120}, {"hl", "Euclid", true, 60}} {
		t.Run(coll.distance, func(t *testing.T) {
			queryBruteForce(t, e, pts, coll.name, coll.distance, coll.l2, coll.trees)
		})
	}
}

func queryBruteForce(t *testing.T, e *apitest.Env, pts []rdPoint, coll, distance string, l2 bool, trees int) {
	res := e.Do(http.MethodPut, "/collections/"+coll, `{"vectors": {"size": 8, "distance": "`+distance+`"}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.Do(http.MethodPut, "/collections/"+coll+"/points?wait=true", rdUpsert(t, pts), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	rng := rand.New(rand.NewPCG(37, 2))
	var batch []map[string]any
	var batchWant [][]bHit
	for i := range trees {
		tree := randTree(rng, 1+rng.IntN(3), true, l2)
		offset := 0
		if rng.IntN(4) == 0 {
			offset = rng.IntN(4)
		}
		body := tree.body(true, offset, "")
		lim := tree.limit
		if lim == 0 {
			lim = 10
		}
		want := brute(tree, pts, nil, lim+offset, l2)
		want = want[min(offset, len(want)):]
		raw := mustJSON(t, body)
		res := e.Do(http.MethodPost, "/collections/"+coll+"/points/query?deadline_ms=5000", string(raw), map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusOK, res.Status, "%s: %s", raw, res.Body)
		require.Equal(t, "false", res.Header.Get("X-Trawl-Degraded"))
		requireFused(t, want, queryHits(t, res.Body), fmt.Sprintf("tree %d: %s", i, raw))
		if i%10 == 0 {
			batch, batchWant = append(batch, body), append(batchWant, want)
		}
	}
	// The same trees as one query/batch: each answered as alone.
	res = e.Do(http.MethodPost, "/collections/"+coll+"/points/query/batch?deadline_ms=5000", string(mustJSON(t, map[string]any{"searches": batch})), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var a struct {
		Result []struct {
			Points json.RawMessage `json:"points"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &a))
	require.Len(t, a.Result, len(batch))
	for i := range batch {
		requireFused(t, batchWant[i], decodeHits(t, a.Result[i].Points), fmt.Sprintf("batch %d", i))
	}

	// with_payload and with_vector on the final answer of a fusion.
	q := randomVector(rng, 8)
	res = e.Do(http.MethodPost, "/collections/"+coll+"/points/query", string(mustJSON(t, map[string]any{
		"prefetch": []any{map[string]any{"query": q, "limit": 5}, map[string]any{"query": randomVector(rng, 8), "limit": 5}},
		"query":    map[string]any{"fusion": "rrf"}, "limit": 3, "with_payload": []string{"city"}, "with_vector": true,
	})), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var full struct {
		Result struct {
			Points []struct {
				ID      int             `json:"id"`
				Payload json.RawMessage `json:"payload"`
				Vector  []float32       `json:"vector"`
			} `json:"points"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &full))
	require.Len(t, full.Result.Points, 3)
	for _, p := range full.Result.Points {
		require.Equal(t, pts[p.ID-1].vector, p.Vector)
		want := map[string]any{}
		if c, ok := pts[p.ID-1].payload["city"]; ok {
			want["city"] = c
		}
		require.JSONEq(t, string(mustJSON(t, want)), string(p.Payload))
	}
}

// TestQdrantQueryFusionIsGlobal: fusing each shard's lists and merging
// the shards' fused lists — what a per-shard fusion would answer — gives
// another answer on this data; trawl's equals the fusion of the global
// lists.
func TestQdrantQueryFusionIsGlobal(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	res := e.Do(http.MethodPut, "/collections/hg", `{"vectors": {"size": 8, "distance": "Dot"}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	pts := rdCorpus(90)
	res = e.Do(http.MethodPut, "/collections/hg/points?wait=true", rdUpsert(t, pts), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	// Each point's shard, from the native search's items.
	res = e.Do(http.MethodPost, "/v1/collections/hg/search", string(mustJSON(t, map[string]any{"vector": pts[0].vector, "k": 1000})), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var native struct {
		Items []struct {
			ID    string `json:"id"`
			Shard string `json:"shard"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &native))
	byShard := map[string][]rdPoint{}
	for _, it := range native.Items {
		var id int
		_, err := fmt.Sscan(it.ID, &id)
		require.NoError(t, err)
		byShard[it.Shard] = append(byShard[it.Shard], pts[id-1])
	}
	require.Len(t, byShard, 3)

	rng := rand.New(rand.NewPCG(5, 5))
	differed := 0
	for _, method := range []string{"rrf", "dbsf"} {
		for range 5 {
			tree := &tNode{fusion: method, filter: -1, limit: 5, kids: []*tNode{
				{vec: randomVector(rng, 8), filter: -1, limit: 4},
				{vec: randomVector(rng, 8), filter: -1, limit: 4},
			}}
			global := brute(tree, pts, nil, 5, false)
			var perShard []bHit
			for _, sp := range byShard {
				perShard = append(perShard, brute(tree, sp, nil, 5, false)...)
			}
			sortHits(perShard, false)
			perShard = perShard[:5]
			if fmt.Sprint(perShard) != fmt.Sprint(global) {
				differed++
			}
			raw := mustJSON(t, tree.body(true, 0, ""))
			res := e.Do(http.MethodPost, "/collections/hg/points/query", string(raw), nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			requireFused(t, global, queryHits(t, res.Body), string(raw))
		}
	}
	require.Greater(t, differed, 5, "the data should tell per-shard fusion from global fusion")
}

// TestQdrantQueryDegradedOnce: a two-round query (two leaves fused, then
// re-scored) missing a shard is degraded, and counts once in the
// queries and degraded counters, not once per round or branch.
func TestQdrantQueryDegradedOnce(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	e.StopShard("shard-1")
	counter := func(name string) float64 {
		var v float64
		for _, m := range e.Gather()[name].GetMetric() {
			if labels(m)["path"] == "search" && labels(m)["collection"] == "trawl" {
				v += m.GetCounter().GetValue()
			}
		}
		return v
	}
	q0, d0 := counter("trawl_scatter_queries_total"), counter("trawl_scatter_degraded_total")
	body := `{"prefetch": {"prefetch": [{"query": ` + unit(0) + `, "limit": 20}, {"query": ` + unit(1) + `, "limit": 20}], "query": {"fusion": "rrf"}, "limit": 15},
		"query": ` + unit(2) + `, "limit": 5}`
	res := e.Do(http.MethodPost, "/collections/trawl/points/query?deadline_ms=1000", body, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "true", res.Header.Get("X-Trawl-Degraded"))
	var a struct {
		ScatterGather struct {
			Degraded          bool     `json:"degraded"`
			UnavailableShards []string `json:"unavailable_shards"`
			Coverage          float64  `json:"coverage"`
		} `json:"scatter_gather"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &a))
	require.True(t, a.ScatterGather.Degraded)
	require.Equal(t, []string{"shard-1"}, a.ScatterGather.UnavailableShards)
	require.Less(t, a.ScatterGather.Coverage, 1.0)
	require.Equal(t, q0+1, counter("trawl_scatter_queries_total"))
	require.Equal(t, d0+1, counter("trawl_scatter_degraded_total"))

	res = e.Do(http.MethodPost, "/collections/trawl/points/query?deadline_ms=1000&allow_partial=false", body, nil)
	require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	require.Equal(t, "true", res.Header.Get("X-Trawl-Degraded"))
	require.Equal(t, q0+2, counter("trawl_scatter_queries_total"))
	require.Equal(t, d0+2, counter("trawl_scatter_degraded_total"))
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// TestQdrantQueryPrefetchBadInput: malformed trees are Qdrant-style 400s
// naming the member, and reach no shard.
func TestQdrantQueryPrefetchBadInput(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	v := unit(0)
	deep := `{"query": ` + v + `}`
	for range 65 {
		deep = `{"prefetch": ` + deep + `, "query": {"fusion": "rrf"}}`
	}
	var many []string
	for range 257 {
		many = append(many, `{"query": `+v+`}`)
	}
	for _, tc := range []struct{ name, path, body, msg string }{
		{"bad fusion", "points/query", `{"prefetch": {"query": ` + v + `}, "query": {"fusion": "max"}}`, `query.fusion: unknown variant "max", want "rrf" or "dbsf"`},
		{"fusion not a string", "points/query", `{"prefetch": {"query": ` + v + `}, "query": {"fusion": 1}}`, `query.fusion: want "rrf" or "dbsf"`},
		{"fusion without prefetch", "points/query", `{"query": {"fusion": "rrf"}}`, "query.fusion needs prefetch"},
		{"nested fusion without prefetch", "points/query", `{"prefetch": [{"query": {"fusion": "dbsf"}}], "query": {"fusion": "rrf"}}`, "prefetch[0].query.fusion needs prefetch"},
		{"prefetch without query", "points/query", `{"prefetch": {"prefetch": {"query": ` + v + `}}, "query": {"fusion": "rrf"}}`, "prefetch.query is missing: a prefetch with prefetches needs a query"},
		{"leaf without query", "points/query", `{"prefetch": [{"query": ` + v + `}, {"limit": 3}], "query": {"fusion": "rrf"}}`, "prefetch[1]: query is missing"},
		{"root without query", "points/query", `{"prefetch": {"query": ` + v + `}}`, "query is missing"},
		{"limit 0", "points/query", `{"prefetch": [{"query": ` + v + `, "limit": 0}], "query": {"fusion": "rrf"}}`, "prefetch[0]: limit 0 and offset 0: want limit at least 1"},
		{"limit over", "points/query", `{"prefetch": [{"query": ` + v + `, "limit": 1001}], "query": {"fusion": "rrf"}}`, "prefetch[0]: limit 1001"},
		{"offset in a prefetch", "points/query", `{"prefetch": [{"query": ` + v + `, "offset": 1}], "query": {"fusion": "rrf"}}`, `prefetch[0]: bad JSON: json: unknown field "offset"`},
		{"bad filter", "points/query", `{"prefetch": [{"query": ` + v + `, "filter": {"must": [{"key": "", "match": {"value": 1}}]}}], "query": {"fusion": "rrf"}}`, "prefetch[0]: filter.must[0].key"},
		{"wrong dimension", "points/query", `{"prefetch": {"prefetch": [{"query": [1, 2]}], "query": {"fusion": "dbsf"}}, "query": {"fusion": "rrf"}}`, "prefetch.prefetch[0]: query: vector has 2 dimensions, want 8"},
		{"rrf k 0", "points/query", `{"prefetch": {"query": ` + v + `}, "query": {"rrf": {"k": 0}}}`, "query.rrf.k is 0, want at least 1"},
		{"rrf weights", "points/query", `{"prefetch": {"query": ` + v + `}, "query": {"rrf": {"weights": [1, 2]}}}`, "rrf has 2 weights for 1 prefetches"},
		{"root limit 0", "points/query", `{"prefetch": {"query": ` + v + `}, "query": {"fusion": "rrf"}, "limit": 0}`, "limit 0 and offset 0: want limit at least 1"},
		{"using in a prefetch", "points/query", `{"prefetch": [{"query": ` + v + `, "using": "text"}], "query": {"fusion": "rrf"}}`, `prefetch[0]: using: the collection has no named vectors`},
		{"lookup_from on a fusion", "points/query", `{"prefetch": [{"query": {"fusion": "rrf"}, "lookup_from": {"collection": "x"}, "prefetch": {"query": ` + v + `}}], "query": {"fusion": "rrf"}}`, `prefetch[0]: lookup_from is not supported`},
		{"too deep", "points/query", deep, "nest deeper than 64"},
		{"too many", "points/query", `{"prefetch": [` + strings.Join(many, ",") + `], "query": {"fusion": "rrf"}}`, "more than 256 query stages"},
		{"prefetch not an object", "points/query", `{"prefetch": 3, "query": {"fusion": "rrf"}}`, "prefetch: want a prefetch object or a list of them"},
		{"batch entry", "points/query/batch", `{"searches": [{"query": ` + v + `}, {"prefetch": {"query": ` + v + `}, "query": {"fusion": "x"}}]}`, `searches[1]: query.fusion: unknown variant "x"`},
		{"groups", "points/query/groups", `{"prefetch": {"query": ` + v + `}, "query": {"fusion": "x"}, "group_by": "color"}`, `query.fusion: unknown variant "x"`},
		{"groups without group_by", "points/query/groups", `{"prefetch": {"query": ` + v + `}, "query": {"fusion": "rrf"}}`, `missing "group_by"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rpcs, store := e.ShardRPCs(), e.StoreState()
			res := e.Do(http.MethodPost, "/collections/trawl/"+tc.path, tc.body, nil)
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			var a struct {
				Status struct {
					Error string `json:"error"`
				} `json:"status"`
			}
			require.NoError(t, json.Unmarshal(res.Body, &a), "%s", res.Body)
			require.Contains(t, a.Status.Error, tc.msg)
			require.Equal(t, rpcs, e.ShardRPCs(), "a shard RPC was made for bad input")
			require.Equal(t, store, e.StoreState())
		})
	}
}
