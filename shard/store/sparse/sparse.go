package sparse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/trawl-search/trawl/vector/sparsevec"
)

// Vector is a sparse vector (package vector/sparsevec).
type Vector = sparsevec.Vector

// Posting is one row's value of one term.
type Posting struct {
	Row   uint32
	Value float32
}

// entry is one term of a row: its value and where its posting is in the
// term's list.
type entry struct {
	term  uint32
	value float32
	pos   uint32
}

// Index is the inverted index of one sparse vector over a store's rows.
// It is not safe for concurrent use: the store guards it with its own
// lock, as it guards the rows.
type Index struct {
	postings map[uint32][]Posting
	rows     [][]entry // rows[r] sorted by term; nil: row r holds no vector
	docs     int       // rows holding a non-empty vector
	total    int       // postings
}

// New returns an empty index.
func New() *Index { return &Index{postings: map[uint32][]Posting{}} }

// Rows is the number of row slots (the store's rows, holding a vector or
// not).
func (x *Index) Rows() int { return len(x.rows) }

// Docs is the number of rows holding a non-empty vector.
func (x *Index) Docs() int { return x.docs }

// Postings is the number of postings, every term's.
func (x *Index) Postings() int { return x.total }

// Terms is the number of distinct terms.
func (x *Index) Terms() int { return len(x.postings) }

// DF is the number of rows whose vector holds term.
func (x *Index) DF(term uint32) int { return len(x.postings[term]) }

// BytesPerPosting is what a posting costs in memory (see the package
// comment): 8 in its term's list, 12 in its row's.
const BytesPerPosting = 20

// Bytes estimates the index's memory: its postings, a row slice header a
// row, and about 64 bytes a term for the map entry and list header.
func (x *Index) Bytes() int {
	return BytesPerPosting*x.total + 24*len(x.rows) + 64*len(x.postings)
}

// grow makes row a valid slot.
func (x *Index) grow(row int) {
	for len(x.rows) <= row {
		x.rows = append(x.rows, nil)
	}
}

// Set makes row's vector v (valid, see Validate), replacing any it held;
// an empty v leaves the row with none. Rows past the end are added.
func (x *Index) Set(row int, v Vector) {
	x.grow(row)
	x.Remove(row)
	if v.Len() == 0 {
		return
	}
	v = v.Sorted()
	es := make([]entry, len(v.Indices))
	for i, t := range v.Indices {
		l := x.postings[t]
		es[i] = entry{term: t, value: v.Values[i], pos: uint32(len(l))}
		x.postings[t] = append(l, Posting{Row: uint32(row), Value: v.Values[i]})
	}
	x.rows[row] = es
	x.docs++
	x.total += len(es)
}

// Remove drops row's vector, if it holds one; the slot stays.
func (x *Index) Remove(row int) {
	if row >= len(x.rows) || x.rows[row] == nil {
		return
	}
	for _, e := range x.rows[row] {
		l := x.postings[e.term]
		last := len(l) - 1
		if int(e.pos) != last {
			// The last posting fills the hole; its row's entry learns
			// where it went.
			moved := l[last]
			l[e.pos] = moved
			x.entryOf(int(moved.Row), e.term).pos = e.pos
		}
		if last == 0 {
			delete(x.postings, e.term)
		} else {
			x.postings[e.term] = l[:last]
		}
	}
	x.total -= len(x.rows[row])
	x.rows[row] = nil
	x.docs--
}

// entryOf is row's entry for term, which it must hold.
func (x *Index) entryOf(row int, term uint32) *entry {
	es := x.rows[row]
	i, ok := slices.BinarySearchFunc(es, term, func(e entry, t uint32) int { return cmpU32(e.term, t) })
	if !ok {
		panic(fmt.Sprintf("sparse: row %d lost term %d", row, term))
	}
	return &es[i]
}

