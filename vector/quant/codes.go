package quant

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/trawl-search/trawl/vector"
)

// Codes holds one int8 code per element of a set of rows, in a
// vector.Arena (64-byte aligned chunks, so a growing shard never copies
// its codes), plus each row's squared float32 norm (for Euclidean
// candidates: |q-x|² = |q|² + |x|² - 2q·x) and the sum of its codes (for
// the AVX2 tile's query offset), eight bytes a row beside the codes. It
// mirrors a shard's float32 rows row for row: Append, Set and Delete do to
// the codes what the shard does to its rows, so row i of the codes is row
// i of the floats.
//
// Codes is not safe for concurrent use; the caller guards it as it
// guards the float32 rows (writes exclusive, scans shared).
type Codes struct {
	scale Scale
	dim   int
	codes *vector.Arena[int8]
	norms []float32 // |x|² of each row, float64 sum rounded once
	sums  []int32   // Σ codes of each row, for the offset tile
}

// NewCodes returns empty codes for rows encoded with s.
func NewCodes(s Scale) *Codes {
	if s.Dim() == 0 {
		panic("quant: codes with the zero Scale")
	}
	return &Codes{scale: s, dim: s.Dim(), codes: vector.NewArena[int8](s.Dim(), 0)}
}

// NewCodesCap returns empty codes for rows encoded with s, kept in one
// array with room for rows rows and growing by a quarter (at least 16
// rows) each time they must (vector.NewFlatArena). It is for indexes that
// keep many small arrays, such as vector/ivf's inverted lists (hundreds
// of a few hundred rows each): a chunk each would be mostly empty, and
// doubling would leave a list built at its exact size half empty after
// one more row.
func NewCodesCap(s Scale, rows int) *Codes {
	if s.Dim() == 0 {
		panic("quant: codes with the zero Scale")
	}
	rows = max(rows, 0)
	return &Codes{scale: s, dim: s.Dim(), codes: vector.NewFlatArena[int8](s.Dim(), rows),
		norms: make([]float32, 0, rows), sums: make([]int32, 0, rows)}
}

// Encode returns the codes of every row of rows under s, as Append would
// build them one by one. Rebuilding the codes of a loaded shard is this
// call, so it encodes on every core (a 1536-D row takes ~8 µs on one);
// each row's codes depend on that row alone, so the split changes nothing.
func Encode(s Scale, rows vector.Rows) (*Codes, error) {
	if rows.Dim != s.Dim() {
		return nil, fmt.Errorf("quant: %d-D rows with a %d-D scale", rows.Dim, s.Dim())
	}
	if err := rows.Check(); err != nil {
		return nil, fmt.Errorf("quant: %w", err)
	}
	n := rows.Len()
	c := NewCodes(s)
	c.codes.Reserve(n)
	for range n {
		c.codes.Append()
	}
	c.norms = make([]float32, n)
	c.sums = make([]int32, n)
	encode := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := rows.Row(i)
			s.Encode(c.Row(i), row)
			c.norms[i] = norm(row)
			c.sums[i] = codeSum(c.Row(i))
		}
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), n/minEncodeRows))
	per := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := min(w*per, n), min((w+1)*per, n)
		wg.Go(func() { encode(lo, hi) })
	}
	wg.Wait()
	return c, nil
}

// FromEncoded returns the codes of n rows encoded with s before and kept
// elsewhere (a segment's codes file): row(i) gives row i's codes and the
// squared norm of the float32 row they were encoded from, as Row and Norm
// return them. The codes are copied; nothing is encoded, so the caller
// must know they were encoded with s (the same scale, the same rows).
func FromEncoded(s Scale, n int, row func(i int) (codes []int8, norm float32)) (*Codes, error) {
	c := NewCodes(s)
	c.codes.Reserve(n)
	c.norms = make([]float32, n)
	c.sums = make([]int32, n)
	for i := range n {
		codes, nrm := row(i)
		if len(codes) != c.dim {
			return nil, fmt.Errorf("quant: row %d has %d codes, the scale %d", i, len(codes), c.dim)
		}
		dst := c.codes.Append()
		copy(dst, codes)
		c.norms[i] = nrm
		c.sums[i] = codeSum(dst)
	}
	return c, nil
}

