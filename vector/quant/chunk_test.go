package quant

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
)

// rechunk lays rows and their codes out again in chunks of chunkRows
// rows, so the int8 scan can be checked across chunk edges without a
// large corpus.
func rechunk(rows vector.Rows, c *Codes, chunkRows int) (vector.Rows, *Codes) {
	a := vector.NewArena[float32](rows.Dim, chunkRows)
	out := &Codes{scale: c.scale, dim: c.dim, codes: vector.NewArena[int8](c.dim, chunkRows)}
	for i := range rows.Len() {
		copy(a.Append(), rows.Row(i))
		out.Append(rows.Row(i))
	}
	return vector.ArenaRows(a, rows.IDs), out
}

// TestScanChunkedEqualsFlat: the int8 scan (whole, split across workers,
// selected rows) and subset keys over rows and codes kept in chunks
// smaller than, equal to and larger than a block return exactly what
// they return over one array.
func TestScanChunkedEqualsFlat(t *testing.T) {
	r := rand.New(rand.NewPCG(131, 132))
	n, dim := parallelRows+3*BlockRows+17, 24
	rows, vecs := clustered(r, n, 5, dim, true)
	codes := mustCodes(t, rows, DefaultKind)
	qs := make([]vector.Query, len(vecs))
	for i, v := range vecs {
		qs[i] = vector.Query{Vector: v, K: 10}
	}
	qs[2].Exclude = rows.IDs[600]
	var sel []uint32
	for i := 0; i < n; i += 1 + r.IntN(40) {
		for j := i; j < min(i+r.IntN(40), n); j++ {
			sel = append(sel, uint32(j))
		}
	}
	f, _ := vector.Select("")
	ctx := context.Background()
	for _, k := range Available() {
		for _, m := range metrics {
			want, err := k.scan(ctx, f, m, rows, codes, qs, 2, nil, 2)
			require.NoError(t, err)
			wantSel, err := k.scan(ctx, f, m, rows, codes, qs, 2, sel, 2)
			require.NoError(t, err)
			q, err := k.EncodeQueries(codes.Scale(), m, vecs)
			require.NoError(t, err)
			wantKeys := make([]float32, 2*(n-5))
			q.NewScorer().Keys([]int{0, 3}, codes, 5, n, wantKeys)
			for _, chunk := range []int{64, BlockRows, 4096} {
				crows, ccodes := rechunk(rows, codes, chunk)
				for _, procs := range []int{1, 2} {
					got, err := k.scan(ctx, f, m, crows, ccodes, qs, 2, nil, procs)
					require.NoError(t, err)
					require.Equal(t, want, got, "%s %v chunk=%d procs=%d", k.Name, m, chunk, procs)
					got, err = k.scan(ctx, f, m, crows, ccodes, qs, 2, sel, procs)
					require.NoError(t, err)
					require.Equal(t, wantSel, got, "%s %v chunk=%d procs=%d selected", k.Name, m, chunk, procs)
				}
				keys := make([]float32, 2*(n-5))
				q.NewScorer().Keys([]int{0, 3}, ccodes, 5, n, keys)
				require.Equal(t, wantKeys, keys, "%s %v chunk=%d keys", k.Name, m, chunk)
			}
		}
	}
}

// TestFromEncodedEqualsEncode: codes copied from where they were kept
// (row codes and norms) are the codes Encode builds, sums included, so
// every scan over them answers the same.
func TestFromEncodedEqualsEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(133, 134))
	rows, _ := clustered(r, 3*BlockRows+5, 4, 40, false)
	want := mustCodes(t, rows, DefaultKind)
	got, err := FromEncoded(want.Scale(), want.Len(), func(i int) ([]int8, float32) { return want.Row(i), want.Norm(i) })
	require.NoError(t, err)
	require.Equal(t, want.norms, got.norms)
	require.Equal(t, want.sums, got.sums)
	for i := range want.Len() {
		require.Equal(t, want.Row(i), got.Row(i), "row %d", i)
	}
	_, err = FromEncoded(want.Scale(), 1, func(int) ([]int8, float32) { return make([]int8, 39), 0 })
	require.Error(t, err, "codes of another dimension")
}
