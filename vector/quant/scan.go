package quant

import (
	"context"
	"fmt"
	"runtime"

	"github.com/trawl-search/trawl/vector"
)

// Oversample bounds. A query asks its codes for oversample·k candidates
// and re-scores those exactly. Measured (bench/KERNELS.md, 100 queries):
// recall@10 is 0.93–0.95 at oversample 1 and 1.0 from 2 on the clustered,
// Gaussian and anisotropic corpora; 4 is the default for margin (a k=1
// query then still re-scores four rows, and real data is less regular)
// because it is nearly free: 40 re-scored rows of a top-10 query cost
// ~50 µs beside a 26 ms scan of 200 000 codes.
const (
	DefaultOversample = 4
	MaxOversample     = 32
)

// minCandidateK is the smallest k the candidate count is computed for: a
// query asks for oversample·max(k, minCandidateK) candidates. A top-1
// query at oversample 4 would otherwise re-score four rows, where one
// unlucky rounding loses the answer; forty cost ~35 µs more.
const minCandidateK = 10

// BlockRows is how many rows of codes a scan scores before it looks at
// its context again: 768 KiB of 1536-D codes, half of what a float32
// block reads, and a batch's int32 sums for it stay in L2.
const BlockRows = 512

// Scan returns, for each query, its q.K best rows best first, ties by id
// ascending, leaving out q.Exclude, in two steps: one pass over the codes
// (every block scored against the whole batch while it is in cache, large
// scans split across cores, the context checked every block) keeps each
// query's best min(oversample·max(K, 10), rows) candidates by code score
// (see minCandidateK); then f
// re-scores those candidates from rows exactly, as f.Scan would score
// them. Returned scores are exact; only the candidate set is approximate.
//
// codes must mirror rows (same length and dimension, row i encoded from
// row i). For Cosine, rows and queries are unit vectors, as for
// vector.Kernel.Scan. oversample is 1..MaxOversample (a query's
// "oversample"), or 0 for DefaultOversample; a query with "exact": true
// is not for this scan but for f.Scan. A scan whose context ends returns its error
// (wrapped) and no hits.
func (k Kernel) Scan(ctx context.Context, f vector.Kernel, m vector.Metric, rows vector.Rows, codes *Codes, queries []vector.Query, oversample int) ([][]vector.Hit, error) {
	return k.scan(ctx, f, m, rows, codes, queries, oversample, nil, runtime.GOMAXPROCS(0))
}

// ScanSelected is Scan over only the rows sel names (ascending, distinct
// row numbers): a filtered search, whose candidates all come from the
// selected rows and whose cost follows len(sel). Scattered rows' codes are
// gathered into a block buffer first; their scores are the same as in
// place. An empty sel returns empty hit lists.
func (k Kernel) ScanSelected(ctx context.Context, f vector.Kernel, m vector.Metric, rows vector.Rows, codes *Codes, queries []vector.Query, oversample int, sel []uint32) ([][]vector.Hit, error) {
	if sel == nil {
		sel = []uint32{}
	}
	return k.scan(ctx, f, m, rows, codes, queries, oversample, sel, runtime.GOMAXPROCS(0))
}

