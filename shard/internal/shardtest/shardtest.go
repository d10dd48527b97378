// Package shardtest holds the test corpora the shard packages' tests and
// benchmarks share: clustered vectors (so IVF lists mean something) and
// the benchmark payloads, and an IVF index read as id sets. It is for
// tests only; nothing in the product imports it.
package shardtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
	"github.com/trawl-search/trawl/vector/quant"
)

// Normal is a dim-D vector of standard normal values: never all zero, and
// with no structure an index could exploit.
func Normal(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for d := range v {
		v[d] = float32(rng.NormFloat64())
	}
	return v
}

// Clustered makes vectors around a few fixed centres.
type Clustered struct {
	rng     *rand.Rand
	centres [][]float32
}

// NewClustered returns a generator of dim-dimensional vectors around
// centres random centres; the same seed gives the same vectors.
func NewClustered(seed uint64, dim, centres int) *Clustered {
	g := &Clustered{rng: rand.New(rand.NewPCG(seed, 99))}
	for range centres {
		c := make([]float32, dim)
		for j := range c {
			c[j] = float32(g.rng.NormFloat64())
		}
		g.centres = append(g.centres, c)
	}
	return g
}

// IntN is a number in [0, n) from the generator's stream, for choices a
// test makes alongside its vectors (repeatable with the same seed).
func (g *Clustered) IntN(n int) int { return g.rng.IntN(n) }

// Vec is the next vector: a centre plus noise.
func (g *Clustered) Vec() []float32 {
	c := g.centres[g.rng.IntN(len(g.centres))]
	v := make([]float32, len(c))
	for j := range v {
		v[j] = c[j] + 0.5*float32(g.rng.NormFloat64())
	}
	return v
}

// BenchRows is the shard size of the payload benchmarks (DESIGN.md's
// "1 % of a 200 000-vector shard"); TRAWL_FILTER_BENCH_ROWS makes it
// smaller for a quick look.
func BenchRows() int {
	if n, err := strconv.Atoi(os.Getenv("TRAWL_FILTER_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// BenchPayload is document i's payload in the benchmarks: bucket (0..99)
// makes selectivities exact (bucket == 7 keeps 1 %, bucket < 10 keeps
// 10 %), plus the dev corpus's kind of fields.
func BenchPayload(rng *rand.Rand, i int) []byte {
	langs := []string{"en", "en", "de", "fr", "es", "ja"}
	return fmt.Appendf(nil, `{"bucket":%d,"lang":%q,"year":%d,"tags":["t%d","t%d"],"price":%d.%02d}`,
		i%100, langs[rng.IntN(len(langs))], 2000+rng.IntN(26), rng.IntN(20), rng.IntN(20), rng.IntN(1000), rng.IntN(100))
}

// Indexed is a store with an IVF index (store.Memory), seen through the
// methods these helpers read; an interface so that the store's own tests
// can use them without an import cycle.
type Indexed interface {
	ViewIVF(fn func(vector.Rows, *ivf.Index) error) error
	View(fn func(vector.Rows) error) error
	Trained(name string) []byte
}

// ListSets returns m's index as sorted id sets, list by list (slot order
// inside a list follows the write history, which replicas and a fresh
// build need not share; answers do not depend on it).
func ListSets(t testing.TB, m Indexed) [][]string {
	t.Helper()
	var out [][]string
	require.NoError(t, m.ViewIVF(func(r vector.Rows, x *ivf.Index) error {
		require.NotNil(t, x, "an index")
		require.Equal(t, r.Len(), x.Len())
		out = idSets(r, x)
		return nil
	}))
	return out
}

// FreshLists builds an index from m's committed centroids and scale (the
// trained values named centroids and scale) over its rows, as ListSets
// gives it.
func FreshLists(t testing.TB, m Indexed, centroids, scale string) [][]string {
	t.Helper()
	var c ivf.Centroids
	require.NoError(t, c.UnmarshalBinary(m.Trained(centroids)))
	var s quant.Scale
	require.NoError(t, s.UnmarshalBinary(m.Trained(scale)))
	var out [][]string
	require.NoError(t, m.View(func(r vector.Rows) error {
		x, err := ivf.Build(vector.Generic(), c, s, r)
		require.NoError(t, err)
		out = idSets(r, x)
		return nil
	}))
	return out
}

func idSets(r vector.Rows, x *ivf.Index) [][]string {
	var out [][]string
	for l := range x.Lists() {
		ids := []string{}
		for _, row := range x.ListRows(l) {
			ids = append(ids, r.IDs[row])
		}
		sort.Strings(ids)
		out = append(out, ids)
	}
	return out
}
