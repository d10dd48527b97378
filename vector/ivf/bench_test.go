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
	"github.com/trawl-search/trawl/vector/quant"
)

// BenchmarkSearch compares, in one run on one corpus of 100 000 1536-D
// unit rows (614 MB of floats, far past L3), the exact float32 scan, the
// flat int8 scan (quant) and the index at several nprobe, for single
// queries (p50, p99 and q/s of one client) and batches of 32. Each
// case also reports recall@10 against the exact scan over its 100
// queries. The "build" case reports the time to train the centroids (on
// SampleSize rows), to build the lists, and the index's bytes per row
// beside the floats. Run it short:
//
//	go test -run '^$' -bench Search -benchtime 40x ./vector/ivf/
//
// IVF_BENCH_ROWS overrides the row count.
func BenchmarkSearch(b *testing.B) {
	const dim, nq = 1536, 100
	n := benchRows()
	for _, corpus := range []string{"clustered", "gaussian"} {
		b.Run(corpus, func(b *testing.B) {
			r := rand.New(rand.NewPCG(21, 22))
			var (
				rows vector.Rows
				vecs [][]float32
			)
			if corpus == "clustered" {
				rows, vecs = clustered(r, n, nq, dim, true)
			} else {
				rows, vecs = gaussian(r, n, dim, true), gaussianQueries(r, nq, dim, true)
			}
			f, _ := vector.Select("")
			k, _ := quant.Select("")
			ctx := context.Background()
			m := vector.Cosine

			t0 := time.Now()
			lists := DefaultLists(n)
			sample := Sample(rows, SampleSize(lists, n), 1)
			c, err := Train(ctx, f, m, sample, dim, Config{Rows: n, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			train := time.Since(t0)
			s, err := quant.Train(flat(rows)[:min(n, 131072)*dim], dim, quant.DefaultKind)
			if err != nil {
				b.Fatal(err)
			}
			t0 = time.Now()
			x, err := Build(f, c, s, rows)
			if err != nil {
				b.Fatal(err)
			}
			buildTime := time.Since(t0)
			codes, err := quant.Encode(s, rows)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("build", func(b *testing.B) {
				for b.Loop() {
				}
				b.ReportMetric(train.Seconds(), "train-s")
				b.ReportMetric(buildTime.Seconds(), "build-s")
				b.ReportMetric(float64(x.Bytes())/float64(n), "index-B/row")
				b.ReportMetric(float64(codes.Bytes())/float64(n), "flat-int8-B/row")
				b.ReportMetric(float64(lists), "lists")
			})

			exact10, err := f.Scan(ctx, m, rows, plain(queriesOf(vecs, 10, 0)))
			if err != nil {
				b.Fatal(err)
			}
			type search func(qs []Query) ([][]vector.Hit, error)
			cases := []struct {
				name string
				run  search
			}{
				{"exact-float32", func(qs []Query) ([][]vector.Hit, error) { return f.Scan(ctx, m, rows, plain(qs)) }},
				{"flat-int8", func(qs []Query) ([][]vector.Hit, error) {
					return k.Scan(ctx, f, m, rows, codes, plain(qs), 0)
				}},
			}
			for _, np := range []int{1, 2, 4, 8, 16, 32, 64, 128, lists} {
				cases = append(cases, struct {
					name string
					run  search
				}{fmt.Sprintf("ivf-nprobe=%d", np), func(qs []Query) ([][]vector.Hit, error) {
					for i := range qs {
						qs[i].NProbe = np
					}
					return x.Search(ctx, k, f, rows, qs)
				}})
			}
			for _, cs := range cases {
				got, err := cs.run(queriesOf(vecs, 10, 0))
				if err != nil {
					b.Fatal(err)
				}
				rec := recall(exact10, got)
				b.Run(cs.name+"/batch=1", func(b *testing.B) {
					var lat []time.Duration
					i := 0
					for b.Loop() {
						t := time.Now()
						if _, err := cs.run(queriesOf(vecs[i%nq:i%nq+1], 10, 0)); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(t))
						i++
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "q/s")
					b.ReportMetric(rec, "recall@10")
				})
				b.Run(cs.name+"/batch=32", func(b *testing.B) {
					i := 0
					for b.Loop() {
						lo := i * 32 % (nq - 32)
						if _, err := cs.run(queriesOf(vecs[lo:lo+32], 10, 0)); err != nil {
							b.Fatal(err)
						}
						i++
					}
					b.ReportMetric(float64(32*b.N)/b.Elapsed().Seconds(), "q/s")
				})
			}
			runtime.KeepAlive(rows)
		})
	}
}
