package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
	"github.com/trawl-search/trawl/vector/quant"
)

// scanQuery is one query of a batch as the shard scans it: decoded and
// checked once, then carried whole through grouping, scanning and
// answering.
type scanQuery struct {
	vector.Query
	// Oversample is the int8 scan's candidates per k (0: the default);
	// NProbe the IVF lists to probe (0: the committed default).
	Oversample int
	NProbe     int
	// Filter and its canonical bytes (the batch is grouped by them), nil
	// and "" for none.
	Filter    *filter.Filter
	filterKey string
	Threshold *float64
	Payload   *shardpb.PayloadSelector
	// WithVector returns each hit's stored vector.
	WithVector bool
	// Sparse, when set, makes this a sparse query (Query then holds no
	// vector): scored by the store's inverted index, never by a scan.
	Sparse *store.SparseQuery
	// Using names the named dense vector the query scans ("" for the
	// unnamed one); Metric is the metric it scores by.
	Using  string
	Metric vector.Metric
}

// scanResult is what a scan found for one query, and how: ScanExact,
// ScanInt8 or ScanIVF.
type scanResult struct {
	Hits []vector.Hit
	Kind string
}

// scanQueries are a group of a batch's queries scanned in one pass.
type scanQueries []*scanQuery

// vectors are the group's queries as the kernels take them.
func (qs scanQueries) vectors() []vector.Query {
	out := make([]vector.Query, len(qs))
	for i, q := range qs {
		out[i] = q.Query
	}
	return out
}

// decodeQuery checks one query of a batch the way the router does.
func (s *Server) decodeQuery(set catalog.Settings, i int, pq *shardpb.Query) (scanQuery, error) {
	var (
		v   []float32
		sq  *store.SparseQuery
		err error
	)
	using := pq.GetUsing()
	switch {
	case pq.GetSparse() != nil && using != "":
		err = status.Errorf(codes.InvalidArgument, "query %d: a sparse query names its vector in sparse, not using", i)
	case pq.GetSparse() != nil:
		sq, err = decodeSparseQuery(set, i, pq)
	case using != "":
		ns, ok := namedSettings(set, using)
		if !ok {
			return scanQuery{}, status.Errorf(codes.InvalidArgument, "query %d: the collection has no named vector %q", i, using)
		}
		v, err = s.decodeVector(ns, pq.GetVector(), "query", i)
	case !set.HasUnnamed():
		err = status.Errorf(codes.InvalidArgument, "query %d: the collection has no unnamed vector: name one of its vectors with using", i)
	default:
		v, err = s.decodeVector(set, pq.GetVector(), "query", i)
	}
	if err != nil {
		return scanQuery{}, err
	}
	if pq.GetK() < 1 || pq.GetK() > vector.MaxK {
		return scanQuery{}, status.Errorf(codes.InvalidArgument, "query %d: k is %d, want 1..%d", i, pq.GetK(), vector.MaxK)
	}
	if o := pq.GetOversample(); o > quant.MaxOversample {
		return scanQuery{}, status.Errorf(codes.InvalidArgument, "query %d: oversample is %d, want 1..%d (0: the default)", i, o, quant.MaxOversample)
	}
	q := scanQuery{
		Query:      vector.Query{Vector: v, K: int(pq.GetK()), Exclude: pq.GetExcludeId()},
		Oversample: int(pq.GetOversample()),
		NProbe:     int(min(pq.GetNprobe(), ivf.MaxLists)),
		Payload:    pq.GetWithPayload(),
		WithVector: pq.GetWithVector(),
		Sparse:     sq,
		Using:      using,
		Metric:     namedQueryMetric(set, using),
	}
	if pq.ScoreThreshold != nil {
		t := pq.GetScoreThreshold()
		if math.IsNaN(t) {
			return scanQuery{}, status.Errorf(codes.InvalidArgument, "query %d: score_threshold is NaN", i)
		}
		q.Threshold = &t
	}
	if fb := pq.GetFilter(); len(fb) > 0 {
		f, err := filter.Parse(fb)
		if err != nil {
			return scanQuery{}, status.Errorf(codes.InvalidArgument, "query %d: %v", i, err)
		}
		if !f.Empty() {
			q.Filter, q.filterKey = f, string(fb)
		}
	}
	return q, nil
}

