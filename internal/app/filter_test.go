package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter/filtertest"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

// refMatch is DESIGN.md's filter semantics written again, independently
// of package filter, on encoding/json's trees (numbers as json.Number):
// the reference the router's answers are checked against.
func refMatch(f map[string]any, doc map[string]any) bool {
	list := func(v any) []any {
		switch v := v.(type) {
		case nil:
			return nil
		case []any:
			return v
		}
		return []any{v}
	}
	for _, c := range list(f["must"]) {
		if !refCond(c.(map[string]any), doc) {
			return false
		}
	}
	if should := list(f["should"]); len(should) > 0 {
		if !slices.ContainsFunc(should, func(c any) bool { return refCond(c.(map[string]any), doc) }) {
			return false
		}
	}
	for _, c := range list(f["must_not"]) {
		if refCond(c.(map[string]any), doc) {
			return false
		}
	}
	return true
}

func refLookup(doc map[string]any, key string) (any, bool) {
	var cur any = doc
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

// refInt is a payload or filter integer: a number literal with no
// fraction or exponent.
func refInt(v any) (string, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return "", false
	}
	return string(n), true
}

func refEqual(want, got any) bool {
	switch w := want.(type) {
	case string, bool:
		return got == w
	}
	wi, ok1 := refInt(want)
	gi, ok2 := refInt(got)
	return ok1 && ok2 && wi == gi
}

func refCond(c map[string]any, doc map[string]any) bool {
	if ie, ok := c["is_empty"]; ok {
		v, found := refLookup(doc, ie.(map[string]any)["key"].(string))
		a, isArr := v.([]any)
		return !found || v == nil || (isArr && len(a) == 0)
	}
	if in, ok := c["is_null"]; ok {
		v, found := refLookup(doc, in.(map[string]any)["key"].(string))
		return found && v == nil
	}
	key, ok := c["key"].(string)
	if !ok {
		return refMatch(c, doc) // a nested filter
	}
	v, found := refLookup(doc, key)
	if vc, ok := c["values_count"].(map[string]any); ok {
		// Qdrant's count: an array's length, 0 for null or missing, else 1.
		n := 0
		if a, isArr := v.([]any); isArr {
			n = len(a)
		} else if found && v != nil {
			n = 1
		}
		for bound, bv := range vc {
			b, _ := strconv.Atoi(string(bv.(json.Number)))
			switch {
			case bound == "gt" && !(n > b), bound == "gte" && !(n >= b),
				bound == "lt" && !(n < b), bound == "lte" && !(n <= b):
				return false
			}
		}
		return true
	}
	if !found || v == nil {
		return false
	}
	elems := []any{v}
	if a, ok := v.([]any); ok {
		elems = a
	}
	test := func(e any) bool { return false }
	if m, ok := c["match"].(map[string]any); ok {
		switch {
		case m["value"] != nil:
			test = func(e any) bool { return refEqual(m["value"], e) }
		case m["any"] != nil:
			test = func(e any) bool {
				return slices.ContainsFunc(m["any"].([]any), func(w any) bool { return refEqual(w, e) })
			}
		default:
			ex := m["except"].([]any)
			test = func(e any) bool {
				_, isStr := e.(string)
				_, isInt := refInt(e)
				switch {
				case len(ex) == 0:
					if !isStr && !isInt {
						return false
					}
				case isStr != func() bool { _, s := ex[0].(string); return s }():
					return false
				case !isStr && !isInt:
					return false
				}
				return !slices.ContainsFunc(ex, func(w any) bool { return refEqual(w, e) })
			}
		}
	} else {
		r := c["range"].(map[string]any)
		test = func(e any) bool {
			n, ok := e.(json.Number)
			if !ok {
				return false
			}
			x, _ := strconv.ParseFloat(string(n), 64)
			for bound, bv := range r {
				if bv == nil {
					continue
				}
				b, _ := strconv.ParseFloat(string(bv.(json.Number)), 64)
				switch {
				case bound == "gt" && !(x > b), bound == "gte" && !(x >= b),
					bound == "lt" && !(x < b), bound == "lte" && !(x <= b):
					return false
				}
			}
			return true
		}
	}
	return slices.ContainsFunc(elems, test)
}

