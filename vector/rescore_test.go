package vector

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRescoreMatchesScan offers every row as a candidate: Rescore must
// then return exactly what Scan returns, scores bit for bit, on random
// (inexact) floats and on tied integer rows.
func TestRescoreMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, k := range Available() {
		for _, m := range metrics {
			for _, rows := range []Rows{intRows(r, 300, 9), FlatRows(unaligned(r, 200*33, 0), 33, intRows(r, 200, 1).IDs), rechunk(intRows(r, 300, 9), 16)} {
				all := make([]int32, rows.Len())
				for i := range all {
					all[i] = int32(i)
				}
				r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
				for _, q := range []Query{
					{Vector: unaligned(r, rows.Dim, 1), K: 10},
					{Vector: unaligned(r, rows.Dim, 2), K: 1, Exclude: rows.IDs[7]},
					{Vector: unaligned(r, rows.Dim, 3), K: 0},
					{Vector: unaligned(r, rows.Dim, 4), K: 1000},
				} {
					want, err := k.Scan(t.Context(), m, rows, []Query{q})
					require.NoError(t, err)
					got, err := k.Rescore(m, rows, q, all)
					require.NoError(t, err)
					require.Equal(t, nonNil(want[0]), nonNil(got), "%s %v k=%d", k.Name, m, q.K)
				}
			}
		}
	}
}

func TestRescoreSubsetAndErrors(t *testing.T) {
	rows := FlatRows([]float32{1, 0, 0, 1, 1, 1, 2, 2}, 2, []string{"a", "b", "c", "d"})
	k := Generic()
	got, err := k.Rescore(DotProduct, rows, Query{Vector: []float32{1, 1}, K: 2}, []int32{0, 1, 2})
	require.NoError(t, err)
	require.Equal(t, []Hit{{ID: "c", Score: 2}, {ID: "a", Score: 1}}, got)
	got, err = k.Rescore(Euclidean, rows, Query{Vector: []float32{2, 2}, K: 5, Exclude: "d"}, []int32{3, 2})
	require.NoError(t, err)
	require.Equal(t, []Hit{{ID: "c", Score: float32(1.4142135)}}, got)
	_, err = k.Rescore(DotProduct, rows, Query{Vector: []float32{1, 1}, K: 1}, []int32{4})
	require.ErrorContains(t, err, "candidate row 4")
	_, err = k.Rescore(DotProduct, rows, Query{Vector: []float32{1}, K: 1}, nil)
	require.ErrorContains(t, err, "dimensions")
}
