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
// (bench/RESULTS-peer-nprobe.md), and on isotropic data nothing short of
// nearly every list reaches 0.99.
const (
	// CalibrationQueries is how many of the shard's rows stand in for
	// queries: each asks for its 10 nearest other rows.
	CalibrationQueries = 64
	// CalibrationK is the k recall is measured at.
	CalibrationK = 10
	// CalibrationTarget is the sample recall the chosen nprobe reaches:
	// above the 0.99 promised, since the sample's recall is an estimate.
	CalibrationTarget = 0.995
)

// Viewer runs fn with the rows an index mirrors and the index, both
// consistent for the duration of fn (a shard: under its read lock).
// Calibration holds it for one step at a time, so writes are never held
// off for a whole calibration.
type Viewer func(fn func(rows vector.Rows, x *Index) error) error

// CalibrateNProbe returns the smallest nprobe in a ladder from
// DefaultNProbe(lists), growing by half each step, at which the index
// finds, for CalibrationQueries rows taken evenly through the shard, at
// least CalibrationTarget of each one's exact CalibrationK nearest other
// rows (leave-one-out recall: the row itself is excluded from both
// answers), and the recall measured there. Every list is the last step
// (recall 1 by construction: a probe of all lists re-scores the flat
// candidates).
//
// The result depends only on the rows and the index, so it is the same
// on any replica, but only a leader runs it, and commits it: replicas
// then use the committed value (Index.SetDefaultNProbe).
func CalibrateNProbe(ctx context.Context, view Viewer, k quant.Kernel, f vector.Kernel) (int, float64, error) {
	var (
		qs    []vector.Query
		exact [][]vector.Hit
		lists int
	)
	// The truth: an exact float32 scan, batch by batch of queries.
	const batch = 8
	err := view(func(rows vector.Rows, x *Index) error {
		n := rows.Len()
		if x == nil || n < 2*CalibrationK {
			return fmt.Errorf("ivf calibration: %d rows", n)
		}
		lists = len(x.lists)
		nq := min(CalibrationQueries, n)
		for i := range nq {
			r := i * n / nq
			v := append([]float32(nil), rows.Data[r*rows.Dim:(r+1)*rows.Dim]...)
			qs = append(qs, vector.Query{Vector: v, K: CalibrationK, Exclude: rows.IDs[r]})
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	for lo := 0; lo < len(qs); lo += batch {
		sub := qs[lo:min(lo+batch, len(qs))]
		err := view(func(rows vector.Rows, x *Index) error {
			hs, err := f.Scan(ctx, x.cent.Metric, rows, sub)
			exact = append(exact, hs...)
			return err
		})
		if err != nil {
			return 0, 0, fmt.Errorf("ivf calibration: %w", err)
		}
	}
	np := DefaultNProbe(lists)
	for {
		iq := make([]Query, len(qs))
		for i, q := range qs {
			iq[i] = Query{Query: q, NProbe: np}
		}
		var got [][]vector.Hit
		err := view(func(rows vector.Rows, x *Index) error {
			var err error
			got, err = x.Search(ctx, k, f, rows, iq)
			return err
		})
		if err != nil {
			return 0, 0, fmt.Errorf("ivf calibration: %w", err)
		}
		r := recallOf(exact, got)
		if r >= CalibrationTarget || np >= lists {
			return np, r, nil
		}
		np = min(lists, np+max(1, np/2))
	}
}

// recallOf is the mean share of each exact answer's ids found in got's.
func recallOf(exact, got [][]vector.Hit) float64 {
	var sum float64
	for i, ex := range exact {
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
