package ivf

import (
	"context"
	"fmt"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// Calibration: the leader of a shard measures the nprobe its own data
// needs, because no fixed share of the lists fits every corpus. The rule
// DefaultNProbe was measured on corpora with fewer natural clusters than
// lists; on 1 000 clusters over 128 lists a shard it gave recall@10 0.98
// (the peer corpus of bench/RESULTS-peer.md), and on isotropic data
// nothing short of nearly every list reaches 0.99. Deeper answers need more lists: a
// shard's 100th neighbour lies further from the query's lists than its
// 10th, so one default for every k either loses recall at k = 100 or
// probes far too much at k = 10. The leader measures one nprobe per level
// of CalibrationKs.
const (
	// CalibrationQueries is how many of the shard's rows stand in for
	// queries: each asks for its nearest other rows. 256 queries measure
	// recall@10 on 2 560 neighbours, so a sample recall of 0.99 is within
	// about ±0.004 of the shard's (one standard error).
	CalibrationQueries = 256
	// CalibrationTarget is the sample recall each level's nprobe reaches:
	// the promised 0.99 of the shard's own top-k. The router's answer needs
	// less of each shard: its top-k is spread over the shards, so each
	// contributes its shallower top hits, which its nearest lists hold more
	// surely (bench/RESULTS-ivf-*.md measures it).
	CalibrationTarget = 0.99
)

// CalibrationKs are the k the default nprobe is measured at: a query for
// k hits probes the level of the smallest of them at least k (the last
// one beyond it: nothing is promised past k = 100; such a query can name
// its nprobe or ask for "exact": true).
func CalibrationKs() []int { return []int{10, 100} }

// Level is a measured default: queries for up to K hits probe NProbe
// lists; Recall is the sample recall@K measured there.
type Level struct {
	K, NProbe int
	Recall    float64
}

// Viewer runs fn with the rows an index mirrors and the index, both
// consistent for the duration of fn (a shard: under its read lock).
// Calibration holds it for one step at a time, so writes are never held
// off for a whole calibration.
type Viewer func(fn func(rows vector.Rows, x *Index) error) error

// CalibrateNProbe returns, for each of CalibrationKs in order, the
// smallest nprobe in a ladder growing by half each step (from
// DefaultNProbe(lists) for the first level, from the previous level's
// value after it) at which the index finds, for CalibrationQueries rows
// taken evenly through the shard (through the rows written since the
// centroids were trained, when there are that many), at least
// CalibrationTarget of each one's exact K nearest other rows (leave-one-out recall: the row itself
// is excluded from both answers). Every list is the last step (recall 1
// by construction: a probe of all lists re-scores the flat candidates).
//
// Writes go on between steps (a bulk load usually is), so every step
// reads only the rows the shard held at the first: the truth is scanned
// over them and the probes are restricted to them (Query.Allow), or rows
// added meanwhile would displace true neighbours from the answers and
// the measured recall, lowered, would push nprobe up to every list. Rows
// are appended at the end; a delete moves the last row into its hole, and
// an upsert of a held id changes its vector, so those (rare under a load)
// can still move the figure a little.
//
// The result depends only on the rows and the index, so it is the same
// on any replica, but only a leader runs it, and commits it: replicas
// then use the committed value (Index.SetDefaultNProbes).
func CalibrateNProbe(ctx context.Context, view Viewer, k quant.Kernel, f vector.Kernel) ([]Level, error) {
	var (
		qs    []vector.Query
		exact [][]vector.Hit
		lists int
		held  int // rows at the first step, the only ones any step reads
	)
	ks := CalibrationKs()
	deepest := ks[len(ks)-1]
	// The truth: an exact float32 scan at the deepest level, batch by
	// batch of queries (each batch one read-lock hold: at 333 000 rows of
	// 1536-D, about a quarter of a second of writes held off); each
	// level's truth is its prefix.
	const batch = 8
	err := view(func(rows vector.Rows, x *Index) error {
		n := rows.Len()
		if x == nil || n < 2*ks[0] {
			return fmt.Errorf("ivf calibration: %d rows", n)
		}
		lists, held = len(x.lists), n
		deepest = min(deepest, n-1)
		// Rows the centroids were trained on sit nearer the centroids
		// they shaped than a query does, so their recall flatters the
		// index. Rows written after the training (appended past
		// TrainedRows) are as new to the centroids as a query: use them
		// when there are enough.
		from := 0
		if t := x.cent.TrainedRows; n-t >= CalibrationQueries {
			from = t
		}
		nq := min(CalibrationQueries, n)
		for i := range nq {
			r := from + i*(n-from)/nq
			v := append([]float32(nil), rows.Row(r)...)
			qs = append(qs, vector.Query{Vector: v, K: deepest, Exclude: rows.IDs[r]})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for lo := 0; lo < len(qs); lo += batch {
		sub := qs[lo:min(lo+batch, len(qs))]
		err := view(func(rows vector.Rows, x *Index) error {
			hs, err := f.Scan(ctx, x.cent.Metric, rows.Prefix(held), sub)
			exact = append(exact, hs...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("ivf calibration: %w", err)
		}
	}
	allow := func(row int32) bool { return int(row) < held }
	var out []Level
	np := DefaultNProbe(lists)
	for _, lk := range ks {
		kk := min(lk, deepest)
		for {
			iq := make([]Query, len(qs))
			for i, q := range qs {
				q.K = kk
				iq[i] = Query{Query: q, NProbe: np, Allow: allow}
			}
			var got [][]vector.Hit
			err := view(func(rows vector.Rows, x *Index) error {
				var err error
				got, err = x.Search(ctx, k, f, rows, iq)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("ivf calibration: %w", err)
			}
			r := recallOf(exact, got, kk)
			if r >= CalibrationTarget || np >= lists {
				out = append(out, Level{K: lk, NProbe: np, Recall: r})
				break
			}
			np = min(lists, np+max(1, np/2))
		}
	}
	return out, nil
}

// recallOf is the mean share of each exact answer's first k ids found in
// got's.
func recallOf(exact, got [][]vector.Hit, k int) float64 {
	var sum float64
	for i, ex := range exact {
		ex = ex[:min(k, len(ex))]
		if len(ex) == 0 {
			sum++
			continue
		}
		have := make(map[string]bool, len(got[i]))
		for _, h := range got[i] {
			have[h.ID] = true
		}
		found := 0
		for _, h := range ex {
			if have[h.ID] {
				found++
			}
		}
		sum += float64(found) / float64(len(ex))
	}
	return sum / float64(max(1, len(exact)))
}
