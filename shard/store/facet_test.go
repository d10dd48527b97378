package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/index"
	"github.com/trawl-search/trawl/idorder"
)

// readsStore is a store of n documents whose payloads mix what facets and
// ordered pages meet: a keyword, an array with repeats, an integer, a
// float, a nested key, a null, a missing key.
func readsStore(t *testing.T, n int, ix index.Config) *Memory {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	m := NewMemory(2)
	m.payloadIndex = index.New(ix)
	var recs []Record
	for i := range n {
		var pl string
		switch i % 5 {
		case 0:
			pl = fmt.Sprintf(`{"k": "v%d", "x": %d, "m": {"k": true}}`, rng.IntN(4), rng.IntN(9))
		case 1:
			x := rng.IntN(9)
			pl = fmt.Sprintf(`{"k": ["v%d", "v%d", "v1", 7], "x": [%d, %d.5, %d, %d.0]}`, rng.IntN(4), rng.IntN(4), x, rng.IntN(9), x, x)
		case 2:
			pl = fmt.Sprintf(`{"k": null, "x": %d.25}`, rng.IntN(9))
		case 3:
			pl = `{"x": "nine"}`
		default:
		}
		recs = append(recs, Record{ID: fmt.Sprint(i), Vector: []float32{1, float32(i)}, Payload: []byte(pl)})
	}
	bg := context.Background()
	require.NoError(t, m.Upsert(bg, place, recs))
	// Replaced and deleted documents leave the counts and the listings.
	var again []Record
	for i := range 40 {
		again = append(again, Record{ID: fmt.Sprint(i), Vector: []float32{2, float32(i)}, Payload: []byte(`{"k": ["v9", "v9"], "x": 100}`)})
	}
	require.NoError(t, m.Upsert(bg, place, again))
	for i := 40; i < 60; i++ {
		_, err := m.Delete(bg, place, fmt.Sprint(i))
		require.NoError(t, err)
	}
	return m
}

// TestFacetCountsEachValueOncePerDocument: Facet's counts equal a
// brute force over the decoded payloads, with and without a filter and
// a slot filter.
func TestFacetCountsEachValueOncePerDocument(t *testing.T) {
	t.Run("from the index", func(t *testing.T) { testFacet(t, readsStore(t, 400, index.Config{})) })
	// Keys past the index's cap, and strings too long to index, are
	// counted from the payloads.
	t.Run("from the payloads", func(t *testing.T) { testFacet(t, readsStore(t, 400, index.Config{MaxKeys: 1, MaxStringBytes: 1})) })
}

func testFacet(t *testing.T, m *Memory) {
	f, err := filter.Parse([]byte(`{"must": {"key": "x", "range": {"gte": 3}}}`))
	require.NoError(t, err)
	// has_id needs the rows' ids, which the facet's selection must hand
	// the payload index.
	byID, err := filter.Parse([]byte(`{"must": [{"has_id": ["` + m.ids[3] + `", "` + m.ids[10] + `", "` + m.ids[77] + `"]}]}`))
	require.NoError(t, err)
	even := func(id string) bool { return len(id)%2 == 0 }
	for _, tc := range []struct {
		key  []string
		f    *filter.Filter
		keep func(string) bool
	}{{[]string{"k"}, nil, nil}, {[]string{"k"}, f, nil}, {[]string{"k"}, nil, even}, {[]string{"m", "k"}, nil, nil}, {[]string{"x"}, f, even}, {[]string{"k"}, byID, nil}} {
		want := map[any]int{}
		for r, id := range m.ids {
			doc := decodePayload(m.payloads[r])
			if !tc.f.Empty() && !tc.f.MatchPoint(id, doc) || tc.keep != nil && !tc.keep(id) {
				continue
			}
			v, ok := filter.Lookup(doc, tc.key)
			if !ok {
				continue
			}
			vs, isArr := v.([]any)
			if !isArr {
				vs = []any{v}
			}
			seen := map[any]bool{}
			for _, x := range vs {
				switch x.(type) {
				case string, int64, bool:
					if !seen[x] {
						seen[x] = true
						want[x]++
					}
				}
			}
		}
		got := m.Facet(FacetRequest{Filter: tc.f, Path: tc.key, Keep: tc.keep})
		require.Equal(t, want, got.Counts, "%v", tc.key)
		require.Equal(t, 380, got.Docs)
	}
}

// TestOrderedPageIsTheSortedPrefix: an ordered page is the first Limit
// (value, id) pairs of a brute-force sort, in both directions, from any
// start, each document once per number it holds.
func TestOrderedPageIsTheSortedPrefix(t *testing.T) {
	m := readsStore(t, 300, index.Config{})
	type pair struct {
		v  float64
		id string
	}
	var all []pair
	for r, id := range m.ids {
		v, ok := filter.Lookup(decodePayload(m.payloads[r]), []string{"x"})
		if !ok {
			continue
		}
		vs, isArr := v.([]any)
		if !isArr {
			vs = []any{v}
		}
		for _, x := range vs {
			var p pair
			switch x := x.(type) {
			case int64:
				p = pair{float64(x), id}
			case float64:
				p = pair{x, id}
			default:
				continue
			}
			if !slices.Contains(all, p) {
				all = append(all, p)
			}
		}
	}
	for _, desc := range []bool{false, true} {
		for _, tc := range []struct {
			from    float64
			hasFrom bool
			limit   int
		}{{0, false, 1}, {0, false, 50}, {4, true, 30}, {4.25, true, 1000}, {100, true, 5}} {
			want := slices.Clone(all)
			want = slices.DeleteFunc(want, func(p pair) bool {
				return tc.hasFrom && (!desc && p.v < tc.from || desc && p.v > tc.from)
			})
			slices.SortFunc(want, func(a, b pair) int {
				c := cmp.Or(cmp.Compare(a.v, b.v), idorder.Compare(a.id, b.id))
				if desc {
					return -c
				}
				return c
			})
			want = want[:min(tc.limit, len(want))]
			req := OrderedPageRequest{Path: []string{"x"}, Descending: desc, From: tc.from, HasFrom: tc.hasFrom,
				Limit: tc.limit, Payload: &PayloadKeys{}}
			page, err := m.OrderedPage(req)
			require.NoError(t, err)
			got := make([]pair, len(page.Records))
			for i, r := range page.Records {
				got[i] = pair{r.Value, r.ID}
				if r.Integer {
					require.Equal(t, math.Trunc(r.Value), r.Value, "an integer value")
				}
				require.NotEmpty(t, r.Payload)
			}
			require.Equal(t, want, got, "desc %v from %v/%v limit %d", desc, tc.from, tc.hasFrom, tc.limit)
			// The payloads' path, which a key the index does not hold
			// takes, lists the same keys.
			less := func(a, b orderKey) int {
				c := cmp.Or(cmp.Compare(a.value, b.value), idorder.Compare(m.ids[a.row], m.ids[b.row]))
				if desc {
					return -c
				}
				return c
			}
			idx, ok := m.orderedFromIndex(req, nil, less)
			require.True(t, ok, "the index holds x")
			require.Equal(t, idx, m.orderedFromPayloads(req, nil, less))
		}
	}
}
