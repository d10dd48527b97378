package ivf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

func TestCentroidsBinary(t *testing.T) {
	c := Centroids{Metric: vector.Euclidean, Dim: 3, Data: []float32{1, 2, 3, -4, 5e-30, 6}, TrainedRows: 99}
	b, err := c.MarshalBinary()
	require.NoError(t, err)
	var got Centroids
	require.NoError(t, got.UnmarshalBinary(b))
	require.True(t, c.Equal(got))
	require.Equal(t, 2, got.Lists())

	for name, bad := range map[string]func([]byte) []byte{
		"empty":      func([]byte) []byte { return nil },
		"magic":      func(b []byte) []byte { b[0] = 'X'; return b },
		"short":      func(b []byte) []byte { return b[:len(b)-1] },
		"long":       func(b []byte) []byte { return append(b, 0) },
		"metric":     func(b []byte) []byte { b[4] = 9; return b },
		"zero dim":   func(b []byte) []byte { b[5] = 0; return b },
		"no lists":   func(b []byte) []byte { b[9] = 0; return b },
		"NaN centre": func(b []byte) []byte { copy(b[headerLen:], []byte{0, 0, 0xc0, 0x7f}); return b },
	} {
		t.Run(name, func(t *testing.T) {
			var c2 Centroids
			require.Error(t, c2.UnmarshalBinary(bad(append([]byte(nil), b...))))
		})
	}
	_, err = Centroids{Metric: vector.Cosine, Dim: 2, Data: []float32{1}}.MarshalBinary()
	require.Error(t, err, "not whole centroids")
	_, err = Centroids{Metric: vector.Cosine, Dim: 2, Data: []float32{float32(math.Inf(1)), 0}}.MarshalBinary()
	require.Error(t, err, "infinite centre")
}

// reference is the assignment rule spelled out: every centre's float64
// key, the best one, ties to the lower id.
func reference(c Centroids, v []float32, w float64, n int) []int32 {
	type kv struct {
		j int32
		k float64
	}
	var all []kv
	for j := range c.Lists() {
		all = append(all, kv{int32(j), dot64(v, c.Centre(j)) - w*dot64(c.Centre(j), c.Centre(j))/2})
	}
	var out []int32
	used := make([]bool, len(all))
	for range min(n, len(all)) {
		best := -1
		for i, a := range all {
			if !used[i] && (best < 0 || a.k > all[best].k) {
				best = i
			}
		}
		used[best] = true
		out = append(out, all[best].j)
	}
	return out
}

// TestAssignDeterministic: every kernel assigns every row to the list the
// float64 rule gives, ties (duplicate centres, rows equidistant from two)
// to the lower id, and probes the same lists.
func TestAssignDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, m := range metrics {
		for _, dim := range []int{3, 64, 1536} {
			t.Run(fmt.Sprintf("%v/%d", m, dim), func(t *testing.T) {
				cents := gaussian(r, 40, dim, m == vector.Cosine)
				c := Centroids{Metric: m, Dim: dim, Data: flat(cents)}
				copy(c.Centre(7), c.Centre(30)) // a duplicate: 7 must win its ties
				s, err := quant.Train(flat(cents), dim, quant.DefaultKind)
				require.NoError(t, err)
				vs := gaussian(r, 200, dim, m == vector.Cosine)
				// Rows exactly between two centres, and on a centre.
				for i := range 20 {
					a, b := c.Centre(i), c.Centre(i+1)
					v := vs.Row(i)
					for d := range v {
						v[d] = (a[d] + b[d]) / 2
					}
				}
				copy(vs.Row(20), c.Centre(30))
				w := 1.0
				if m == vector.Cosine {
					w = 0
				}
				for _, f := range vector.Available() {
					x, err := New(f, c, s)
					require.NoError(t, err)
					for i := range vs.Len() {
						want := reference(c, vs.Row(i), w, 1)
						require.Equal(t, int(want[0]), x.Assign(vs.Row(i)), "%s row %d", f.Name, i)
					}
					require.Equal(t, 7, x.Assign(vs.Row(20)), "duplicate centres: the lower id")
					// Probing: the n best by the probe key, whatever the kernel.
					fast := make([]float32, c.Lists())
					for i := range 30 {
						v := vs.Row(i)
						f.ScoreRows(vector.DotProduct, [][]float32{v}, c.Data, dim, fast)
						got, _ := x.co.nearest(nil, fast, v, 5, x.probeW(), nil)
						want := reference(c, v, x.probeW(), 5)
						require.ElementsMatch(t, want, got, "%s probe %d", f.Name, i)
					}
				}
			})
		}
	}
}

func TestDefaultLists(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 1}, {1, 1}, {2, 1}, {3, 2}, {100, 10}, {100000, 316}, {1000000, 1000}, {1 << 40, MaxLists},
	} {
		require.Equal(t, c.want, DefaultLists(c.n), "n=%d", c.n)
	}
}

func TestNeedsRetrain(t *testing.T) {
	for _, c := range []struct {
		trained, rows int
		want          bool
	}{
		{0, MinRows - 1, false}, // too small for an index at all
		{0, MinRows, true},      // never trained
		{100000, 399999, false}, // grown 4× less one row
		{100000, 400000, true},  // grown 4×
		{100000, 25000, true},   // shrunk 4×
		{100000, 25001, false},
		{100000, 100000, false},
		{100000, MinRows - 1, false},
	} {
		require.Equal(t, c.want, NeedsRetrain(c.trained, c.rows), "trained %d, rows %d", c.trained, c.rows)
	}
}

func TestDefaultNProbe(t *testing.T) {
	for _, c := range []struct{ lists, want int }{
		{1, 1}, {5, 5}, {8, 8}, {158, 8}, {160, 8}, {161, 9}, {316, 16}, {632, 32}, {1000, 50}, {MaxLists, 3277},
	} {
		require.Equal(t, c.want, DefaultNProbe(c.lists), "lists=%d", c.lists)
	}
}
