//go:build !purego

package quant

import "github.com/klauspost/cpuid/v2"

// The assembly takes raw pointers and a length in bytes that is a
// multiple of 32 (ScoreRows and dotAVX2 check and round first) and never
// reads past it.

//go:noescape
func dot1x1AVX2(q, r *int8, n int) int32

//go:noescape
func dot1x4AVX2(q *int8, r *[4]*int8, n int, out *[4]int32)

// dot2x4uAVX2 takes queries offset into unsigned bytes (see QueryMax)
// and writes Σ u·c of query i against row j to out[i*4+j]. It prefetches
// 4n bytes from pf, which it never loads from.
//
//go:noescape
func dot2x4uAVX2(q *[2]*uint8, r *[4]*int8, n int, out *[8]int32, pf uintptr)

// dotAVX2 is Kernel.Dot: the assembly over whole 32-byte steps, Go for
// the rest.
func dotAVX2(a, b []int8) int32 {
	n := min(len(a), len(b))
	body := n &^ (tileStep - 1)
	var s int32
	if body > 0 {
		s = dot1x1AVX2(&a[0], &b[0], body)
	}
	if body < n {
		s += dotGeneric(a[body:n], b[body:n])
	}
	return s
}

// tiler runs the AVX2 tile kernels; direct calls keep the pointer arrays
// on the caller's stack.
type tiler struct{}

func (*tiler) single(q, r *int8, n int) int32 { return dot1x1AVX2(q, r, n) }

func (*tiler) one(q *int8, r *[4]*int8, n int, out *[4]int32) { dot1x4AVX2(q, r, n, out) }

func (*tiler) two(q *[2]*uint8, r *[4]*int8, n int, out *[8]int32, pf uintptr) {
	dot2x4uAVX2(q, r, n, out, pf)
}

// platformKernels lists the SIMD kernels this CPU (and its OS) can run,
// best last.
func platformKernels() []Kernel {
	var ks []Kernel
	if cpuid.CPU.Supports(cpuid.AVX2) {
		ks = append(ks, Kernel{Name: "avx2", Dot: dotAVX2, tile: &tiler{}})
	}
	return ks
}