// minEncodeRows is the fewest rows Encode gives a goroutine (~30 ms of
// work at 1536-D), below which starting one costs more than it saves.
const minEncodeRows = 4096

// Scale is the Scale the codes were encoded with.
func (c *Codes) Scale() Scale { return c.scale }

// Len is the number of rows.
func (c *Codes) Len() int { return len(c.norms) }

// Dim is the number of codes per row.
func (c *Codes) Dim() int { return c.dim }

// Row returns the codes of row i; the slice aliases the arena.
func (c *Codes) Row(i int) []int8 { return c.codes.Row(i) }

// run returns the codes of rows [lo, end) back to back, end being hi or
// the end of lo's chunk (vector.Arena.Run).
func (c *Codes) run(lo, hi int) []int8 { return c.codes.Run(lo, hi) }

// Norm returns the squared norm of the float32 row i was encoded from.
func (c *Codes) Norm(i int) float32 { return c.norms[i] }

// Bytes is the memory the codes use (arena chunks, norms and sums).
func (c *Codes) Bytes() int { return c.codes.Bytes() + 4*cap(c.norms) + 4*cap(c.sums) }

// Encoded is one row's codes encoded ahead of storing them (EncodeRow),
// so a store can encode a batch before it takes its write lock and hold
// the lock only to copy them in.
type Encoded struct {
	Codes []int8
	Norm  float32
	Sum   int32
}

// EncodeRow encodes row under s into dst (len s.Dim()) as Append would.
func EncodeRow(s Scale, dst []int8, row []float32) Encoded {
	s.Encode(dst, row)
	return Encoded{Codes: dst, Norm: norm(row), Sum: codeSum(dst)}
}

// Prepare makes room for n more rows without changing the codes
// (vector.Arena.Prepare): a writer calls it under its read lock, then
// Adopt under its write lock. nil when there is nothing to allocate.
func (c *Codes) Prepare(n int) *vector.Spare[int8] { return c.codes.Prepare(n) }

// Adopt installs room Prepare made, when the codes are as they were then
// (vector.Arena.Adopt: the caller must know no row was written since),
// and reports whether it did.
func (c *Codes) Adopt(s *vector.Spare[int8]) bool { return c.codes.Adopt(s) }

// AppendEncoded adds e, encoded with c's scale (EncodeRow with Scale()),
// as a new last row.
func (c *Codes) AppendEncoded(e Encoded) {
	copy(c.codes.Append(), e.Codes)
	c.norms = append(c.norms, e.Norm)
	c.sums = append(c.sums, e.Sum)
}

// SetEncoded replaces row i with e, encoded with c's scale.
func (c *Codes) SetEncoded(i int, e Encoded) {
	copy(c.Row(i), e.Codes)
	c.norms[i] = e.Norm
	c.sums[i] = e.Sum
}

// Append encodes row as a new last row.
func (c *Codes) Append(row []float32) {
	dst := c.codes.Append()
	c.scale.Encode(dst, row)
	c.norms = append(c.norms, norm(row))
	c.sums = append(c.sums, codeSum(dst))
}

// Set re-encodes row i (an overwrite of an existing id).
func (c *Codes) Set(i int, row []float32) {
	c.scale.Encode(c.Row(i), row)
	c.norms[i] = norm(row)
	c.sums[i] = codeSum(c.Row(i))
}

// Delete removes row i by moving the last row into it, as the shard's
// rows do, so rows stay dense.
func (c *Codes) Delete(i int) {
	last := c.Len() - 1
	if i < 0 || i > last {
		panic(fmt.Sprintf("quant: delete row %d of %d", i, last+1))
	}
	if i != last {
		copy(c.Row(i), c.Row(last))
		c.norms[i] = c.norms[last]
		c.sums[i] = c.sums[last]
	}
	c.codes.Truncate(last)
	c.norms = c.norms[:last]
	c.sums = c.sums[:last]
}

// norm is |x|² summed in float64 in index order and rounded once. Every
// product of two float32 is exact in float64, so the result is the same
// on every machine whether or not the compiler fuses the multiply-add.
func norm(x []float32) float32 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return float32(s)
}
