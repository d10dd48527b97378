package store

import (
	"fmt"
	"maps"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/trawl-search/trawl/shard/store/sparse"
	"github.com/trawl-search/trawl/vector"
)

// namedSpace is one named dense vector's rows, parallel to the store's
// ids: row i is ids[i]'s vector of that name when has holds i, and zeros
// (never read) when the point lacks it. Keeping a row for every point
// costs a point without the vector its dim floats, but makes the delete's
// swap-with-last and a snapshot view's copy-on-write the unnamed rows'
// own, row number for row number.
type namedSpace struct {
	dim  int
	rows *vector.Arena[float32]
	has  *roaring.Bitmap
}

// WithNamed gives the store a named dense vector space of each size in
// dims (name → dimension). Its rows live in memory whatever the unnamed
// rows' placement.
func WithNamed(dims map[string]int) MemoryOption {
	return func(m *Memory) {
		if len(dims) == 0 {
			return
		}
		m.named = make(map[string]*namedSpace, len(dims))
		for name, dim := range dims {
			m.named[name] = &namedSpace{dim: dim, rows: vector.NewArena[float32](dim, 0), has: roaring.New()}
		}
	}
}

// NamedNames are the store's named dense vectors, ascending.
func (m *Memory) NamedNames() []string { return slices.Sorted(maps.Keys(m.named)) }

// NamedDim is the dimension of the named vector name, 0 when the store
// has none of that name.
func (m *Memory) NamedDim(name string) int {
	if s, ok := m.named[name]; ok {
		return s.dim
	}
	return 0
}

// appendNamedLocked adds row i (the new last row) to every space, with
// the vectors vs holds. m.mu must be held for writing.
func (m *Memory) appendNamedLocked(i int, vs map[string][]float32) {
	for name, s := range m.named {
		row := s.rows.Append()
		if v, ok := vs[name]; ok {
			copy(row, v)
			s.has.Add(uint32(i))
			continue
		}
		clear(row)
	}
}

// setNamedLocked writes row i's named vectors: those vs holds, and with
// all (an upsert, which replaces a point's vectors) removes the others.
// m.mu must be held for writing.
func (m *Memory) setNamedLocked(i int, vs map[string][]float32, all bool) {
	for name, s := range m.named {
		v, ok := vs[name]
		switch {
		case ok:
			m.view.preserveNamed(name, s.rows, i)
			copy(s.rows.Row(i), v)
			s.has.Add(uint32(i))
		case all:
			s.has.Remove(uint32(i))
		}
	}
}

// deleteNamedLocked follows deleteLocked: the last row moves into slot i
// and every space shrinks to last. m.mu must be held for writing.
func (m *Memory) deleteNamedLocked(i, last int) {
	for name, s := range m.named {
		if i != last {
			m.view.preserveNamed(name, s.rows, i)
			copy(s.rows.Row(i), s.rows.Row(last))
			if s.has.Contains(uint32(last)) {
				s.has.Add(uint32(i))
			} else {
				s.has.Remove(uint32(i))
			}
		} else {
			s.has.Remove(uint32(i))
		}
		s.has.Remove(uint32(last))
		s.rows.Truncate(last)
	}
}

// resetNamedLocked empties every space, sized for rows rows. m.mu must
// be held for writing.
func (m *Memory) resetNamedLocked(rows int) {
	for _, s := range m.named {
		s.rows = vector.NewArena[float32](s.dim, 0)
		s.rows.Reserve(rows)
		s.has = roaring.New()
	}
}

// namedOf returns copies of row i's named vectors, nil when it has none.
// m.mu must be held.
func (m *Memory) namedOf(i int) map[string][]float32 {
	var out map[string][]float32
	for name, s := range m.named {
		if !s.has.Contains(uint32(i)) {
			continue
		}
		if out == nil {
			out = map[string][]float32{}
		}
		out[name] = slices.Clone(s.rows.Row(i))
	}
	return out
}

// namedBytes is the memory of the named spaces. m.mu must be held.
func (m *Memory) namedBytes() int {
	n := 0
	for _, s := range m.named {
		n += s.rows.Bytes() + int(s.has.GetSizeInBytes())
	}
	return n
}

