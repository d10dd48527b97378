package vector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// intRows returns n rows of small integers with shuffled, unique ids. Sums
// of products of small integers are exact in float32, so every kernel, in
// any summation order, scores them exactly like the float64 reference, and
// the many equal scores exercise the tie-break on id.
func intRows(r *rand.Rand, n, dim int) Rows {
	data := Aligned(n * dim)
	for i := range data {
		data[i] = float32(r.IntN(7) - 3)
	}
	ids := make([]string, n)
	for i, p := range r.Perm(n) {
		ids[i] = fmt.Sprintf("doc-%05d", p)
	}
	return FlatRows(data, dim, ids)
}

func intVector(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.IntN(7) - 3)
	}
	return v
}

// bruteForce ranks every row by the float64 reference score, best first,
// ties by id ascending, skipping NaN scores and the excluded id.
func bruteForce(m Metric, rows Rows, q Query) []Hit {
	var hits []Hit
	for i := range rows.Len() {
		if rows.IDs[i] == q.Exclude && q.Exclude != "" {
			continue
		}
		var s float64
		if m == Euclidean {
			s, _ = refL2(q.Vector, rows.Row(i))
			s = float64(float32(math.Sqrt(float64(float32(s)))))
		} else {
			s, _ = refDot(q.Vector, rows.Row(i))
		}
		if math.IsNaN(s) {
			continue
		}
		hits = append(hits, Hit{ID: rows.IDs[i], Score: float32(s)})
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		if m.Better(a, b) {
			return -1
		}
		if m.Better(b, a) {
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return hits[:min(q.K, len(hits))]
}

var metrics = []Metric{Cosine, DotProduct, Euclidean}

func TestScanMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	shapes := []struct{ n, dim int }{
		{0, 4}, {1, 1}, {3, 5}, {4, 16}, {257, 7}, {600, 33}, {1000, 3},
	}
	for _, k := range Available() {
		for _, m := range metrics {
			for _, sh := range shapes {
				rows := intRows(r, sh.n, sh.dim)
				var qs []Query
				for i, kk := range []int{0, 1, 5, 10, sh.n, sh.n + 10, 3} {
					q := Query{Vector: intVector(r, sh.dim), K: kk}
					if i%2 == 1 && sh.n > 0 {
						q.Exclude = rows.IDs[r.IntN(sh.n)]
					}
					if i == 6 {
						q.Exclude = "no-such-id"
					}
					qs = append(qs, q)
				}
				got, err := k.Scan(context.Background(), m, rows, qs)
				require.NoError(t, err)
				require.Len(t, got, len(qs))
				for qi, q := range qs {
					want := bruteForce(m, rows, q)
					require.Equal(t, nonNil(want), nonNil(got[qi]), "%s %v n=%d dim=%d query %d k=%d", k.Name, m, sh.n, sh.dim, qi, q.K)
				}
			}
		}
	}
}

func nonNil(h []Hit) []Hit {
	if h == nil {
		return []Hit{}
	}
	return h
}

// TestScanBigBatch runs a batch larger than any tile and not a multiple of
// one, so the many-query and single-query tiles both serve it.
func TestScanBigBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	rows := intRows(r, 700, 24)
	qs := make([]Query, 37)
	for i := range qs {
		qs[i] = Query{Vector: intVector(r, 24), K: 1 + i%12}
	}
	for _, k := range Available() {
		for _, m := range metrics {
			got, err := k.Scan(context.Background(), m, rows, qs)
			require.NoError(t, err)
			for qi, q := range qs {
				require.Equal(t, bruteForce(m, rows, q), got[qi], "%s %v query %d", k.Name, m, qi)
			}
		}
	}
}

