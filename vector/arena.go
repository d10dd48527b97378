package vector

import (
	"fmt"
	"slices"
	"unsafe"
)

// Arena is a growable array of rows of dim elements (float32 rows, int8
// codes) kept in chunks of ChunkRows rows, so growing never copies what
// is stored nor holds two copies at once: a store of a million 1536-D
// rows that grew by doubling one arena held up to twice its rows (the
// new arena and, until the collector freed it, the old one). Only the
// first chunk grows by copying, while the arena is smaller than one chunk,
// so a small collection costs what it holds. Every chunk starts on a
// 64-byte boundary, and full chunks are advised to use transparent huge
// pages as Aligned's large arenas are.
//
// Arena is not safe for concurrent use; its owner guards it (writes
// exclusive, reads shared) and views of it (ArenaRows, Run) are valid
// until the next write.
type Arena[T float32 | int8] struct {
	dim    int
	shift  uint8 // chunk c holds rows c<<shift onwards
	gentle bool  // the first chunk grows by a quarter, not by doubling
	chunks [][]T
	n      int
}

// ChunkBytes is the size an Arena's chunks aim at: the largest power of
// two rows that fits in it makes a chunk (within MinChunkRows and
// MaxChunkRows). At 32 MiB, 1536-D float32 rows make chunks of 4 096 rows
// (24 MiB) and their int8 codes chunks of 16 384 rows (24 MiB): past
// Aligned's 16 MiB huge-page threshold, so scans keep their TLB reach;
// small enough that the unused tail of a store's last chunk stays a few
// percent of a large store; and a million rows are 245 chunks, a table
// the scans index in a shift.
const ChunkBytes = 32 << 20

// Chunk rows bounds. MinChunkRows is a multiple of the scans' blocks
// (BlockRows, quant's 512), so a block never spans two chunks.
const (
	MinChunkRows = 512
	MaxChunkRows = 1 << 16
)

// firstChunkRows is how many rows an arena's first chunk starts with; it
// doubles from there (a quarter for gentle arenas) up to a chunk.
const firstChunkRows = 64

// ChunkRows is the number of rows an Arena of rows of rowBytes bytes puts
// in a chunk: the largest power of two whose rows fit in ChunkBytes,
// within [MinChunkRows, MaxChunkRows].
func ChunkRows(rowBytes int) int {
	n := MinChunkRows
	for n < MaxChunkRows && 2*n*rowBytes <= ChunkBytes {
		n *= 2
	}
	return n
}

// NewArena returns an empty arena of dim-element rows in chunks of
// chunkRows rows, a power of two; 0 picks ChunkRows for the row's size.
// Chunks smaller than a scan block work (runs end at chunk edges) but are
// for tests of those edges.
func NewArena[T float32 | int8](dim, chunkRows int) *Arena[T] {
	if dim <= 0 {
		panic(fmt.Sprintf("vector: arena of dimension %d", dim))
	}
	if chunkRows == 0 {
		var zero T
		chunkRows = ChunkRows(dim * int(unsafe.Sizeof(zero)))
	}
	if chunkRows <= 0 || chunkRows&(chunkRows-1) != 0 || chunkRows > 1<<40 {
		panic(fmt.Sprintf("vector: arena chunks of %d rows", chunkRows))
	}
	return &Arena[T]{dim: dim, shift: log2(chunkRows)}
}

// NewFlatArena returns an empty arena kept in one chunk, with room for
// rows rows, that grows by a quarter (at least 16 rows) each time it
// must. It is for many small arrays (vector/ivf's inverted lists:
// hundreds of a few hundred rows each), where a chunk each would be
// mostly empty and doubling would leave a list built at its exact size
// half empty after one more row.
func NewFlatArena[T float32 | int8](dim, rows int) *Arena[T] {
	if dim <= 0 {
		panic(fmt.Sprintf("vector: arena of dimension %d", dim))
	}
	a := &Arena[T]{dim: dim, shift: flatShift, gentle: true}
	if rows > 0 {
		a.chunks = [][]T{aligned[T](rows * dim)}
	}
	return a
}

