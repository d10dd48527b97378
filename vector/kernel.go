package vector

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/trawl-search/trawl/vector/internal/racerange"
)

// Kernel is one implementation of the scoring primitives. Kernels are
// values, not package state, so tests and benchmarks can run every tier the
// machine supports side by side.
type Kernel struct {
	// Name is "generic", "avx2" or "avx512"; it is what /cluster/status and
	// trawl_vector_kernel_info report.
	Name string
	// Dot returns Σ aᵢbᵢ over min(len(a), len(b)) elements.
	Dot func(a, b []float32) float32
	// L2Squared returns Σ (aᵢ-bᵢ)² over min(len(a), len(b)) elements.
	L2Squared func(a, b []float32) float32

	// tile, when set, scores several queries against four rows per call;
	// ScoreRows and Scan use it. A Kernel built from just Dot and L2Squared
	// works too, scoring pair by pair.
	tile *tiler
}

// EnvKernel is the environment variable that forces a kernel by name.
const EnvKernel = "TRAWL_VECTOR_KERNEL"

// Generic is the portable Go kernel, available everywhere.
func Generic() Kernel {
	return Kernel{Name: "generic", Dot: dotGeneric, L2Squared: l2Generic}
}

// Available lists the kernels this CPU can run, best last.
func Available() []Kernel {
	return append([]Kernel{Generic()}, platformKernels()...)
}

// Select returns the kernel called name ("" means the best available), or an
// error naming the kernels this machine can run.
func Select(name string) (Kernel, error) {
	avail := Available()
	if name == "" {
		return avail[len(avail)-1], nil
	}
	names := make([]string, 0, len(avail))
	for _, k := range avail {
		if k.Name == name {
			return k, nil
		}
		names = append(names, k.Name)
	}
	return Kernel{}, fmt.Errorf("vector kernel %q not available on this CPU (have %s)", name, strings.Join(names, ", "))
}

// FromEnv selects the kernel named by TRAWL_VECTOR_KERNEL, or the best one.
func FromEnv() (Kernel, error) {
	return Select(os.Getenv(EnvKernel))
}

// Normalize scales v in place to unit length and reports whether it could:
// a zero (or non-finite) vector is left unchanged and returns false. The norm
// is taken in float64, so vectors whose float32 squared norm would underflow
// (elements near 1e-23) or overflow (near 1e20) still normalise: they have a
// direction, and refusing them would surprise. It runs once per write or
// query, never per scored row, so the scalar loop costs nothing that matters.
func (Kernel) Normalize(v []float32) bool {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return false
	}
	inv := 1 / math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
	return true
}

// The generic kernels keep four running sums, each taking the sum of two
// products per step: a single running sum makes every addition wait for
// the previous one, so the loop is latency-bound. Four sums (not eight)
// keep every value in a register; with eight, Go spills one, and its
// chain through memory becomes the bottleneck. Re-slicing each chunk to
// exactly eight elements lets the compiler drop the bounds checks.
//
// They are built //go:norace and report their reads once per call
// (racerange): instrumenting every element made scans the larger part of
// the race-enabled tests, 5 to 10 times the cost of the loop.

//go:norace
func dotGeneric(a, b []float32) float32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	racerange.Read(a)
	racerange.Read(b)
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0]*y[0] + x[4]*y[4]
		s1 += x[1]*y[1] + x[5]*y[5]
		s2 += x[2]*y[2] + x[6]*y[6]
		s3 += x[3]*y[3] + x[7]*y[7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

//go:norace
func l2Generic(a, b []float32) float32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	racerange.Read(a)
	racerange.Read(b)
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		d0, d4 := x[0]-y[0], x[4]-y[4]
		s0 += d0*d0 + d4*d4
		d1, d5 := x[1]-y[1], x[5]-y[5]
		s1 += d1*d1 + d5*d5
		d2, d6 := x[2]-y[2], x[6]-y[6]
		s2 += d2*d2 + d6*d6
		d3, d7 := x[3]-y[3], x[7]-y[7]
		s3 += d3*d3 + d7*d7
	}
	for ; i < n; i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}
