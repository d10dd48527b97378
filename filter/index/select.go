package index

import (
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/trawl-search/trawl/filter"
)

// residualFactor decides when a must condition is left to per-row
// evaluation: when building its bitmap would touch more than this many
// postings per row the other conditions left. Evaluating one row decodes
// its payload (about a microsecond for a small one); a posting costs a few
// nanoseconds in a union.
const residualFactor = 64

// Source is what Select reads of a store's rows besides the index. A
// store gives all three: without ID and Row, has_id would hold for no row.
type Source struct {
	// Doc returns a row's decoded payload.
	Doc func(row uint32) map[string]any
	// ID returns a row's id; nil: ids are unknown, and has_id holds for
	// no row.
	ID func(row uint32) string
	// Row finds the row of an id, so has_id is a lookup per id rather
	// than a check per row; nil: has_id is checked per row.
	Row func(id string) (uint32, bool)
}

// Select returns the rows in [0, n) whose ids and payloads match f,
// reading src for conditions the indexes do not answer. The bitmap may be
// one of the index's own: it is read-only, and valid only until the next
// write.
func (ix *Index) Select(f *filter.Filter, n int, src Source) *roaring.Bitmap {
	if n <= 0 {
		return roaring.New()
	}
	s := selector{ix: ix, n: n, src: src}
	b, exact := s.filter(f)
	if b == nil {
		b = s.all()
	}
	if exact {
		return b
	}
	out := roaring.New()
	it := b.Iterator()
	for it.HasNext() {
		r := it.Next()
		id := ""
		if src.ID != nil {
			id = src.ID(r)
		}
		if f.MatchPoint(id, src.Doc(r)) {
			out.Add(r)
		}
	}
	return out
}

// selector plans one Select. A plan of a condition is a bitmap (nil: every
// row) and whether it is exact; an inexact bitmap holds every matching
// row and maybe others, which per-row evaluation then drops.
type selector struct {
	ix       *Index
	n        int
	src      Source
	universe *roaring.Bitmap
}

func (s *selector) all() *roaring.Bitmap {
	if s.universe == nil {
		s.universe = roaring.New()
		s.universe.AddRange(0, uint64(s.n))
	}
	return s.universe
}

func (s *selector) filter(f *filter.Filter) (*roaring.Bitmap, bool) {
	if f == nil {
		return nil, true
	}
	cur, exact := s.must(f.Must)
	if len(f.Should) > 0 {
		b, e := s.should(f.Should)
		exact = exact && e
		cur = and(cur, b)
	}
	if f.MinShould != nil {
		// At least one of the conditions holds wherever min_count of them
		// do: their union bounds the rows, which are then checked.
		exact = false
		if b, _ := s.should(f.MinShould.Conds); b != nil {
			cur = and(cur, b)
		}
	}
	for i := range f.MustNot {
		b, e := s.cond(&f.MustNot[i])
		if !e {
			// Rows outside an inexact superset are known not to match,
			// but those inside are unknown: the negation narrows nothing.
			exact = false
			continue
		}
		if b == nil {
			return roaring.New(), true // the negated condition holds everywhere
		}
		if cur == nil {
			cur = s.all()
		}
		cur = roaring.AndNot(cur, b)
	}
	return cur, exact
}

func and(a, b *roaring.Bitmap) *roaring.Bitmap {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return roaring.And(a, b)
}

// must intersects the conditions cheapest first, and leaves to per-row
// evaluation a condition that would cost more than checking the rows the
// cheaper ones left.
func (s *selector) must(cs []filter.Condition) (*roaring.Bitmap, bool) {
	if len(cs) == 0 {
		return nil, true
	}
	order := make([]int, len(cs))
	costs := make([]uint64, len(cs))
	for i := range cs {
		order[i] = i
		costs[i] = s.cost(&cs[i])
	}
	sort.SliceStable(order, func(a, b int) bool { return costs[order[a]] < costs[order[b]] })
	var cur *roaring.Bitmap
	exact := true
	for _, i := range order {
		if cur != nil && costs[i] > residualFactor*cur.GetCardinality()+residualFactor {
			exact = false
			continue
		}
		b, e := s.cond(&cs[i])
		exact = exact && e
		cur = and(cur, b)
		if cur != nil && cur.IsEmpty() {
			return cur, true // nothing can match, whatever the rest says
		}
	}
	return cur, exact
}

func (s *selector) should(cs []filter.Condition) (*roaring.Bitmap, bool) {
	if len(cs) == 0 {
		return roaring.New(), true
	}
	bs := make([]*roaring.Bitmap, 0, len(cs))
	exact := true
	for i := range cs {
		b, e := s.cond(&cs[i])
		exact = exact && e
		if b == nil {
			if e {
				return nil, true // one condition holds everywhere
			}
			return nil, false
		}
		bs = append(bs, b)
	}
	return roaring.FastOr(bs...), exact
}

