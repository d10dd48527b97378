package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/trawl-search/trawl/vector"
)

// TestScorerKeys: the key of a query-row pair is the same whichever subset
// of the batch it is scored in, whichever kernel scores it, and whatever
// rows of the arena are scored with it; and it is Scan's key (the exact
// code dot product, and 2·t·sum − |x|² for Euclidean).
func TestScorerKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(111, 112))
	for _, m := range metrics {
		for _, dim := range []int{7, 64, 100} {
			rows := gaussian(r, 37, dim, m == vector.Cosine)
			s, err := TrainRows(rows, rows.Len(), DefaultKind)
			require.NoError(t, err)
			c := NewCodesCap(s, 5)
			for i := range rows.Len() {
				c.Append(rows.Row(i))
			}
			vecs := make([][]float32, 9)
			for i := range vecs {
				vecs[i] = gaussian(r, 1, dim, m == vector.Cosine).Row(0)
			}
			var want []float32
			for _, k := range Available() {
				qs, err := k.EncodeQueries(s, m, vecs)
				require.NoError(t, err)
				full := make([]float32, len(vecs)*c.Len())
				all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
				qs.NewScorer().Keys(all, c, 0, c.Len(), full)
				for qi := range vecs {
					for j := range c.Len() {
						sum := dotGeneric(qs.b.codes[qi], c.Row(j))
						key := float32(sum)
						if m == vector.Euclidean {
							key = float32(2*qs.units[qi]*float32(sum)) - c.Norm(j)
						}
						require.Equal(t, math.Float32bits(key), math.Float32bits(full[qi*c.Len()+j]), "%s %v dim %d q%d r%d", k.Name, m, dim, qi, j)
					}
				}
				if want == nil {
					want = full
				}
				require.Equal(t, want, full, "kernel %s", k.Name)
				sc := qs.NewScorer()
				for _, sel := range [][]int{{3}, {8, 1}, {0, 2, 4, 6, 7}} {
					lo, hi := 5, 30
					out := make([]float32, len(sel)*(hi-lo))
					sc.Keys(sel, c, lo, hi, out)
					for i, qi := range sel {
						require.Equal(t, full[qi*c.Len()+lo:qi*c.Len()+hi], out[i*(hi-lo):(i+1)*(hi-lo)])
					}
				}
			}
		}
	}
}

// TestNewCodesCap: small arenas start at the size asked for and grow by
// a quarter, staying aligned and equal to codes built by NewCodes.
func TestNewCodesCap(t *testing.T) {
	r := rand.New(rand.NewPCG(113, 114))
	rows := gaussian(r, 100, 48, true)
	s, err := TrainRows(rows, rows.Len(), DefaultKind)
	require.NoError(t, err)
	c, ref := NewCodesCap(s, 20), NewCodes(s)
	require.Equal(t, 20*48, c.codes.Bytes())
	for i := range rows.Len() {
		c.Append(rows.Row(i))
		ref.Append(rows.Row(i))
	}
	require.Less(t, c.codes.Bytes(), 48*130, "grew by a quarter, not doubling")
	require.Equal(t, allCodes(ref), allCodes(c))
	require.Equal(t, ref.norms, c.norms)
	require.Equal(t, ref.sums, c.sums)
}
