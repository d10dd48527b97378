package ivf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var metrics = []vector.Metric{vector.Cosine, vector.DotProduct, vector.Euclidean}

// gaussian returns n rows of dim standard normal floats with ids doc-0,
// doc-1, …; unit rows if normalise.
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
// corpus is made (centres N(0, 1), each row a centre plus N(0, ½) noise
// per element), and nq queries drawn the same way (so not in the corpus);
// unit vectors if normalise.
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

// gaussianQueries returns nq fresh Gaussian queries.
func gaussianQueries(r *rand.Rand, nq, dim int, normalise bool) [][]float32 {
	g := gaussian(r, nq, dim, normalise)
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = g.Row(i)
	}
	return qs
}

// built is a trained and built index over rows, with the kernels.
type built struct {
	x    *Index
	rows vector.Rows
	k    quant.Kernel
	f    vector.Kernel
	m    vector.Metric
}

func build(t testing.TB, m vector.Metric, rows vector.Rows, lists int) built {
	f, err := vector.Select("")
	require.NoError(t, err)
	k, err := quant.Select("")
	require.NoError(t, err)
	if lists == 0 {
		lists = DefaultLists(rows.Len())
	}
	sample := Sample(rows, SampleSize(lists, rows.Len()), 1)
	c, err := Train(context.Background(), f, m, sample, rows.Dim, Config{Rows: rows.Len(), Lists: lists, Seed: 1})
	require.NoError(t, err)
	s, err := quant.Train(flat(rows), rows.Dim, quant.DefaultKind)
	require.NoError(t, err)
	x, err := Build(f, c, s, rows)
	require.NoError(t, err)
	return built{x: x, rows: rows, k: k, f: f, m: m}
}

func queriesOf(vecs [][]float32, k, nprobe int) []Query {
	qs := make([]Query, len(vecs))
	for i, v := range vecs {
		qs[i] = Query{Query: vector.Query{Vector: v, K: k}, NProbe: nprobe}
	}
	return qs
}

func plain(qs []Query) []vector.Query {
	out := make([]vector.Query, len(qs))
	for i, q := range qs {
		out[i] = q.Query
	}
	return out
}

// recall is the mean share of the exact top-k ids found.
func recall(want, got [][]vector.Hit) float64 {
	var sum float64
	for i := range want {
		ids := map[string]bool{}
		for _, h := range want[i] {
			ids[h.ID] = true
		}
		found := 0
		for _, h := range got[i] {
			if ids[h.ID] {
				found++
			}
		}
		sum += float64(found) / float64(max(1, len(want[i])))
	}
	return sum / float64(len(want))
}

// benchRows is the corpus size of the benchmarks: IVF_BENCH_ROWS or
// 100 000.
func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("IVF_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 100000
}

// flat is every row of rows back to back: the one array of rows made
// with vector.FlatRows (nil for none).
func flat(rows vector.Rows) []float32 {
	if rows.Len() == 0 {
		return nil
	}
	return rows.Run(0, rows.Len())
}
