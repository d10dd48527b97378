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

// The read-side Qdrant calls (facet, scroll order_by) on a 3-shard
// cluster, each answer's JSON equal to one built from a brute force over
// the points written.

// rdPoint is a point of the reads corpus: its payload as written, with
// integers as int64 and other numbers as float64.
type rdPoint struct {
	id      int
	vector  []float32
	payload map[string]any
}

// rdCorpus is n seeded points whose payloads mix the kinds facet and
// order_by meet: keywords, integers, floats, booleans, arrays (with
// repeats), nulls, nested objects, and missing keys.
func rdCorpus(n int) []rdPoint {
	rng := rand.New(rand.NewPCG(11, 0))
	cities := []string{"berlin", "lima", "oslo", "pune", "quito", "rome"}
	out := make([]rdPoint, n)
	for i := range out {
		p := map[string]any{}
		switch rng.IntN(6) {
		case 0: // no city
		case 1:
			p["city"] = nil
		case 2:
			p["city"] = []any{cities[rng.IntN(6)], cities[rng.IntN(6)], cities[rng.IntN(3)]}
		default:
			p["city"] = cities[rng.IntN(6)]
		}
		switch rng.IntN(5) {
		case 0:
		case 1:
			p["n"] = float64(rng.IntN(10)) + 0.5
		case 2:
			x := int64(rng.IntN(10))
			p["n"] = []any{x, int64(rng.IntN(10)), "x", x}
		default:
			p["n"] = int64(rng.IntN(10) - 3)
		}
		if rng.IntN(4) > 0 {
			p["flag"] = rng.IntN(2) == 0
		}
		p["meta"] = map[string]any{"kind": []string{"a", "b"}[i%2]}
		out[i] = rdPoint{id: i + 1, vector: randomVector(rng, apitest.Dim), payload: p}
	}
	return out
}

func rdUpsert(t *testing.T, pts []rdPoint) string {
	t.Helper()
	type point struct {
		ID      int            `json:"id"`
		Vector  []float32      `json:"vector"`
		Payload map[string]any `json:"payload"`
	}
	var body struct {
		Points []point `json:"points"`
	}
	for _, p := range pts {
		body.Points = append(body.Points, point{ID: p.id, Vector: p.vector, Payload: p.payload})
	}
	return string(mustJSON(t, body))
}

// lookup follows a dotted key through nested objects.
func lookup(p map[string]any, key string) (any, bool) {
	var cur any = p
	for _, seg := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// facetKind orders value kinds as Qdrant does: strings, integers, booleans.
func facetKind(v any) int {
	switch v.(type) {
	case string:
		return 0
	case int64:
		return 1
	case bool:
		return 2
	}
	return -1
}

// bruteFacet is the facet answer's result JSON over the points keep
// passes: each distinct string, integer or boolean under key counted once
// per point, by count descending then value.
func bruteFacet(t *testing.T, pts []rdPoint, key string, limit int, keep func(rdPoint) bool) string {
	t.Helper()
	counts := map[any]int{}
	for _, p := range pts {
		if keep != nil && !keep(p) {
			continue
		}
		v, ok := lookup(p.payload, key)
		if !ok {
			continue
		}
		vs, isArr := v.([]any)
		if !isArr {
			vs = []any{v}
		}
		seen := map[any]bool{}
		for _, x := range vs {
			if facetKind(x) >= 0 && !seen[x] {
				seen[x] = true
				counts[x]++
			}
		}
	}
	type hit struct {
		Value any `json:"value"`
		Count int `json:"count"`
	}
	hits := []hit{}
	for v, n := range counts {
		hits = append(hits, hit{v, n})
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(facetKind(a.Value), facetKind(b.Value)); c != 0 {
			return c
		}
		switch x := a.Value.(type) {
		case string:
			return cmp.Compare(x, b.Value.(string))
		case int64:
			return cmp.Compare(x, b.Value.(int64))
		case bool:
			if x == b.Value.(bool) {
				return 0
			} else if !x {
				return -1
			}
			return 1
		}
		return 0
	})
	return string(mustJSON(t, map[string]any{"hits": hits[:min(limit, len(hits))]}))
}