// cond plans one condition.
func (s *selector) cond(c *filter.Condition) (*roaring.Bitmap, bool) {
	switch c.Op {
	case filter.OpFilter:
		return s.filter(c.Nested)
	case filter.OpHasID:
		if s.src.Row == nil {
			return nil, false
		}
		b := roaring.New()
		for _, id := range c.IDs {
			if r, ok := s.src.Row(id); ok && int(r) < s.n {
				b.Add(r)
			}
		}
		return b, true
	case filter.OpValuesCount:
		// The postings hold values, not how many a row has (and a count of
		// 0 holds where the key is missing): evaluated per row.
		return nil, false
	}
	f, ok := s.ix.fields[c.Key]
	if !ok {
		if s.ix.capped {
			return nil, false // maybe held by rows, unindexed
		}
		// No row holds the key.
		if c.Op == filter.OpIsEmpty {
			return nil, true
		}
		return roaring.New(), true
	}
	if c.TextIndex != nil && (c.Op == filter.OpText || c.Op == filter.OpTextAny) {
		if b, ok := s.textCond(c); ok {
			return b, true
		}
	}
	if c.UUID {
		// The postings are by string as written; a UUID matches every
		// way of writing it, so the rows holding the key are checked.
		if f.present == nil {
			return roaring.New(), true
		}
		return f.present, false
	}
	switch c.Op {
	case filter.OpIsNull:
		return orEmpty(f.null), true
	case filter.OpIsEmpty:
		if f.present == nil {
			return nil, true
		}
		return roaring.AndNot(s.all(), f.present), true
	case filter.OpMatch:
		if c.Value.Type == filter.String && len(c.Value.Str) > s.ix.cfg.MaxStringBytes {
			return nil, false
		}
		return orEmpty(f.posting(c.Value)), true
	case filter.OpAny:
		bs := make([]*roaring.Bitmap, 0, len(c.Values))
		for _, v := range c.Values {
			if v.Type == filter.String && len(v.Str) > s.ix.cfg.MaxStringBytes {
				return nil, false
			}
			if b := f.posting(v); b != nil {
				bs = append(bs, b)
			}
		}
		return roaring.FastOr(bs...), true
	case filter.OpExcept:
		return s.except(f, c)
	case filter.OpRange:
		var bs []*roaring.Bitmap
		f.eachInRange(c.Range, func(b *roaring.Bitmap) { bs = append(bs, b) })
		return roaring.FastOr(bs...), true
	}
	// Nested, datetime, text and geo conditions: the rows holding the key
	// bound them, and each is checked.
	if f.present == nil {
		return roaring.New(), true
	}
	return f.present, false
}

func orEmpty(b *roaring.Bitmap) *roaring.Bitmap {
	if b == nil {
		return roaring.New()
	}
	return b
}

// except is the union of the postings of every string and integer the
// list leaves out and of the rows holding other values (booleans, floats,
// objects), which no list holds.
func (s *selector) except(f *field, c *filter.Condition) (*roaring.Bitmap, bool) {
	if f.long {
		return nil, false // unindexed strings may be outside the list
	}
	bs := []*roaring.Bitmap{orEmpty(f.other)}
	for v, b := range f.strs {
		if !slices.ContainsFunc(c.Values, func(w filter.Value) bool { return w.Type == filter.String && w.Str == v }) {
			bs = append(bs, b)
		}
	}
	for v, b := range f.ints {
		if !slices.ContainsFunc(c.Values, func(w filter.Value) bool { return w.Type == filter.Integer && w.Int == v }) {
			bs = append(bs, b)
		}
	}
	return roaring.FastOr(bs...), true
}

func (f *field) posting(v filter.Value) *roaring.Bitmap {
	switch v.Type {
	case filter.String:
		return f.strs[v.Str]
	case filter.Integer:
		return f.ints[v.Int]
	}
	if v.Bool {
		return f.bools[1]
	}
	return f.bools[0]
}

// eachInRange calls fn with the posting of every number within r.
func (f *field) eachInRange(r filter.Range, fn func(*roaring.Bitmap)) {
	lo := 0
	switch {
	case r.GTE != nil && (r.GT == nil || *r.GTE > *r.GT):
		lo = sort.SearchFloat64s(f.keys, *r.GTE)
	case r.GT != nil:
		lo = sort.Search(len(f.keys), func(i int) bool { return f.keys[i] > *r.GT })
	}
	for _, k := range f.keys[lo:] {
		if !r.Contains(k) {
			if (r.LT != nil && k >= *r.LT) || (r.LTE != nil && k > *r.LTE) {
				return // past the upper bound
			}
			continue
		}
		if b, ok := f.nums[k]; ok {
			fn(b)
		}
	}
}

// cost estimates the postings a condition's bitmap touches, to order a
// must and choose what to evaluate per row.
func (s *selector) cost(c *filter.Condition) uint64 {
	switch c.Op {
	case filter.OpFilter, filter.OpValuesCount:
		return uint64(s.n) // unknown: planned after the leaves, or left to per-row evaluation
	case filter.OpHasID:
		if s.src.Row == nil {
			return uint64(s.n) * residualFactor // per-row evaluation anyway
		}
		return uint64(len(c.IDs))
	}
	f, ok := s.ix.fields[c.Key]
	if !ok {
		if s.ix.capped {
			return uint64(s.n) * residualFactor // per-row evaluation anyway
		}
		return 0
	}
	card := func(b *roaring.Bitmap) uint64 {
		if b == nil {
			return 0
		}
		return b.GetCardinality()
	}
	if c.UUID {
		return card(f.present)
	}
	switch c.Op {
	case filter.OpIsNull:
		return card(f.null)
	case filter.OpIsEmpty:
		return uint64(s.n)
	case filter.OpMatch:
		return card(f.posting(c.Value))
	case filter.OpAny:
		var t uint64
		for _, v := range c.Values {
			t += card(f.posting(v))
		}
		return t
	case filter.OpExcept:
		return card(f.present)
	case filter.OpRange:
		var t uint64
		f.eachInRange(c.Range, func(b *roaring.Bitmap) { t += b.GetCardinality() })
		return t
	}
	return card(f.present)
}
