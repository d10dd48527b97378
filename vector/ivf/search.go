package ivf

import (
	"context"
	"fmt"
	"runtime"
	"slices"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// DefaultNProbe is the rule for how many of lists lists a query probes
// unless it says, until a value measured on the index is set
// (CalibrateNProbe, Index.SetDefaultNProbes), and where calibration
// starts: one in ProbeShare (rounded up), at least MinNProbe, at most
// lists.
//
// Measured (docs/ivf.md) on the dev cluster's clustered corpus (32
// clusters, cosine, 100 queries): recall@10 and @100 reach 0.99 at 8 of
// 158 lists (25 000 rows), 12 of 316 (100 000), 24 of 632 (400 000) and 48
// of 1 000 (1 000 000; 32 gave 0.997 and 0.998); that is, at a nearly
// constant share of the lists, 4–5 %, not at a constant count: with √N
// lists each natural cluster spans more lists as the shard grows, and a
// query must open all of its cluster's. One in twenty (16 of 316, 50 of
// 1 000) clears every one of those with a margin, and costs a probe of
// 5 % of the codes plus scoring √N centres. Isotropic Gaussian data has
// no clusters, so no share short of nearly all lists reaches 0.99 there
// (docs/ivf.md); a query that needs that asks for a larger nprobe, or
// "exact": true.
func DefaultNProbe(lists int) int {
	return max(1, min(lists, max(MinNProbe, (lists+ProbeShare-1)/ProbeShare)))
}

// DefaultNProbe's parameters.
const (
	ProbeShare = 20
	MinNProbe  = 8
)

// DefaultNProbe is the lists a query for up to the first of
// CalibrationKs hits probes when it names none: DefaultNProbeFor(0).
func (x *Index) DefaultNProbe() int { return x.DefaultNProbeFor(0) }

// DefaultNProbeFor is the lists a query for k hits probes when it names
// none: the level set with SetDefaultNProbes of the smallest K at least
// k (the last level beyond), else DefaultNProbe(lists); never more than
// the lists.
func (x *Index) DefaultNProbeFor(k int) int {
	if len(x.nprobes) == 0 {
		return DefaultNProbe(len(x.lists))
	}
	l := x.nprobes[len(x.nprobes)-1]
	for _, v := range x.nprobes {
		if v.K >= k {
			l = v
			break
		}
	}
	return max(1, min(l.NProbe, len(x.lists)))
}

// SetDefaultNProbes sets the measured defaults (CalibrateNProbe), levels
// by ascending K; nil restores DefaultNProbe(lists). It must not run
// beside a search.
func (x *Index) SetDefaultNProbes(levels []Level) { x.nprobes = slices.Clone(levels) }

// Query is one search of a batch.
type Query struct {
	vector.Query
	// NProbe is how many lists to probe: 0 for the index's default
	// (Index.DefaultNProbeFor its K); more than the lists there are probes them
	// all. A query whose nearest lists hold fewer rows than it keeps
	// candidates probes twice as many, until they do.
	NProbe int
	// Oversample is how many candidates per hit the codes choose for
	// exact re-scoring, as quant.Kernel.Scan's: 1..quant.MaxOversample,
	// 0 for quant.DefaultOversample.
	Oversample int
	// Allow, when set, keeps only the rows it returns true for (a filter);
	// it is called from several goroutines at once, with row numbers of
	// the rows passed to Search. When it keeps few rows, scan those
	// exactly instead (see ScanExactly).
	Allow func(row int32) bool
}

// Search returns, for each query, its K best rows best first, ties by id
// ascending, leaving out Exclude and rows Allow refuses. Each query
// probes its NProbe nearest lists (see coarse); each list is scanned once
// for all the queries that chose it, every block of its codes scored
// against that subset of the batch while it is in cache, lists shared out
// among cores. Each query keeps its best min(Oversample·max(K, 10), rows)
// candidates by code score, as quant's flat scan does (so probing every
// list chooses exactly its candidates), and f re-scores them from rows:
// returned scores are exact, only the candidate set is approximate.
//
// rows are the shard's float32 rows the index mirrors. For Cosine, rows
// and queries are unit vectors. The context is checked every block of
// codes; a search whose context ends returns its error (wrapped) and no
// hits.
func (x *Index) Search(ctx context.Context, k quant.Kernel, f vector.Kernel, rows vector.Rows, queries []Query) ([][]vector.Hit, error) {
	return x.search(ctx, k, f, rows, queries, runtime.GOMAXPROCS(0))
}

// BlockRows is how many rows of a list's codes a search scores before it
// looks at its context again, as quant.BlockRows.
const BlockRows = quant.BlockRows

func (x *Index) search(ctx context.Context, k quant.Kernel, f vector.Kernel, rows vector.Rows, queries []Query, procs int) ([][]vector.Hit, error) {
	dim, n := x.cent.Dim, rows.Len()
	if rows.Dim != dim {
		return nil, fmt.Errorf("ivf search: %d-D rows, %d-D index", rows.Dim, dim)
	}
	if n != x.Len() {
		return nil, fmt.Errorf("ivf search: the index holds %d rows, rows %d", x.Len(), n)
	}
	if err := rows.Check(); err != nil {
		return nil, fmt.Errorf("ivf search: %w", err)
	}
	nl := len(x.lists)
	vecs := make([][]float32, len(queries))
	for i, q := range queries {
		switch {
		case len(q.Vector) != dim:
			return nil, fmt.Errorf("ivf search: query %d has %d dimensions, want %d", i, len(q.Vector), dim)
		case q.K < 0:
			return nil, fmt.Errorf("ivf search: query %d asks for %d hits", i, q.K)
		case q.NProbe < 0:
			return nil, fmt.Errorf("ivf search: query %d probes %d lists", i, q.NProbe)
		case q.Oversample < 0 || q.Oversample > quant.MaxOversample:
			return nil, fmt.Errorf("ivf search: query %d: oversample %d outside 1..%d", i, q.Oversample, quant.MaxOversample)
		}
		vecs[i] = q.Vector
	}
	if len(queries) == 0 {
		return [][]vector.Hit{}, nil
	}

	// Choose each query's lists, and invert: which queries scan list l.
	fast := make([]float32, len(queries)*nl)
	f.ScoreRows(vector.DotProduct, vecs, x.cent.Data, dim, fast)
	byList := make([][]int, nl)
	var (
		probe []int32
		cand  []candidate
	)
	for qi, q := range queries {
		if q.K == 0 {
			continue
		}
		np := q.NProbe
		if np == 0 {
			np = x.DefaultNProbeFor(q.K)
		}
		// Probe more lists (doubling) while the chosen ones hold fewer
		// rows than the query keeps candidates: k-means can leave lists
		// of a handful of rows, and a top-10 query must not get one hit
		// from a shard of thousands.
		want := min(candidates(q.Query, q.Oversample), n)
		for {
			probe, cand = x.co.nearest(probe[:0], fast[qi*nl:(qi+1)*nl], q.Vector, np, x.probeW(), cand)
			have := 0
			for _, l := range probe {
				have += len(x.lists[l].rows)
			}
			if have >= want || np >= nl {
				break
			}
			np *= 2
		}
		for _, l := range probe {
			byList[l] = append(byList[l], qi)
		}
	}
	enc, err := k.EncodeQueries(x.scale, x.cent.Metric, vecs)
	if err != nil {
		return nil, fmt.Errorf("ivf search: %w", err)
	}

	// Share the lists out in contiguous runs of about equal work (rows ×
	// queries), each worker with its own candidate heaps.
	var scanned, work int
	for l, qs := range byList {
		if len(qs) > 0 {
			scanned += len(x.lists[l].rows)
			work += len(x.lists[l].rows) * len(qs)
		}
	}
	workers := vector.ScanWorkers(scanned, procs)
	bounds := make([]int, 0, workers+1)
	bounds = append(bounds, 0)
	acc := 0
	for l, qs := range byList {
		acc += len(x.lists[l].rows) * len(qs)
		if len(bounds) < workers && acc*workers >= work*len(bounds) {
			bounds = append(bounds, l+1)
		}
	}
	for len(bounds) <= workers {
		bounds = append(bounds, nl)
	}
	scanners := make([]*scanner, workers)
	if err := vector.SplitRows(workers, workers, 1, func(w, _, _ int) error {
		s := &scanner{x: x, rows: rows, queries: queries, sc: enc.NewScorer(), tops: make([]*vector.TopK, len(queries))}
		scanners[w] = s
		return s.run(ctx, byList, bounds[w], bounds[w+1], n)
	}); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ivf search stopped before re-scoring: %w", err)
	}

	// Merge the workers' candidates, then re-score on as many goroutines.
	cands := make([][]int32, len(queries))
	for qi := range queries {
		var t *vector.TopK
		for _, s := range scanners {
			switch {
			case s.tops[qi] == nil:
			case t == nil:
				t = s.tops[qi]
			default:
				t.Merge(s.tops[qi])
			}
		}
		if t != nil {
			cands[qi], _ = t.Sorted()
		}
	}
	out := make([][]vector.Hit, len(queries))
	errs := make([]error, len(queries))
	_ = vector.SplitRows(len(queries), min(workers, len(queries)), 1, func(_, lo, hi int) error {
		for qi := lo; qi < hi; qi++ {
			out[qi], errs[qi] = f.Rescore(x.cent.Metric, rows, queries[qi].Query, cands[qi])
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("ivf search: %w", err)
		}
	}
	return out, nil
}

// scanner is one worker's state: a candidate heap for each query it has
// met, a scorer and a key buffer, reused from list to list.
type scanner struct {
	x       *Index
	rows    vector.Rows
	queries []Query
	sc      *quant.Scorer
	tops    []*vector.TopK
	keys    []float32
}

// run scans lists [lo, hi) for the queries that chose them; n is the
// shard's row count (a query never keeps more candidates than that).
func (s *scanner) run(ctx context.Context, byList [][]int, lo, hi, n int) error {
	for l := lo; l < hi; l++ {
		sel := byList[l]
		li := &s.x.lists[l]
		if len(sel) == 0 || len(li.rows) == 0 {
			continue
		}
		for _, qi := range sel {
			if s.tops[qi] == nil {
				q := s.queries[qi]
				s.tops[qi] = vector.NewTopK(min(candidates(q.Query, q.Oversample), n), s.rows.IDs)
			}
		}
		if need := len(sel) * min(BlockRows, len(li.rows)); cap(s.keys) < need {
			s.keys = make([]float32, need)
		}
		for b := 0; b < len(li.rows); b += BlockRows {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("ivf search stopped in list %d: %w", l, err)
			}
			end := min(b+BlockRows, len(li.rows))
			nr := end - b
			keys := s.keys[:len(sel)*nr]
			s.sc.Keys(sel, li.codes, b, end, keys)
			for i, qi := range sel {
				s.collect(s.tops[qi], s.queries[qi], li.rows[b:end], keys[i*nr:(i+1)*nr])
			}
		}
	}
	return nil
}

