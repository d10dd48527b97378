package vector

import (
	"fmt"
	"math/bits"
	"slices"
)

// Rows is a read-only view of stored vectors, held in chunks of a power of
// two rows each (an Arena's, or one chunk of them all: FlatRows): row i is
// row i mod ChunkRows of chunk i / ChunkRows, and its id is IDs[i]. Len is
// len(IDs); the chunks hold at least that many rows. Scans read a chunk's
// rows as one contiguous block (Run), so the kernels' contract — rows
// back to back, dim floats each — holds within a chunk.
//
// Rows may also be indirect (SlotRows): row i is then slot slots[i], slot
// s being row s mod ChunkRows of chunk s / ChunkRows, and Run returns the
// longest stretch of rows whose slots follow each other in one chunk.
type Rows struct {
	Dim int
	IDs []string
	// chunks[c] holds rows (or slots) c<<shift onwards; flatShift makes
	// one chunk hold every row.
	chunks [][]float32
	shift  uint8
	// slots, when not nil, maps row i to its slot.
	slots []uint32
}

// SlotRows returns rows held out of order: row i is slot slots[i], and
// slot s is row s&(1<<shift-1) of chunks[s>>shift] (chunks of 1<<shift
// rows of dim floats; a chunk no slot names may be nil). The view shares
// chunks and slots: it is valid while its owner keeps them unchanged.
func SlotRows(dim int, ids []string, chunks [][]float32, shift uint8, slots []uint32) Rows {
	if slots == nil {
		slots = []uint32{}
	}
	return Rows{Dim: dim, IDs: ids, chunks: chunks, shift: shift, slots: slots}
}

// flatShift is the shift of a single chunk: i>>flatShift is 0 and
// i&(1<<flatShift-1) is i for every row number an int can hold.
const flatShift = 62

// FlatRows returns the rows of one array: row i is data[i*dim:(i+1)*dim].
func FlatRows(data []float32, dim int, ids []string) Rows {
	return Rows{Dim: dim, IDs: ids, chunks: [][]float32{data}, shift: flatShift}
}

// Len is the number of rows.
func (r Rows) Len() int { return len(r.IDs) }

// Row returns row i (capacity cut at its end).
func (r Rows) Row(i int) []float32 {
	if r.slots != nil {
		s := int(r.slots[i])
		c, j := r.chunks[s>>r.shift], s&(1<<r.shift-1)
		return c[j*r.Dim : (j+1)*r.Dim : (j+1)*r.Dim]
	}
	c, j := r.chunks[i>>r.shift], i&(1<<r.shift-1)
	return c[j*r.Dim : (j+1)*r.Dim : (j+1)*r.Dim]
}

// Run returns rows [lo, end) back to back, where end is hi or the end of
// lo's chunk if that comes first; lo < hi. A caller walks [lo, hi) by
// advancing lo by len(run)/Dim.
func (r Rows) Run(lo, hi int) []float32 {
	if r.slots != nil {
		return r.slotRun(lo, hi)
	}
	c, j := r.chunks[lo>>r.shift], lo&(1<<r.shift-1)
	end := min(hi-lo+j, 1<<r.shift)
	if r.shift == flatShift {
		end = hi - lo + j
	}
	return c[j*r.Dim : end*r.Dim : end*r.Dim]
}

// slotRun is Run for indirect rows: rows lo.. as long as their slots are
// consecutive within lo's chunk.
func (r Rows) slotRun(lo, hi int) []float32 {
	first := int(r.slots[lo])
	c, j := r.chunks[first>>r.shift], first&(1<<r.shift-1)
	n := 1
	for lo+n < hi && int(r.slots[lo+n]) == first+n && (j+n)>>r.shift == 0 {
		n++
	}
	return c[j*r.Dim : (j+n)*r.Dim : (j+n)*r.Dim]
}

// Prefix is the first n rows (all of them if there are fewer).
func (r Rows) Prefix(n int) Rows {
	r.IDs = r.IDs[:min(n, len(r.IDs))]
	return r
}

// Clone copies the rows and ids into one array of their own, for a
// caller that keeps them past the view it read them from.
func (r Rows) Clone() Rows {
	data := make([]float32, 0, r.Len()*r.Dim)
	for lo := 0; lo < r.Len(); {
		run := r.Run(lo, r.Len())
		data = append(data, run...)
		lo += len(run) / r.Dim
	}
	return FlatRows(data, r.Dim, slices.Clone(r.IDs))
}

// Check reports an error when the chunks hold fewer than Len rows, or the
// dimension is not positive: the scans call it before reading a row.
func (r Rows) Check() error {
	if r.Dim <= 0 {
		return fmt.Errorf("rows of dimension %d", r.Dim)
	}
	n, have := r.Len(), 0
	if n == 0 {
		return nil
	}
	if r.slots != nil {
		if len(r.slots) < n {
			return fmt.Errorf("%d ids but only %d slots", n, len(r.slots))
		}
		return nil
	}
	for c, ch := range r.chunks {
		if r.shift != flatShift && c < len(r.chunks)-1 && len(ch) != r.Dim<<r.shift {
			return fmt.Errorf("chunk %d holds %d floats, want %d", c, len(ch), r.Dim<<r.shift)
		}
		have += len(ch) / r.Dim
		if have >= n {
			return nil
		}
	}
	return fmt.Errorf("%d ids but only %d rows of %d-D floats", n, have, r.Dim)
}

// rowsOf is the Rows view of a float32 arena's first len(ids) rows.
func rowsOf(a *Arena[float32], ids []string) Rows {
	return Rows{Dim: a.dim, IDs: ids, chunks: a.chunks, shift: a.shift}
}

// ArenaRows returns the rows of a as Rows with ids (one per row, at most
// a.Len()). The view shares a's chunks: it is valid until a's next write,
// and sees a row rewritten in place; a caller that keeps it across writes
// must hold what it reads still (a store's read lock) or clone the rows.
func ArenaRows(a *Arena[float32], ids []string) Rows { return rowsOf(a, ids) }

// log2 is the exponent of a power of two.
func log2(n int) uint8 { return uint8(bits.TrailingZeros(uint(n))) }