// Move moves row from's vector to row to, which must hold none: the
// store's delete moves its last row into the hole. Moving the last slot
// shrinks the index by one.
func (x *Index) Move(from, to int) {
	x.grow(max(from, to))
	es := x.rows[from]
	for _, e := range es {
		x.postings[e.term][e.pos].Row = uint32(to)
	}
	x.rows[to], x.rows[from] = es, nil
}

// Truncate drops the slots from n on, removing what they hold.
func (x *Index) Truncate(n int) {
	for r := n; r < len(x.rows); r++ {
		x.Remove(r)
	}
	if n < len(x.rows) {
		clear(x.rows[n:])
		x.rows = x.rows[:n]
	}
}

// Has reports whether row holds a vector.
func (x *Index) Has(row int) bool { return row < len(x.rows) && x.rows[row] != nil }

// Vector returns a copy of row's vector, terms ascending; ok false when
// it holds none.
func (x *Index) Vector(row int) (Vector, bool) {
	if row >= len(x.rows) || x.rows[row] == nil {
		return Vector{}, false
	}
	es := x.rows[row]
	v := Vector{Indices: make([]uint32, len(es)), Values: make([]float32, len(es))}
	for i, e := range es {
		v.Indices[i], v.Values[i] = e.term, e.value
	}
	return v, true
}

// Scored is a row with its score.
type Scored struct {
	Row   uint32
	Score float32
}

// Query is one sparse search: the query vector (valid), a weight per
// query term (nil: 1 each; else Weights[i] multiplies Vector.Values[i],
// the idf of its term), and Allow, when set, the rows that may be hits.
type Query struct {
	Vector  Vector
	Weights []float32
	Allow   func(row uint32) bool
}

// Score returns every row sharing a term with q and allowed, with its
// exact score, in no particular order. The caller picks its top k (it
// knows the ids that break ties).
func (x *Index) Score(q Query) []Scored {
	qv := q.Vector
	w := q.Weights
	if !slices.IsSorted(qv.Indices) {
		order := make([]int, len(qv.Indices))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmpU32(qv.Indices[a], qv.Indices[b]) })
		s := Vector{Indices: make([]uint32, len(order)), Values: make([]float32, len(order))}
		var sw []float32
		if w != nil {
			sw = make([]float32, len(order))
		}
		for j, i := range order {
			s.Indices[j], s.Values[j] = qv.Indices[i], qv.Values[i]
			if w != nil {
				sw[j] = w[i]
			}
		}
		qv, w = s, sw
	}
	// Scores accumulate in a dense array over the rows (4 bytes a row,
	// plus a byte to mark the rows touched) when the query's lists are
	// long: common terms' lists cover much of the shard, where a map would
	// cost far more per posting. Rare terms' few postings use a map, so a
	// query costs in proportion to its postings, not the shard.
	reach := 0
	for _, t := range qv.Indices {
		reach += len(x.postings[t])
	}
	weight := func(i int) float32 {
		if w != nil {
			return qv.Values[i] * w[i]
		}
		return qv.Values[i]
	}
	if reach*16 < len(x.rows) {
		acc := make(map[uint32]float32, reach)
		var order []uint32 // first touch, so float32 sums run in term order
		for i, t := range qv.Indices {
			qw := weight(i)
			for _, p := range x.postings[t] {
				s, seen := acc[p.Row]
				if !seen {
					if q.Allow != nil && !q.Allow(p.Row) {
						continue
					}
					order = append(order, p.Row)
				}
				acc[p.Row] = s + qw*p.Value
			}
		}
		out := make([]Scored, len(order))
		for i, r := range order {
			out[i] = Scored{Row: r, Score: acc[r]}
		}
		return out
	}
	acc := make([]float32, len(x.rows))
	seen := make([]bool, len(x.rows))
	var touched []uint32
	for i, t := range qv.Indices {
		qw := weight(i)
		for _, p := range x.postings[t] {
			if !seen[p.Row] {
				if q.Allow != nil && !q.Allow(p.Row) {
					continue
				}
				seen[p.Row] = true
				touched = append(touched, p.Row)
			}
			acc[p.Row] += qw * p.Value
		}
	}
	out := make([]Scored, len(touched))
	for i, r := range touched {
		out[i] = Scored{Row: r, Score: acc[r]}
	}
	return out
}