// search scans for a batch and reports whether it was exact: float32 over
// every matching row, as it is when a query of the batch asks "exact":
// true or the store holds no int8 codes (yet); otherwise an IVF index
// probe, or else the int8 codes, choose each query's candidates (one pass
// per distinct oversample for the flat codes, one probe of the union of
// the batch's lists for the index) and float32 re-scores them. Queries
// with a filter scan only the rows it matches, one pass per distinct
// filter, the rows chosen from the payload index before anything is
// scored; on an IVF store a filter keeping few rows scans them exactly
// (ivf.ScanExactly), so it never loses hits to lists left unprobed.
//
// keep, when set, limits every query to the rows of the hash slots the
// read asked for (slotReadFilter): those of a slot moving in or out of
// this group are another group's to count.
func (s *Server) search(ctx context.Context, col *collection, pqs []*shardpb.Query, keep func(id string) bool) ([]*shardpb.HitList, uint64, bool, error) {
	qs := make([]scanQuery, len(pqs))
	all := make(scanQueries, len(pqs))
	wantExact := false
	m := col.settings.Metric
	for i, pq := range pqs {
		q, err := s.decodeQuery(col.settings, i, pq)
		if err != nil {
			return nil, 0, false, err
		}
		qs[i], all[i] = q, &qs[i]
		wantExact = wantExact || pq.GetExact()
	}
	ctx, span := s.startScan(ctx)
	release, err := s.cfg.Scans.Acquire(ctx)
	if err != nil {
		if errors.Is(err, admission.ErrWouldMiss) {
			s.observe(errOverloaded, 0)
			err = status.Errorf(codes.ResourceExhausted, "shard overloaded: %v", err)
		} else {
			err = status.FromContextError(err).Err()
		}
		s.endScan(span, m, all, 0, err)
		return nil, 0, false, err
	}
	start := time.Now()
	defer func() { release(time.Since(start)) }()
	var (
		out     []*shardpb.HitList
		docs    int
		results = make([]scanResult, len(qs))
	)
	err = col.mem.ViewScan(func(v *store.ScanView) error {
		docs = v.Rows.Len()
		for _, group := range groupBy(len(qs), func(i int) string { return qs[i].filterKey }) {
			var sel []uint32 // nil: every row
			if f := qs[group[0]].Filter; f != nil {
				var err error
				if sel, err = v.Select(f); err != nil {
					return err
				}
			}
			if keep != nil {
				sel = v.Keep(sel, keep)
			}
			// Sparse queries read the inverted index, exactly; the dense
			// ones of the group share one scan.
			gq := make(scanQueries, 0, len(group))
			dense := make([]int, 0, len(group))
			var named []int
			for _, qi := range group {
				if qs[qi].Using != "" {
					named = append(named, qi)
					continue
				}
				if sq := qs[qi].Sparse; sq != nil {
					hits, err := v.SparseSearch(*sq, sel)
					if err != nil {
						return err
					}
					results[qi] = scanResult{Hits: hits, Kind: ScanExact}
					continue
				}
				gq = append(gq, &qs[qi])
				dense = append(dense, qi)
			}
			if err := s.scanNamed(ctx, v, qs, named, sel, results); err != nil {
				return err
			}
			if len(gq) == 0 {
				continue
			}
			rs, err := s.scanRows(ctx, m, v, gq, sel, wantExact)
			if err != nil {
				return err
			}
			for j, qi := range dense {
				results[qi] = rs[j]
			}
		}
		var err error
		out, err = s.answer(m, v, qs, results)
		return err
	})
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// The caller gave up (a losing hedge, a client gone) or the
		// deadline passed mid-scan: the scan stopped at its next block, and
		// what it spent is counted apart from failures.
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	s.observe(err, time.Since(start))
	exact := true
	if err == nil {
		count := map[string]int{}
		for _, r := range results {
			count[r.Kind]++
			exact = exact && r.Kind == ScanExact
		}
		if s.cfg.Observer != nil {
			for k, n := range count {
				s.cfg.Observer.Queries(k, n)
			}
		}
	}
	s.endScan(span, m, all, docs, err)
	if err != nil {
		if c := status.FromContextError(ctx.Err()); ctx.Err() != nil {
			return nil, 0, false, c.Err()
		}
		return nil, 0, false, status.Errorf(codes.Internal, "scan: %v", err)
	}
	return out, uint64(docs), exact, nil
}