// bruteOrder is an order_by scroll's result JSON (without payloads or
// vectors) over the points keep passes: a point once per number under
// key, by (value, id) in the direction asked, from start on.
func bruteOrder(t *testing.T, pts []rdPoint, key string, desc bool, start *float64, limit int, keep func(rdPoint) bool) string {
	t.Helper()
	type entry struct {
		id    int
		value float64
		out   any
	}
	var es []entry
	for _, p := range pts {
		if keep != nil && !keep(p) {
			continue
		}
		v, ok := lookup(p.payload, key)
		if !ok {
			continue
		}
		vs, isArr := v.([]any)
		if !isArr {
			vs = []any{v}
		}
		for _, x := range vs {
			var f float64
			switch x := x.(type) {
			case int64:
				f = float64(x)
			case float64:
				f = x
			default:
				continue
			}
			if start != nil && (!desc && f < *start || desc && f > *start) ||
				slices.ContainsFunc(es, func(e entry) bool { return e.id == p.id && e.value == f }) {
				continue // a point is listed once per distinct value
			}
			es = append(es, entry{p.id, f, x})
		}
	}
	slices.SortFunc(es, func(a, b entry) int {
		c := cmp.Compare(a.value, b.value)
		if c == 0 {
			c = cmp.Compare(a.id, b.id)
		}
		if desc {
			return -c
		}
		return c
	})
	type rec struct {
		ID         int       `json:"id"`
		Payload    *struct{} `json:"payload"`
		Vector     []float32 `json:"vector"`
		OrderValue any       `json:"order_value"`
	}
	out := struct {
		Points         []rec `json:"points"`
		NextPageOffset *int  `json:"next_page_offset"`
	}{Points: []rec{}}
	for _, e := range es[:min(limit, len(es))] {
		out.Points = append(out.Points, rec{ID: e.id, OrderValue: e.out})
	}
	return string(mustJSON(t, out))
}

