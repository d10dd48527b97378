package vector

import (
	"fmt"
	"math"
	"os"
	"strings"
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
}

// EnvKernel is the environment variable that forces a kernel by name.
const EnvKernel = "TRAWL_VECTOR_KERNEL"

// Generic is the portable Go kernel, available everywhere.
func Generic() Kernel {
	return Kernel{Name: "generic", Dot: dotGeneric, L2Squared: l2Generic}
}

// Available lists the kernels this CPU can run, best last.
func Available() []Kernel {
	return []Kernel{Generic()}
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

func dotGeneric(a, b []float32) float32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func l2Generic(a, b []float32) float32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		d0 := a[i] - b[i]
		d1 := a[i+1] - b[i+1]
		d2 := a[i+2] - b[i+2]
		d3 := a[i+3] - b[i+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < n; i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}
