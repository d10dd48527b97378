package app_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

// textModel is the test's own reading of Qdrant's full-text match: the
// tokens of a key's strings (an array's together) hold every token of
// the query (text) or one (text_any), a query without tokens matches
// nothing; without a text index, match.text is a substring test.
type textModel struct {
	word  bool // word tokenizer (else whitespace)
	lower bool
}

var wordRE = regexp.MustCompile(`[\p{L}\p{N}]+`)

func (m *textModel) tokens(s string) []string {
	var toks []string
	if m.word {
		toks = wordRE.FindAllString(s, -1)
	} else {
		toks = strings.Fields(s)
	}
	if m.lower {
		for i := range toks {
			toks[i] = strings.ToLower(toks[i])
		}
	}
	return toks
}

func (m *textModel) match(v any, op, q string) bool {
	var strs []string
	switch v := v.(type) {
	case string:
		strs = []string{v}
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				strs = append(strs, s)
			}
		}
	}
	if m == nil { // no text index: a substring of some string
		return slices.ContainsFunc(strs, func(s string) bool { return strings.Contains(s, q) })
	}
	have := map[string]bool{}
	for _, s := range strs {
		for _, tok := range m.tokens(s) {
			have[tok] = true
		}
	}
	qt := m.tokens(q)
	if len(qt) == 0 {
		return false
	}
	if op == "text_any" {
		return slices.ContainsFunc(qt, func(tok string) bool { return have[tok] })
	}
	for _, tok := range qt {
		if !have[tok] {
			return false
		}
	}
	return true
}

var textWords = []string{"Go", "go", "rust", "Vector", "search", "fast,", "fox", "über", "x-ray", "a", "b.c", "42", "GO!"}

func textOf(rng *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = textWords[rng.IntN(len(textWords))]
	}
	return strings.Join(w, " ")
}