// IDF is Qdrant's inverse document frequency (sparsevec.IDF).
func IDF(n, df uint64) float32 { return sparsevec.IDF(n, df) }

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AppendBinary appends the index's snapshot form to b: the number of
// terms, then for each term in ascending order the term, its postings'
// count and the postings (row u32, value f32 bits, little-endian), in
// list order, so replicas holding the same index write the same bytes
// and a restore rebuilds the same lists.
func (x *Index) AppendBinary(b []byte) []byte {
	terms := make([]uint32, 0, len(x.postings))
	for t := range x.postings {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	// Sized once: a term's two varints take at most 10 bytes, a posting 8.
	b = slices.Grow(b, binary.MaxVarintLen64+len(terms)*2*binary.MaxVarintLen32+8*x.total)
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		l := x.postings[t]
		b = binary.AppendUvarint(b, uint64(t))
		b = binary.AppendUvarint(b, uint64(len(l)))
		at := len(b)
		b = b[:at+8*len(l)]
		for i, p := range l {
			binary.LittleEndian.PutUint32(b[at+8*i:], p.Row)
			binary.LittleEndian.PutUint32(b[at+8*i+4:], math.Float32bits(p.Value))
		}
	}
	return b
}

// errCorrupt wraps every Decode failure.
var errCorrupt = errors.New("sparse index snapshot is corrupt")

// Decode restores an index of rows row slots from AppendBinary's form.
func Decode(b []byte, rows int) (*Index, error) {
	x := New()
	x.rows = make([][]entry, rows)
	nterms, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: no term count", errCorrupt)
	}
	b = b[n:]
	counts := make([]int, rows)
	prev := int64(-1)
	for range nterms {
		t, n := binary.Uvarint(b)
		if n <= 0 || t > math.MaxUint32 || int64(t) <= prev {
			return nil, fmt.Errorf("%w: bad term", errCorrupt)
		}
		prev = int64(t)
		b = b[n:]
		c, n := binary.Uvarint(b)
		if n <= 0 || c == 0 || c > uint64(len(b)-n)/8 {
			return nil, fmt.Errorf("%w: term %d: bad posting count", errCorrupt, t)
		}
		b = b[n:]
		l := make([]Posting, c)
		for i := range l {
			r := binary.LittleEndian.Uint32(b)
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[4:]))
			b = b[8:]
			if int(r) >= rows {
				return nil, fmt.Errorf("%w: term %d: row %d of %d", errCorrupt, t, r, rows)
			}
			l[i] = Posting{Row: r, Value: v}
			counts[r]++
		}
		x.postings[uint32(t)] = l
		x.total += len(l)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last term", errCorrupt, len(b))
	}
	// Each row's terms, in ascending order because the terms are read in
	// ascending order: one pass over the postings.
	for r, c := range counts {
		if c > 0 {
			x.rows[r] = make([]entry, 0, c)
			x.docs++
		}
	}
	terms := make([]uint32, 0, len(x.postings))
	for t := range x.postings {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	for _, t := range terms {
		for pos, p := range x.postings[t] {
			es := x.rows[p.Row]
			if len(es) > 0 && es[len(es)-1].term == t {
				return nil, fmt.Errorf("%w: term %d lists row %d twice", errCorrupt, t, p.Row)
			}
			x.rows[p.Row] = append(es, entry{term: t, value: p.Value, pos: uint32(pos)})
		}
	}
	return x, nil
}

// CountRows is the number of rows holding term that keep is true for.
func (x *Index) CountRows(term uint32, keep func(row uint32) bool) int {
	n := 0
	for _, p := range x.postings[term] {
		if keep(p.Row) {
			n++
		}
	}
	return n
}
