package ivf

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
)

// viewOf is a Viewer over a fixed index, as a shard's read lock would give.
func viewOf(b built) Viewer {
	return func(fn func(vector.Rows, *Index) error) error { return fn(b.rows, b.x) }
}

// CalibrateNProbe finds what each corpus needs: on isotropic data, where
// DefaultNProbe's share loses most neighbours, more lists, enough that
// fresh queries (not rows of the shard) then reach the promised recall at
// the index's default; on a corpus of few clusters, about the rule's own
// value. The same inputs give the same answer.
func TestCalibrateNProbe(t *testing.T) {
	n, dim, nq := 20000, 64, 40
	r := rand.New(rand.NewPCG(21, 22))
	grows := gaussian(r, n, dim, true)
	gq := gaussianQueries(r, nq, dim, true)
	crows, cq := clustered(r, n, nq, dim, true)
	for _, c := range []struct {
		name    string
		rows    vector.Rows
		vecs    [][]float32
		atLeast func(def int) int
		atMost  func(def, lists int) int
	}{
		{"gaussian", grows, gq, func(def int) int { return 2 * def }, func(_, lists int) int { return lists }},
		{"clustered", crows, cq, func(def int) int { return def }, func(def, _ int) int { return 3 * def }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := build(t, vector.Cosine, c.rows, 0)
			def := DefaultNProbe(b.x.Lists())
			np, rec, err := CalibrateNProbe(context.Background(), viewOf(b), b.k, b.f)
			require.NoError(t, err)
			t.Logf("%s: %d lists, rule %d, calibrated %d (sample recall %.4f)", c.name, b.x.Lists(), def, np, rec)
			require.GreaterOrEqual(t, np, c.atLeast(def))
			require.LessOrEqual(t, np, c.atMost(def, b.x.Lists()))
			require.True(t, rec >= CalibrationTarget || np == b.x.Lists(), "stops at the target or at every list")

			again, _, err := CalibrateNProbe(context.Background(), viewOf(b), b.k, b.f)
			require.NoError(t, err)
			require.Equal(t, np, again)

			b.x.SetDefaultNProbe(np)
			require.Equal(t, np, b.x.DefaultNProbe())
			qs := queriesOf(c.vecs, 10, 0)
			exact, err := b.f.Scan(context.Background(), vector.Cosine, c.rows, plain(qs))
			require.NoError(t, err)
			got, err := b.x.Search(context.Background(), b.k, b.f, c.rows, qs)
			require.NoError(t, err)
			fresh := recall(exact, got)
			t.Logf("%s: fresh queries' recall@10 at the calibrated default %.4f", c.name, fresh)
			require.GreaterOrEqual(t, fresh, 0.98)
		})
	}
}

func TestCalibrateNProbeRefusesTinyShards(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := build(t, vector.Cosine, gaussian(r, 15, 8, true), 2)
	_, _, err := CalibrateNProbe(context.Background(), viewOf(b), b.k, b.f)
	require.ErrorContains(t, err, "15 rows")
}

func TestDefaultNProbeOverride(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := build(t, vector.Cosine, gaussian(r, 2000, 8, true), 40)
	require.Equal(t, DefaultNProbe(40), b.x.DefaultNProbe())
	b.x.SetDefaultNProbe(12)
	require.Equal(t, 12, b.x.DefaultNProbe())
	b.x.SetDefaultNProbe(400)
	require.Equal(t, 40, b.x.DefaultNProbe(), "never more than the lists")
	b.x.SetDefaultNProbe(0)
	require.Equal(t, DefaultNProbe(40), b.x.DefaultNProbe())
}
