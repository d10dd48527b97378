// Package bench measures package vector against comparison libraries and
// against the machine itself (a plain memory read). It is its own module so
// that gonum, vek and the plotting library stay out of trawl's go.mod.
//
// go test -bench . runs the micro-benchmarks; go run ./cmd/benchreport
// writes KERNELS.md and KERNELS.png.
package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/trawl-search/trawl/vector"
	"github.com/viterin/vek/vek32"
	"gonum.org/v1/gonum/blas/blas32"
)

// Dim is the production dimension.
const Dim = 1536

// PlainDot is the one-accumulator loop every kernel is compared with.
func PlainDot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// GonumDot is gonum's float32 BLAS dot (its own amd64 assembly).
func GonumDot(a, b []float32) float32 {
	return blas32.Dot(blas32.Vector{N: len(a), Data: a, Inc: 1}, blas32.Vector{N: len(b), Data: b, Inc: 1})
}

// VekDot is vek's float32 dot (AVX2 when the CPU has it). It must not be
// called with empty slices.
func VekDot(a, b []float32) float32 { return vek32.Dot(a, b) }

// ReadSum is the plain memory read a scan is measured against: it reads
// every byte of v once, as 64-bit words into eight independent sums, which
// is faster than memory on any core, so it runs at the memory's speed.
func ReadSum(v []float32) uint64 {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(v))), len(v)/2)
	var s0, s1, s2, s3, s4, s5, s6, s7 uint64
	i := 0
	for ; i+8 <= len(w); i += 8 {
		x := w[i : i+8 : i+8]
		s0 += x[0]
		s1 += x[1]
		s2 += x[2]
		s3 += x[3]
		s4 += x[4]
		s5 += x[5]
		s6 += x[6]
		s7 += x[7]
	}
	for ; i < len(w); i++ {
		s0 += w[i]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}

// Vectors returns two random 64-byte aligned vectors of n floats.
func Vectors(n int) (a, b []float32) {
	r := rand.New(rand.NewPCG(1, 2))
	a, b = vector.Aligned(n), vector.Aligned(n)
	for i := range a {
		a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	return a, b
}

// Corpus returns n random unit rows of Dim floats in one aligned arena, as
// a shard stores them.
func Corpus(n int) vector.Rows {
	r := rand.New(rand.NewPCG(3, 4))
	data := vector.Aligned(n * Dim)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	rows := vector.FlatRows(data, Dim, make([]string, n))
	k := vector.Generic()
	for i := range n {
		k.Normalize(rows.Row(i))
		rows.IDs[i] = fmt.Sprintf("doc-%08d", i)
	}
	return rows
}

// Queries returns b random unit queries asking for k hits each.
func Queries(b, k int) []vector.Query {
	r := rand.New(rand.NewPCG(5, 6))
	qs := make([]vector.Query, b)
	for i := range qs {
		v := make([]float32, Dim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		vector.Generic().Normalize(v)
		qs[i] = vector.Query{Vector: v, K: k}
	}
	return qs
}

// Scores returns n random candidate scores for the top-k benchmark.
func Scores(n int) []float32 {
	r := rand.New(rand.NewPCG(7, 8))
	s := make([]float32, n)
	for i := range s {
		s[i] = r.Float32()
	}
	return s
}

// SelectTopK offers every score to t the way a scan does: one comparison
// against the heap's threshold, and a push only for candidates that pass.
func SelectTopK(t *vector.TopK, scores []float32) {
	for i, s := range scores {
		if th, full := t.Threshold(); full && !(s >= th) {
			continue
		}
		t.Push(int32(i), s)
	}
}

// Clustered returns n unit rows of Dim floats around 32 random centres,
// made the way the dev cluster's corpus is (centres N(0, 1), each row a
// centre plus N(0, ½) noise per element, then normalised), and nq queries
// drawn the same way, so not in the corpus.
func Clustered(n, nq int) (vector.Rows, [][]float32) {
	r := rand.New(rand.NewPCG(9, 10))
	const centres = 32
	cs := make([][]float32, centres)
	for i := range cs {
		cs[i] = make([]float32, Dim)
		for j := range cs[i] {
			cs[i][j] = float32(r.NormFloat64())
		}
	}
	noise := float32(0.7071067811865476)
	k := vector.Generic()
	draw := func(v []float32) {
		c := cs[r.IntN(centres)]
		for j := range v {
			v[j] = c[j] + noise*float32(r.NormFloat64())
		}
		k.Normalize(v)
	}
	rows := vector.FlatRows(vector.Aligned(n*Dim), Dim, make([]string, n))
	for i := range n {
		draw(rows.Row(i))
		rows.IDs[i] = fmt.Sprintf("doc-%08d", i)
	}
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = make([]float32, Dim)
		draw(qs[i])
	}
	return rows, qs
}

// Recall is the mean over queries of the fraction of want's ids (the
// exact answer) that got holds.
func Recall(want, got [][]vector.Hit) float64 {
	var sum float64
	for i, w := range want {
		ids := make(map[string]bool, len(w))
		for _, h := range w {
			ids[h.ID] = true
		}
		found := 0
		for _, h := range got[i] {
			if ids[h.ID] {
				found++
			}
		}
		sum += float64(found) / float64(max(1, len(w)))
	}
	return sum / float64(len(want))
}

// Anisotropic returns n unit rows of Dim floats whose dimensions have
// unequal spread, as learned embeddings do: dimension d is N(0, σ_d²) with
// σ_d log-uniform over [e^-1.5, e^1.5], and 16 dimensions eight times wider
// still, then normalised; and nq queries drawn the same way. It is where a
// per-dimension scale should beat a per-shard one.
func Anisotropic(n, nq int) (vector.Rows, [][]float32) {
	r := rand.New(rand.NewPCG(13, 14))
	sigma := make([]float64, Dim)
	for d := range sigma {
		sigma[d] = math.Exp(3*r.Float64() - 1.5)
	}
	for _, d := range r.Perm(Dim)[:16] {
		sigma[d] *= 8
	}
	k := vector.Generic()
	draw := func(v []float32) {
		for d := range v {
			v[d] = float32(sigma[d] * r.NormFloat64())
		}
		k.Normalize(v)
	}
	rows := vector.FlatRows(vector.Aligned(n*Dim), Dim, make([]string, n))
	for i := range n {
		draw(rows.Row(i))
		rows.IDs[i] = fmt.Sprintf("doc-%08d", i)
	}
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = make([]float32, Dim)
		draw(qs[i])
	}
	return rows, qs
}

// Floats is the one array a corpus made here (Corpus, Clustered,
// Anisotropic) keeps its rows in, back to back: what a plain read of the
// same bytes, or training on all of them, takes.
func Floats(rows vector.Rows) []float32 {
	if rows.Len() == 0 {
		return nil
	}
	return rows.Run(0, rows.Len())
}