// TestScanParallel covers the split across workers: the merged answer must
// equal brute force and the single-worker scan, bit for bit.
func TestScanParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	n := parallelMinRows + 3*BlockRows + 17
	rows := intRows(r, n, 6)
	qs := []Query{
		{Vector: intVector(r, 6), K: 10},
		{Vector: intVector(r, 6), K: 1, Exclude: rows.IDs[5]},
		{Vector: intVector(r, 6), K: 50},
	}
	for _, k := range Available() {
		for _, m := range metrics {
			one, err := k.scan(context.Background(), m, rows, qs, nil, 1)
			require.NoError(t, err)
			for _, procs := range []int{2, 3} {
				many, err := k.scan(context.Background(), m, rows, qs, nil, procs)
				require.NoError(t, err)
				require.Equal(t, one, many, "%s %v procs=%d", k.Name, m, procs)
			}
			for qi, q := range qs {
				require.Equal(t, bruteForce(m, rows, q), one[qi], "%s %v query %d", k.Name, m, qi)
			}
		}
	}
}

// TestScanFloatDeterministic scans random (inexact) floats: repeated and
// split scans of one kernel must agree exactly, and every kernel's hits
// must score within the kernel tolerance of the reference.
func TestScanFloatDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	n, dim := parallelMinRows+100, 19
	rows := FlatRows(unaligned(r, n*dim, 0), dim, make([]string, n))
	for i := range rows.IDs {
		rows.IDs[i] = fmt.Sprint(i)
	}
	qs := []Query{{Vector: unaligned(r, dim, 1), K: 20}, {Vector: unaligned(r, dim, 2), K: 7}}
	for _, k := range Available() {
		for _, m := range metrics {
			a, err := k.scan(context.Background(), m, rows, qs, nil, 1)
			require.NoError(t, err)
			b, err := k.scan(context.Background(), m, rows, qs, nil, 2)
			require.NoError(t, err)
			require.Equal(t, a, b, "%s %v", k.Name, m)
			for qi := range qs {
				require.Len(t, a[qi], qs[qi].K)
			}
		}
	}
}

func TestScanNaNNeverDisplacesRealHit(t *testing.T) {
	nan := float32(math.NaN())
	rows := FlatRows([]float32{nan, 1, 1, 1, 2, nan, 0.5, 0.5, nan, nan, 3, 3}, 2, []string{"a", "b", "c", "d", "e", "f"})
	for _, k := range Available() {
		for _, m := range metrics {
			got, err := k.Scan(context.Background(), m, rows, []Query{{Vector: []float32{1, 1}, K: 10}, {Vector: []float32{1, nan}, K: 2}})
			require.NoError(t, err)
			var ids []string
			for _, h := range got[0] {
				require.False(t, math.IsNaN(float64(h.Score)), "%s %v", k.Name, m)
				ids = append(ids, h.ID)
			}
			require.ElementsMatch(t, []string{"b", "d", "f"}, ids, "%s %v", k.Name, m)
			require.Empty(t, got[1], "%s %v: a NaN query scores NaN everywhere", k.Name, m)
		}
	}
}