func (k Kernel) scan(ctx context.Context, f vector.Kernel, m vector.Metric, rows vector.Rows, codes *Codes, queries []vector.Query, oversample int, sel []uint32, procs int) ([][]vector.Hit, error) {
	if oversample == 0 {
		oversample = DefaultOversample
	}
	if oversample < 1 || oversample > MaxOversample {
		return nil, fmt.Errorf("int8 scan: oversample %d outside 1..%d", oversample, MaxOversample)
	}
	dim, n := rows.Dim, rows.Len()
	if dim <= 0 {
		return nil, fmt.Errorf("int8 scan: dimension %d", dim)
	}
	if err := rows.Check(); err != nil {
		return nil, fmt.Errorf("int8 scan: %w", err)
	}
	if codes == nil || codes.Dim() != dim || codes.Len() != n {
		return nil, fmt.Errorf("int8 scan: codes do not mirror the %d rows of %d-D", n, dim)
	}
	qcodes := vector.AlignedInt8(len(queries) * dim)
	qs := make([][]int8, len(queries))
	units := make([]float32, len(queries))
	for i, q := range queries {
		if len(q.Vector) != dim {
			return nil, fmt.Errorf("int8 scan: query %d has %d dimensions, want %d", i, len(q.Vector), dim)
		}
		if q.K < 0 {
			return nil, fmt.Errorf("int8 scan: query %d asks for %d hits", i, q.K)
		}
		qs[i] = qcodes[i*dim : (i+1)*dim : (i+1)*dim]
		units[i] = codes.scale.encodeQuery(qs[i], q.Vector)
	}

	todo := n
	if sel != nil {
		todo = len(sel)
		if todo > 0 && int(sel[todo-1]) >= n {
			return nil, fmt.Errorf("int8 scan: selected row %d of %d", sel[todo-1], n)
		}
	}
	// The same split as the float32 scan, in blocks of this package's size.
	workers := vector.ScanWorkers(todo, procs)
	scanners := make([]*scanner, workers)
	if err := vector.SplitRows(todo, workers, BlockRows, func(w, lo, hi int) error {
		scanners[w] = newScanner(k, m, rows, codes, queries, qs, units, oversample, sel)
		return scanners[w].run(ctx, lo, hi)
	}); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("int8 scan stopped before re-scoring: %w", err)
	}

	// Merge the workers' candidates, then re-score; queries are shared out
	// among the same number of goroutines.
	cands := make([][]int32, len(queries))
	for qi := range queries {
		t := scanners[0].tops[qi]
		for _, s := range scanners[1:] {
			t.Merge(s.tops[qi])
		}
		cands[qi], _ = t.Sorted()
	}
	out := make([][]vector.Hit, len(queries))
	rerrs := make([]error, len(queries))
	rescore := func(lo, hi int) {
		for qi := lo; qi < hi; qi++ {
			out[qi], rerrs[qi] = f.Rescore(m, rows, queries[qi], cands[qi])
		}
	}
	_ = vector.SplitRows(len(queries), min(workers, len(queries)), 1, func(_, lo, hi int) error {
		rescore(lo, hi)
		return nil
	})
	for _, err := range rerrs {
		if err != nil {
			return nil, fmt.Errorf("int8 scan: %w", err)
		}
	}
	return out, nil
}

// scanner is one worker's state: a candidate heap per query and a sum
// buffer for one block, allocated once so scoring a row allocates nothing.
type scanner struct {
	k       Kernel
	m       vector.Metric
	rows    vector.Rows
	codes   *Codes
	queries []vector.Query
	qs      [][]int8
	batch   batch
	units   []float32
	tops    []*vector.TopK
	sums    []int32
	// sel, when not nil, lists the rows to scan (run's range indexes
	// it); the bufs hold a block of their codes, code sums and norms.
	sel      []uint32
	codeBuf  []int8
	sumBuf   []int32
	normBuf  []float32
	selBlock []uint32
}

func newScanner(k Kernel, m vector.Metric, rows vector.Rows, codes *Codes, queries []vector.Query, qs [][]int8, units []float32, oversample int, sel []uint32) *scanner {
	n := rows.Len()
	if sel != nil {
		n = len(sel)
	}
	s := &scanner{
		k: k, m: m, rows: rows, codes: codes, queries: queries, qs: qs, units: units, sel: sel,
		batch: k.prepare(qs, rows.Dim),
		tops:  make([]*vector.TopK, len(queries)),
		sums:  make([]int32, len(queries)*min(BlockRows, n)),
	}
	for qi, q := range queries {
		c := 0
		if q.K > 0 {
			c = min(max(q.K, minCandidateK)*oversample, n)
		}
		s.tops[qi] = vector.NewTopK(c, rows.IDs)
	}
	return s
}

