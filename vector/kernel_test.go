package vector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tolerance. A kernel's result is compared with a float64 reference:
//
//	|got - ref| ≤ 1e-5·Σ|termᵢ| + n·2⁻¹⁴⁹
//
// where termᵢ is aᵢbᵢ (Dot) or (aᵢ-bᵢ)² (L2Squared). The relative part
// covers float32 rounding of a sum of up to 2048 terms kept in several
// accumulators; the absolute part is half a step of the denormal grid per
// term, for products that underflow. A NaN reference (a NaN input, Inf·0,
// Inf-Inf) must give NaN, an infinite reference the same infinity, and a
// finite one past float32's range may give that infinity.

func refDot(a, b []float32) (sum, mag float64) {
	for i := range min(len(a), len(b)) {
		p := float64(a[i]) * float64(b[i])
		sum += p
		mag += math.Abs(p)
	}
	return sum, mag
}

func refL2(a, b []float32) (sum, mag float64) {
	for i := range min(len(a), len(b)) {
		d := float64(a[i]) - float64(b[i])
		sum += d * d
		mag += d * d
	}
	return sum, mag
}

// checkClose reports why got is not an acceptable float32 result for the
// reference (ref, mag) over n terms, or "" when it is.
func checkClose(got float32, ref, mag float64, n int) string {
	switch {
	case math.IsNaN(ref):
		if got == got {
			return fmt.Sprintf("got %v, want NaN", got)
		}
		return ""
	case math.IsInf(ref, 0):
		if float64(got) != ref {
			return fmt.Sprintf("got %v, want %v", got, ref)
		}
		return ""
	}
	tol := 1e-5*mag + float64(n)*0x1p-149
	if r32 := float32(ref); math.IsInf(float64(r32), 0) && got == r32 {
		return "" // the true sum overflows float32
	}
	if d := math.Abs(float64(got) - ref); !(d <= tol) {
		return fmt.Sprintf("got %v, want %v ± %g (off by %g)", got, ref, tol, d)
	}
	return ""
}

// unaligned returns n random floats starting off floats past a 64-byte
// boundary, in a slice whose capacity ends at its length.
func unaligned(r *rand.Rand, n, off int) []float32 {
	buf := Aligned(n + off)[off:]
	for i := range buf {
		buf[i] = float32(r.NormFloat64())
	}
	return buf[:n:n]
}

func TestAvailable(t *testing.T) {
	ks := Available()
	require.NotEmpty(t, ks)
	require.Equal(t, "generic", ks[0].Name)
	for _, k := range ks {
		got, err := Select(k.Name)
		require.NoError(t, err)
		require.Equal(t, k.Name, got.Name)
	}
	best, err := Select("")
	require.NoError(t, err)
	require.Equal(t, ks[len(ks)-1].Name, best.Name)
	_, err = Select("sse9")
	require.ErrorContains(t, err, "generic")
	t.Logf("kernels: %v", kernelNames(ks))
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvKernel, "generic")
	k, err := FromEnv()
	require.NoError(t, err)
	require.Equal(t, "generic", k.Name)
	t.Setenv(EnvKernel, "nope")
	_, err = FromEnv()
	require.Error(t, err)
}

func kernelNames(ks []Kernel) []string {
	var names []string
	for _, k := range ks {
		names = append(names, k.Name)
	}
	return names
}

type kernelFunc struct {
	name string
	fn   func(Kernel) func(a, b []float32) float32
	ref  func(a, b []float32) (float64, float64)
}

var kernelFuncs = []kernelFunc{
	{"Dot", func(k Kernel) func(a, b []float32) float32 { return k.Dot }, refDot},
	{"L2Squared", func(k Kernel) func(a, b []float32) float32 { return k.L2Squared }, refL2},
}

// TestKernelsEveryLength runs every kernel this machine has, forced, over
// every length 0..2048 with both inputs starting at varying offsets from a
// cache line, so the 64-, 16- (8-) and masked tail paths all run.
func TestKernelsEveryLength(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const maxLen = 2048
	a := unaligned(r, maxLen+16, 0)
	b := unaligned(r, maxLen+16, 0)
	for _, k := range Available() {
		for _, kf := range kernelFuncs {
			t.Run(k.Name+"/"+kf.name, func(t *testing.T) {
				fn := kf.fn(k)
				for n := 0; n <= maxLen; n++ {
					offA, offB := n%16, (n*7+3)%16
					x, y := a[offA:offA+n:offA+n], b[offB:offB+n:offB+n]
					ref, mag := kf.ref(x, y)
					if msg := checkClose(fn(x, y), ref, mag, n); msg != "" {
						t.Fatalf("n=%d offsets %d,%d: %s", n, offA, offB, msg)
					}
				}
			})
		}
	}
}

