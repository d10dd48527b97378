package vector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

func benchRows(n, dim int) Rows {
	r := rand.New(rand.NewPCG(41, 42))
	data := Aligned(n * dim)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	rows := FlatRows(data, dim, make([]string, n))
	for i := range rows.IDs {
		rows.IDs[i] = fmt.Sprintf("doc-%d", i)
	}
	return rows
}

func benchQueries(n, dim, k int) []Query {
	r := rand.New(rand.NewPCG(43, 44))
	qs := make([]Query, n)
	for i := range qs {
		qs[i] = Query{Vector: unaligned(r, dim, 0), K: k}
	}
	return qs
}

// BenchmarkScan reports scan throughput for the best kernel on 1536-D
// rows: B/s counts row bytes read once per batch, and vq/s the vector-query
// pairs scored per second. 8192 rows (48 MiB) is past the last-level cache
// on most servers; bench/ measures bigger corpora against a memory read.
func BenchmarkScan(b *testing.B) {
	k, _ := Select("")
	const dim = 1536
	for _, n := range []int{256, 8192} {
		rows := benchRows(n, dim)
		for _, batch := range []int{1, 8, 32} {
			qs := benchQueries(batch, dim, 10)
			b.Run(fmt.Sprintf("%s/rows=%d/batch=%d", k.Name, n, batch), func(b *testing.B) {
				b.SetBytes(int64(n * dim * 4))
				for b.Loop() {
					if _, err := k.Scan(context.Background(), Cosine, rows, qs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n*batch)*float64(b.N)/b.Elapsed().Seconds(), "vq/s")
			})
		}
	}
}

// BenchmarkTopK measures the cost per candidate of keeping the best k of a
// stream of random scores, as a scan offers them.
func BenchmarkTopK(b *testing.B) {
	r := rand.New(rand.NewPCG(45, 46))
	const n = 1 << 16
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = r.Float32()
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	for _, k := range []int{10, 100} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			s := &scanner{m: DotProduct, rows: Rows{IDs: ids}}
			t := NewTopK(k, ids)
			for b.Loop() {
				t.Reset(ids)
				s.collect(t, "", 0, nil, scores)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/n, "ns/candidate")
		})
	}
}

// BenchmarkScoreRows measures the tile kernels alone on a block of 256
// rows that stays in cache, per kernel and batch size, in ns per
// (query, row) pair.
func BenchmarkScoreRows(b *testing.B) {
	const dim, n = 1536, 256
	rows := benchRows(n, dim)
	for _, k := range Available() {
		for _, batch := range []int{1, 4, 32} {
			qs := make([][]float32, batch)
			for i, q := range benchQueries(batch, dim, 10) {
				qs[i] = q.Vector
			}
			out := make([]float32, batch*n)
			b.Run(fmt.Sprintf("%s/batch=%d", k.Name, batch), func(b *testing.B) {
				for b.Loop() {
					k.ScoreRows(DotProduct, qs, rows.Run(0, n), dim, out)
				}
				b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(batch*n), "ns/pair")
			})
		}
	}
}
