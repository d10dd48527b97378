package vector

import (
	"context"
	"fmt"
	"math"
	"runtime"
)

// Query is one search in a batch scan.
type Query struct {
	Vector []float32
	K      int
	// Exclude is an id left out of the answer (search by stored id).
	Exclude string
}

// BlockRows is how many rows a scan scores before it looks at its context
// again: small enough that a passed deadline stops a scan within
// microseconds, large enough that the check costs nothing. A block of
// 1536-D rows (1.5 MiB) is scored by every query of a batch before the scan
// moves on, four rows at a time, so each row comes from memory once per
// batch and from L1 for every query after the first.
const BlockRows = 256

// Scan returns, for each query, its k best rows best first. One pass over the
// rows serves the whole batch: each block of rows is scored against every
// query while it is still in cache. Large scans are split across cores, each
// worker keeping its own k-sized heaps, merged at the end; the answer is the
// exact top k under Better's order, so it does not depend on the split. The
// context is checked every block; a scan whose context ends returns its
// error (wrapped) and no hits.
func (k Kernel) Scan(ctx context.Context, m Metric, rows Rows, queries []Query) ([][]Hit, error) {
	return k.scan(ctx, m, rows, queries, nil, runtime.GOMAXPROCS(0))
}

// ScanSelected is Scan over only the rows sel names (row numbers into
// rows, ascending, distinct): a filtered search, which reads and scores
// those rows alone, so its cost follows len(sel), not the shard. Runs of
// consecutive rows are scored in place; scattered ones are first copied
// into a block buffer, so the batch kernels score them exactly as Scan
// would (the same bits). An empty sel returns empty hit lists.
func (k Kernel) ScanSelected(ctx context.Context, m Metric, rows Rows, queries []Query, sel []uint32) ([][]Hit, error) {
	if sel == nil {
		sel = []uint32{}
	}
	return k.scan(ctx, m, rows, queries, sel, runtime.GOMAXPROCS(0))
}

func (k Kernel) scan(ctx context.Context, m Metric, rows Rows, queries []Query, sel []uint32, procs int) ([][]Hit, error) {
	if err := rows.Check(); err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	n := rows.Len()
	vecs := make([][]float32, len(queries))
	for i, q := range queries {
		if len(q.Vector) != rows.Dim {
			return nil, fmt.Errorf("scan: query %d has %d dimensions, want %d", i, len(q.Vector), rows.Dim)
		}
		if q.K < 0 {
			return nil, fmt.Errorf("scan: query %d asks for %d hits", i, q.K)
		}
		vecs[i] = q.Vector
	}

	todo := n
	if sel != nil {
		todo = len(sel)
		if todo > 0 && int(sel[todo-1]) >= n {
			return nil, fmt.Errorf("scan: selected row %d of %d", sel[todo-1], n)
		}
	}
	workers := ScanWorkers(todo, procs)
	scanners := make([]*scanner, workers)
	if err := SplitRows(todo, workers, BlockRows, func(w, lo, hi int) error {
		scanners[w] = newScanner(k, m, rows, queries, vecs, sel)
		return scanners[w].run(ctx, lo, hi)
	}); err != nil {
		return nil, err
	}

	out := make([][]Hit, len(queries))
	for qi := range queries {
		t := scanners[0].tops[qi]
		for _, s := range scanners[1:] {
			t.Merge(s.tops[qi])
		}
		rs, keys := t.Sorted()
		hits := make([]Hit, len(rs))
		for i, r := range rs {
			hits[i] = Hit{ID: rows.IDs[r], Score: m.scoreOf(keys[i])}
		}
		out[qi] = hits
	}
	return out, nil
}

// scanner is one worker's state: a heap per query and a score buffer for
// one block, allocated once so scoring a row allocates nothing.
type scanner struct {
	k       Kernel
	m       Metric
	rows    Rows
	queries []Query
	vecs    [][]float32
	tops    []*TopK
	scores  []float32
	// sel, when not nil, lists the rows to scan (run's range indexes
	// it); buf holds scattered ones gathered, pending their row numbers.
	sel     []uint32
	buf     []float32
	pending []uint32
}

func newScanner(k Kernel, m Metric, rows Rows, queries []Query, vecs [][]float32, sel []uint32) *scanner {
	n := rows.Len()
	if sel != nil {
		n = len(sel)
	}
	s := &scanner{
		k: k, m: m, rows: rows, queries: queries, vecs: vecs, sel: sel,
		tops:   make([]*TopK, len(queries)),
		scores: make([]float32, len(queries)*min(BlockRows, n)),
	}
	for qi, q := range queries {
		// A heap never holds more than the rows there are, whatever k.
		s.tops[qi] = NewTopK(min(q.K, n), rows.IDs)
	}
	return s
}

