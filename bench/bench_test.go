package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/trawl-search/trawl/vector"
)

var sink float32

// BenchmarkDot1536 runs trawl's kernels, gonum, vek and the plain loop on
// the same aligned vectors in one run.
func BenchmarkDot1536(b *testing.B) {
	x, y := Vectors(Dim)
	impls := []struct {
		name string
		fn   func(a, b []float32) float32
	}{{"plain", PlainDot}, {"gonum", GonumDot}, {"vek", VekDot}}
	for _, k := range vector.Available() {
		impls = append(impls, struct {
			name string
			fn   func(a, b []float32) float32
		}{"trawl-" + k.Name, k.Dot})
	}
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			for b.Loop() {
				sink = im.fn(x, y)
			}
		})
	}
}

func BenchmarkTopK(b *testing.B) {
	scores := Scores(1 << 16)
	ids := make([]string, len(scores))
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	for _, k := range []int{10, 100} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			t := vector.NewTopK(k, ids)
			for b.Loop() {
				t.Reset(ids)
				SelectTopK(t, scores)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(len(scores)), "ns/candidate")
		})
	}
}

// BenchmarkScan scans a 48 MiB corpus (past most last-level caches) with
// batches of 1, 8 and 32 against a plain read of the same bytes.
func BenchmarkScan(b *testing.B) {
	rows := Corpus(8192)
	k, _ := vector.Select("")
	bytes := int64(len(Floats(rows)) * 4)
	b.Run("read", func(b *testing.B) {
		b.SetBytes(bytes)
		var s uint64
		for b.Loop() {
			s += ReadSum(Floats(rows))
		}
		sink = float32(s)
	})
	for _, batch := range []int{1, 8, 32} {
		qs := Queries(batch, 10)
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			b.SetBytes(bytes)
			for b.Loop() {
				if _, err := k.Scan(context.Background(), vector.Cosine, rows, qs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows.Len()*batch)*float64(b.N)/b.Elapsed().Seconds(), "vq/s")
		})
	}
}
