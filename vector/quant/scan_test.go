package quant

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/trawl-search/trawl/vector"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var metrics = []vector.Metric{vector.Cosine, vector.DotProduct, vector.Euclidean}

// gaussian returns n rows of dim normal floats with ids doc-0, doc-1, …;
// unit rows if normalise.
func gaussian(r *rand.Rand, n, dim int, normalise bool) vector.Rows {
	data := vector.Aligned(n * dim)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	rows := vector.FlatRows(data, dim, make([]string, n))
	for i := range n {
		if normalise {
			vector.Generic().Normalize(rows.Row(i))
		}
		rows.IDs[i] = fmt.Sprintf("doc-%d", i)
	}
	return rows
}

// clustered returns n rows around 32 random centres, as the dev cluster's
// corpus is made (centres N(0, 1), each row a centre plus N(0, ½) noise per
// element), and queries drawn the same way (so not in the corpus);
// rows and queries are unit vectors if normalise.
func clustered(r *rand.Rand, n, nq, dim int, normalise bool) (vector.Rows, [][]float32) {
	const centres = 32
	cs := make([][]float32, centres)
	for i := range cs {
		cs[i] = make([]float32, dim)
		for j := range cs[i] {
			cs[i][j] = float32(r.NormFloat64())
		}
	}
	noise := float32(0.7071067811865476)
	draw := func(v []float32) {
		c := cs[r.IntN(centres)]
		for j := range v {
			v[j] = c[j] + noise*float32(r.NormFloat64())
		}
		if normalise {
			vector.Generic().Normalize(v)
		}
	}
	rows := vector.FlatRows(vector.Aligned(n*dim), dim, make([]string, n))
	for i := range n {
		draw(rows.Row(i))
		rows.IDs[i] = fmt.Sprintf("doc-%d", i)
	}
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = make([]float32, dim)
		draw(qs[i])
	}
	return rows, qs
}

func mustCodes(t testing.TB, rows vector.Rows, kind Kind) *Codes {
	s, err := TrainRows(rows, rows.Len(), kind)
	require.NoError(t, err)
	c, err := Encode(s, rows)
	require.NoError(t, err)
	return c
}

func nonNil(h []vector.Hit) []vector.Hit {
	if h == nil {
		return []vector.Hit{}
	}
	return h
}

// TestScanAllCandidatesIsExact: when oversample·k covers every row, the
// int8 scan re-scores every row and must return exactly what the float32
// scan returns, for every int8 kernel, float kernel and metric, with
// exclusions, k = 0 and k beyond the rows.
func TestScanAllCandidatesIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for _, f := range vector.Available() {
		for _, k := range Available() {
			for _, m := range metrics {
				for _, sh := range []struct{ n, dim int }{{0, 4}, {1, 1}, {5, 33}, {63, 64}, {200, 100}} {
					rows := gaussian(r, sh.n, sh.dim, m == vector.Cosine)
					codes := mustCodes(t, rows, PerDimension)
					var qs []vector.Query
					for i, kk := range []int{0, 1, 3, sh.n, sh.n + 10} {
						q := vector.Query{Vector: gaussian(r, 1, sh.dim, m == vector.Cosine).Row(0), K: kk}
						if i%2 == 1 && sh.n > 0 {
							q.Exclude = rows.IDs[r.IntN(sh.n)]
						}
						qs = append(qs, q)
					}
					want, err := f.Scan(context.Background(), m, rows, qs)
					require.NoError(t, err)
					got, err := k.Scan(context.Background(), f, m, rows, codes, qs, MaxOversample)
					require.NoError(t, err)
					for qi := range qs {
						if max(qs[qi].K, minCandidateK)*MaxOversample < sh.n {
							continue // not every row is a candidate
						}
						require.Equal(t, nonNil(want[qi]), nonNil(got[qi]), "%s/%s %v n=%d query %d", f.Name, k.Name, m, sh.n, qi)
					}
				}
			}
		}
	}
}