// run scans rows [lo, hi) block by block (of sel, when set).
func (s *scanner) run(ctx context.Context, lo, hi int) error {
	for b := lo; b < hi; b += BlockRows {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scan stopped after %d of %d rows: %w", b-lo, hi-lo, err)
		}
		end := min(b+BlockRows, hi)
		if s.sel != nil {
			s.runSelected(s.sel[b:end])
			continue
		}
		s.scoreRun(b, end)
	}
	return nil
}

// scoreRun scores rows [lo, hi) in place, one contiguous run per chunk
// they span (a block spans one unless chunks are smaller than blocks).
func (s *scanner) scoreRun(lo, hi int) {
	for lo < hi {
		run := s.rows.Run(lo, hi)
		s.score(lo, nil, run)
		lo += len(run) / s.rows.Dim
	}
}

// minRun is the shortest run of consecutive selected rows scored in
// place; shorter ones are gathered, so the tiles (four rows at a time)
// are not called on fragments.
const minRun = 8

// gatherRows is how many scattered rows are copied aside before they are
// scored: 384 KiB at 1536-D, so a sparse filter's scan allocates little.
const gatherRows = 64

// runSelected scores a block of selected rows: runs of consecutive rows
// in place, the rest copied into buf in groups of gatherRows.
func (s *scanner) runSelected(rows []uint32) {
	dim := s.rows.Dim
	var pending []uint32
	flush := func() {
		if len(pending) > 0 {
			s.score(0, pending, s.buf[:len(pending)*dim])
			pending = pending[:0]
		}
	}
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j] == rows[j-1]+1 {
			j++
		}
		if j-i >= minRun {
			s.scoreRun(int(rows[i]), int(rows[j-1])+1)
			i = j
			continue
		}
		if s.buf == nil {
			s.buf = Aligned(min(gatherRows, len(s.sel)) * dim)
			s.pending = make([]uint32, 0, min(gatherRows, len(s.sel)))
		}
		if pending == nil {
			pending = s.pending[:0]
		}
		for _, r := range rows[i:j] {
			if len(pending) == cap(pending) {
				flush()
			}
			n := len(pending)
			copy(s.buf[n*dim:(n+1)*dim], s.rows.Row(int(r)))
			pending = append(pending, r)
		}
		i = j
	}
	flush()
}

// score scores rows (consecutive in data) against every query and offers
// them to the heaps: as rows base, base+1, ..., or idx's rows when set.
func (s *scanner) score(base int, idx []uint32, data []float32) {
	nr := len(data) / s.rows.Dim
	scores := s.scores[:len(s.vecs)*nr]
	s.k.ScoreRows(s.m, s.vecs, data, s.rows.Dim, scores)
	for qi, q := range s.queries {
		if q.K == 0 {
			continue
		}
		s.collect(s.tops[qi], q.Exclude, base, idx, scores[qi*nr:(qi+1)*nr])
	}
}

// collect offers one query's scores for rows base, base+1, ... (or idx[0],
// idx[1], ... when idx is set) to its heap. Once the heap is full almost
// every candidate is rejected by one float comparison; NaN fails it too,
// and Push drops NaN when the heap is not full, so a NaN score never
// displaces a real one.
func (s *scanner) collect(t *TopK, exclude string, base int, idx []uint32, scores []float32) {
	neg := s.m == Euclidean // keys are larger-is-better
	ids := s.rows.IDs
	for j, sc := range scores {
		key := sc
		if neg {
			key = -sc
		}
		if len(t.rows) == t.k && !(key >= t.keys[0]) {
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

// scoreOf turns a scan key back into the score the API reports.
func (m Metric) scoreOf(key float32) float32 {
	if m == Euclidean {
		return float32(math.Sqrt(float64(-key)))
	}
	return key
}

// Ref is a merged hit and where it came from: its input list, and its
// position in that list (so a caller can take what else it carries).
type Ref struct {
	List, Pos int
	Hit
}

// Merge returns the best k hits over lists that are each sorted best first,
// as Better orders them. The result is the exact top k of their union.
func (m Metric) Merge(k int, lists [][]Hit) []Ref {
	pos := make([]int, len(lists))
	var out []Ref
	for len(out) < k {
		best := -1
		for li, l := range lists {
			if pos[li] >= len(l) {
				continue
			}
			if best < 0 || m.Better(l[pos[li]], lists[best][pos[best]]) {
				best = li
			}
		}
		if best < 0 {
			break
		}
		out = append(out, Ref{List: best, Pos: pos[best], Hit: lists[best][pos[best]]})
		pos[best]++
	}
	return out
}
