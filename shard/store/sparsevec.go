package store

import (
	"container/heap"
	"fmt"
	"maps"
	"slices"

	"github.com/trawl-search/trawl/shard/store/sparse"
	"github.com/trawl-search/trawl/vector"
)

// WithSparse gives the store an inverted index (package sparse) for each
// named sparse vector of its collection.
func WithSparse(names ...string) MemoryOption {
	return func(m *Memory) {
		if len(names) == 0 {
			return
		}
		m.sparse = make(map[string]*sparse.Index, len(names))
		for _, n := range names {
			m.sparse[n] = sparse.New()
		}
	}
}

// SparseNames are the store's sparse vectors, ascending.
func (m *Memory) SparseNames() []string { return slices.Sorted(maps.Keys(m.sparse)) }

// setSparseLocked makes row i's sparse vectors vs: every name the store
// indexes, a name absent from vs leaving the row without one (an upsert
// replaces a point's vectors). m.mu must be held for writing.
func (m *Memory) setSparseLocked(i int, vs map[string]sparse.Vector) {
	m.sparseGen++
	for name, x := range m.sparse {
		x.Set(i, vs[name])
	}
}

// updateSparseLocked sets only the named vectors of row i (an update of
// some of a point's vectors). m.mu must be held for writing.
func (m *Memory) updateSparseLocked(i int, vs map[string]sparse.Vector) {
	m.sparseGen++
	for name, v := range vs {
		if x, ok := m.sparse[name]; ok {
			x.Set(i, v)
		}
	}
}

// deleteSparseLocked follows deleteLocked: row i's vectors go, the last
// row's move into slot i, and the slots shrink to last. m.mu must be held
// for writing.
func (m *Memory) deleteSparseLocked(i, last int) {
	m.sparseGen++
	for _, x := range m.sparse {
		x.Remove(i)
		if i != last {
			x.Move(last, i)
		}
		x.Truncate(last)
	}
}

// resetSparseLocked empties every sparse index. m.mu must be held for
// writing.
func (m *Memory) resetSparseLocked() {
	m.sparseGen++
	for name := range m.sparse {
		m.sparse[name] = sparse.New()
	}
}

// sparseOf returns copies of row i's sparse vectors, nil when it has
// none. m.mu must be held.
func (m *Memory) sparseOf(i int) map[string]sparse.Vector {
	var out map[string]sparse.Vector
	for name, x := range m.sparse {
		if v, ok := x.Vector(i); ok {
			if out == nil {
				out = map[string]sparse.Vector{}
			}
			out[name] = v
		}
	}
	return out
}

// sparseBytes is the memory of the sparse indexes. m.mu must be held.
func (m *Memory) sparseBytes() int {
	n := 0
	for _, x := range m.sparse {
		n += x.Bytes()
	}
	return n
}

// SparseStats is one sparse vector's statistics for collection-wide idf.
type SparseStats struct {
	// Docs is every document counted; Vectors those holding a vector of
	// the name (Qdrant's N).
	Docs    int
	Vectors int
	// DF is, per asked term, the documents whose vector holds it.
	DF []int
}

// SparseStats counts the documents and the document frequency of terms
// of the sparse vector name, under the read lock. keep, when set, counts
// only the documents it is true for (the hash slots a read answers for).
func (m *Memory) SparseStats(name string, terms []uint32, keep func(id string) bool) (SparseStats, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	x, ok := m.sparse[name]
	if !ok {
		return SparseStats{}, fmt.Errorf("no sparse vector %q", name)
	}
	out := SparseStats{Docs: len(m.ids), Vectors: x.Docs(), DF: make([]int, len(terms))}
	if keep == nil {
		for i, t := range terms {
			out.DF[i] = x.DF(t)
		}
		return out, nil
	}
	kept := keepRows(m.ids, nil, keep)
	out.Docs, out.Vectors = len(kept), 0
	for _, r := range kept {
		if x.Has(int(r)) {
			out.Vectors++
		}
	}
	for i, t := range terms {
		out.DF[i] = x.CountRows(t, func(row uint32) bool { return keep(m.ids[row]) })
	}
	return out, nil
}