// scanRows scans the rows sel names (every row when nil) for qs: with the
// IVF index or else the int8 codes unless exact is asked or there are
// none.
func (s *Server) scanRows(ctx context.Context, m vector.Metric, v *store.ScanView, qs scanQueries, sel []uint32, wantExact bool) ([]scanResult, error) {
	rows, c := v.Rows, v.Codes
	if x := v.IVF; x != nil && !wantExact && x.Len() == rows.Len() {
		return s.scanIVF(ctx, m, rows, x, qs, sel)
	}
	if c == nil || wantExact || c.Len() != rows.Len() {
		var (
			hs  [][]vector.Hit
			err error
		)
		if sel != nil {
			hs, err = s.cfg.Kernel.ScanSelected(ctx, m, rows, qs.vectors(), sel)
		} else {
			start := time.Now()
			hs, err = s.cfg.Kernel.Scan(ctx, m, rows, qs.vectors())
			if err == nil {
				s.observeRate(rows.Len(), rows.Dim, len(qs), time.Since(start))
			}
		}
		return resultsOf(hs, ScanExact), err
	}
	out := make([]scanResult, len(qs))
	// The int8 scan takes one oversample a pass.
	for _, group := range groupBy(len(qs), func(i int) int { return qs[i].Oversample }) {
		sub := make(scanQueries, len(group))
		for j, qi := range group {
			sub[j] = qs[qi]
		}
		over := sub[0].Oversample
		var (
			hs  [][]vector.Hit
			err error
		)
		if sel != nil {
			hs, err = s.cfg.Int8Kernel.ScanSelected(ctx, s.cfg.Kernel, m, rows, c, sub.vectors(), over, sel)
		} else {
			hs, err = s.cfg.Int8Kernel.Scan(ctx, s.cfg.Kernel, m, rows, c, sub.vectors(), over)
		}
		if err != nil {
			return nil, err
		}
		for j, qi := range group {
			out[qi] = scanResult{Hits: hs[j], Kind: ScanInt8}
		}
	}
	return out, nil
}

// scanIVF answers qs from the index: one probe of the union of their
// lists. With a filter (sel, the rows it keeps, ascending), a query for
// which ivf.ScanExactly says the probed lists would hold too few allowed
// rows to find its hits, or that reading the allowed rows' floats costs
// no more than probing, scans them exactly instead; the others probe
// with the filter as the Allow hook.
func (s *Server) scanIVF(ctx context.Context, m vector.Metric, rows vector.Rows, x *ivf.Index, qs scanQueries, sel []uint32) ([]scanResult, error) {
	out := make([]scanResult, len(qs))
	var exactQs, probeQs []int
	for i, q := range qs {
		np := q.NProbe
		if np == 0 {
			np = x.DefaultNProbeFor(q.K)
		}
		if sel != nil && ivf.ScanExactly(len(sel), rows.Len(), q.K, np, x.Lists()) {
			exactQs = append(exactQs, i)
		} else {
			probeQs = append(probeQs, i)
		}
	}
	if len(exactQs) > 0 {
		sub := make(scanQueries, len(exactQs))
		for j, i := range exactQs {
			sub[j] = qs[i]
		}
		hs, err := s.cfg.Kernel.ScanSelected(ctx, m, rows, sub.vectors(), sel)
		if err != nil {
			return nil, err
		}
		for j, i := range exactQs {
			out[i] = scanResult{Hits: hs[j], Kind: ScanExact}
		}
	}
	if len(probeQs) > 0 {
		var allow func(int32) bool
		if sel != nil {
			allow = rowSet(sel, rows.Len())
		}
		iq := make([]ivf.Query, len(probeQs))
		for j, i := range probeQs {
			iq[j] = ivf.Query{Query: qs[i].Query, NProbe: qs[i].NProbe, Oversample: qs[i].Oversample, Allow: allow}
		}
		hs, err := x.Search(ctx, s.cfg.Int8Kernel, s.cfg.Kernel, rows, iq)
		if err != nil {
			return nil, err
		}
		for j, i := range probeQs {
			out[i] = scanResult{Hits: hs[j], Kind: ScanIVF}
		}
	}
	return out, nil
}

