package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/filtertest"
	"github.com/trawl-search/trawl/shard/store/sparse"
	"github.com/trawl-search/trawl/vector"
)

func randSparse(rng *rand.Rand, vocab int) sparse.Vector {
	v := sparse.Vector{}
	seen := map[uint32]bool{}
	for range rng.IntN(6) + 1 {
		t := uint32(rng.IntN(vocab))
		if !seen[t] {
			seen[t] = true
			v.Indices = append(v.Indices, t)
			v.Values = append(v.Values, float32(rng.IntN(9)-2)/4) // ties happen
		}
	}
	return v
}

// bruteSparse is Qdrant's semantics evaluated document by document: the
// documents f matches whose vector shares a term with q, scored by
// Σ q·w·d in ascending term order, best first, ties by id.
func bruteSparse(docs map[string]Record, name string, q sparse.Vector, w []float32, f *filter.Filter, k int) []vector.Hit {
	qs := q.Sorted()
	wt := map[uint32]float32{}
	for i, t := range q.Indices {
		if w != nil {
			wt[t] = w[i]
		}
	}
	hits := []vector.Hit{}
	for id, r := range docs {
		if !f.Empty() && !f.MatchPoint(id, decodePayload(r.Payload)) {
			continue
		}
		d, ok := r.Sparse[name]
		if !ok {
			continue
		}
		dv := map[uint32]float32{}
		for i, t := range d.Indices {
			dv[t] = d.Values[i]
		}
		var s float32
		shared := false
		for i, t := range qs.Indices {
			x, ok := dv[t]
			if !ok {
				continue
			}
			qw := qs.Values[i]
			if w != nil {
				qw *= wt[t]
			}
			s += qw * x
			shared = true
		}
		if shared {
			hits = append(hits, vector.Hit{ID: id, Score: s})
		}
	}
	sort.Slice(hits, func(i, j int) bool { return vector.DotProduct.Better(hits[i], hits[j]) })
	return hits[:min(k, len(hits))]
}

// TestSparseSearchAgainstBruteForce writes random points (two sparse
// vectors, payloads) through upserts, overwrites, deletes and edits, then
// checks random filtered sparse queries, with and without weights,
// against brute force; then restores a snapshot view into a new store
// (rows, then the postings as they are) and checks again.
func TestSparseSearchAgainstBruteForce(t *testing.T) {
	bg := context.Background()
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 11))
		m := NewMemory(2, WithSparse("a", "b"))
		docs := map[string]Record{}
		var ids []string
		for b := range 8 {
			var recs []Record
			for i := range 60 {
				id := fmt.Sprintf("d%d-%d", b, i)
				if len(ids) > 0 && rng.IntN(4) == 0 {
					id = ids[rng.IntN(len(ids))]
				} else {
					ids = append(ids, id)
				}
				r := Record{ID: id, Vector: []float32{1, float32(i)}, Payload: []byte(filtertest.Payload(rng))}
				for _, name := range []string{"a", "b"} {
					if rng.IntN(4) > 0 {
						if r.Sparse == nil {
							r.Sparse = map[string]sparse.Vector{}
						}
						r.Sparse[name] = randSparse(rng, 30)
					}
				}
				recs = append(recs, r)
			}
			require.NoError(t, m.Upsert(bg, place, recs))
			for _, r := range recs {
				docs[r.ID] = r
			}
			for range 15 {
				id := ids[rng.IntN(len(ids))]
				_, err := m.Delete(bg, place, id)
				require.NoError(t, err)
				delete(docs, id)
			}
			// An update of one sparse vector of a stored point.
			for id, r := range docs {
				v := randSparse(rng, 30)
				require.NoError(t, m.Edit(bg, place, []Edit{{Kind: EditUpdateVectors, Records: []Record{{ID: id, Sparse: map[string]sparse.Vector{"b": v}}}}}))
				sp := map[string]sparse.Vector{"b": v}
				if a, ok := r.Sparse["a"]; ok {
					sp["a"] = a
				}
				r.Sparse = sp
				docs[id] = r
				break
			}
		}
		check := func(m *Memory) {
			t.Helper()
			for id, r := range docs {
				got, ok := m.Record(id)
				require.True(t, ok)
				require.Equal(t, len(r.Sparse), len(got.Sparse), id)
				for name, v := range r.Sparse {
					require.ElementsMatch(t, v.Indices, got.Sparse[name].Indices)
				}
			}
			for range 30 {
				name := []string{"a", "b"}[rng.IntN(2)]
				q := randSparse(rng, 30)
				var w []float32
				if rng.IntN(2) == 0 {
					st, err := m.SparseStats(name, q.Indices, nil)
					require.NoError(t, err)
					holding := 0
					for _, r := range docs {
						if v, ok := r.Sparse[name]; ok && v.Len() > 0 {
							holding++
						}
					}
					require.Equal(t, len(docs), st.Docs)
					require.Equal(t, holding, st.Vectors)
					w = make([]float32, q.Len())
					for i := range w {
						w[i] = sparse.IDF(uint64(st.Vectors), uint64(st.DF[i]))
					}
				}
				var f *filter.Filter
				if rng.IntN(2) == 0 {
					var err error
					f, err = filter.Parse([]byte(filtertest.Filter(rng, 2)))
					require.NoError(t, err)
				}
				k := rng.IntN(20) + 1
				var got []vector.Hit
				require.NoError(t, m.ViewScan(func(v *ScanView) error {
					var sel []uint32
					if !f.Empty() {
						var err error
						if sel, err = v.Select(f); err != nil {
							return err
						}
					}
					var err error
					got, err = v.SparseSearch(SparseQuery{Name: name, Vector: q, Weights: w, K: k}, sel)
					return err
				}))
				require.Equal(t, bruteSparse(docs, name, q, w, f, k), got)
			}
		}
		check(m)

		view, err := m.OpenView()
		require.NoError(t, err)
		restored := NewMemory(2, WithSparse("a", "b"))
		restored.Reset(place, nil, view.Len())
		var recs []Record
		require.NoError(t, view.Read(0, view.Len(), func(id string, vec []float32, payload []byte) error {
			recs = append(recs, Record{ID: id, Vector: append([]float32(nil), vec...), Payload: payload})
			return nil
		}))
		ps := view.Sparse()
		view.Close()
		require.NoError(t, restored.Upsert(bg, place, recs))
		require.NoError(t, restored.RestoreSparse(ps))
		require.NoError(t, restored.FinishRestore(bg, nil, nil))
		check(restored)
		require.Error(t, NewMemory(2, WithSparse("a")).RestoreSparse(ps), "a vector the collection lacks")
	}
}