// candidates is how many candidates a query keeps for re-scoring, as
// quant's flat scan: oversample·max(k, minCandidateK), 0 for k = 0.
func candidates(q vector.Query, oversample int) int {
	if q.K <= 0 {
		return 0
	}
	if oversample == 0 {
		oversample = quant.DefaultOversample
	}
	return max(q.K, minCandidateK) * oversample
}

// minCandidateK is quant's: a query keeps candidates for at least ten
// hits, so top-1 answers do not rest on one rounding.
const minCandidateK = 10

// collect offers one query's keys for the rows of a block to its heap.
// Once the heap is full almost every row is rejected by one comparison,
// before the id or the filter is looked at.
func (s *scanner) collect(t *vector.TopK, q Query, rows []int32, keys []float32) {
	ids := s.rows.IDs
	for j, key := range keys {
		if th, full := t.Threshold(); full && !(key >= th) {
			continue
		}
		r := rows[j]
		if q.Exclude != "" && ids[r] == q.Exclude {
			continue
		}
		if q.Allow != nil && !q.Allow(r) {
			continue
		}
		t.Push(r, key)
	}
}

// ScanExactly reports whether a query that keeps allowed of total rows
// (a filter's count), asking for k hits, should skip the index and scan
// the allowed rows exactly in float32 (vector.Kernel.Rescore over them,
// or the shard's exact scan) instead of probing nprobe of lists lists.
// Either of two things decides it:
//
//   - recall: the probed lists are expected to hold allowed·nprobe/lists
//     allowed rows; when that is fewer than the candidates the query
//     would re-score (quant.DefaultOversample·max(k, 10)), the probe
//     cannot even see enough allowed rows, and would lose hits that sit
//     in lists it does not open. BenchmarkFilterCrossover measured the
//     probe's recall@k reach 0.99 at about 2.5·k expected allowed rows
//     (k = 10 and 100, a filter independent of the clusters); 4·k keeps a
//     margin for filters that are not.
//   - cost: scanning an allowed row exactly costs no more than
//     ExactRowCost probed rows: ExactRowCost·allowed ≤ total·nprobe/lists.
//
// A probe of every list is the flat int8 scan, so it never pays to
// probe then (nprobe ≥ lists counts as "exact": as cheap and exact).
// nprobe 0 means DefaultNProbe(lists).
func ScanExactly(allowed, total, k, nprobe, lists int) bool {
	if lists > 0 && nprobe <= 0 {
		nprobe = DefaultNProbe(lists)
	}
	if lists <= 0 || nprobe >= lists || allowed <= 0 {
		return true
	}
	probed := float64(nprobe) / float64(lists)
	cands := float64(quant.DefaultOversample * max(k, minCandidateK))
	return float64(allowed)*probed < cands || ExactRowCost*float64(allowed) <= float64(total)*probed
}

// ExactRowCost is what scanning one filtered row exactly (its float32s,
// read out of order) costs in rows of a probe (their int8 codes, read in
// order, plus the probe's share of scoring the centres and re-scoring),
// as BenchmarkFilterCrossover measured it: the two paths cost the same
// (p50 ratio 1, interpolated over six rounds) at a filter keeping ~1 060
// of 100 000 1536-D rows, probing 16 of 316 lists (5 063 rows), for
// k = 10 (docs/ivf.md). The byte count alone (4 bytes of float against 1
// of code) says 4, which sent filters of up to 1.3 % to the exact scan
// where it was already ~1.2× slower.
const ExactRowCost = 4.8
