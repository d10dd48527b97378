package quant

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/trawl-search/trawl/vector"
)

// BenchmarkScan compares the int8 scan (codes, then re-scoring oversample·10
// rows per query) with the float32 scan of the same unit rows, 1536-D, in
// one run: 65 536 rows are 384 MiB of floats and 96 MiB of codes, both
// past a 32 MiB L3. vq/s counts vector-query pairs per second. Run with
// -cpu 1 for per-core figures.
func BenchmarkScan(b *testing.B) {
	const n, dim = 65536, 1536
	r := rand.New(rand.NewPCG(91, 92))
	rows := gaussian(r, n, dim, true)
	codes := mustCodes(b, rows, DefaultKind)
	k, _ := Select("")
	f, _ := vector.Select("")
	ctx := context.Background()
	for _, batch := range []int{1, 32} {
		qs := make([]vector.Query, batch)
		for i := range qs {
			qs[i] = vector.Query{Vector: gaussian(r, 1, dim, true).Row(0), K: 10}
		}
		b.Run(fmt.Sprintf("float32-%s/batch=%d", f.Name, batch), func(b *testing.B) {
			for b.Loop() {
				if _, err := f.Scan(ctx, vector.Cosine, rows, qs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*batch)*float64(b.N)/b.Elapsed().Seconds(), "vq/s")
		})
		b.Run(fmt.Sprintf("int8-%s/batch=%d", k.Name, batch), func(b *testing.B) {
			for b.Loop() {
				if _, err := k.Scan(ctx, f, vector.Cosine, rows, codes, qs, DefaultOversample); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*batch)*float64(b.N)/b.Elapsed().Seconds(), "vq/s")
		})
	}
}

// BenchmarkEncode measures encoding one 1536-D row (what an upsert adds,
// and what rebuilding the codes on load costs per row) and training a
// scale from 10 000 rows.
func BenchmarkEncode(b *testing.B) {
	const dim = 1536
	r := rand.New(rand.NewPCG(93, 94))
	rows := gaussian(r, 10000, dim, true)
	s, err := TrainRows(rows, rows.Len(), DefaultKind)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("row", func(b *testing.B) {
		c := NewCodes(s)
		i := 0
		for b.Loop() {
			if c.Len() == 10000 {
				c = NewCodes(s)
			}
			c.Append(rows.Row(i % 10000))
			i++
		}
	})
	b.Run("train-10000", func(b *testing.B) {
		for b.Loop() {
			if _, err := TrainRows(rows, rows.Len(), DefaultKind); err != nil {
				b.Fatal(err)
			}
		}
	})
}