// TestScanDeterministic: the candidates, and so the answer, are the same
// for every int8 kernel, any split across workers and any batching.
func TestScanDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	n, dim := parallelRows+3*BlockRows+17, 48
	rows, vecs := clustered(r, n, 7, dim, true)
	codes := mustCodes(t, rows, PerDimension)
	qs := make([]vector.Query, len(vecs))
	for i, v := range vecs {
		qs[i] = vector.Query{Vector: v, K: 1 + 3*i}
	}
	qs[2].Exclude = rows.IDs[9]
	f, _ := vector.Select("")
	for _, m := range metrics {
		var first [][]vector.Hit
		for _, k := range Available() {
			for _, procs := range []int{1, 2, 3} {
				got, err := k.scan(context.Background(), f, m, rows, codes, qs, 2, nil, procs)
				require.NoError(t, err)
				if first == nil {
					first = got
				}
				require.Equal(t, first, got, "%s %v procs=%d", k.Name, m, procs)
			}
			for qi, q := range qs {
				one, err := k.Scan(context.Background(), f, m, rows, codes, []vector.Query{q}, 2)
				require.NoError(t, err)
				require.Equal(t, first[qi], one[0], "%s %v query %d alone", k.Name, m, qi)
			}
		}
	}
}

func TestScanErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(75, 76))
	rows := gaussian(r, 10, 4, true)
	codes := mustCodes(t, rows, PerShard)
	k, f := Generic(), vector.Generic()
	q := []vector.Query{{Vector: rows.Row(0), K: 1}}
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		rows  vector.Rows
		codes *Codes
		qs    []vector.Query
		os    int
		want  string
	}{
		{"oversample high", rows, codes, q, MaxOversample + 1, "oversample"},
		{"oversample negative", rows, codes, q, -1, "oversample"},
		{"no codes", rows, nil, q, 0, "mirror"},
		{"short codes", gaussian(r, 11, 4, true), codes, q, 0, "mirror"},
		{"dimension", rows, codes, []vector.Query{{Vector: []float32{1}, K: 1}}, 0, "dimensions"},
		{"k", rows, codes, []vector.Query{{Vector: rows.Row(0), K: -1}}, 0, "hits"},
		{"rows dim", vector.Rows{Dim: 0}, codes, q, 0, "dimension"},
		{"rows data", vector.FlatRows(rows.Row(0)[:3], 4, rows.IDs), codes, q, 0, "rows of"},
	} {
		_, err := k.Scan(ctx, f, vector.Cosine, c.rows, c.codes, c.qs, c.os)
		require.ErrorContains(t, err, c.want, c.name)
	}
	got, err := k.Scan(ctx, f, vector.Cosine, rows, codes, nil, 0)
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
	r := rand.New(rand.NewPCG(77, 78))
	rows := gaussian(r, parallelRows+BlockRows, 8, true)
	codes := mustCodes(t, rows, PerDimension)
	qs := []vector.Query{{Vector: rows.Row(3), K: 3}}
	f := vector.Generic()
	for _, k := range Available() {
		for _, procs := range []int{1, 2} {
			ctx := &cancelAfter{Context: context.Background(), after: 5}
			got, err := k.scan(ctx, f, vector.Cosine, rows, codes, qs, 0, nil, procs)
			require.ErrorIs(t, err, context.Canceled, "%s procs=%d", k.Name, procs)
			require.ErrorContains(t, err, "int8 scan stopped after")
			require.Nil(t, got)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := k.Scan(ctx, f, vector.Cosine, rows, codes, qs, 0)
		require.ErrorIs(t, err, context.Canceled)
	}
}

