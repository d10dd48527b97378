//go:build !purego

package vector

import "github.com/klauspost/cpuid/v2"

// Dot and L2Squared are the assembly itself, taking the slices and using
// the shorter length, so a call costs one jump. The tile routines take raw
// pointers and one length, which ScoreRows checks first.

//go:noescape
func dotAVX2(a, b []float32) float32

//go:noescape
func l2AVX2(a, b []float32) float32

//go:noescape
func dot1x1AVX2(q, r *float32, n int) float32

//go:noescape
func l21x1AVX2(q, r *float32, n int) float32

//go:noescape
func dot1x4AVX2(q *float32, r *[4]*float32, n int, out *[4]float32)

//go:noescape
func l21x4AVX2(q *float32, r *[4]*float32, n int, out *[4]float32)

// dot2x4AVX2 and l22x4AVX2 read q[0:2] and write out[0:8].
//
//go:noescape
func dot2x4AVX2(q *[4]*float32, r *[4]*float32, n int, out *[16]float32)

//go:noescape
func l22x4AVX2(q *[4]*float32, r *[4]*float32, n int, out *[16]float32)

//go:noescape
func dotAVX512(a, b []float32) float32

//go:noescape
func l2AVX512(a, b []float32) float32

//go:noescape
func dot1x1AVX512(q, r *float32, n int) float32

//go:noescape
func l21x1AVX512(q, r *float32, n int) float32

//go:noescape
func dot1x4AVX512(q *float32, r *[4]*float32, n int, out *[4]float32)

//go:noescape
func l21x4AVX512(q *float32, r *[4]*float32, n int, out *[4]float32)

// dot4x4AVX512 and l24x4AVX512 also prefetch n floats (rounded down to
// whole steps) at each of the addresses pf0 and pf1, which they never load
// from: a prefetch does not fault, so these may point anywhere.
//
//go:noescape
func dot4x4AVX512(q *[4]*float32, r *[4]*float32, n int, out *[16]float32, pf0, pf1 uintptr)

//go:noescape
func l24x4AVX512(q *[4]*float32, r *[4]*float32, n int, out *[16]float32, pf0, pf1 uintptr)

// dot6x4AVX512 and l26x4AVX512 score six queries, out[i*4+j] for query i
// and row j, and prefetch like the 4×4 tiles.
//
//go:noescape
func dot6x4AVX512(q *[6]*float32, r *[4]*float32, n int, out *[24]float32, pf0, pf1 uintptr)

//go:noescape
func l26x4AVX512(q *[6]*float32, r *[4]*float32, n int, out *[24]float32, pf0, pf1 uintptr)

// Instruction sets of the tile kernels.
const (
	isaAVX2 = iota + 1
	isaAVX512
)

// tiler runs one instruction set's tile kernels. The calls are direct, not
// through func values, so escape analysis sees the assembly's noescape and
// the pointer arrays stay on the caller's stack: a scan allocates nothing
// per row.
type tiler struct {
	isa     uint8
	queries int // queries per many-query tile
	wide    int // queries per six-query tile (six), or 0 if there is none
}

// single scores q against one row.
func (t *tiler) single(m Metric, q, r *float32, n int) float32 {
	switch {
	case t.isa == isaAVX512 && m == Euclidean:
		return l21x1AVX512(q, r, n)
	case t.isa == isaAVX512:
		return dot1x1AVX512(q, r, n)
	case m == Euclidean:
		return l21x1AVX2(q, r, n)
	default:
		return dot1x1AVX2(q, r, n)
	}
}

// one scores q against four rows into out.
func (t *tiler) one(m Metric, q *float32, r *[4]*float32, n int, out *[4]float32) {
	switch {
	case t.isa == isaAVX512 && m == Euclidean:
		l21x4AVX512(q, r, n, out)
	case t.isa == isaAVX512:
		dot1x4AVX512(q, r, n, out)
	case m == Euclidean:
		l21x4AVX2(q, r, n, out)
	default:
		dot1x4AVX2(q, r, n, out)
	}
}

// many scores t.queries queries against four rows: out[i*4+j] is query
// i against row j.
func (t *tiler) many(m Metric, q *[4]*float32, r *[4]*float32, n int, out *[16]float32, pf0, pf1 uintptr) {
	switch {
	case t.isa == isaAVX512 && m == Euclidean:
		l24x4AVX512(q, r, n, out, pf0, pf1)
	case t.isa == isaAVX512:
		dot4x4AVX512(q, r, n, out, pf0, pf1)
	case m == Euclidean:
		l22x4AVX2(q, r, n, out)
	default:
		dot2x4AVX2(q, r, n, out)
	}
}

// six scores six queries against four rows: out[i*4+j] is query i
// against row j. Only tilers with wide == 6 have it.
func (t *tiler) six(m Metric, q *[6]*float32, r *[4]*float32, n int, out *[24]float32, pf0, pf1 uintptr) {
	if m == Euclidean {
		l26x4AVX512(q, r, n, out, pf0, pf1)
	} else {
		dot6x4AVX512(q, r, n, out, pf0, pf1)
	}
}

// platformKernels lists the SIMD kernels this CPU (and its OS, which must
// save the wider registers; cpuid checks that) can run, best last.
func platformKernels() []Kernel {
	var ks []Kernel
	if cpuid.CPU.Supports(cpuid.AVX2, cpuid.FMA3) {
		ks = append(ks, Kernel{
			Name: "avx2", Dot: dotAVX2, L2Squared: l2AVX2,
			tile: &tiler{isa: isaAVX2, queries: 2},
		})
	}
	if cpuid.CPU.Supports(cpuid.AVX512F) {
		ks = append(ks, Kernel{
			Name: "avx512", Dot: dotAVX512, L2Squared: l2AVX512,
			tile: &tiler{isa: isaAVX512, queries: 4, wide: 6},
		})
	}
	return ks
}
