package sparse

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// zipfVector draws about terms distinct terms from a Zipf vocabulary of
// vocab terms, with positive weights.
func zipfVector(r *rand.Rand, z *rand.Zipf, terms int) Vector {
	seen := map[uint32]bool{}
	v := Vector{}
	for len(v.Indices) < terms {
		t := uint32(z.Uint64())
		if seen[t] {
			continue
		}
		seen[t] = true
		v.Indices = append(v.Indices, t)
		v.Values = append(v.Values, r.Float32()+0.01)
	}
	return v
}

// topK is the best k of scored (score descending, row ascending on ties).
func topK(s []Scored, k int) []Scored {
	slices.SortFunc(s, func(a, b Scored) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.Row, b.Row)
	})
	return s[:min(k, len(s))]
}

// BenchmarkSparseTopK scores queries of 20 terms against 100 000 rows of
// about 100 terms each from a Zipf vocabulary of 30 000 terms, idf
// weighted, and checks recall against a brute-force pass over every row
// (it must be 1: the search is exact). Report q/s from ns/op.
func BenchmarkSparseTopK(b *testing.B) {
	const (
		rows, vocab, termsPerDoc, queryTerms, k = 100_000, 30_000, 100, 20, 10
	)
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 2, vocab-1)
	x := New()
	docs := make([]map[uint32]float32, rows)
	for i := range rows {
		v := zipfVector(r, z, termsPerDoc)
		x.Set(i, v)
		docs[i] = toMap(v)
	}
	queries := make([]Query, 64)
	for i := range queries {
		q := zipfVector(r, z, queryTerms)
		w := make([]float32, q.Len())
		for j, t := range q.Indices {
			w[j] = IDF(rows, uint64(x.DF(t)))
		}
		queries[i] = Query{Vector: q, Weights: w}
	}
	// Recall against brute force, on a few queries (brute force reads
	// every row).
	hits, found := 0, 0
	for _, q := range queries[:8] {
		var want []Scored
		for row, d := range docs {
			if s, ok := bruteScore(q.Vector, q.Weights, d); ok {
				want = append(want, Scored{Row: uint32(row), Score: s})
			}
		}
		want = topK(want, k)
		got := topK(x.Score(q), k)
		in := map[uint32]bool{}
		for _, g := range got {
			in[g.Row] = true
		}
		for _, w := range want {
			hits++
			if in[w.Row] {
				found++
			}
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		bestK(x.Score(queries[i%len(queries)]), k)
	}
	b.ReportMetric(float64(found)/float64(hits), "recall")
	b.ReportMetric(float64(x.Postings())/rows, "postings/doc")
}

// bestK keeps the k best of s in one pass (insertion into a k-sized
// sorted prefix), as a shard's top-k selection costs.
func bestK(s []Scored, k int) []Scored {
	out := make([]Scored, 0, k+1)
	for _, c := range s {
		if len(out) == k && c.Score <= out[k-1].Score {
			continue
		}
		i, _ := slices.BinarySearchFunc(out, c, func(a, b Scored) int { return cmp.Compare(b.Score, a.Score) })
		out = slices.Insert(out, i, c)
		if len(out) > k {
			out = out[:k]
		}
	}
	return out
}

// BenchmarkSnapshotEncode is what opening a snapshot view costs a store
// with a sparse vector of 100 000 rows of ~100 terms (10 million
// postings): encoding the postings (AppendBinary), and restoring them
// (Decode). Report ms/op.
func BenchmarkSnapshotEncode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 2, 30_000-1)
	x := New()
	for i := range 100_000 {
		x.Set(i, zipfVector(r, z, 100))
	}
	var enc []byte
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			enc = x.AppendBinary(enc[:0])
		}
		b.ReportMetric(float64(len(enc))/float64(x.Postings()), "bytes/posting")
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := Decode(enc, x.Rows()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