// Len is the number of rows.
func (a *Arena[T]) Len() int { return a.n }

// Dim is the number of elements a row.
func (a *Arena[T]) Dim() int { return a.dim }

// ChunkRows is the number of rows a full chunk holds.
func (a *Arena[T]) ChunkRows() int { return 1 << a.shift }

// Row returns row i (capacity cut at its end); it aliases the arena.
func (a *Arena[T]) Row(i int) []T {
	if i < 0 || i >= a.n {
		panic(fmt.Sprintf("vector: arena row %d of %d", i, a.n))
	}
	c, j := a.chunks[i>>a.shift], i&(1<<a.shift-1)
	return c[j*a.dim : (j+1)*a.dim : (j+1)*a.dim]
}

// Run returns rows [lo, end) back to back, where end is hi or the end of
// lo's chunk if that comes first; lo < hi <= Len.
func (a *Arena[T]) Run(lo, hi int) []T {
	if lo < 0 || hi > a.n || lo >= hi {
		panic(fmt.Sprintf("vector: arena rows [%d, %d) of %d", lo, hi, a.n))
	}
	c, j := a.chunks[lo>>a.shift], lo&(1<<a.shift-1)
	end := hi - lo + j
	if a.shift != flatShift {
		end = min(end, 1<<a.shift)
	}
	return c[j*a.dim : end*a.dim : end*a.dim]
}

// Append adds a row at the end and returns it for the caller to fill; it
// holds whatever the memory held (a truncated row's values, or zeros).
func (a *Arena[T]) Append() []T {
	a.Reserve(1)
	a.n++
	return a.Row(a.n - 1)
}

// Reserve makes room for n more rows, so the next n Appends allocate
// nothing.
func (a *Arena[T]) Reserve(n int) {
	need := a.n + n
	for a.capRows() < need {
		if len(a.chunks) <= 1 && (a.shift == flatShift || a.capRows() < 1<<a.shift) {
			a.growFirst(need)
			continue
		}
		a.chunks = append(a.chunks, alignedChunk[T](a.dim<<a.shift))
	}
}

// growFirst replaces the first chunk by a larger one (at most a chunk),
// copying its rows: the one copy an arena makes.
func (a *Arena[T]) growFirst(need int) {
	have := a.capRows()
	rows := max(need, 2*have, firstChunkRows)
	if a.gentle {
		rows = max(need, have+have/4, 16)
	}
	if a.shift != flatShift {
		rows = min(rows, 1<<a.shift)
	}
	next := alignedChunk[T](rows * a.dim)
	if a.gentle {
		next = aligned[T](rows * a.dim)
	}
	if len(a.chunks) == 1 {
		copy(next, a.chunks[0][:a.n*a.dim])
		a.chunks[0] = nil
	}
	a.chunks = [][]T{next}
}

// capRows is how many rows the chunks hold.
func (a *Arena[T]) capRows() int {
	switch len(a.chunks) {
	case 0:
		return 0
	case 1:
		return len(a.chunks[0]) / a.dim
	}
	return len(a.chunks) << a.shift
}

// Truncate drops the rows from n on. Chunks left empty are freed, but for
// one kept for the next rows, so deletes and appends across a chunk's
// edge do not allocate a chunk each time.
func (a *Arena[T]) Truncate(n int) {
	if n < 0 || n > a.n {
		panic(fmt.Sprintf("vector: truncate an arena of %d rows to %d", a.n, n))
	}
	a.n = n
	if a.shift == flatShift {
		return
	}
	used := (n + 1<<a.shift - 1) >> a.shift
	for len(a.chunks) > max(used+1, 1) {
		a.chunks[len(a.chunks)-1] = nil
		a.chunks = a.chunks[:len(a.chunks)-1]
	}
}

