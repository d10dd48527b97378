package ivf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/trawl-search/trawl/vector"
)

// BenchmarkFilterCrossover times, on one index of 100 000 clustered 1536-D
// unit rows (cosine, √N = 316 lists, default nprobe 16), a filtered query
// answered both ways a shard can answer it: "exact" scans the float32 rows
// the filter keeps (vector.Kernel.ScanSelected: exact by construction),
// "probe" probes the default nprobe lists with the filter as the Allow
// hook (a bitset, built per query as the shard builds it). A filter
// keeps a uniformly random share of the rows, independent of the clusters,
// at 0.1 % to 20 %, for k = 10 and 100; each case takes several such
// filters in turn, so their rows are not all in cache. Each probe case reports its
// recall@k against the exact filtered answer over the 100 queries, and
// "rule" is what ScanExactly decides there (1: exact). Run it as
//
//	go test -run '^$' -bench FilterCrossover -benchtime 40x ./vector/ivf/
//
// and compare the two p50s of each selectivity within the run; the rows
// are chosen by the caller (the shard's payload index) before either scan,
// so that cost is common to both and left out. IVF_BENCH_ROWS overrides
// the row count.
func BenchmarkFilterCrossover(b *testing.B) {
	const dim, nq = 1536, 100
	n := benchRows()
	r := rand.New(rand.NewPCG(31, 32))
	rows, vecs := clustered(r, n, nq, dim, true)
	ctx := context.Background()
	bt := build(b, vector.Cosine, rows, 0)
	x, f, k, m := bt.x, bt.f, bt.k, bt.m
	lists := x.Lists()
	b.Logf("%d rows of %d-D, %d lists, default nprobe %d, kernels %s/%s", n, dim, lists, DefaultNProbe(lists), f.Name, k.Name)

	for _, kk := range []int{10, 100} {
		for _, share := range []float64{0.001, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.10, 0.20} {
			// Several filters of the share, taken in turn, so that the
			// rows they keep (half the shard together, or 100 filters)
			// do not stay in the 32 MiB L3 from one query to the next:
			// a shard's queries rarely repeat a filter back to back.
			kept := max(1, int(share*float64(n)))
			sels := make([][]uint32, min(100, (n/2+kept-1)/kept))
			for i := range sels {
				sels[i] = selectShare(rand.New(rand.NewPCG(uint64(share*1e6), uint64(i))), n, share)
			}
			name := fmt.Sprintf("k=%d/sel=%.1f%%", kk, 100*share)
			exact := func(v []float32, sel []uint32) ([]vector.Hit, error) {
				hs, err := f.ScanSelected(ctx, m, rows, []vector.Query{{Vector: v, K: kk}}, sel)
				if err != nil {
					return nil, err
				}
				return hs[0], nil
			}
			probe := func(v []float32, sel []uint32) ([]vector.Hit, error) {
				allow := bitsetOf(sel, n)
				hs, err := x.Search(ctx, k, f, rows, []Query{{Query: vector.Query{Vector: v, K: kk}, Allow: allow}})
				if err != nil {
					return nil, err
				}
				return hs[0], nil
			}
			want, got := make([][]vector.Hit, nq), make([][]vector.Hit, nq)
			for i, v := range vecs {
				var err error
				if want[i], err = exact(v, sels[i%len(sels)]); err != nil {
					b.Fatal(err)
				}
				if got[i], err = probe(v, sels[i%len(sels)]); err != nil {
					b.Fatal(err)
				}
			}
			rule := 0.0
			if ScanExactly(kept, n, kk, 0, lists) {
				rule = 1
			}
			for _, c := range []struct {
				name string
				run  func([]float32, []uint32) ([]vector.Hit, error)
			}{{"exact", exact}, {"probe", probe}} {
				b.Run(name+"/"+c.name, func(b *testing.B) {
					var lat []time.Duration
					i := 0
					for b.Loop() {
						t := time.Now()
						if _, err := c.run(vecs[i%nq], sels[i%len(sels)]); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(t))
						i++
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(kept), "rows-kept")
					b.ReportMetric(rule, "rule")
					if c.name == "probe" {
						b.ReportMetric(recall(want, got), fmt.Sprintf("recall@%d", kk))
					}
				})
			}
		}
	}
	runtime.KeepAlive(rows)
}

// selectShare returns a uniformly random, ascending share of the rows
// 0..n-1 (at least one), as a filter's selected rows.
func selectShare(r *rand.Rand, n int, share float64) []uint32 {
	want := max(1, int(share*float64(n)))
	perm := r.Perm(n)[:want]
	sel := make([]uint32, want)
	for i, p := range perm {
		sel[i] = uint32(p)
	}
	slices.Sort(sel)
	return sel
}

// bitsetOf is the shard's rowSet: a membership test for sel's rows.
func bitsetOf(sel []uint32, n int) func(int32) bool {
	bits := make([]uint64, (n+63)/64)
	for _, r := range sel {
		bits[r/64] |= 1 << (r % 64)
	}
	return func(r int32) bool { return bits[r/64]&(1<<(uint32(r)%64)) != 0 }
}