// TestTextIndexMatchIsExact is the brute-force property of text payload
// indexes over 3 shards: random texts from a small vocabulary under keys
// with a word index, a case-sensitive whitespace index and none; random
// upserts, payload sets, overwrites and key deletes, point deletes and
// deletes by a match.text filter; random match.text and match.text_any
// filters on count, scroll, query, a prefetch, facet and the native /v1
// search, each equal to
// the model evaluated over every point, before and after every replica
// restarts from its snapshot and the log written since.
func TestTextIndexMatchIsExact(t *testing.T) {
	t.Parallel() // an exactness test: its own cluster, its own deadlines of seconds
	dir := t.TempDir()
	dcfg := devcluster.Config{Shards: 3, Replicas: 2, Dim: 4, Kernel: vector.Generic(), DataDir: dir}
	dc, err := devcluster.Start(dcfg)
	require.NoError(t, err)
	a, _, stop := routerOver(t, dc)

	code, raw := a.do(http.MethodPut, "/collections/tx", map[string]any{"vectors": map[string]any{"size": 4, "distance": "Dot"}})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	models := map[string]*textModel{"body": {word: true, lower: true}, "note": {word: false, lower: false}, "raw": nil}
	keys := []string{"body", "note", "raw"}

	rng := rand.New(rand.NewPCG(41, 3))
	docs := map[int]map[string]any{}
	randPayload := func() map[string]any {
		p := map[string]any{"n": rng.IntN(3)}
		for _, k := range keys {
			switch rng.IntN(5) {
			case 0: // absent
			case 1:
				p[k] = []any{textOf(rng, 1+rng.IntN(3)), textOf(rng, 1+rng.IntN(2))}
			case 2:
				if rng.IntN(2) == 0 {
					p[k] = 7 // not a string
				}
			default:
				p[k] = textOf(rng, 1+rng.IntN(6))
			}
		}
		return p
	}
	// roundTrip gives a payload as the store reads it back (numbers as
	// float64 after JSON), so the model compares what the shards hold.
	roundTrip := func(p map[string]any) map[string]any {
		b, err := json.Marshal(p)
		require.NoError(t, err)
		var out map[string]any
		require.NoError(t, json.Unmarshal(b, &out))
		return out
	}
	randIDs := func(n int) []int {
		var ids []int
		for range n {
			ids = append(ids, rng.IntN(150))
		}
		return ids
	}
	// heldIDs are up to n ids of stored points: payload edits of an
	// absent id are a 404.
	heldIDs := func(n int) []int {
		all := make([]int, 0, len(docs))
		for id := range docs {
			all = append(all, id)
		}
		slices.Sort(all)
		var out []int
		for range n {
			out = append(out, all[rng.IntN(len(all))])
		}
		return slices.Compact(slices.Sorted(slices.Values(out)))
	}
	write := func(method, path string, body map[string]any) {
		t.Helper()
		code, raw := a.do(method, "/collections/tx/points"+path+"?wait=true", body)
		require.Equal(t, http.StatusOK, code, "%s %s: %s", method, path, raw)
	}
	randCond := func() (map[string]any, string, string, string) {
		k := keys[rng.IntN(len(keys))]
		op := "text"
		if rng.IntN(3) == 0 && models[k] != nil {
			op = "text_any"
		}
		q := textOf(rng, rng.IntN(3))
		if models[k] == nil && rng.IntN(2) == 0 {
			q = q[:len(q)/2] // a substring of words
		}
		return map[string]any{"key": k, "match": map[string]any{op: q}}, k, op, q
	}
	want := func(k, op, q string, neg bool, n int) []int {
		var out []int
		for id, d := range docs {
			v, ok := d[k]
			m := ok && models[k].match(v, op, q)
			if neg {
				m = !m
			}
			if m && (n < 0 || d["n"] == float64(n)) {
				out = append(out, id)
			}
		}
		slices.Sort(out)
		return out
	}
	ids := func(raw []byte, list string) []int {
		var ans map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &ans), "%s", raw)
		var pts []struct {
			ID int `json:"id"`
		}
		res := ans["result"]
		if list != "" {
			var r map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(res, &r), "%s", raw)
			res = r[list]
		}
		require.NoError(t, json.Unmarshal(res, &pts), "%s", raw)
		out := []int{}
		for _, p := range pts {
			out = append(out, p.ID)
		}
		slices.Sort(out)
		return out
	}
	queries, hits := 0, 0
	check := func(what string) {
		t.Helper()
		cond, k, op, q := randCond()
		neg, n := rng.IntN(4) == 0, -1
		f := map[string]any{"must": []any{cond}}
		if neg {
			f = map[string]any{"must_not": []any{cond}}
		}
		if rng.IntN(3) == 0 {
			n = rng.IntN(3)
			f["should"] = []any{map[string]any{"key": "n", "match": map[string]any{"value": n}}}
		}
		exp := want(k, op, q, neg, n)
		msg := fmt.Sprintf("%s: filter %v", what, f)
		queries++
		if len(exp) > 0 {
			hits++
		}
		if exp == nil {
			exp = []int{}
		}

		code, raw := a.do(http.MethodPost, "/collections/tx/points/count?deadline_ms=3000", map[string]any{"filter": f, "exact": true})
		require.Equal(t, http.StatusOK, code, "%s", raw)
		require.Contains(t, string(raw), `"count":`+strconv.Itoa(len(exp))+`}`, msg)
		code, raw = a.do(http.MethodPost, "/collections/tx/points/scroll?deadline_ms=3000", map[string]any{"filter": f, "limit": 1000})
		require.Equal(t, http.StatusOK, code, "%s", raw)
		require.Equal(t, exp, ids(raw, "points"), msg)
		code, raw = a.do(http.MethodPost, "/collections/tx/points/query?deadline_ms=3000", map[string]any{"query": []float32{1, 0, 0, 0}, "filter": f, "limit": 1000})
		require.Equal(t, http.StatusOK, code, "%s", raw)
		require.Equal(t, exp, ids(raw, "points"), "query "+msg)
		code, raw = a.do(http.MethodPost, "/collections/tx/points/query?deadline_ms=3000", map[string]any{
			"prefetch": []any{map[string]any{"query": []float32{1, 0, 0, 0}, "filter": f, "limit": 1000}},
			"query":    map[string]any{"fusion": "rrf"}, "limit": 1000})
		require.Equal(t, http.StatusOK, code, "%s", raw)
		require.Equal(t, exp, ids(raw, "points"), "prefetch "+msg)
		// The native API follows the same declarations.
		code, raw = a.do(http.MethodPost, "/v1/collections/tx/search?deadline_ms=3000", map[string]any{"vector": []float32{1, 0, 0, 0}, "k": 1000, "filter": f})
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var native struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		require.NoError(t, json.Unmarshal(raw, &native), "%s", raw)
		nativeIDs := []int{}
		for _, it := range native.Items {
			id, err := strconv.Atoi(it.ID)
			require.NoError(t, err)
			nativeIDs = append(nativeIDs, id)
		}
		slices.Sort(nativeIDs)
		require.Equal(t, exp, nativeIDs, "/v1 search "+msg)
		code, raw = a.do(http.MethodPost, "/collections/tx/facet?deadline_ms=3000", map[string]any{"key": "n", "filter": f, "exact": true})
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var facet struct {
			Result struct {
				Hits []struct {
					Value int `json:"value"`
					Count int `json:"count"`
				} `json:"hits"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(raw, &facet), "%s", raw)
		total := 0
		for _, h := range facet.Result.Hits {
			total += h.Count
		}
		require.Equal(t, len(exp), total, "facet "+msg)
	}

	for step := range 70 {
		if step == 5 {
			for _, ix := range []map[string]any{
				{"field_name": "body", "field_schema": "text"},
				{"field_name": "note", "field_schema": map[string]any{"type": "text", "tokenizer": "whitespace", "lowercase": false}},
			} {
				code, raw := a.do(http.MethodPut, "/collections/tx/index?wait=true", ix)
				require.Equal(t, http.StatusOK, code, "%s", raw)
			}
			code, raw := a.do(http.MethodGet, "/collections/tx", nil)
			require.Equal(t, http.StatusOK, code, "%s", raw)
			require.Contains(t, string(raw), `"note":{"data_type":"text","params":{"lowercase":false,"tokenizer":"whitespace","type":"text"},`)
			require.Contains(t, string(raw), `"body":{"data_type":"text","params":{"lowercase":true,"tokenizer":"word","type":"text"},`)
		}
		switch op := rng.IntN(12); {
		case op < 4 || len(docs) == 0:
			var pts []map[string]any
			seen := map[int]bool{}
			for _, id := range randIDs(1 + rng.IntN(15)) {
				if seen[id] {
					continue
				}
				seen[id] = true
				p := randPayload()
				pts = append(pts, map[string]any{"id": id, "vector": []float32{1, 0, 0, 0}, "payload": p})
				docs[id] = roundTrip(p)
			}
			write(http.MethodPut, "", map[string]any{"points": pts})
		case op < 5: // set payload: merge keys
			p, pts := randPayload(), heldIDs(3)
			write(http.MethodPost, "/payload", map[string]any{"payload": p, "points": pts})
			for _, id := range pts {
				if d, ok := docs[id]; ok {
					for k, v := range roundTrip(p) {
						d[k] = v
					}
				}
			}
		case op < 6: // overwrite payload
			p, pts := randPayload(), heldIDs(3)
			write(http.MethodPut, "/payload", map[string]any{"payload": p, "points": pts})
			for _, id := range pts {
				if _, ok := docs[id]; ok {
					docs[id] = roundTrip(p)
				}
			}
		case op < 7: // delete payload keys
			k, pts := keys[rng.IntN(len(keys))], heldIDs(4)
			write(http.MethodPost, "/payload/delete", map[string]any{"keys": []string{k}, "points": pts})
			for _, id := range pts {
				if d, ok := docs[id]; ok {
					delete(d, k)
				}
			}
		case op < 8:
			pts := randIDs(3)
			write(http.MethodPost, "/delete", map[string]any{"points": pts})
			for _, id := range pts {
				delete(docs, id)
			}
		case op < 9 && step > 5: // delete by a match.text filter
			cond, k, mop, q := randCond()
			for _, id := range want(k, mop, q, false, -1) {
				delete(docs, id)
			}
			write(http.MethodPost, "/delete", map[string]any{"filter": map[string]any{"must": []any{cond}}})
		default:
			check(fmt.Sprintf("step %d", step))
		}
	}

	for _, sh := range []string{"shard-0", "shard-1", "shard-2"} {
		for i := range 2 {
			r, ok := dc.Replica(sh, i)
			require.True(t, ok)
			require.NoError(t, r.Node.Snapshot())
		}
	}
	pts := []map[string]any{}
	for _, id := range randIDs(10) {
		p := randPayload()
		pts = append(pts, map[string]any{"id": id, "vector": []float32{1, 0, 0, 0}, "payload": p})
	}
	write(http.MethodPut, "", map[string]any{"points": pts})
	for _, p := range pts {
		docs[p["id"].(int)] = roundTrip(p["payload"].(map[string]any))
	}
	stop()
	dc.Close()
	dc, err = devcluster.Start(dcfg)
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	a, _, _ = routerOver(t, dc)
	for i := range 15 {
		check(fmt.Sprintf("after the restart, check %d", i))
	}
	require.Greater(t, hits, queries/3, "many filters match points: the property is not vacuous")
}