// TestScanNaNQuery: a NaN query scores NaN everywhere in float32, so the
// exact scan returns nothing, and so must the int8 scan, whatever its
// candidates were.
func TestScanNaNQuery(t *testing.T) {
	r := rand.New(rand.NewPCG(79, 80))
	rows := gaussian(r, 300, 40, true)
	codes := mustCodes(t, rows, PerDimension)
	q := slices.Clone(rows.Row(1))
	q[3] = float32(math.NaN())
	f, _ := vector.Select("")
	for _, k := range Available() {
		for _, m := range metrics {
			got, err := k.Scan(context.Background(), f, m, rows, codes, []vector.Query{{Vector: q, K: 5}, {Vector: rows.Row(2), K: 1}}, 0)
			require.NoError(t, err)
			require.Empty(t, got[0], "%s %v", k.Name, m)
			require.Equal(t, rows.IDs[2], got[1][0].ID, "%s %v", k.Name, m)
		}
	}
}

// TestScanAllocations checks that allocations do not grow with the number
// of rows scanned: scoring a row of codes allocates nothing.
func TestScanAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := rand.New(rand.NewPCG(83, 84))
	small, big := gaussian(r, 1000, 64, true), gaussian(r, 8000, 64, true)
	cs, cb := mustCodes(t, small, PerDimension), mustCodes(t, big, PerDimension)
	var qs []vector.Query
	for range 5 {
		qs = append(qs, vector.Query{Vector: gaussian(r, 1, 64, true).Row(0), K: 10})
	}
	f, _ := vector.Select("")
	for _, k := range Available() {
		for _, m := range metrics {
			a := testing.AllocsPerRun(5, func() { _, _ = k.Scan(context.Background(), f, m, small, cs, qs, 0) })
			b := testing.AllocsPerRun(5, func() { _, _ = k.Scan(context.Background(), f, m, big, cb, qs, 0) })
			require.Equal(t, a, b, "%s %v: %v allocs for 1000 rows, %v for 8000", k.Name, m, a, b)
		}
	}
}

// parallelRows is a row count past which vector.ScanWorkers splits a scan
// on two cores.
var parallelRows = func() int {
	n := 1
	for vector.ScanWorkers(n, 2) < 2 {
		n *= 2
	}
	return n
}()

// TestScanSelected: an int8 scan of selected rows equals the int8 scan of
// a store holding only those rows (same scale), so every candidate comes
// from the selection, for scattered rows, runs, a split and none.
func TestScanSelected(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 78))
	n, dim := parallelRows+3*BlockRows+17, 48
	rows, vecs := clustered(r, n, 7, dim, true)
	codes := mustCodes(t, rows, PerShard)
	qs := make([]vector.Query, len(vecs))
	for i, v := range vecs {
		qs[i] = vector.Query{Vector: v, K: 1 + 3*i}
	}
	f, _ := vector.Select("")
	var scattered, mixed []uint32
	for i := 0; i < n; i += 1 + r.IntN(9) {
		scattered = append(scattered, uint32(i))
	}
	for i := 0; i < n; i++ {
		if (i/700)%2 == 0 || r.IntN(40) == 0 {
			mixed = append(mixed, uint32(i))
		}
	}
	qs[1].Exclude = rows.IDs[scattered[3]]
	for name, sel := range map[string][]uint32{"scattered": scattered, "mixed": mixed, "one": {5}, "none": {}} {
		var (
			subData []float32
			subIDs  []string
		)
		for _, i := range sel {
			subData = append(subData, rows.Row(int(i))...)
			subIDs = append(subIDs, rows.IDs[i])
		}
		sub := vector.FlatRows(subData, dim, subIDs)
		subCodes, err := Encode(codes.Scale(), sub)
		require.NoError(t, err)
		for _, m := range metrics {
			for _, k := range Available() {
				want, err := k.Scan(context.Background(), f, m, sub, subCodes, qs, 2)
				require.NoError(t, err)
				for _, procs := range []int{1, 2} {
					got, err := k.scan(context.Background(), f, m, rows, codes, qs, 2, sel, procs)
					require.NoError(t, err)
					for qi := range qs {
						require.Equal(t, nonNil(want[qi]), nonNil(got[qi]), "%s %s %v procs=%d query %d", name, k.Name, m, procs, qi)
					}
				}
			}
		}
	}
}