func decodeNumbers(t *testing.T, b []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

// TestFilteredSearchIsExactTopKOfTheMatchingDocs is the brute-force
// property with payloads and filters: random corpora with random payloads
// over 3 shards, random filters from the whole grammar (missing keys, type
// mismatches, arrays, nested filters, fewer than k matches or none), every
// metric: the answer is the brute-force top-k of the matching documents of
// the union, with their payloads when asked, cut at score_threshold.
func TestFilteredSearchIsExactTopKOfTheMatchingDocs(t *testing.T) {
	const dim = 16
	for _, m := range []vector.Metric{vector.Cosine, vector.DotProduct, vector.Euclidean} {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", m, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 17))
				recs := corpus(rng, 600, dim)
				for i := range recs {
					if rng.IntN(10) > 0 {
						recs[i].Payload = []byte(filtertest.Payload(rng))
					}
				}
				h := start(t, devcluster.Config{Dim: dim, Metric: m, Replicas: 1, Corpus: recs, Kernel: vector.Generic()})
				docs := map[string]map[string]any{}
				stored := map[string][]byte{}
				for _, r := range h.dc.Corpus {
					if len(r.Payload) > 0 {
						docs[r.ID] = decodeNumbers(t, r.Payload)
					}
					stored[r.ID] = r.Payload
				}
				matched := map[string]int{}
				for fi := range 60 {
					src := filtertest.Filter(rng, 3)
					switch fi {
					case 0:
						src = `{"must": {"key": "nope", "match": {"value": "x"}}}` // none
					case 1:
						src = `{"must": [{"key": "year", "match": {"value": 2024}}, {"key": "flag", "match": {"value": true}}]}` // a few
					}
					ftree := decodeNumbers(t, []byte(src))
					qv := make([]float32, dim)
					for j := range qv {
						qv[j] = float32(rng.NormFloat64())
					}
					scoredQ := slices.Clone(qv)
					if m == vector.Cosine {
						vector.Generic().Normalize(scoredQ)
					}
					var ref []scored
					for _, s := range bruteForce(m, scoredQ, h.dc.Corpus) {
						if refMatch(ftree, docs[s.id]) {
							ref = append(ref, s)
						}
					}
					byID := map[string]scored{}
					for _, s := range ref {
						byID[s.id] = s
					}
					k := []int{1, 10, 50}[fi%3]
					body := map[string]any{"vector": qv, "k": k, "filter": json.RawMessage(src), "with_payload": true}
					// A threshold between two neighbours well apart (no
					// rounding can move a hit across it) keeps exactly the
					// hits above it.
					var threshold *float64
					if fi%4 == 3 {
						for i := 2; i+1 < len(ref) && i < k; i++ {
							a, b := ref[i], ref[i+1]
							if math.Abs(a.score-b.score) > 4*(a.bound+b.bound)+1e-6 {
								th := (a.score + b.score) / 2
								if m == vector.Euclidean {
									th = math.Sqrt(th)
								}
								threshold = &th
								body["score_threshold"] = th
								ref = ref[:i+1]
								break
							}
						}
					}
					a, resp := h.searchPayloads(t, body)
					require.Equal(t, http.StatusOK, resp.StatusCode)
					require.False(t, a.ScatterGather.Degraded)
					require.Len(t, a.Items, min(k, len(ref)), "filter %s threshold %v", src, threshold)
					matched[fmt.Sprint(min(len(ref), 11))]++
					for i, it := range a.Items {
						w, ok := byID[it.ID]
						require.True(t, ok, "%s does not match filter %s", it.ID, src)
						got := it.Score
						if m == vector.Euclidean {
							got *= got
						}
						require.InDelta(t, w.score, got, w.bound+1e-6*math.Abs(w.score), "score of %s", it.ID)
						if it.ID != ref[i].id {
							require.InDelta(t, ref[i].score, w.score, ref[i].bound+w.bound,
								"position %d: got %s, want %s (filter %s)", i, it.ID, ref[i].id, src)
						}
						p := stored[it.ID]
						if len(p) == 0 {
							p = []byte("{}")
						}
						require.JSONEq(t, string(p), string(it.Payload))
						if threshold != nil {
							if m == vector.Euclidean {
								require.LessOrEqual(t, it.Score, *threshold)
							} else {
								require.GreaterOrEqual(t, it.Score, *threshold)
							}
						}
					}
				}
				t.Logf("matching documents per filter (capped at 11): %v", matched)
			})
		}
	}
}

type payloadItem struct {
	ID      string          `json:"id"`
	Score   float64         `json:"score"`
	Payload json.RawMessage `json:"payload"`
}

type payloadAnswer struct {
	Items         []payloadItem `json:"items"`
	ScatterGather struct {
		Degraded bool `json:"degraded"`
	} `json:"scatter_gather"`
}

func (h *harness) searchPayloads(t *testing.T, body any) (payloadAnswer, *http.Response) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(h.srv.URL+"/v1/search?deadline_ms=2000", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	var a payloadAnswer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	return a, resp
}