// run scans rows [lo, hi) block by block.
func (s *scanner) run(ctx context.Context, lo, hi int) error {
	dim := s.rows.Dim
	for b := lo; b < hi; b += BlockRows {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("int8 scan stopped after %d of %d rows: %w", b-lo, hi-lo, err)
		}
		end := min(b+BlockRows, hi)
		if s.sel != nil {
			s.score(s.gather(s.sel[b:end]))
			continue
		}
		// A block spans one chunk of codes unless chunks are smaller.
		for lo := b; lo < end; {
			data := s.codes.run(lo, end)
			nr := len(data) / dim
			s.score(lo, nil, data, s.codes.sums[lo:lo+nr], s.codes.norms[lo:lo+nr])
			lo += nr
		}
	}
	return nil
}

// score scores rows of codes back to back in data (rows base, base+1,
// ..., or idx's rows when set) against every query and offers them to
// the heaps.
func (s *scanner) score(base int, idx []uint32, data []int8, rowSums []int32, norms []float32) {
	nr := len(norms)
	sums := s.sums[:len(s.qs)*nr]
	if s.batch.offset == nil {
		rowSums = nil
	}
	s.k.score(s.batch, data, rowSums, s.rows.Dim, sums)
	for qi, q := range s.queries {
		if q.K == 0 {
			continue
		}
		s.collect(qi, q.Exclude, base, idx, norms, sums[qi*nr:(qi+1)*nr])
	}
}

// gather returns a block of sel's rows as one run: in place when they are
// consecutive (base is then the first row and idx nil), else copied into
// the scanner's buffers (idx maps a position to its row).
func (s *scanner) gather(rows []uint32) (base int, idx []uint32, data []int8, sums []int32, norms []float32) {
	dim, c := s.rows.Dim, s.codes
	first, last := int(rows[0]), int(rows[len(rows)-1])
	if last-first == len(rows)-1 {
		if data := c.run(first, last+1); len(data) == len(rows)*dim {
			return first, nil, data, c.sums[first : last+1], c.norms[first : last+1]
		}
	}
	if s.codeBuf == nil {
		nb := min(BlockRows, len(s.sel))
		s.codeBuf = vector.AlignedInt8(nb * dim)
		s.sumBuf = make([]int32, nb)
		s.normBuf = make([]float32, nb)
	}
	for j, r := range rows {
		copy(s.codeBuf[j*dim:(j+1)*dim], c.Row(int(r)))
		s.sumBuf[j] = c.sums[r]
		s.normBuf[j] = c.norms[r]
	}
	n := len(rows)
	return 0, rows, s.codeBuf[:n*dim], s.sumBuf[:n], s.normBuf[:n]
}

// collect offers query qi's sums for rows base, base+1, ... to its heap
// as keys where larger is better: the sum itself for Cosine and
// DotProduct (the query's unit is a positive constant), and 2·t·sum − |x|²
// for Euclidean (|q − x|² less the constant |q|²). The products are
// rounded to float32 explicitly so no compiler fuses them into a
// multiply-add: every machine computes the same keys, and so the same
// candidates.
func (s *scanner) collect(qi int, exclude string, base int, idx []uint32, norms []float32, sums []int32) {
	t := s.tops[qi]
	ids := s.rows.IDs
	l2 := s.m == vector.Euclidean
	twoT := 2 * s.units[qi]
	for j, sum := range sums {
		key := float32(sum)
		if l2 {
			key = euclideanKey(twoT, sum, norms[j])
		}
		if th, full := t.Threshold(); full && !(key >= th) {
			continue
		}
		row := base + j
		if idx != nil {
			row = int(idx[j])
		}
		if exclude != "" && ids[row] == exclude {
			continue
		}
		t.Push(int32(row), key)
	}
}