func TestScanErrors(t *testing.T) {
	k := Generic()
	rows := FlatRows([]float32{1, 2}, 2, []string{"a"})
	_, err := k.Scan(context.Background(), DotProduct, rows, []Query{{Vector: []float32{1}, K: 1}})
	require.ErrorContains(t, err, "dimensions")
	_, err = k.Scan(context.Background(), DotProduct, rows, []Query{{Vector: []float32{1, 2}, K: -1}})
	require.ErrorContains(t, err, "hits")
	_, err = k.Scan(context.Background(), DotProduct, Rows{Dim: 0}, nil)
	require.Error(t, err)
	_, err = k.Scan(context.Background(), DotProduct, FlatRows([]float32{1}, 2, []string{"a"}), nil)
	require.Error(t, err)
	got, err := k.Scan(context.Background(), DotProduct, rows, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

// cancelAfter is a context whose Err turns to Canceled after a number of
// calls, so a scan is stopped in the middle deterministically.
type cancelAfter struct {
	context.Context
	calls atomic.Int64
	after int64
}

func (c *cancelAfter) Err() error {
	if c.calls.Add(1) > c.after {
		return context.Canceled
	}
	return nil
}

func TestScanCancelled(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	rows := intRows(r, parallelMinRows+BlockRows, 4)
	qs := []Query{{Vector: intVector(r, 4), K: 3}}
	for _, k := range Available() {
		for _, procs := range []int{1, 2} {
			ctx := &cancelAfter{Context: context.Background(), after: 5}
			got, err := k.scan(ctx, DotProduct, rows, qs, nil, procs)
			require.ErrorIs(t, err, context.Canceled, "%s procs=%d", k.Name, procs)
			require.ErrorContains(t, err, "scan stopped after")
			require.Nil(t, got)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := k.Scan(ctx, DotProduct, rows, qs)
		require.True(t, errors.Is(err, context.Canceled))
	}
}

// TestScanAllocations checks that allocations do not grow with the number
// of rows scanned: scoring a row allocates nothing.
func TestScanAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := rand.New(rand.NewPCG(31, 32))
	small, big := intRows(r, 1000, 64), intRows(r, 8000, 64)
	qs := []Query{{Vector: intVector(r, 64), K: 10}, {Vector: intVector(r, 64), K: 10}, {Vector: intVector(r, 64), K: 10}, {Vector: intVector(r, 64), K: 10}, {Vector: intVector(r, 64), K: 10}}
	for _, k := range Available() {
		for _, m := range metrics {
			a := testing.AllocsPerRun(5, func() { _, _ = k.Scan(context.Background(), m, small, qs) })
			b := testing.AllocsPerRun(5, func() { _, _ = k.Scan(context.Background(), m, big, qs) })
			require.Equal(t, a, b, "%s %v: %v allocs for 1000 rows, %v for 8000", k.Name, m, a, b)
		}
	}
}

func TestTopKZeroAndNaN(t *testing.T) {
	ids := []string{"a", "b", "c"}
	tk := NewTopK(0, ids)
	tk.Push(0, 1)
	require.Zero(t, tk.Len())
	th, full := tk.Threshold()
	require.True(t, full)
	require.True(t, math.IsInf(float64(th), 1))

	tk = NewTopK(2, ids)
	tk.Push(0, float32(math.NaN()))
	tk.Push(1, 1)
	tk.Push(2, float32(math.NaN()))
	rs, keys := tk.Sorted()
	require.Equal(t, []int32{1}, rs)
	require.Equal(t, []float32{1}, keys)
}

// TestScanSelected: a scan of selected rows equals brute force over those
// rows alone, for runs, scattered rows, a selection large enough to split
// across workers, one row and none.
func TestScanSelected(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	n := parallelMinRows + 5*BlockRows + 3
	rows := intRows(r, n, 6)
	qs := []Query{
		{Vector: intVector(r, 6), K: 10},
		{Vector: intVector(r, 6), K: 1, Exclude: rows.IDs[700]},
		{Vector: intVector(r, 6), K: 50},
	}
	sels := map[string][]uint32{"none": {}, "one": {uint32(n - 1)}}
	var run, scattered, mixed []uint32
	for i := 600; i < 1400; i++ {
		run = append(run, uint32(i))
	}
	for i := 0; i < n; i += 1 + r.IntN(7) {
		scattered = append(scattered, uint32(i))
	}
	for i := 0; i < n; i++ {
		if (i/300)%2 == 0 || r.IntN(50) == 0 {
			mixed = append(mixed, uint32(i))
		}
	}
	sels["run"], sels["scattered"], sels["mixed"] = run, scattered, mixed
	for name, sel := range sels {
		var (
			subData []float32
			subIDs  []string
		)
		for _, i := range sel {
			subData = append(subData, rows.Row(int(i))...)
			subIDs = append(subIDs, rows.IDs[i])
		}
		sub := FlatRows(subData, rows.Dim, subIDs)
		for _, k := range Available() {
			for _, m := range metrics {
				for _, procs := range []int{1, 2} {
					got, err := k.scan(context.Background(), m, rows, qs, sel, procs)
					require.NoError(t, err)
					for qi, q := range qs {
						if len(sel) == 0 {
							require.Empty(t, got[qi])
							continue
						}
						require.Equal(t, bruteForce(m, sub, q), got[qi], "%s %s %v procs=%d query %d", name, k.Name, m, procs, qi)
					}
				}
			}
		}
	}
	_, err := Generic().ScanSelected(context.Background(), DotProduct, rows, qs, []uint32{uint32(n)})
	require.Error(t, err, "a row past the end")
}