// NamedRows is the scan's view of the named vector name: its rows (every
// point's, zeros where a point lacks it) and the rows holding it,
// ascending, of those sel names (every row when sel is nil). It is an
// error when the store has no vector of that name.
func (v *ScanView) NamedRows(name string, sel []uint32) (vector.Rows, []uint32, error) {
	s, ok := v.m.named[name]
	if !ok {
		return vector.Rows{}, nil, fmt.Errorf("no named vector %q", name)
	}
	rows := vector.ArenaRows(s.rows, v.m.ids)
	if sel == nil {
		return rows, s.has.ToArray(), nil
	}
	out := make([]uint32, 0, len(sel))
	for _, r := range sel {
		if s.has.Contains(r) {
			out = append(out, r)
		}
	}
	return rows, out, nil
}

// NamedVectors returns id's named vectors as the scan reads them (not
// copies: encode them before the view is released), nil when it has
// none.
func (v *ScanView) NamedVectors(id string) map[string][]float32 {
	i, ok := v.m.index[id]
	if !ok {
		return nil
	}
	var out map[string][]float32
	for name, s := range v.m.named {
		if s.has.Contains(uint32(i)) {
			if out == nil {
				out = map[string][]float32{}
			}
			out[name] = s.rows.Row(i)
		}
	}
	return out
}

// namedView is one named space as a snapshot view opened it: the
// chunk table and presence then, and the rows overwritten since that the
// view had yet to read.
type namedView struct {
	rows  *vector.Arena[float32]
	has   *roaring.Bitmap
	saved map[int][]float32
}

// openNamedViews freezes every space for a view. m.mu must be held for
// writing.
func (m *Memory) openNamedViews() map[string]*namedView {
	if len(m.named) == 0 {
		return nil
	}
	out := make(map[string]*namedView, len(m.named))
	for name, s := range m.named {
		out[name] = &namedView{rows: s.rows.Clone(), has: s.has.Clone(), saved: map[int][]float32{}}
	}
	return out
}

// preserveNamed is preserve for the named space name. A nil view does
// nothing.
func (v *View) preserveNamed(name string, rows *vector.Arena[float32], i int) {
	if v == nil || i < v.read || i >= len(v.ids) {
		return
	}
	nv := v.named[name]
	if nv == nil || !rows.SameChunk(nv.rows, i) {
		return
	}
	if _, ok := nv.saved[i]; ok {
		return
	}
	nv.saved[i] = slices.Clone(nv.rows.Row(i))
}

// namedRow is row i's named vectors as the view opened, nil when it had
// none; the store's read lock must be held. The slices must not be
// retained.
func (v *View) namedRow(i int) map[string][]float32 {
	var out map[string][]float32
	for name, nv := range v.named {
		if !nv.has.Contains(uint32(i)) {
			continue
		}
		row, ok := nv.saved[i]
		if !ok {
			row = nv.rows.Row(i)
		}
		if out == nil {
			out = make(map[string][]float32, len(v.named))
		}
		out[name] = row
	}
	return out
}

// dropVectors plans the removal of the named dense and sparse vectors
// names from d (delete_vectors): a vector set earlier in the list is
// forgotten, a stored one removed when the list applies.
func (d *pendingDoc) dropVectors(m *Memory, names []string) {
	for _, name := range names {
		if _, ok := m.named[name]; ok {
			delete(d.named, name)
			if d.dropNamed == nil {
				d.dropNamed = map[string]bool{}
			}
			d.dropNamed[name] = true
		}
		if _, ok := m.sparse[name]; ok {
			if d.sparse == nil {
				d.sparse = map[string]sparse.Vector{}
			}
			d.sparse[name] = sparse.Vector{} // an empty vector is none
		}
	}
}

// dropNamedLocked removes row i's named vectors names. m.mu must be held
// for writing.
func (m *Memory) dropNamedLocked(i int, names map[string]bool) {
	for name := range names {
		if s, ok := m.named[name]; ok {
			s.has.Remove(uint32(i))
		}
	}
}
