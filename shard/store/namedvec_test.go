package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// randNamed gives a record some of the named vectors "a" (3-D) and "b"
// (5-D), or none.
func randNamed(rng *rand.Rand) map[string][]float32 {
	var out map[string][]float32
	for name, dim := range map[string]int{"a": 3, "b": 5} {
		if rng.IntN(3) == 0 {
			continue
		}
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(rng.IntN(9) - 4)
		}
		if out == nil {
			out = map[string][]float32{}
		}
		out[name] = v
	}
	return out
}

// TestNamedVectorsFollowTheRows writes random points with named vectors
// (some lacking one) through upserts, overwrites, deletes and vector
// updates, with a snapshot view opened midway, on a store with and
// without the unnamed vector: every point reads back its named vectors,
// the scan's presence lists exactly the points holding each, the view
// reads the state it opened at, and a store restored from it reads the
// same.
func TestNamedVectorsFollowTheRows(t *testing.T) {
	bg := context.Background()
	for _, dim := range []int{0, 2} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("dim%d/seed%d", dim, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 37))
				dims := map[string]int{"a": 3, "b": 5}
				m := NewMemory(dim, WithNamed(dims))
				docs := map[string]Record{}
				var (
					ids    []string
					view   *View
					atView map[string]Record
				)
				for b := range 10 {
					var recs []Record
					for i := range 40 {
						id := fmt.Sprintf("d%d-%d", b, i)
						if len(ids) > 0 && rng.IntN(3) == 0 {
							id = ids[rng.IntN(len(ids))]
						} else {
							ids = append(ids, id)
						}
						r := Record{ID: id, Named: randNamed(rng)}
						if dim > 0 {
							r.Vector = []float32{1, float32(i)}
						}
						recs = append(recs, r)
					}
					require.NoError(t, m.Upsert(bg, place, recs))
					for _, r := range recs {
						docs[r.ID] = r
					}
					for range 12 {
						id := ids[rng.IntN(len(ids))]
						_, err := m.Delete(bg, place, id)
						require.NoError(t, err)
						delete(docs, id)
					}
					// An update of one named vector of some stored points.
					n := 0
					for id, r := range docs {
						if n++; n > 5 {
							break
						}
						v := []float32{float32(b), 1, float32(n)}
						require.NoError(t, m.Edit(bg, place, []Edit{{Kind: EditUpdateVectors, Records: []Record{{ID: id, Named: map[string][]float32{"a": v}}}}}))
						named := map[string][]float32{"a": v}
						if x, ok := r.Named["b"]; ok {
							named["b"] = x
						}
						r.Named = named
						docs[id] = r
					}
					// Removing one named vector of a stored point keeps the
					// point and its other vector.
					for id, r := range docs {
						require.NoError(t, m.Edit(bg, place, []Edit{{Kind: EditDeleteVectors, IDs: []string{id}, Keys: []string{"b"}}}))
						named := map[string][]float32{}
						if x, ok := r.Named["a"]; ok {
							named["a"] = x
						}
						if len(named) == 0 {
							named = nil
						}
						r.Named = named
						docs[id] = r
						break
					}
					if b == 4 {
						var err error
						view, err = m.OpenView()
						require.NoError(t, err)
						atView = map[string]Record{}
						for id, r := range docs {
							atView[id] = r
						}
					}
				}
				check := func(m *Memory, docs map[string]Record) {
					t.Helper()
					require.Equal(t, len(docs), m.Len())
					for id, r := range docs {
						got, ok := m.Record(id)
						require.True(t, ok)
						require.Equal(t, r.Named, got.Named, id)
						require.Len(t, got.Vector, dim)
					}
					require.NoError(t, m.ViewScan(func(v *ScanView) error {
						for name := range dims {
							_, has, err := v.NamedRows(name, nil)
							require.NoError(t, err)
							var want []string
							for id, r := range docs {
								if _, ok := r.Named[name]; ok {
									want = append(want, id)
								}
							}
							got := make([]string, len(has))
							for i, row := range has {
								got[i] = m.ids[row]
							}
							require.ElementsMatch(t, want, got, name)
						}
						_, _, err := v.NamedRows("c", nil)
						require.ErrorContains(t, err, `no named vector "c"`)
						return nil
					}))
				}
				check(m, docs)
				// The view reads the points as they were when it opened,
				// and a store restored from it holds them.
				restored := NewMemory(dim, WithNamed(dims))
				restored.Reset(place, nil, view.Len())
				var recs []Record
				require.NoError(t, view.ReadRecords(0, view.Len(), func(r Record) error {
					want, ok := atView[r.ID]
					require.True(t, ok, r.ID)
					require.Equal(t, want.Named, r.Named, r.ID)
					r.Vector = slices.Clone(r.Vector)
					named := map[string][]float32{}
					for name, v := range r.Named {
						named[name] = slices.Clone(v)
					}
					if len(named) == 0 {
						named = nil
					}
					r.Named = named
					recs = append(recs, r)
					return nil
				}))
				view.Close()
				require.NoError(t, restored.Upsert(bg, place, recs))
				check(restored, atView)
				require.Positive(t, m.Bytes())
			})
		}
	}
}

// BenchmarkNamedVectorBytes reports what a 768-D named vector costs a
// point in the store (Memory.Bytes), for points all holding it and half
// holding it, beside a store of no named vector.
func BenchmarkNamedVectorBytes(b *testing.B) {
	const rows, dim = 100_000, 768
	bg := context.Background()
	fill := func(m *Memory, every int) {
		v := make([]float32, dim)
		v[0] = 1
		recs := make([]Record, 0, 1000)
		for i := range rows {
			r := Record{ID: fmt.Sprintf("p%d", i)}
			if i%every == 0 {
				r.Named = map[string][]float32{"text": v}
			}
			recs = append(recs, r)
			if len(recs) == cap(recs) {
				if err := m.Upsert(bg, place, recs); err != nil {
					b.Fatal(err)
				}
				recs = recs[:0]
			}
		}
	}
	for range b.N {
		base := NewMemory(0)
		fill(base, rows+1)
		all := NewMemory(0, WithNamed(map[string]int{"text": dim}))
		fill(all, 1)
		half := NewMemory(0, WithNamed(map[string]int{"text": dim}))
		fill(half, 2)
		b.ReportMetric(float64(all.Bytes()-base.Bytes())/rows, "B/point_all_hold")
		b.ReportMetric(float64(half.Bytes()-base.Bytes())/rows, "B/point_half_hold")
	}
}
