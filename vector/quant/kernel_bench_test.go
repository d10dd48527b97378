package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

var sink int32

// BenchmarkDot1536 runs every kernel on the production dimension, both
// vectors in L1.
func BenchmarkDot1536(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	x, y := randCodes(r, 1536, 0), randCodes(r, 1536, 0)
	for _, k := range Available() {
		b.Run(k.Name, func(b *testing.B) {
			b.SetBytes(2 * 1536)
			for b.Loop() {
				sink = k.Dot(x, y)
			}
		})
	}
}

// BenchmarkScoreRows measures the tiles alone on 1024 rows of codes that
// stay in cache (1.5 MiB, L2/L3), in ns per (query, row) pair, with the
// queries prepared and the row sums computed once, as a scan has them.
func BenchmarkScoreRows(b *testing.B) {
	const dim, n = 1536, 1024
	r := rand.New(rand.NewPCG(13, 14))
	rows := randCodes(r, n*dim, 0)
	for _, k := range Available() {
		for _, batch := range []int{1, 2, 32} {
			qs := make([][]int8, batch)
			for i := range qs {
				qs[i] = queryCodes(randCodes(r, dim, 0))
			}
			out := make([]int32, batch*n)
			prep := k.prepare(qs, dim)
			sums := make([]int32, n)
			for j := range sums {
				sums[j] = codeSum(rows[j*dim : (j+1)*dim])
			}
			b.Run(fmt.Sprintf("%s/batch=%d", k.Name, batch), func(b *testing.B) {
				for b.Loop() {
					k.score(prep, rows, sums, dim, out)
				}
				b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(batch*n), "ns/pair")
			})
		}
	}
}
