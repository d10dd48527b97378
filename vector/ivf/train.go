package ivf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"

	"github.com/trawl-search/trawl/vector"
)

// Training parameters.
const (
	// SamplePerList is how many sample rows Train is given per list.
	// FAISS warns below 39 per centre and caps at 256; 64 (20 224 rows for
	// 316 lists) trained 100 000 1536-D rows in ~2 s on two cores and gave
	// the recall in docs/ivf.md. Training cost grows with lists·sample,
	// so with √N lists it is linear in N.
	SamplePerList = 64
	// DefaultIterations bounds Lloyd's iterations; Train stops earlier
	// when no sample row changes list.
	DefaultIterations = 10
	// RetrainGrowth is the factor a shard may grow (or shrink) by from
	// the rows its centroids were trained on before NeedsRetrain says to
	// train again: see NeedsRetrain.
	RetrainGrowth = 4
	// MinRows is the smallest shard worth an index: below it a flat int8
	// scan costs under ~2 ms a query on one core (16 384 rows of 1536-D
	// codes, 24 MiB), and √N lists would be too few to skip much.
	MinRows = 16384
)

// DefaultLists is the list count for a shard of n rows: √n rounded, at
// least 1 and at most MaxLists (and never more than n). With √n lists of
// √n rows each, choosing lists (n scores against centres) and scanning
// nprobe of them (nprobe·√n rows) both cost O(√n) per query.
func DefaultLists(n int) int {
	l := int(math.Round(math.Sqrt(float64(max(n, 0)))))
	return max(1, min(l, MaxLists, max(n, 1)))
}

// NeedsRetrain reports whether a shard now holding rows rows should train
// new centroids, trained when it held trained: once it has grown (or
// shrunk) by RetrainGrowth. Lists were sized for √trained rows each; at 4×
// the rows each holds 4× that, so a query probing the same nprobe lists
// reads twice the rows √n lists would give it (and the centres may no
// longer fit where the new rows are). Retraining sooner costs a full
// re-assignment of every row (Build) more often; later lets probe cost
// grow linearly with the shard, as a flat scan's does.
func NeedsRetrain(trained, rows int) bool {
	if rows < MinRows {
		return false
	}
	return trained <= 0 || rows >= RetrainGrowth*trained || trained >= RetrainGrowth*rows
}

// SampleSize is how many rows to train lists lists from (at most rows).
func SampleSize(lists, rows int) int { return min(rows, lists*SamplePerList) }

// Sample copies n rows chosen uniformly at random without replacement
// (seeded) out of rows, in row order, into a new slice. The caller holds
// its read lock only for this copy (about 30 ms for 20 000 1536-D rows)
// and trains from the copy with no lock held, so training never blocks
// writes, nor the searches that would queue behind them.
func Sample(rows vector.Rows, n int, seed uint64) []float32 {
	total := rows.Len()
	n = min(max(n, 0), total)
	r := rand.New(rand.NewPCG(seed, 0x1f5))
	pick := r.Perm(total)[:n]
	slices.Sort(pick)
	out := make([]float32, 0, n*rows.Dim)
	for _, i := range pick {
		out = append(out, rows.Row(i)...)
	}
	return out
}

// Config is what Train needs beyond the sample.
type Config struct {
	// Rows is how many rows the shard holds; it sets the list count
	// (DefaultLists) and Centroids.TrainedRows.
	Rows int
	// Lists overrides DefaultLists(Rows) when positive.
	Lists int
	// Iterations overrides DefaultIterations when positive.
	Iterations int
	// Seed makes training repeatable: the same sample, kernel and seed give
	// the same centroids. (Replicas need not train: the leader commits the
	// result.)
	Seed uint64
}

