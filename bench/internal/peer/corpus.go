// Package peer holds what a comparison of trawl with another vector
// database (or with its own exact scan) needs on both sides: a
// deterministic corpus, clustered or isotropic, streamed in chunks so a
// million rows never sit in the harness's memory; queries drawn like it;
// the exact answers by brute force; and recall by id set.
package peer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/trawl-search/trawl/vector"
)

// Recipe is how a corpus is drawn. With Clusters > 0, centres are
// N(0, I/dim) (unit length on average); a document is a centre chosen
// uniformly plus noise N(0, Noise²·I/dim), normalised; a query is the
// same with a fresh draw, so it lies near a cluster but is not a stored
// document. With Clusters = 0 documents and queries are isotropic
// Gaussian N(0, I), normalised: no structure for an index to find.
type Recipe struct {
	Rows, Queries, Dim, Clusters int
	// Noise is the noise's expected norm relative to a centre's.
	Noise float64
	Seed  uint64
}

func (r Recipe) String() string {
	if r.Clusters == 0 {
		return fmt.Sprintf("%d documents and %d queries, %d-D, isotropic Gaussian: vector = normalise(e), e ~ N(0, I), "+
			"queries drawn alike, seed %d", r.Rows, r.Queries, r.Dim, r.Seed)
	}
	return fmt.Sprintf("%d documents and %d queries, %d-D, %d Gaussian clusters: centre c ~ N(0, I/%d), "+
		"vector = normalise(c + e), e ~ N(0, %.2g²·I/%d), centre uniform per vector; queries are fresh draws of the same, seed %d",
		r.Rows, r.Queries, r.Dim, r.Clusters, r.Dim, r.Noise, r.Dim, r.Seed)
}

func (r Recipe) validate() error {
	if r.Rows <= 0 || r.Dim <= 0 || r.Clusters < 0 || r.Queries <= 0 {
		return fmt.Errorf("corpus recipe %+v: sizes must be positive (clusters 0: isotropic)", r)
	}
	return nil
}

// Corpus is the queries and, when generated whole, the documents
// (row-major, unit length).
type Corpus struct {
	Recipe
	Data    []float32 // Rows × Dim; nil when streamed
	Queries [][]float32
}

// Streams of the recipe's seed: the centres, the documents and the
// queries each draw from their own, so a streamed corpus and a whole one
// are the same bits and the queries do not depend on the row count.
const (
	streamCentres = 0x63656e74
	streamRows    = 0x726f7773
	streamQueries = 0x71756572
)

// drawer draws unit vectors of one recipe from one stream.
type drawer struct {
	r       Recipe
	rng     *rand.Rand
	centres [][]float64
	tmp     []float64
	sd      float64
}

func newDrawer(r Recipe, stream uint64) *drawer {
	d := &drawer{r: r, rng: rand.New(rand.NewPCG(r.Seed, stream)), tmp: make([]float64, r.Dim), sd: 1 / math.Sqrt(float64(r.Dim))}
	crng := rand.New(rand.NewPCG(r.Seed, streamCentres))
	d.centres = make([][]float64, r.Clusters)
	for i := range d.centres {
		c := make([]float64, r.Dim)
		for j := range c {
			c[j] = d.sd * crng.NormFloat64()
		}
		d.centres[i] = c
	}
	return d
}

// draw fills out with the next vector; sums run in float64 in a fixed
// order, so the bits are the same on every machine (math/rand/v2's PCG
// and NormFloat64 are specified).
func (d *drawer) draw(out []float32) {
	var norm float64
	if len(d.centres) == 0 {
		for j := range d.tmp {
			d.tmp[j] = d.rng.NormFloat64()
			norm += d.tmp[j] * d.tmp[j]
		}
	} else {
		c := d.centres[d.rng.IntN(len(d.centres))]
		for j := range d.tmp {
			d.tmp[j] = c[j] + d.r.Noise*d.sd*d.rng.NormFloat64()
			norm += d.tmp[j] * d.tmp[j]
		}
	}
	norm = math.Sqrt(norm)
	for j := range d.tmp {
		out[j] = float32(d.tmp[j] / norm)
	}
}

// Queries draws the recipe's queries.
func Queries(r Recipe) ([][]float32, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	d := newDrawer(r, streamQueries)
	qs := make([][]float32, r.Queries)
	for i := range qs {
		qs[i] = make([]float32, r.Dim)
		d.draw(qs[i])
	}
	return qs, nil
}