// TestKernelsUnequalLengths checks that the shorter slice sets the length.
func TestKernelsUnequalLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b := unaligned(r, 100, 1), unaligned(r, 37, 5)
	for _, k := range Available() {
		for _, kf := range kernelFuncs {
			ref, mag := kf.ref(a[:37], b)
			require.Empty(t, checkClose(kf.fn(k)(a, b), ref, mag, 37), k.Name)
			require.Empty(t, checkClose(kf.fn(k)(b, a), ref, mag, 37), k.Name)
			require.Zero(t, kf.fn(k)(nil, a), k.Name)
			require.Zero(t, kf.fn(k)(a, []float32{}), k.Name)
		}
	}
}

func TestKernelsSpecialValues(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	den := math.Float32frombits(1)           // smallest denormal
	bigDen := math.Float32frombits(0x7fffff) // largest denormal
	cases := []struct {
		name string
		a, b float32 // placed at index at, every other element is 1
		want string  // "nan", "inf", "-inf" or "" for the reference check
	}{
		{"nan in a", nan, 1, "nan"},
		{"nan in b", 1, nan, "nan"},
		{"nan times zero", nan, 0, "nan"},
		{"inf", inf, 1, "inf"},
		{"minus inf", -inf, 1, "-inf"},
		{"inf times zero", inf, 0, "nan"},
		{"denormal times one", den, 1, ""},
		{"denormal squared", bigDen, bigDen, ""},
		{"max float", math.MaxFloat32, 0.5, ""},
	}
	// Lengths put the special value in the unrolled body, the single-step
	// loop and the masked tail of each kernel.
	lengths := []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1536}
	for _, k := range Available() {
		for _, kf := range kernelFuncs {
			for _, c := range cases {
				for _, n := range lengths {
					for _, at := range []int{0, n / 2, n - 1} {
						a, b := make([]float32, n), make([]float32, n)
						for i := range a {
							a[i], b[i] = 0.25, 0.5
						}
						a[at], b[at] = c.a, c.b
						got := kf.fn(k)(a, b)
						ref, mag := kf.ref(a, b)
						name := fmt.Sprintf("%s/%s/%s n=%d at=%d", k.Name, kf.name, c.name, n, at)
						require.Empty(t, checkClose(got, ref, mag, n), name)
						if kf.name == "L2Squared" {
							// (Inf-1)² is +Inf and (Inf-0)² too: only a NaN
							// input forces NaN, and the reference check
							// above covers the rest.
							if c.a != c.a || c.b != c.b {
								require.True(t, got != got, name)
							}
							continue
						}
						switch c.want {
						case "nan":
							require.True(t, got != got, name)
						case "inf":
							require.Equal(t, inf, got, name)
						case "-inf":
							require.Equal(t, -inf, got, name)
						}
					}
				}
			}
		}
	}
}

// TestTilesMatchReference checks ScoreRows, and so every tile kernel and
// its padding of short row groups and query remainders, against the
// reference for small dimensions (all tail shapes) and a few large ones.
func TestTilesMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dims := []int{1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 129, 1536}
	for _, k := range Available() {
		for _, m := range []Metric{DotProduct, Euclidean} {
			for _, dim := range dims {
				nq, nr := 1+r.IntN(9), 1+r.IntN(11)
				rows := unaligned(r, nr*dim, r.IntN(16))
				qs := make([][]float32, nq)
				for i := range qs {
					qs[i] = unaligned(r, dim, r.IntN(16))
				}
				out := make([]float32, nq*nr)
				k.ScoreRows(m, qs, rows, dim, out)
				for i, q := range qs {
					for j := range nr {
						row := rows[j*dim : (j+1)*dim]
						ref, mag := refDot(q, row)
						if m == Euclidean {
							ref, mag = refL2(q, row)
						}
						msg := checkClose(out[i*nr+j], ref, mag, dim)
						require.Empty(t, msg, "%s %v dim=%d q=%d row=%d", k.Name, m, dim, i, j)
					}
				}
			}
		}
	}
}

