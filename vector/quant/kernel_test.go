package quant

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/trawl-search/trawl/vector"
)

// refDot is the exact reference: int64 products summed in order.
func refDot(a, b []int8) int64 {
	var s int64
	for i := range min(len(a), len(b)) {
		s += int64(a[i]) * int64(b[i])
	}
	return s
}

// randCodes returns n random codes in [-127, 127] starting off bytes past
// a 64-byte boundary, in a slice whose capacity ends at its length. Every
// tenth element is an extreme (±127), so saturation would show.
func randCodes(r *rand.Rand, n, off int) []int8 {
	buf := vector.AlignedInt8(n + off)[off:]
	for i := range buf {
		switch r.IntN(10) {
		case 0:
			buf[i] = MaxCode
		case 1:
			buf[i] = -MaxCode
		default:
			buf[i] = int8(r.IntN(2*MaxCode+1) - MaxCode)
		}
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
	_, err := Select("vnni")
	require.ErrorContains(t, err, "generic")
	t.Setenv(vector.EnvKernel, "generic")
	require.Equal(t, "generic", FromEnv().Name)
	t.Setenv(vector.EnvKernel, "avx512") // no int8 twin: the best one
	require.Equal(t, ks[len(ks)-1].Name, FromEnv().Name)
	var names []string
	for _, k := range ks {
		names = append(names, k.Name)
	}
	// There is no AVX-512 VNNI (VPDPBUSD) or AMX kernel: say so where the
	// test log shows which paths ran.
	t.Logf("int8 kernels run here: %v (no VNNI or AMX kernel is built)", names)
}

// TestDotEveryLength runs every kernel this machine has, forced, over
// every length 0..2048 with both inputs at several offsets from a cache
// line, against the exact reference.
func TestDotEveryLength(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const maxLen = 2048
	a := randCodes(r, maxLen+64, 0)
	b := randCodes(r, maxLen+64, 0)
	neg, pos := make([]int8, maxLen), make([]int8, maxLen)
	for i := range neg {
		neg[i], pos[i] = -MaxCode, MaxCode
	}
	for _, k := range Available() {
		t.Run(k.Name, func(t *testing.T) {
			for n := 0; n <= maxLen; n++ {
				for _, off := range [][2]int{{0, 0}, {n % 64, (n*7 + 3) % 64}, {1, 33}, {31, 2}} {
					x, y := a[off[0]:off[0]+n:off[0]+n], b[off[1]:off[1]+n:off[1]+n]
					require.Equal(t, refDot(x, y), int64(k.Dot(x, y)), "n=%d offsets %v", n, off)
				}
				// All -127 against all -127 and all +127: the largest sums
				// of each sign.
				require.Equal(t, int64(n)*127*127, int64(k.Dot(neg[:n], neg[:n])), "n=%d", n)
				require.Equal(t, -int64(n)*127*127, int64(k.Dot(neg[:n], pos[:n])), "n=%d", n)
				require.Equal(t, -int64(n)*127*127, int64(k.Dot(pos[:n], neg[:n])), "n=%d", n)
			}
		})
	}
}

func TestDotUnequalLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b := randCodes(r, 100, 1), randCodes(r, 37, 5)
	for _, k := range Available() {
		require.Equal(t, refDot(a[:37], b), int64(k.Dot(a, b)), k.Name)
		require.Equal(t, refDot(a[:37], b), int64(k.Dot(b, a)), k.Name)
		require.Zero(t, k.Dot(nil, a), k.Name)
		require.Zero(t, k.Dot(a, []int8{}), k.Name)
	}
}

