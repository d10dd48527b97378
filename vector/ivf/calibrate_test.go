package ivf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/vector"
)

// viewOf is a Viewer over a fixed index, as a shard's read lock would give.
func viewOf(b built) Viewer {
	return func(fn func(vector.Rows, *Index) error) error { return fn(b.rows, b.x) }
}

// CalibrateNProbe finds what each corpus needs: on isotropic data, where
// DefaultNProbe's share loses most neighbours, more lists, enough that
// fresh queries (not rows of the shard) then reach the promised recall at
// the index's default, at k = 10 and at k = 100; on a corpus of few
// clusters, about the rule's own value at k = 10. A deeper level never
// probes fewer lists. The same inputs give the same answer.
func TestCalibrateNProbe(t *testing.T) {
	longtest.Mark(t)
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
			levels, err := CalibrateNProbe(context.Background(), viewOf(b), b.k, b.f)
			require.NoError(t, err)
			t.Logf("%s: %d lists, rule %d, calibrated %+v", c.name, b.x.Lists(), def, levels)
			require.Len(t, levels, len(CalibrationKs()))
			for i, l := range levels {
				require.Equal(t, CalibrationKs()[i], l.K)
				require.True(t, l.Recall >= CalibrationTarget || l.NProbe == b.x.Lists(), "stops at the target or at every list")
				if i > 0 {
					require.GreaterOrEqual(t, l.NProbe, levels[i-1].NProbe, "a deeper level probes at least as many lists")
				}
			}
			require.GreaterOrEqual(t, levels[0].NProbe, c.atLeast(def))
			require.LessOrEqual(t, levels[0].NProbe, c.atMost(def, b.x.Lists()))

			again, err := CalibrateNProbe(context.Background(), viewOf(b), b.k, b.f)
			require.NoError(t, err)
			require.Equal(t, levels, again)

			b.x.SetDefaultNProbes(levels)
			require.Equal(t, levels[0].NProbe, b.x.DefaultNProbe())
			for _, k := range []int{10, 100} {
				qs := queriesOf(c.vecs, k, 0)
				exact, err := b.f.Scan(context.Background(), vector.Cosine, c.rows, plain(qs))
				require.NoError(t, err)
				got, err := b.x.Search(context.Background(), b.k, b.f, c.rows, qs)
				require.NoError(t, err)
				fresh := recall(exact, got)
				t.Logf("%s: fresh queries' recall@%d at the calibrated default %.4f", c.name, k, fresh)
				require.GreaterOrEqual(t, fresh, 0.98, "k = %d", k)
			}
		})
	}
}

func TestCalibrateNProbeRefusesTinyShards(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := build(t, vector.Cosine, gaussian(r, 15, 8, true), 2)
	_, err := CalibrateNProbe(context.Background(), viewOf(b), b.k, b.f)
	require.ErrorContains(t, err, "15 rows")
}

// A query's default is the level of the smallest K covering its k, the
// last level beyond every K, never more than the lists; no levels is the
// rule.
func TestDefaultNProbeFor(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := build(t, vector.Cosine, gaussian(r, 2000, 8, true), 40)
	require.Equal(t, DefaultNProbe(40), b.x.DefaultNProbe())
	require.Equal(t, DefaultNProbe(40), b.x.DefaultNProbeFor(100))
	b.x.SetDefaultNProbes([]Level{{K: 10, NProbe: 12}, {K: 100, NProbe: 400}})
	for k, want := range map[int]int{0: 12, 1: 12, 10: 12, 11: 40, 100: 40, 1000: 40} {
		require.Equal(t, want, b.x.DefaultNProbeFor(k), "k = %d", k)
	}
	require.Equal(t, 12, b.x.DefaultNProbe())
	b.x.SetDefaultNProbes(nil)
	require.Equal(t, DefaultNProbe(40), b.x.DefaultNProbeFor(10))
}

// Rows written while a calibration runs (a bulk load goes on between its
// steps) change nothing: every step reads the rows held at the first.
// The rows written here are each a near copy of a calibration query, so
// counted they would push out a true neighbour of nearly every query.
func TestCalibrateNProbeIgnoresRowsWrittenMeanwhile(t *testing.T) {
	longtest.Mark(t)
	n, dim := 8000, 32
	r := rand.New(rand.NewPCG(5, 6))
	rows, _ := clustered(r, n, 1, dim, true)
	b := build(t, vector.Cosine, rows, 0)
	want, err := CalibrateNProbe(context.Background(), viewOf(b), b.k, b.f)
	require.NoError(t, err)

	// A copy of the rows and index that grows between steps.
	data := append(make([]float32, 0, 2*n*dim), flat(rows)...)
	ids := append(make([]string, 0, 2*n), rows.IDs...)
	g := build(t, vector.Cosine, vector.FlatRows(data, dim, ids), b.x.Lists())
	steps := 0
	grow := func(fn func(vector.Rows, *Index) error) error {
		if steps > 0 {
			for q := range min(CalibrationQueries, n) {
				src := q * n / min(CalibrationQueries, n)
				v := make([]float32, dim)
				copy(v, data[src*dim:(src+1)*dim])
				v[steps%dim] += 1e-3
				vector.Generic().Normalize(v)
				data = append(data, v...)
				ids = append(ids, fmt.Sprintf("new-%d-%d", steps, q))
				g.x.Append(v)
			}
		}
		steps++
		return fn(vector.FlatRows(data, dim, ids), g.x)
	}
	got, err := CalibrateNProbe(context.Background(), grow, g.k, g.f)
	require.NoError(t, err)
	require.Greater(t, len(ids), n+CalibrationQueries, "rows were written between steps")
	require.Equal(t, want, got)
}