// Stream draws the documents in order, chunk rows at a time, calling fn
// with the first row's number and the chunk (reused: fn must copy what
// it keeps).
func Stream(ctx context.Context, r Recipe, chunk int, fn func(first int, rows []float32) error) error {
	if err := r.validate(); err != nil {
		return err
	}
	d := newDrawer(r, streamRows)
	buf := make([]float32, chunk*r.Dim)
	for first := 0; first < r.Rows; first += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(chunk, r.Rows-first)
		for i := range n {
			d.draw(buf[i*r.Dim : (i+1)*r.Dim])
		}
		if err := fn(first, buf[:n*r.Dim]); err != nil {
			return err
		}
	}
	return nil
}

// Generate draws the whole corpus into memory (Rows × Dim floats).
func Generate(r Recipe) (*Corpus, error) {
	qs, err := Queries(r)
	if err != nil {
		return nil, err
	}
	c := &Corpus{Recipe: r, Data: make([]float32, 0, r.Rows*r.Dim), Queries: qs}
	err = Stream(context.Background(), r, 4096, func(_ int, rows []float32) error {
		c.Data = append(c.Data, rows...)
		return nil
	})
	return c, err
}

// ID is document i's id in trawl: `router load` names .npy rows by their
// row number.
func ID(i int) string { return strconv.Itoa(i) }

// Truth accumulates every query's exact top-k by brute force over a
// corpus fed to it in chunks, by a metric (cosine is a dot product: the
// generated rows and queries are unit vectors), with trawl's float32
// kernel: each chunk's top-k merged into the running one, best score
// first and ties by id ascending, as the kernel orders hits, so the
// result is the whole corpus's top-k.
type Truth struct {
	kern   vector.Kernel
	metric vector.Metric
	dim    int
	qs     []vector.Query
	best   [][]vector.Hit
}

// NewTruth starts the exact top-k of queries by metric.
func NewTruth(queries [][]float32, k int, metric vector.Metric) (*Truth, error) {
	kern, err := vector.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("exact answers: %w", err)
	}
	t := &Truth{kern: kern, metric: metric, best: make([][]vector.Hit, len(queries))}
	for _, q := range queries {
		t.dim = len(q)
		t.qs = append(t.qs, vector.Query{Vector: q, K: k})
	}
	return t, nil
}

// Add scores rows (row-major, first numbering the first of them).
func (t *Truth) Add(ctx context.Context, first int, data []float32) error {
	n := len(data) / t.dim
	ids := make([]string, n)
	for i := range ids {
		ids[i] = ID(first + i)
	}
	hits, err := t.kern.Scan(ctx, t.metric, vector.FlatRows(data, t.dim, ids), t.qs)
	if err != nil {
		return fmt.Errorf("exact answers: %w", err)
	}
	for i, hs := range hits {
		b := append(t.best[i], hs...)
		slices.SortFunc(b, func(x, y vector.Hit) int {
			switch {
			case t.metric.Better(x, y):
				return -1
			case t.metric.Better(y, x):
				return 1
			}
			return 0
		})
		t.best[i] = b[:min(len(b), t.qs[i].K)]
	}
	return nil
}

// IDs is every query's top-k ids, best first, cut to the first k (k ≤
// the k the Truth was started with).
func (t *Truth) IDs(k int) [][]string {
	out := make([][]string, len(t.best))
	for i, hs := range t.best {
		for _, h := range hs[:min(k, len(hs))] {
			out[i] = append(out[i], h.ID)
		}
	}
	return out
}

// Exact is every query's exact top-k ids by metric, by brute force over a
// corpus held in memory.
func Exact(ctx context.Context, c *Corpus, k int, metric vector.Metric) ([][]string, error) {
	t, err := NewTruth(c.Queries, k, metric)
	if err != nil {
		return nil, err
	}
	if err := t.Add(ctx, 0, c.Data); err != nil {
		return nil, err
	}
	return t.IDs(k), nil
}

// Recall is the share of the exact ids found: |got ∩ want| / |want|,
// summed over queries (an exact id set, not scores: ties at the k-th score
// count against a system that returns another id of the same score).
func Recall(got, want [][]string) float64 {
	found, total := 0, 0
	for i, w := range want {
		set := make(map[string]bool, len(w))
		for _, id := range w {
			set[id] = true
		}
		total += len(w)
		if i >= len(got) {
			continue
		}
		for _, id := range got[i] {
			if set[id] {
				found++
				delete(set, id)
			}
		}
	}
	if total == 0 {
		return 0
	}
	return float64(found) / float64(total)
}