// SparseQuery is one sparse search of a scan.
type SparseQuery struct {
	Name    string
	Vector  sparse.Vector
	Weights []float32 // nil: 1 each
	K       int
	Exclude string // an id left out of the answer
}

// SparseSearch answers q over the rows sel names (every row when nil,
// else ascending): the exact top K by sparse dot product, best first,
// ties by id ascending.
func (v *ScanView) SparseSearch(q SparseQuery, sel []uint32) ([]vector.Hit, error) {
	m := v.m
	x, ok := m.sparse[q.Name]
	if !ok {
		return nil, fmt.Errorf("no sparse vector %q", q.Name)
	}
	sq := sparse.Query{Vector: q.Vector, Weights: q.Weights}
	if sel != nil {
		allow := rowSetOf(sel, len(m.ids))
		sq.Allow = allow
	}
	h := &hitHeap{}
	for _, s := range x.Score(sq) {
		id := m.ids[s.Row]
		if id == q.Exclude && q.Exclude != "" {
			continue
		}
		hit := vector.Hit{ID: id, Score: s.Score}
		if h.Len() < q.K {
			heap.Push(h, hit)
			continue
		}
		if vector.DotProduct.Better(hit, (*h)[0]) {
			(*h)[0] = hit
			heap.Fix(h, 0)
		}
	}
	out := make([]vector.Hit, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(vector.Hit)
	}
	return out, nil
}

// SparseVectors returns copies of id's sparse vectors, nil when it has
// none.
func (v *ScanView) SparseVectors(id string) map[string]sparse.Vector {
	i, ok := v.m.index[id]
	if !ok {
		return nil
	}
	return v.m.sparseOf(i)
}

// rowSetOf is a membership test for the rows of sel, each below n.
func rowSetOf(sel []uint32, n int) func(uint32) bool {
	bits := make([]uint64, (n+63)/64)
	for _, r := range sel {
		bits[r/64] |= 1 << (r % 64)
	}
	return func(r uint32) bool { return bits[r/64]&(1<<(r%64)) != 0 }
}

// hitHeap keeps the worst of the best hits so far at its root.
type hitHeap []vector.Hit

func (h hitHeap) Len() int           { return len(h) }
func (h hitHeap) Less(i, j int) bool { return vector.DotProduct.Better(h[j], h[i]) }
func (h hitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)        { *h = append(*h, x.(vector.Hit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// NamedPostings is one sparse index in its snapshot form.
type NamedPostings struct {
	Name     string
	Postings []byte
}

// encodeSparseLocked is every sparse index in its snapshot form, names
// ascending. m.mu must be held.
func (m *Memory) encodeSparseLocked() []NamedPostings {
	var out []NamedPostings
	for _, name := range m.SparseNames() {
		out = append(out, NamedPostings{Name: name, Postings: m.sparse[name].AppendBinary(nil)})
	}
	return out
}

// Sparse is the view's sparse indexes in their snapshot form, names
// ascending (nil when the store has none).
func (v *View) Sparse() []NamedPostings { return v.sparse }

// RestoreSparse installs the postings of a snapshot's sparse indexes
// once its rows are restored (Reset then rows, or RestoreSegments): row
// numbers are the snapshot's, which a restore keeps. A name the store
// does not index is an error, as is one it indexes but ps lacks: the
// snapshot and the catalog it came with disagree.
func (m *Memory) RestoreSparse(ps []NamedPostings) error {
	m.lock()
	defer m.mu.Unlock()
	got := map[string]*sparse.Index{}
	for _, p := range ps {
		if _, ok := m.sparse[p.Name]; !ok {
			return fmt.Errorf("snapshot holds postings of sparse vector %q, which the collection does not have", p.Name)
		}
		x, err := sparse.Decode(p.Postings, len(m.ids))
		if err != nil {
			return fmt.Errorf("sparse vector %q: %w", p.Name, err)
		}
		got[p.Name] = x
	}
	for name := range m.sparse {
		if _, ok := got[name]; !ok {
			return fmt.Errorf("snapshot holds no postings of sparse vector %q", name)
		}
	}
	m.sparse = got
	m.sparseGen++
	return nil
}