// rowSet returns a membership test for the rows of sel (each below n): a
// bitset, read-only once built, so the probe's goroutines may share it.
func rowSet(sel []uint32, n int) func(int32) bool {
	bits := make([]uint64, (n+63)/64)
	for _, r := range sel {
		bits[r/64] |= 1 << (r % 64)
	}
	return func(r int32) bool { return bits[r/64]&(1<<(uint32(r)%64)) != 0 }
}

// resultsOf labels one scan's hit lists with the kind of scan.
func resultsOf(hs [][]vector.Hit, kind string) []scanResult {
	out := make([]scanResult, len(hs))
	for i, h := range hs {
		out[i] = scanResult{Hits: h, Kind: kind}
	}
	return out
}

// answer turns each query's hits into its hit list: only those within its
// score_threshold (the top k of the hits at least that good are the
// top-k's hits at least that good), with their payloads when asked. It
// runs under the scan's read lock, so payloads are those of the scanned
// rows.
func (s *Server) answer(m vector.Metric, v *store.ScanView, qs []scanQuery, results []scanResult) ([]*shardpb.HitList, error) {
	out := make([]*shardpb.HitList, len(results))
	for i, r := range results {
		q := qs[i]
		qm := q.Metric
		if q.Sparse != nil {
			qm = vector.DotProduct // a sparse score is a dot product: higher is better
		}
		l := &shardpb.HitList{Hits: make([]*shardpb.Hit, 0, len(r.Hits))}
		for _, h := range r.Hits {
			if q.Threshold != nil && !within(qm, h.Score, *q.Threshold) {
				break // hits are best first
			}
			ph := &shardpb.Hit{Id: h.ID, Score: h.Score}
			if sel := q.Payload; sel != nil {
				var keys []string
				if !sel.GetAll() {
					keys = sel.GetKeys()
					if keys == nil {
						keys = []string{}
					}
				}
				p, err := v.Payload(h.ID, keys)
				if err != nil {
					return nil, err
				}
				ph.Payload = p
			}
			if q.WithVector {
				vec, err := v.Vector(h.ID)
				if err != nil {
					return nil, err
				}
				ph.Vector = shard.EncodeVector(vec)
				ph.Sparse = sparseToPB(v.SparseVectors(h.ID))
				ph.Named = namedToPB(v.NamedVectors(h.ID))
			}
			l.Hits = append(l.Hits, ph)
		}
		out[i] = l
	}
	return out, nil
}

// within reports whether a score meets a score_threshold: at least it
// under cosine and dot (higher is better), at most it under l2 (a
// distance). The score compared is the one the client reads: the API
// prints a float32 in its shortest decimal form, which as a float64 can
// sit just on the other side of a threshold from the float32 itself.
func within(m vector.Metric, score float32, t float64) bool {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(score), 'g', -1, 32), 64)
	if err != nil {
		v = float64(score)
	}
	if m == vector.Euclidean {
		return v <= t
	}
	return v >= t
}

// groupBy splits the indexes 0..n-1 by key (one pass each: a filter's
// selection, an int8 scan's oversample), in order of first appearance.
func groupBy[K comparable](n int, key func(i int) K) [][]int {
	var keys []K
	by := map[K][]int{}
	for i := range n {
		k := key(i)
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], i)
	}
	out := make([][]int, len(keys))
	for i, k := range keys {
		out[i] = by[k]
	}
	return out
}