// Clone returns a copy of the arena's chunk table, for a view that must
// see the rows as they are after later Appends move the table (the
// chunks themselves are shared).
func (a *Arena[T]) Clone() *Arena[T] {
	c := *a
	c.chunks = slices.Clone(a.chunks)
	return &c
}

// SameChunk reports whether row i is held in the same memory in a and b
// (b a Clone of a, or a itself): a write to the row in one is seen in the
// other.
func (a *Arena[T]) SameChunk(b *Arena[T], i int) bool {
	c := i >> a.shift
	return c < len(a.chunks) && c < len(b.chunks) && len(a.chunks[c]) > 0 && len(b.chunks[c]) > 0 &&
		unsafe.SliceData(a.chunks[c]) == unsafe.SliceData(b.chunks[c])
}

// Bytes is the memory the chunks take.
func (a *Arena[T]) Bytes() int {
	var zero T
	n := 0
	for _, c := range a.chunks {
		n += len(c)
	}
	return n * int(unsafe.Sizeof(zero))
}

// Spare is room for an arena's next rows, made ready by Prepare without
// the owner's write lock, for Adopt to install under it.
type Spare[T float32 | int8] struct {
	a *Arena[T]
	n int
	// was is a's chunk table when prepared; chunks is the table with the
	// room (the first chunk grown, its rows copied, or chunks added).
	was, chunks [][]T
}

// Prepare makes ready what Reserve(n) would, without changing the arena,
// so a writer can do the slow part before taking its write lock: the
// chunks Reserve would allocate are allocated, a growing first chunk's
// rows are copied into its replacement, and the memory pages the next n
// rows will occupy are faulted in (PopulateWrite), so the writes that
// follow under the lock neither allocate nor stop in the kernel. It only
// reads the arena, so the owner's read lock is enough. It returns nil
// when Reserve(n) would allocate nothing (the pages are populated all the
// same).
func (a *Arena[T]) Prepare(n int) *Spare[T] {
	b := a.Clone()
	b.Reserve(n)
	for lo, hi := a.n, a.n+n; lo < hi; {
		run := b.runUnchecked(lo, hi)
		PopulateWrite(run)
		lo += len(run) / a.dim
	}
	if len(b.chunks) == len(a.chunks) && (len(a.chunks) == 0 || unsafe.SliceData(b.chunks[0]) == unsafe.SliceData(a.chunks[0])) {
		return nil
	}
	return &Spare[T]{a: a, n: a.n, was: slices.Clone(a.chunks), chunks: b.chunks}
}

// Adopt installs s's room in a and reports whether it did: only when s
// was prepared for a and a still has the rows and chunks it had then. The
// arena cannot see rows written in place (through Row), so the caller
// must know, under its own guard, that none was written since Prepare
// (a grown first chunk holds the rows as Prepare copied them). A refused
// Adopt changes nothing: Reserve and Append allocate as before. A nil s
// is refused.
func (a *Arena[T]) Adopt(s *Spare[T]) bool {
	if s == nil || s.a != a || s.n != a.n || len(s.was) != len(a.chunks) {
		return false
	}
	for c := range s.was {
		if unsafe.SliceData(s.was[c]) != unsafe.SliceData(a.chunks[c]) || len(s.was[c]) != len(a.chunks[c]) {
			return false
		}
	}
	a.chunks = s.chunks
	return true
}

// runUnchecked is Run for rows the chunks hold but Len may not count yet
// (lo < hi <= capRows).
func (a *Arena[T]) runUnchecked(lo, hi int) []T {
	c, j := a.chunks[lo>>a.shift], lo&(1<<a.shift-1)
	end := hi - lo + j
	if a.shift != flatShift {
		end = min(end, 1<<a.shift)
	}
	return c[j*a.dim : end*a.dim : end*a.dim]
}
