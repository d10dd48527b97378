package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter/filtertest"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/vector"
)

// refMatch is DESIGN.md's filter semantics written again, independently
// of package filter, on encoding/json's trees (numbers as json.Number):
// the reference the router's answers are checked against, for the
// document with id and payload doc.
func refMatch(f map[string]any, id string, doc map[string]any) bool {
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
		if !refCond(c.(map[string]any), id, doc) {
			return false
		}
	}
	if should := list(f["should"]); len(should) > 0 {
		if !slices.ContainsFunc(should, func(c any) bool { return refCond(c.(map[string]any), id, doc) }) {
			return false
		}
	}
	if ms, ok := f["min_should"].(map[string]any); ok {
		n := 0
		for _, c := range ms["conditions"].([]any) {
			if refCond(c.(map[string]any), id, doc) {
				n++
			}
		}
		if want, _ := strconv.Atoi(string(ms["min_count"].(json.Number))); n < want {
			return false
		}
	}
	for _, c := range list(f["must_not"]) {
		if refCond(c.(map[string]any), id, doc) {
			return false
		}
	}
	return true
}

// refTime reads a datetime as Qdrant does: RFC 3339 (T, t or a space;
// Z, z or an offset with or without its colon or minutes, maybe after a
// space), or without zone (UTC) to the second, the minute or the day.
func refTime(s string) (time.Time, bool) {
	if len(s) > 10 && (s[10] == 't' || s[10] == ' ') {
		s = s[:10] + "T" + s[11:]
	}
	if strings.HasSuffix(s, "z") {
		s = s[:len(s)-1] + "Z"
	}
	s = strings.Replace(s, " ", "", 1) // a space before the offset
	for _, l := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-0700", "2006-01-02T15:04:05.999999999-07",
		"2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// refFloat is a JSON number as a float64.
func refFloat(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	x, err := n.Float64()
	return x, err == nil
}

// refGeo reads {"lon", "lat"} as degrees.
func refGeo(v any) (lon, lat float64, ok bool) {
	m, isObj := v.(map[string]any)
	if !isObj {
		return 0, 0, false
	}
	lon, ok1 := refFloat(m["lon"])
	lat, ok2 := refFloat(m["lat"])
	return lon, lat, ok1 && ok2
}

// refInside is the even-odd rule; a point on an edge is neither inside
// nor outside (onEdge).
func refInside(ring []any, x, y float64) (inside, onEdge bool) {
	for i := 1; i < len(ring); i++ {
		x0, y0, _ := refGeo(ring[i-1])
		x1, y1, _ := refGeo(ring[i])
		if (x1-x0)*(y-y0) == (y1-y0)*(x-x0) && min(x0, x1) <= x && x <= max(x0, x1) && min(y0, y1) <= y && y <= max(y0, y1) {
			return false, true
		}
		if (y0 > y) != (y1 > y) && x < x0+(y-y0)*(x1-x0)/(y1-y0) {
			inside = !inside
		}
	}
	return inside, false
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

func refCond(c map[string]any, id string, doc map[string]any) bool {
	if hi, ok := c["has_id"]; ok {
		return slices.ContainsFunc(hi.([]any), func(w any) bool { return fmt.Sprint(w) == id })
	}
	if n, ok := c["nested"].(map[string]any); ok {
		v, _ := refLookup(doc, n["key"].(string))
		a, _ := v.([]any)
		return slices.ContainsFunc(a, func(e any) bool {
			m, isObj := e.(map[string]any)
			return isObj && refMatch(n["filter"].(map[string]any), id, m)
		})
	}
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
		return refMatch(c, id, doc) // a nested filter
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
		case m["uuid"] != nil || m["uuid_any"] != nil || m["uuid_except"] != nil:
			// UUIDs as google/uuid reads them: a value that is none never holds.
			list, except := m["uuid_any"], m["uuid_except"] != nil
			if m["uuid"] != nil {
				list = []any{m["uuid"]}
			} else if except {
				list = m["uuid_except"]
			}
			test = func(e any) bool {
				s, ok := e.(string)
				if !ok {
					return false
				}
				u, err := uuid.Parse(s)
				if err != nil {
					return false
				}
				in := slices.ContainsFunc(list.([]any), func(w any) bool { return uuid.MustParse(w.(string)) == u })
				return in != except
			}
		case m["text"] != nil || m["phrase"] != nil:
			sub, _ := m["text"].(string)
			if p, ok := m["phrase"].(string); ok {
				sub = p
			}
			test = func(e any) bool { s, ok := e.(string); return ok && strings.Contains(s, sub) }
		case m["text_any"] != nil:
			test = func(e any) bool {
				s, ok := e.(string)
				return ok && slices.ContainsFunc(strings.Fields(m["text_any"].(string)), func(w string) bool { return strings.Contains(s, w) })
			}
		default:
			// Qdrant: any element that is not null and not in the list.
			ex := m["except"].([]any)
			test = func(e any) bool {
				return e != nil && !slices.ContainsFunc(ex, func(w any) bool { return refEqual(w, e) })
			}
		}
	} else if g, ok := c["geo_radius"].(map[string]any); ok {
		clon, clat, _ := refGeo(g["center"])
		r, _ := refFloat(g["radius"])
		test = func(e any) bool {
			lon, lat, ok := refGeo(e)
			if !ok {
				return false
			}
			// Haversine on the mean Earth radius.
			rad := math.Pi / 180
			h := math.Pow(math.Sin((lat-clat)*rad/2), 2) + math.Cos(lat*rad)*math.Cos(clat*rad)*math.Pow(math.Sin((lon-clon)*rad/2), 2)
			return 2*6371008.8*math.Asin(math.Sqrt(h)) < r
		}
	} else if g, ok := c["geo_bounding_box"].(map[string]any); ok {
		l, t, _ := refGeo(g["top_left"])
		r, b, _ := refGeo(g["bottom_right"])
		test = func(e any) bool {
			lon, lat, ok := refGeo(e)
			inLon := l < lon && lon < r
			if l > r {
				inLon = lon > l || lon < r
			}
			return ok && inLon && b < lat && lat < t
		}
	} else if g, ok := c["geo_polygon"].(map[string]any); ok {
		test = func(e any) bool {
			lon, lat, ok := refGeo(e)
			if !ok {
				return false
			}
			if in, _ := refInside(g["exterior"].(map[string]any)["points"].([]any), lon, lat); !in {
				return false
			}
			holes, _ := g["interiors"].([]any)
			return !slices.ContainsFunc(holes, func(h any) bool {
				in, edge := refInside(h.(map[string]any)["points"].([]any), lon, lat)
				return in || edge
			})
		}
	} else if r := c["range"].(map[string]any); slices.ContainsFunc(slices.Collect(maps.Values(r)), func(b any) bool { _, s := b.(string); return s }) {
		test = func(e any) bool {
			s, ok := e.(string)
			if !ok {
				return false
			}
			x, ok := refTime(s)
			for bound, bv := range r {
				if bv == nil {
					continue
				}
				b, _ := refTime(bv.(string))
				switch {
				case bound == "gt" && !x.After(b), bound == "gte" && x.Before(b),
					bound == "lt" && !x.Before(b), bound == "lte" && x.After(b):
					return false
				}
			}
			return ok
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
				if seed > 1 || m != vector.Cosine {
					longtest.Mark(t)
				}
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
					case 2:
						src = `{"must": {"has_id": ["doc-1", "doc-7", "doc-42", "doc-99", "doc-123", "doc-300", "doc-599", 3]}}`
					case 3:
						src = `{"must": {"nested": {"key": "arr", "filter": {"must": {"key": "k", "match": {"any": ["en", "go", ""]}}}}},
							"min_should": {"conditions": [{"key": "lang", "match": {"except": ["en"]}}, {"is_empty": {"key": "tags"}}, {"has_id": ["doc-5"]}], "min_count": 1}}`
					case 4:
						src = `{"should": [{"key": "loc", "geo_radius": {"center": {"lon": 0, "lat": 0}, "radius": 120000}},
							{"key": "date", "range": {"gte": "2021-06-15T12:00:00+02:00"}}, {"key": "title", "match": {"text": "r"}}]}`
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
						if refMatch(ftree, s.id, docs[s.id]) {
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