func TestQdrantReads(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	do := func(path, body string) apitest.Response {
		t.Helper()
		return e.Do(http.MethodPost, path+"?deadline_ms=2000", body, map[string]string{"Content-Type": "application/json"})
	}
	res := e.Do(http.MethodPut, "/collections/reads", `{"vectors": {"size": 8, "distance": "Dot"}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	pts := rdCorpus(240)
	res = e.Do(http.MethodPut, "/collections/reads/points?wait=true", rdUpsert(t, pts), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	okSG := func(result string) string { return `{"result":` + result + `,"status":"ok","time":0,` + sgOK + `}` }
	exact := func(path, body, want string) {
		t.Helper()
		res := do(path, body)
		require.Equal(t, http.StatusOK, res.Status, "%s: %s", body, res.Body)
		require.Equal(t, "false", res.Header.Get("X-Trawl-Degraded"))
		require.Equal(t, okSG(want), normalised(t, res.Body), "%s", body)
	}
	flagged := func(p rdPoint) bool { return p.payload["flag"] == true }

	t.Run("facet", func(t *testing.T) {
		for _, tc := range []struct {
			body  string
			key   string
			limit int
			keep  func(rdPoint) bool
		}{
			{`{"key": "city"}`, "city", 10, nil},
			{`{"key": "city", "limit": 3, "exact": true}`, "city", 3, nil},
			{`{"key": "city", "filter": {"must": [{"key": "flag", "match": {"value": true}}]}}`, "city", 10, flagged},
			{`{"key": "n", "limit": 100}`, "n", 100, nil}, // integers (and the string "x"); floats are not counted
			{`{"key": "flag"}`, "flag", 10, nil},
			{`{"key": "meta.kind"}`, "meta.kind", 10, nil},
			{`{"key": "absent"}`, "absent", 10, nil},
		} {
			exact("/collections/reads/facet", tc.body, bruteFacet(t, pts, tc.key, tc.limit, tc.keep))
		}
		// The shape, spelled out once.
		exact("/collections/reads/facet", `{"key": "meta.kind", "limit": 1}`, `{"hits":[{"value":"a","count":120}]}`)
	})

	t.Run("order_by", func(t *testing.T) {
		f := func(x float64) *float64 { return &x }
		for _, tc := range []struct {
			body  string
			desc  bool
			start *float64
			limit int
			keep  func(rdPoint) bool
		}{
			{`{"order_by": "n", "with_payload": false}`, false, nil, 10, nil},
			{`{"order_by": {"key": "n", "direction": "desc"}, "limit": 50, "with_payload": false}`, true, nil, 50, nil},
			{`{"order_by": {"key": "n", "direction": "asc", "start_from": 2}, "limit": 40, "with_payload": false}`, false, f(2), 40, nil},
			{`{"order_by": {"key": "n", "direction": "desc", "start_from": 4.5}, "limit": 40, "with_payload": false}`, true, f(4.5), 40, nil},
			{`{"order_by": {"key": "n"}, "limit": 1000, "with_payload": false, "filter": {"must": [{"key": "flag", "match": {"value": true}}]}}`, false, nil, 1000, flagged},
			{`{"order_by": "city", "with_payload": false}`, false, nil, 10, nil}, // no numbers: nothing listed
		} {
			key := "n"
			if strings.Contains(tc.body, `"city"`) {
				key = "city"
			}
			exact("/collections/reads/points/scroll", tc.body, bruteOrder(t, pts, key, tc.desc, tc.start, tc.limit, tc.keep))
		}
		// With payload and vector, as Qdrant's Record.
		res := do("/collections/reads/points/scroll", `{"order_by": {"key": "n", "direction": "desc"}, "limit": 3, "with_vector": true, "filter": {"must": [{"key": "meta.kind", "match": {"value": "b"}}]}}`)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		type listed struct {
			Points []struct {
				ID         int             `json:"id"`
				Payload    json.RawMessage `json:"payload"`
				Vector     []float32       `json:"vector"`
				OrderValue json.RawMessage `json:"order_value"`
			} `json:"points"`
			NextPageOffset *int `json:"next_page_offset"`
		}
		var a struct {
			Result listed `json:"result"`
		}
		require.NoError(t, json.Unmarshal(res.Body, &a))
		var want listed
		require.NoError(t, json.Unmarshal([]byte(bruteOrder(t, pts, "n", true, nil, 3, func(p rdPoint) bool { return p.id%2 == 0 })), &want))
		require.Len(t, a.Result.Points, 3)
		for i, got := range a.Result.Points {
			require.Equal(t, want.Points[i].ID, got.ID)
			require.Equal(t, string(want.Points[i].OrderValue), string(got.OrderValue))
			require.JSONEq(t, string(mustJSON(t, pts[got.ID-1].payload)), string(got.Payload))
			require.Equal(t, pts[got.ID-1].vector, got.Vector)
		}
		require.Nil(t, a.Result.NextPageOffset)
	})
}

// bruteRecommend is the recommendation's hits over pts under metric
// ("dot" or "cosine"): the search vector avg(pos) (minus nothing) or
// 2·avg(pos) − avg(neg) from the vectors as stored (unit length under
// cosine), every point but the examples scored, best first.
func bruteRecommend(pts []rdPoint, metric string, pos, neg []int, extra []float32, k, offset int, keep func(rdPoint) bool) []lcHit {
	norm := func(v []float32) []float64 {
		out := make([]float64, len(v))
		n := 0.0
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		for i, x := range v {
			out[i] = float64(x)
			if metric == "cosine" {
				out[i] /= math.Sqrt(n)
			}
		}
		return out
	}
	avg := func(ids []int, extra []float32) []float64 {
		sum := make([]float64, apitest.Dim)
		n := 0
		for _, id := range ids {
			for j, x := range norm(pts[id-1].vector) {
				sum[j] += x
			}
			n++
		}
		if extra != nil {
			for j, x := range extra {
				sum[j] += float64(x)
			}
			n++
		}
		for j := range sum {
			sum[j] /= float64(n)
		}
		return sum
	}
	q := avg(pos, extra)
	if len(neg) > 0 {
		nv := avg(neg, nil)
		for j := range q {
			q[j] += q[j] - nv[j]
		}
	}
	qn := 0.0
	for _, x := range q {
		qn += x * x
	}
	var hits []lcHit
	for _, p := range pts {
		if slices.Contains(pos, p.id) || slices.Contains(neg, p.id) || keep != nil && !keep(p) {
			continue
		}
		s := 0.0
		for j, x := range norm(p.vector) {
			s += x * q[j]
		}
		if metric == "cosine" {
			s /= math.Sqrt(qn)
		}
		hits = append(hits, lcHit{ID: p.id, Score: s})
	}
	slices.SortFunc(hits, func(a, b lcHit) int { return cmp.Compare(b.Score, a.Score) })
	return hits[min(offset, len(hits)):min(offset+k, len(hits))]
}

// TestQdrantRecommend: query's recommend and the legacy
// points/recommend (average_vector) equal a brute force over what was
// written, under dot and cosine, with examples left out of the answer.
func TestQdrantRecommend(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	pts := rdCorpus(200)
	for _, tc := range []struct{ coll, distance, metric string }{{"recd", "Dot", "dot"}, {"recc", "Cosine", "cosine"}} {
		res := e.Do(http.MethodPut, "/collections/"+tc.coll, `{"vectors": {"size": 8, "distance": "`+tc.distance+`"}}`, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = e.Do(http.MethodPut, "/collections/"+tc.coll+"/points?wait=true", rdUpsert(t, pts), nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		flagged := func(p rdPoint) bool { return p.payload["flag"] == true }
		extra := []float32{0.5, -1, 0, 2, 0.25, 0, -0.5, 1}
		for _, q := range []struct {
			path, body string
			pos, neg   []int
			extra      []float32
			k, offset  int
			keep       func(rdPoint) bool
			shape      func(json.RawMessage) json.RawMessage
		}{
			{path: "points/query", body: `{"query": {"recommend": {"positive": [3, 17]}}}`, pos: []int{3, 17}, k: 10},
			{path: "points/query", body: `{"query": {"recommend": {"positive": [3, 17, 40], "negative": [5], "strategy": "average_vector"}}, "limit": 25, "offset": 5}`,
				pos: []int{3, 17, 40}, neg: []int{5}, k: 25, offset: 5},
			{path: "points/query", body: `{"query": {"recommend": {"positive": [8, ` + string(mustJSON(t, extra)) + `], "negative": [9, 10]}}, "limit": 7, "filter": {"must": [{"key": "flag", "match": {"value": true}}]}}`,
				pos: []int{8}, extra: extra, neg: []int{9, 10}, k: 7, keep: flagged},
			{path: "points/recommend", body: `{"positive": [11], "negative": [12, 13], "limit": 12}`, pos: []int{11}, neg: []int{12, 13}, k: 12},
			{path: "points/recommend", body: `{"positive": [` + string(mustJSON(t, extra)) + `, 21], "limit": 4, "offset": 2, "strategy": "average_vector"}`,
				pos: []int{21}, extra: extra, k: 4, offset: 2},
		} {
			res := e.Do(http.MethodPost, "/collections/"+tc.coll+"/"+q.path+"?deadline_ms=2000", q.body, map[string]string{"Content-Type": "application/json"})
			require.Equal(t, http.StatusOK, res.Status, "%s: %s", q.body, res.Body)
			require.Equal(t, "false", res.Header.Get("X-Trawl-Degraded"))
			var a struct {
				Result        json.RawMessage `json:"result"`
				ScatterGather json.RawMessage `json:"scatter_gather"`
			}
			require.NoError(t, json.Unmarshal(res.Body, &a))
			hits := a.Result
			if q.path == "points/query" {
				var r struct {
					Points json.RawMessage `json:"points"`
				}
				require.NoError(t, json.Unmarshal(a.Result, &r))
				hits = r.Points
			}
			want := bruteRecommend(pts, tc.metric, q.pos, q.neg, q.extra, q.k, q.offset, q.keep)
			requireHits(t, want, decodeHits(t, hits), tc.coll+" "+q.body)
			require.Equal(t, `{"degraded":false,"shards_total":3,"shards_queried":3,"unavailable_shards":[],"shard_errors":{},"coverage":1,"exact":true,"elapsed_ms":0,"deadline_ms":2000,"shard_deadline_ms":1995}`,
				elapsedRE.ReplaceAllString(string(a.ScatterGather), `"elapsed_ms":0`))
		}
	}
	// The legacy batch: each request as points/recommend answers it.
	res := e.Do(http.MethodPost, "/collections/recd/points/recommend/batch", `{"searches": [{"positive": [30], "limit": 5}, {"positive": [31, 32], "negative": [33], "limit": 6}]}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var batch struct {
		Result []json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &batch))
	require.Len(t, batch.Result, 2)
	requireHits(t, bruteRecommend(pts, "dot", []int{30}, nil, nil, 5, 0, nil), decodeHits(t, batch.Result[0]), "batch 0")
	requireHits(t, bruteRecommend(pts, "dot", []int{31, 32}, []int{33}, nil, 6, 0, nil), decodeHits(t, batch.Result[1]), "batch 1")
	// An example id that is not stored is a 404, as Qdrant answers.
	res = e.Do(http.MethodPost, "/collections/recd/points/query", `{"query": {"recommend": {"positive": [999999]}}}`, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
}

// TestQdrantReadsBadInput: malformed facet and order_by requests are
// Qdrant-style 400s naming the member, and reach no shard.
func TestQdrantReadsBadInput(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	for _, tc := range []struct{ name, path, body, msg string }{
		{"facet no key", "/collections/trawl/facet", `{}`, `missing "key"`},
		{"facet empty key", "/collections/trawl/facet", `{"key": ""}`, `key is empty: want a payload key`},
		{"facet bad key", "/collections/trawl/facet", `{"key": "a..b"}`, `key "a..b" is not a payload key: a key is a dotted path like meta.draft`},
		{"facet limit", "/collections/trawl/facet", `{"key": "a", "limit": 0}`, `limit is 0, want 1..10000`},
		{"facet unknown member", "/collections/trawl/facet", `{"key": "a", "top": 3}`, `bad JSON: json: unknown field "top"`},
		{"facet bad filter", "/collections/trawl/facet", `{"key": "a", "filter": {"must": [{"key": "b", "range": {}}]}}`,
			`filter.must[0].range: needs at least one of gt, gte, lt, lte`},
		{"facet shard key", "/collections/trawl/facet", `{"key": "a", "shard_key": "s"}`,
			"shard_key is not supported: trawl places points by a hash of their id over every shard"},
		{"recommend best_score", "/collections/trawl/points/query", `{"query": {"recommend": {"positive": [1], "strategy": "best_score"}}}`,
			"query.recommend.strategy best_score is not supported: trawl recommends with average_vector (one search with 2·avg(positive) − avg(negative))"},
		{"recommend bad strategy", "/collections/trawl/points/recommend", `{"positive": [1], "limit": 3, "strategy": "mean"}`,
			`recommend.strategy is "mean", want average_vector (best_score and sum_scores are not supported)`},
		{"recommend no positive", "/collections/trawl/points/query", `{"query": {"recommend": {"negative": [1]}}}`,
			"query.recommend.positive is empty: the average_vector strategy needs at least one positive example"},
		{"recommend bad example", "/collections/trawl/points/query", `{"query": {"recommend": {"positive": [1, [1, 2]]}}}`,
			"query.recommend.positive[1]: vector has 2 dimensions, want 8"},
		{"recommend bad id", "/collections/trawl/points/recommend", `{"positive": [-1], "limit": 3}`,
			"recommend.positive[0]: id -1 is not an unsigned 64-bit integer"},
		{"recommend unknown member", "/collections/trawl/points/query", `{"query": {"recommend": {"positive": [1], "avoid": [2]}}}`,
			`query.recommend: bad JSON: json: unknown field "avoid"`},
		{"recommend no limit", "/collections/trawl/points/recommend", `{"positive": [1]}`, `missing "limit"`},
		{"recommend too many", "/collections/trawl/points/query", `{"query": {"recommend": {"positive": [1, 2, 3]}}, "limit": 999}`,
			"query 0: limit + offset (999) and the 3 example ids left out of the answer come to more than 1000"},
		{"groups no group_by", "/collections/trawl/points/search/groups", `{"vector": ` + unit(0) + `, "group_size": 1, "limit": 1}`, `missing "group_by"`},
		{"groups bad group_by", "/collections/trawl/points/query/groups", `{"query": 1, "group_by": "a..b"}`, `group_by "a..b" is not a payload key: a key is a dotted path like meta.draft`},
		{"search groups no group_size", "/collections/trawl/points/search/groups", `{"vector": ` + unit(0) + `, "group_by": "a", "limit": 1}`, `missing "group_size"`},
		{"groups size", "/collections/trawl/points/query/groups", `{"query": 1, "group_by": "a", "group_size": 0}`, "group_size is 0, want 1..100"},
		{"groups limit", "/collections/trawl/points/query/groups", `{"query": 1, "group_by": "a", "limit": 101}`, "limit is 101, want 1..100"},
		{"groups offset", "/collections/trawl/points/query/groups", `{"query": 1, "group_by": "a", "offset": 2}`, `bad JSON: json: unknown field "offset"`},
		{"groups lookup", "/collections/trawl/points/query/groups", `{"query": 1, "group_by": "a", "with_lookup": "other"}`,
			"with_lookup is not supported: trawl groups points of one collection"},
		{"groups bad query", "/collections/trawl/points/query/groups", `{"query": [1, 2], "group_by": "a"}`, "query: vector has 2 dimensions, want 8"},
		{"groups unknown member", "/collections/trawl/points/search/groups", `{"vector": ` + unit(0) + `, "group_by": "a", "group_size": 1, "limit": 1, "top": 1}`,
			`bad JSON: json: unknown field "top"`},
		{"order_by offset", "/collections/trawl/points/scroll", `{"order_by": "n", "offset": 3}`,
			"offset cannot be used with order_by: page on with order_by.start_from"},
		{"order_by direction", "/collections/trawl/points/scroll", `{"order_by": {"key": "n", "direction": "up"}}`,
			`order_by.direction is "up", want "asc" or "desc"`},
		{"order_by datetime", "/collections/trawl/points/scroll", `{"order_by": {"key": "n", "start_from": "2024-01-01T00:00:00Z"}}`,
			"order_by.start_from is a string, want a number (trawl orders by numbers only, not datetimes)"},
		{"order_by no key", "/collections/trawl/points/scroll", `{"order_by": {"direction": "asc"}}`, `order_by: missing "key"`},
		{"order_by bad key", "/collections/trawl/points/scroll", `{"order_by": "a."}`, `order_by "a." is not a payload key: a key is a dotted path like meta.draft`},
		{"order_by number", "/collections/trawl/points/scroll", `{"order_by": 5}`, `order_by is a number, want a payload key or {"key", "direction", "start_from"}`},
		{"order_by unknown member", "/collections/trawl/points/scroll", `{"order_by": {"key": "n", "from": 1}}`, `order_by: bad JSON: json: unknown field "from"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, rpcs := e.StoreState(), e.ShardRPCs()
			res := e.Do(http.MethodPost, tc.path, tc.body, map[string]string{"Content-Type": "application/json"})
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			want := `{"status":{"error":` + string(mustJSON(t, "Bad request: "+tc.msg)) + `},"time":0}`
			require.Equal(t, want, normalised(t, res.Body))
			require.Equal(t, rpcs, e.ShardRPCs(), "a shard RPC was made for bad input")
			require.Equal(t, store, e.StoreState())
		})
	}
}

// TestQdrantGroups: search/groups and query/groups equal a brute force:
// groups ranked by their best hit, each with its group_size best hits, a
// point in one group per distinct string or integer it holds.
func TestQdrantGroups(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	pts := rdCorpus(300)
	res := e.Do(http.MethodPut, "/collections/grp", `{"vectors": {"size": 8, "distance": "Dot"}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.Do(http.MethodPut, "/collections/grp/points?wait=true", rdUpsert(t, pts), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	score := func(p rdPoint, q []float32) float64 {
		s := 0.0
		for j := range q {
			s += float64(p.vector[j]) * float64(q[j])
		}
		return s
	}
	values := func(p rdPoint, key string) []any {
		v, ok := lookup(p.payload, key)
		if !ok {
			return nil
		}
		vs, isArr := v.([]any)
		if !isArr {
			vs = []any{v}
		}
		var out []any
		for _, x := range vs {
			switch x.(type) {
			case string, int64:
				if !slices.Contains(out, x) {
					out = append(out, x)
				}
			}
		}
		return out
	}
	type group struct {
		ID   any     `json:"id"`
		Hits []lcHit `json:"hits"`
	}
	brute := func(q []float32, key string, size, limit int, keep func(rdPoint) bool) []group {
		var ranked []rdPoint
		for _, p := range pts {
			if keep == nil || keep(p) {
				ranked = append(ranked, p)
			}
		}
		slices.SortFunc(ranked, func(a, b rdPoint) int { return cmp.Compare(score(b, q), score(a, q)) })
		var out []group
		for _, p := range ranked {
			for _, v := range values(p, key) {
				if len(out) < limit && !slices.ContainsFunc(out, func(g group) bool { return g.ID == v }) {
					out = append(out, group{ID: v})
				}
			}
		}
		for i := range out {
			for _, p := range ranked {
				if len(out[i].Hits) < size && slices.Contains(values(p, key), out[i].ID) {
					out[i].Hits = append(out[i].Hits, lcHit{ID: p.id, Score: score(p, q)})
				}
			}
		}
		return out
	}
	q := []float32{0.3, -1, 0.2, 0.9, 0, -0.4, 1.2, 0.1}
	for _, tc := range []struct {
		path, body  string
		key         string
		size, limit int
		keep        func(rdPoint) bool
	}{
		{"points/search/groups", `{"vector": ` + string(mustJSON(t, q)) + `, "group_by": "city", "group_size": 2, "limit": 4}`, "city", 2, 4, nil},
		{"points/query/groups", `{"query": ` + string(mustJSON(t, q)) + `, "group_by": "city"}`, "city", 3, 10, nil},
		{"points/query/groups", `{"query": ` + string(mustJSON(t, q)) + `, "group_by": "meta.kind", "group_size": 5, "filter": {"must": [{"key": "flag", "match": {"value": true}}]}}`,
			"meta.kind", 5, 10, func(p rdPoint) bool { return p.payload["flag"] == true }},
		{"points/search/groups", `{"vector": ` + string(mustJSON(t, q)) + `, "group_by": "n", "group_size": 4, "limit": 20, "with_payload": true}`, "n", 4, 20, nil},
		// By a stored point's id: its vector, the point left out.
		{"points/query/groups", `{"query": 5, "group_by": "city", "group_size": 2, "limit": 3}`, "city", 2, 3, func(p rdPoint) bool { return p.id != 5 }},
		// A recommendation: the mean of the examples, which are left out.
		{"points/recommend/groups", `{"positive": [7, 8], "group_by": "city", "group_size": 3, "limit": 2}`, "city", 3, 2, func(p rdPoint) bool { return p.id != 7 && p.id != 8 }},
	} {
		res := e.Do(http.MethodPost, "/collections/grp/"+tc.path+"?deadline_ms=2000", tc.body, map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusOK, res.Status, "%s: %s", tc.body, res.Body)
		require.Equal(t, "false", res.Header.Get("X-Trawl-Degraded"))
		var a struct {
			Result struct {
				Groups []group `json:"groups"`
			} `json:"result"`
			ScatterGather struct {
				Degraded      bool `json:"degraded"`
				ShardsQueried int  `json:"shards_queried"`
				DeadlineMS    int  `json:"deadline_ms"`
			} `json:"scatter_gather"`
		}
		require.NoError(t, json.Unmarshal(res.Body, &a))
		require.False(t, a.ScatterGather.Degraded)
		require.Equal(t, 3, a.ScatterGather.ShardsQueried)
		require.Equal(t, 2000, a.ScatterGather.DeadlineMS, "the request's deadline, not a fan-out's")
		qv := q
		switch {
		case strings.Contains(tc.body, `"query": 5`):
			qv = pts[4].vector
		case strings.Contains(tc.body, `"positive": [7, 8]`):
			qv = make([]float32, apitest.Dim)
			for j := range qv {
				qv[j] = (pts[6].vector[j] + pts[7].vector[j]) / 2
			}
		}
		want := brute(qv, tc.key, tc.size, tc.limit, tc.keep)
		require.Len(t, a.Result.Groups, len(want), "%s", res.Body)
		for i := range want {
			require.Equal(t, string(mustJSON(t, want[i].ID)), string(mustJSON(t, a.Result.Groups[i].ID)), "group %d", i)
			requireHits(t, want[i].Hits, a.Result.Groups[i].Hits, fmt.Sprintf("group %v", want[i].ID))
		}
	}
}