// Train runs k-means on sample (row-major, dim floats a row) for metric
// m and returns the centroids: a seeded random choice of distinct sample
// rows as the initial centres (FAISS's default), then Lloyd's iterations,
// each assigning every sample row to its nearest centre with f's batch
// kernel and moving each centre to the mean of its rows. For Cosine the
// means are normalised (spherical k-means: sample rows are unit vectors,
// and so are the centres, as assignment by dot product assumes); for dot
// and l2 the centres are plain means (L2 k-means). A centre left with no
// rows is moved onto a random row of the largest list.
//
// Train reads only sample, which the caller owns, and checks ctx between
// blocks; it is meant to run in the background while searches continue
// on the old index, its result committed and swapped in by the caller.
func Train(ctx context.Context, f vector.Kernel, m vector.Metric, sample []float32, dim int, cfg Config) (Centroids, error) {
	if dim <= 0 || len(sample)%dim != 0 {
		return Centroids{}, fmt.Errorf("ivf: %d floats are not whole %d-D rows", len(sample), dim)
	}
	ns := len(sample) / dim
	if ns == 0 {
		return Centroids{}, fmt.Errorf("ivf: train with no rows")
	}
	lists := cfg.Lists
	if lists <= 0 {
		lists = DefaultLists(max(cfg.Rows, ns))
	}
	lists = min(lists, ns, MaxLists)
	iters := cfg.Iterations
	if iters <= 0 {
		iters = DefaultIterations
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x1f6))
	cent := make([]float32, 0, lists*dim)
	for _, i := range r.Perm(ns)[:lists] {
		cent = append(cent, sample[i*dim:(i+1)*dim]...)
	}
	c := Centroids{Metric: m, Dim: dim, Data: cent, TrainedRows: max(cfg.Rows, ns)}
	w := 1.0
	if m == vector.Cosine {
		w = 0
	}
	assign := make([]int32, ns)
	for i := range assign {
		assign[i] = -1
	}
	procs := runtime.GOMAXPROCS(0)
	for it := range iters {
		co := newCoarse(c)
		workers := max(1, min(procs, ns/minParallelRows))
		sums := make([][]float64, workers)
		counts := make([][]int, workers)
		changed := make([]int, workers)
		err := vector.SplitRows(ns, workers, assignBlock, func(wk, lo, hi int) error {
			sum := make([]float64, lists*dim)
			cnt := make([]int, lists)
			fast := make([]float32, assignBlock*lists)
			qs := make([][]float32, 0, assignBlock)
			for b := lo; b < hi; b += assignBlock {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("ivf: training stopped in iteration %d: %w", it+1, err)
				}
				end := min(b+assignBlock, hi)
				qs = qs[:0]
				for i := b; i < end; i++ {
					qs = append(qs, sample[i*dim:(i+1)*dim])
				}
				f.ScoreRows(vector.DotProduct, qs, c.Data, dim, fast)
				for i, q := range qs {
					// The fast kernel's best: training need not be the
					// same on every machine (the leader commits its result).
					best, bk := 0, math.Inf(-1)
					for j, d := range fast[i*lists : (i+1)*lists] {
						if k := float64(d) - w*co.half[j]; k > bk {
							best, bk = j, k
						}
					}
					if assign[b+i] != int32(best) {
						changed[wk]++
						assign[b+i] = int32(best)
					}
					cnt[best]++
					acc := sum[best*dim : (best+1)*dim]
					for d, v := range q {
						acc[d] += float64(v)
					}
				}
			}
			sums[wk], counts[wk] = sum, cnt
			return nil
		})
		if err != nil {
			return Centroids{}, err
		}
		total := 0
		for _, ch := range changed {
			total += ch
		}
		if total == 0 {
			break
		}
		// New centres: the mean of each list's rows (normalised for
		// Cosine); empty lists move onto a row of the largest.
		sum, cnt := sums[0], counts[0]
		for wk := 1; wk < workers; wk++ {
			for i, v := range sums[wk] {
				sum[i] += v
			}
			for j, n := range counts[wk] {
				cnt[j] += n
			}
		}
		for j := range lists {
			ctr := c.Data[j*dim : (j+1)*dim]
			if cnt[j] == 0 {
				continue
			}
			for d := range ctr {
				ctr[d] = float32(sum[j*dim+d] / float64(cnt[j]))
			}
			if m == vector.Cosine && !f.Normalize(ctr) {
				copy(ctr, sample[firstOf(assign, int32(j))*dim:])
			}
		}
		for j := range lists {
			if cnt[j] > 0 {
				continue
			}
			big := 0
			for l, n := range cnt {
				if n > cnt[big] {
					big = l
				}
			}
			members := make([]int, 0, cnt[big])
			for i, a := range assign {
				if int(a) == big {
					members = append(members, i)
				}
			}
			pick := members[r.IntN(len(members))]
			copy(c.Data[j*dim:(j+1)*dim], sample[pick*dim:(pick+1)*dim])
			assign[pick] = int32(j)
			cnt[j], cnt[big] = 1, cnt[big]-1
		}
	}
	return c, nil
}

// firstOf returns the first sample row assigned to list j.
func firstOf(assign []int32, j int32) int {
	return max(0, slices.Index(assign, j))
}