// TestTilesPositionIndependent checks that a pair's score is bit-for-bit
// the same whether it was scored alone, in a many-query tile, or in a short
// row group, which is what makes a scan's ranking deterministic.
func TestTilesPositionIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const dim = 77
	rows := unaligned(r, 9*dim, 0)
	qs := make([][]float32, 17)
	for i := range qs {
		qs[i] = unaligned(r, dim, 3)
	}
	for _, k := range Available() {
		for _, m := range []Metric{DotProduct, Euclidean} {
			// Batch sizes that mix six- and four-query tiles and lone
			// queries.
			for _, nq := range []int{2, 5, 7, 8, 9, 14, 17} {
				all := make([]float32, nq*9)
				k.ScoreRows(m, qs[:nq], rows, dim, all)
				for i := range nq {
					for j := range 9 {
						one := make([]float32, 1)
						k.ScoreRows(m, qs[i:i+1], rows[j*dim:(j+1)*dim], dim, one)
						require.Equal(t, math.Float32bits(one[0]), math.Float32bits(all[i*9+j]), "%s %v batch=%d q=%d row=%d", k.Name, m, nq, i, j)
					}
				}
			}
		}
	}
}

func TestNormalize(t *testing.T) {
	for _, k := range Available() {
		v := []float32{3, 4}
		require.True(t, k.Normalize(v))
		require.InDeltaSlice(t, []float32{0.6, 0.8}, v, 1e-6)
		zero := []float32{0, 0, 0}
		require.False(t, k.Normalize(zero))
		require.Equal(t, []float32{0, 0, 0}, zero)
		bad := []float32{1, float32(math.NaN())}
		require.False(t, k.Normalize(bad))
		require.False(t, k.Normalize(nil))
	}
}

// plainDot is the one-accumulator loop the generic kernel must beat.
func plainDot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func floatsFromBytes(data []byte) []float32 {
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24)
	}
	return out
}

// fuzzCheck compares every kernel with the reference on fuzzed inputs.
// Arbitrary bit patterns can overflow float32 in an intermediate sum that
// float64 keeps finite; past 1e37 only NaN propagation is checked.
func fuzzCheck(t *testing.T, kf kernelFunc, a, b []float32) {
	n := min(len(a), len(b))
	ref, mag := kf.ref(a, b)
	for _, k := range Available() {
		got := kf.fn(k)(a, b)
		if mag > 1e37 || math.IsInf(mag, 0) {
			if math.IsNaN(ref) && got == got {
				t.Fatalf("%s %s: got %v from NaN input", k.Name, kf.name, got)
			}
			continue
		}
		if msg := checkClose(got, ref, mag, n); msg != "" {
			t.Fatalf("%s %s n=%d: %s", k.Name, kf.name, n, msg)
		}
	}
}

func fuzzSeeds(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 7, 15, 16, 17, 33, 65, 100} {
		a := make([]byte, 4*n)
		for i := range a {
			a[i] = byte(r.IntN(256))
		}
		f.Add(a, uint8(n%16))
	}
}

// The fuzz targets split one byte string into two vectors; shift moves the
// second one's start, so unaligned loads and unequal lengths get fuzzed
// too. Each target checks every kernel Available returns.

func FuzzDot(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, shift uint8) {
		v := floatsFromBytes(data)
		h := len(v) / 2
		s := min(int(shift%16), len(v)-h)
		fuzzCheck(t, kernelFuncs[0], v[:h], v[h+s:])
	})
}

func FuzzL2Squared(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, shift uint8) {
		v := floatsFromBytes(data)
		h := len(v) / 2
		s := min(int(shift%16), len(v)-h)
		fuzzCheck(t, kernelFuncs[1], v[:h], v[h+s:])
	})
}

// FuzzScoreRows checks the tile kernels: fuzzed floats become a few rows
// and queries of a fuzzed dimension.
func FuzzScoreRows(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, shape uint8) {
		v := floatsFromBytes(data)
		dim := 1 + int(shape%40)
		nq := 1 + int(shape/40)%5
		if len(v) < dim*(nq+1) {
			return
		}
		qs := make([][]float32, nq)
		for i := range qs {
			qs[i] = v[i*dim : (i+1)*dim]
		}
		rows := v[nq*dim:]
		rows = rows[:len(rows)/dim*dim]
		nr := len(rows) / dim
		for _, k := range Available() {
			for _, m := range []Metric{DotProduct, Euclidean} {
				out := make([]float32, nq*nr)
				k.ScoreRows(m, qs, rows, dim, out)
				for i, q := range qs {
					for j := range nr {
						row := rows[j*dim : (j+1)*dim]
						ref, mag := refDot(q, row)
						if m == Euclidean {
							ref, mag = refL2(q, row)
						}
						got := out[i*nr+j]
						if mag > 1e37 || math.IsInf(mag, 0) {
							if math.IsNaN(ref) && got == got {
								t.Fatalf("%s %v: got %v from NaN input", k.Name, m, got)
							}
							continue
						}
						if msg := checkClose(got, ref, mag, dim); msg != "" {
							t.Fatalf("%s %v dim=%d q=%d row=%d: %s", k.Name, m, dim, i, j, msg)
						}
					}
				}
			}
		}
	})
}
