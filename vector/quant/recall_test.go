package quant

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/vector"
)

// recall runs the int8 scan and the exact float32 scan for the same
// queries and returns the mean fraction of the exact top-k the int8 scan
// found. It also checks what must hold whatever the recall: every score
// returned is the float32 kernel's own score for that row, bit for bit,
// and the hits are ordered best first, ties by id.
func recall(t testing.TB, k Kernel, f vector.Kernel, m vector.Metric, rows vector.Rows, codes *Codes, qs []vector.Query, oversample int) float64 {
	ctx := context.Background()
	exact, err := f.Scan(ctx, m, rows, qs)
	require.NoError(t, err)
	approx, err := k.Scan(ctx, f, m, rows, codes, qs, oversample)
	require.NoError(t, err)
	row := make(map[string]int32, rows.Len())
	for i, id := range rows.IDs {
		row[id] = int32(i)
	}
	var sum float64
	for qi, q := range qs {
		want := map[string]bool{}
		for _, h := range exact[qi] {
			want[h.ID] = true
		}
		found := 0
		for i, h := range approx[qi] {
			one, err := f.Rescore(m, rows, vector.Query{Vector: q.Vector, K: 1}, []int32{row[h.ID]})
			require.NoError(t, err)
			require.Equal(t, math.Float32bits(one[0].Score), math.Float32bits(h.Score), "score of %s", h.ID)
			require.NotEqual(t, q.Exclude, h.ID)
			if i > 0 {
				// Best first. Not m.Better on the pair: like vector's
				// Scan, hits are ranked on the squared distance (ties by
				// id) before its square root rounds, so two l2 hits may
				// share a score out of id order.
				prev := approx[qi][i-1]
				require.False(t, m.Better(vector.Hit{Score: h.Score}, vector.Hit{Score: prev.Score}), "order at %d", i)
			}
			if want[h.ID] {
				found++
			}
		}
		require.Len(t, approx[qi], len(exact[qi]))
		sum += float64(found) / float64(max(1, len(exact[qi])))
	}
	return sum / float64(len(qs))
}

type corpus struct {
	name    string
	rows    vector.Rows
	queries [][]float32
}

// recallCorpora are the two corpora recall is asserted on, 1536-D: the
// dev cluster's clustered corpus and normalised Gaussian data, for a
// metric (unit rows for Cosine; raw clustered rows otherwise, so dot and
// l2 see unequal norms).
func recallCorpora(n, nq int, m vector.Metric) []corpus {
	r := rand.New(rand.NewPCG(81, 82))
	const dim = 1536
	crows, cqs := clustered(r, n, nq, dim, m == vector.Cosine)
	g := gaussian(r, n+nq, dim, true)
	grows := g.Prefix(n)
	gqs := make([][]float32, nq)
	for i := range gqs {
		gqs[i] = g.Row(n + i)
	}
	return []corpus{{"clustered", crows, cqs}, {"gaussian", grows, gqs}}
}

// TestRecall asserts recall@k ≥ 0.99 against the exact scan at the
// default oversample, for k of 1, 10 and 100, every metric, on both
// corpora and both kinds of Scale, and logs it with recall at oversample 1.
func TestRecall(t *testing.T) {
	longtest.Mark(t)
	// Under the race detector (make test-long) the corpora are smaller
	// and only the default kind runs; the assertion is the same.
	n, nq, kinds := 20000, 40, []Kind{DefaultKind, PerDimension}
	if raceEnabled {
		n, nq, kinds = 5000, 12, kinds[:1]
	}
	k, _ := Select("")
	f, _ := vector.Select("")
	for _, m := range metrics {
		for _, c := range recallCorpora(n, nq, m) {
			for _, kind := range kinds {
				codes := mustCodes(t, c.rows, kind)
				for _, kk := range []int{1, 10, 100} {
					qs := make([]vector.Query, len(c.queries))
					for i, v := range c.queries {
						qs[i] = vector.Query{Vector: v, K: kk}
					}
					qs[0].Exclude = c.rows.IDs[0]
					got := recall(t, k, f, m, c.rows, codes, qs, DefaultOversample)
					one := recall(t, k, f, m, c.rows, codes, qs, 1)
					t.Logf("%v %s %v k=%d: recall %.4f at oversample %d, %.4f at 1", m, c.name, kind, kk, got, DefaultOversample, one)
					require.GreaterOrEqual(t, got, 0.99, "%v %s %v k=%d", m, c.name, kind, kk)
				}
			}
		}
	}
}

// TestRecallOutlierRows: three degenerate rows (nearly one axis each, as a
// bad embedding of an empty text can be) must not coarsen the codes of
// every other row: the per-shard scale sets the spikes aside.
func TestRecallOutlierRows(t *testing.T) {
	n, nq := 20000, 60
	if testing.Short() || raceEnabled {
		n, nq = 5000, 20
	}
	r := rand.New(rand.NewPCG(85, 86))
	rows, vecs := clustered(r, n, nq, 1536, true)
	for _, i := range []int{7, 8, 9} {
		row := rows.Row(i)
		clear(row)
		row[3+i], row[4] = 0.99, 0.14
		vector.Generic().Normalize(row)
	}
	codes := mustCodes(t, rows, DefaultKind)
	require.Less(t, codes.Scale().Step(0), float32(0.2/MaxCode), "the spikes set the step")
	k, _ := Select("")
	f, _ := vector.Select("")
	for _, kk := range []int{1, 10} {
		qs := make([]vector.Query, len(vecs))
		for i, v := range vecs {
			qs[i] = vector.Query{Vector: v, K: kk}
		}
		got := recall(t, k, f, vector.Cosine, rows, codes, qs, DefaultOversample)
		t.Logf("k=%d: recall %.4f at oversample %d", kk, got, DefaultOversample)
		require.GreaterOrEqual(t, got, 0.99, "k=%d", kk)
	}
}