// TestScoreRowsMatchesReference checks ScoreRows, and so every tile
// kernel, its padding of short row groups, odd query counts and the Go
// tail past the last whole 32-byte step, against the reference.
func TestScoreRowsMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dims := []int{1, 2, 3, 7, 16, 31, 32, 33, 47, 63, 64, 65, 95, 96, 100, 129, 1536, 1543}
	for _, k := range Available() {
		for _, dim := range dims {
			for _, nq := range []int{1, 2, 3, 4, 5, 9} {
				nr := 1 + r.IntN(11)
				rows := randCodes(r, nr*dim, r.IntN(64))
				qs := make([][]int8, nq)
				for i := range qs {
					qs[i] = queryCodes(randCodes(r, dim, r.IntN(64)))
				}
				out := make([]int32, nq*nr)
				k.ScoreRows(qs, rows, dim, out)
				for i, q := range qs {
					for j := range nr {
						want := refDot(q, rows[j*dim:(j+1)*dim])
						require.Equal(t, want, int64(out[i*nr+j]), "%s dim=%d nq=%d q=%d row=%d", k.Name, dim, nq, i, j)
					}
				}
			}
		}
	}
}

func TestScoreRowsPanics(t *testing.T) {
	k := Generic()
	require.Panics(t, func() { k.ScoreRows(nil, nil, 0, nil) })
	require.Panics(t, func() { k.ScoreRows([][]int8{{1}}, []int8{1, 2}, 2, make([]int32, 1)) })
	require.Panics(t, func() { k.ScoreRows([][]int8{{1, 2}}, []int8{1, 2, 3, 4}, 2, make([]int32, 1)) })
}

// The fuzz targets split one byte string into vectors; bytes map to codes
// with -128 folded to -127 (codes never hold -128). shift moves the second
// vector's start, so unaligned loads and unequal lengths are fuzzed too.

// queryCodes folds codes into the query range [-63, 63] in place, keeping
// the extremes extreme.
func queryCodes(v []int8) []int8 {
	for i, c := range v {
		v[i] = c / 2
	}
	return v
}

func fuzzCodes(data []byte) []int8 {
	out := make([]int8, len(data))
	for i, b := range data {
		out[i] = max(int8(b), -MaxCode)
	}
	return out
}

func fuzzSeeds(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 31, 32, 33, 64, 65, 200, 3100} {
		a := make([]byte, n)
		for i := range a {
			a[i] = byte(r.IntN(256))
		}
		f.Add(a, uint8(n%64))
	}
}

func FuzzDot(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, shift uint8) {
		v := fuzzCodes(data)
		h := len(v) / 2
		s := min(int(shift%64), len(v)-h)
		a, b := v[:h], v[h+s:]
		want := refDot(a, b)
		for _, k := range Available() {
			if got := int64(k.Dot(a, b)); got != want {
				t.Fatalf("%s n=%d: got %d, want %d", k.Name, min(len(a), len(b)), got, want)
			}
		}
	})
}

// FuzzScoreRows checks the tiles: fuzzed codes become a few rows and
// queries of a fuzzed dimension.
func FuzzScoreRows(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, shape uint8) {
		v := fuzzCodes(data)
		dim := 1 + int(shape%80)
		nq := 1 + int(shape/80)%4
		if len(v) < dim*(nq+1) {
			return
		}
		qs := make([][]int8, nq)
		for i := range qs {
			qs[i] = queryCodes(slices.Clone(v[i*dim : (i+1)*dim]))
		}
		rows := v[nq*dim:]
		rows = rows[:len(rows)/dim*dim]
		nr := len(rows) / dim
		for _, k := range Available() {
			out := make([]int32, nq*nr)
			k.ScoreRows(qs, rows, dim, out)
			for i, q := range qs {
				for j := range nr {
					if want := refDot(q, rows[j*dim:(j+1)*dim]); int64(out[i*nr+j]) != want {
						t.Fatalf("%s dim=%d q=%d row=%d: got %d, want %d", k.Name, dim, i, j, out[i*nr+j], want)
					}
				}
			}
		}
	})
}

func ExampleKernel_Dot() {
	k, _ := Select("")
	fmt.Println(k.Dot([]int8{1, -2, 3}, []int8{4, 5, -6}))
	// Output: -24
}
