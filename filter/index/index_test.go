package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/filtertest"
)

// rows is a store's payloads kept beside an index the way a shard keeps
// them: dense rows, a delete moving the last row into the hole.
type rows struct {
	ix   *Index
	docs []map[string]any
	// ids are the rows' ids, "0", "1", ... in the order added, as
	// filtertest's has_id names them.
	ids  []string
	next int
	// byID, when set, gives Select the rows' ids to look has_id up.
	byID bool
}

func decode(t testing.TB, s string) map[string]any {
	b, err := filter.CheckPayload([]byte(s))
	require.NoError(t, err, s)
	d, err := filter.DecodePayload(b)
	require.NoError(t, err)
	return d
}

func (r *rows) add(d map[string]any) {
	r.ix.Add(uint32(len(r.docs)), d)
	r.docs = append(r.docs, d)
	r.ids = append(r.ids, fmt.Sprint(r.next))
	r.next++
}

func (r *rows) set(i int, d map[string]any) {
	r.ix.Remove(uint32(i), r.docs[i])
	r.ix.Add(uint32(i), d)
	r.docs[i] = d
}

func (r *rows) delete(i int) {
	last := len(r.docs) - 1
	r.ix.Remove(uint32(i), r.docs[i])
	if i != last {
		r.ix.Remove(uint32(last), r.docs[last])
		r.ix.Add(uint32(i), r.docs[last])
		r.docs[i] = r.docs[last]
		r.ids[i] = r.ids[last]
	}
	r.docs = r.docs[:last]
	r.ids = r.ids[:last]
}

func (r *rows) brute(f *filter.Filter) []uint32 {
	var out []uint32
	for i, d := range r.docs {
		if f.MatchPoint(r.ids[i], d) {
			out = append(out, uint32(i))
		}
	}
	return out
}

func (r *rows) selectRows(f *filter.Filter) []uint32 {
	src := Source{Doc: func(row uint32) map[string]any { return r.docs[row] }, ID: func(row uint32) string { return r.ids[row] }}
	if r.byID {
		src.Row = func(id string) (uint32, bool) {
			i := slices.Index(r.ids, id)
			return uint32(i), i >= 0
		}
	}
	b := r.ix.Select(f, len(r.docs), src)
	out := b.ToArray()
	if len(out) == 0 {
		return nil
	}
	return out
}

// TestSelectEqualsMatch: through random inserts, overwrites and deletes,
// Select of random filters equals evaluating every row, with every key
// indexed, with the key cap hit (per-row evaluation of some keys) and
// with short strings unindexed, has_id looked up by id or checked per row.
func TestSelectEqualsMatch(t *testing.T) {
	for _, cfg := range []Config{{}, {MaxKeys: 4}, {MaxStringBytes: 1}} {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%+v/seed%d", cfg, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				r := &rows{ix: New(cfg), byID: seed%2 == 0}
				for round := range 30 {
					for range 20 + rng.IntN(40) {
						switch n := len(r.docs); {
						case n > 0 && rng.IntN(4) == 0:
							r.delete(rng.IntN(n))
						case n > 0 && rng.IntN(4) == 0:
							r.set(rng.IntN(n), decode(t, filtertest.Payload(rng)))
						case rng.IntN(10) == 0:
							r.add(nil)
						default:
							r.add(decode(t, filtertest.Payload(rng)))
						}
					}
					r.ix.Flush()
					for range 20 {
						src := filtertest.Filter(rng, 3)
						f, err := filter.Parse([]byte(src))
						require.NoError(t, err, src)
						require.Equal(t, r.brute(f), r.selectRows(f), "round %d filter %s", round, src)
					}
				}
			})
		}
	}
}

func TestSelectLeavesCostlyConditionsToRows(t *testing.T) {
	r := &rows{ix: New(Config{})}
	for i := range 10000 {
		r.add(decode(t, fmt.Sprintf(`{"id": %d, "x": %d.5, "b": %d}`, i, i, i%100)))
	}
	r.ix.Flush()
	// The match keeps one row; the range would union 9 000 postings.
	f, err := filter.Parse([]byte(`{"must": [{"key": "x", "range": {"gt": 1000}}, {"key": "id", "match": {"value": 4242}}]}`))
	require.NoError(t, err)
	s := selector{ix: r.ix, n: len(r.docs)}
	b, exact := s.filter(f)
	require.False(t, exact, "the range is left to per-row evaluation")
	require.Equal(t, []uint32{4242}, b.ToArray())
	evaluated := 0
	got := r.ix.Select(f, len(r.docs), Source{Doc: func(row uint32) map[string]any { evaluated++; return r.docs[row] }})
	require.Equal(t, []uint32{4242}, got.ToArray())
	require.Equal(t, 1, evaluated)

	// A range over few postings is answered from the index.
	f, _ = filter.Parse([]byte(`{"must": [{"key": "x", "range": {"gt": 1000, "lt": 1003}}, {"key": "b", "match": {"value": 1}}]}`))
	b, exact = (&selector{ix: r.ix, n: len(r.docs)}).filter(f)
	require.True(t, exact)
	require.Equal(t, []uint32{1001}, b.ToArray())
}

func TestNumericKeysStayOrderedThroughChurn(t *testing.T) {
	ix := New(Config{})
	docs := map[uint32]map[string]any{}
	rng := rand.New(rand.NewPCG(3, 3))
	for step := range 5000 {
		row := uint32(rng.IntN(300))
		if d, ok := docs[row]; ok {
			ix.Remove(row, d)
			delete(docs, row)
		} else {
			d := map[string]any{"v": float64(rng.IntN(200)) / 4}
			ix.Add(row, d)
			docs[row] = d
		}
		if step%7 == 0 {
			ix.Flush()
			f := ix.fields["v"]
			require.IsIncreasing(t, f.keys)
			var want []uint32
			for r, d := range docs {
				if x := d["v"].(float64); x >= 10 && x < 30 {
					want = append(want, r)
				}
			}
			got := roaring.New()
			f.eachInRange(filter.Range{GTE: ptr(10), LT: ptr(30)}, func(b *roaring.Bitmap) { got.Or(b) })
			require.ElementsMatch(t, want, got.ToArray())
		}
	}
}

func ptr(f float64) *float64 { return &f }

// FuzzSelect: for any three payloads and any filter that validate, the
// index's Select over them (inserted, one overwritten and one deleted)
// equals filter.Match row by row: the shard-side evaluator as a shard
// runs it.
func FuzzSelect(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		f.Add([]byte(filtertest.Payload(rng)), []byte(filtertest.Payload(rng)), []byte(filtertest.Payload(rng)), []byte(filtertest.Filter(rng, 3)))
	}
	f.Fuzz(func(t *testing.T, p0, p1, p2, fb []byte) {
		flt, err := filter.Parse(fb)
		if err != nil {
			return
		}
		var ds []map[string]any
		for _, p := range [][]byte{p0, p1, p2} {
			b, err := filter.CheckPayload(p)
			if err != nil {
				ds = append(ds, nil)
				continue
			}
			d, err := filter.DecodePayload(b)
			require.NoError(t, err)
			ds = append(ds, d)
		}
		for _, cfg := range []Config{{}, {MaxKeys: 2, MaxStringBytes: 2}} {
			r := &rows{ix: New(cfg), byID: cfg.MaxKeys == 0}
			r.add(ds[0])
			r.add(ds[1])
			r.add(ds[2])
			r.add(ds[0])
			r.set(1, ds[2])
			r.delete(0)
			r.ix.Flush()
			require.Equal(t, r.brute(flt), r.selectRows(flt))
		}
	})
}
