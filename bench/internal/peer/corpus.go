// Package peer holds what a comparison of trawl with another vector
// database needs on both sides: a deterministic clustered corpus, queries
// near its clusters, the exact answers by brute force, and recall by id
// set.
package peer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/trawl-search/trawl/vector"
)

// Recipe is how a clustered corpus is drawn. Centres are N(0, I/dim)
// (unit length on average); a document is a centre chosen uniformly plus
// noise N(0, Noise²·I/dim), normalised; a query is the same with a fresh
// draw, so it lies near a cluster but is not a stored document.
type Recipe struct {
	Rows, Queries, Dim, Clusters int
	// Noise is the noise's expected norm relative to a centre's.
	Noise float64
	Seed  uint64
}

func (r Recipe) String() string {
	return fmt.Sprintf("%d documents and %d queries, %d-D, %d Gaussian clusters: centre c ~ N(0, I/%d), "+
		"vector = normalise(c + e), e ~ N(0, %.2g²·I/%d), centre uniform per vector; queries are fresh draws of the same, seed %d",
		r.Rows, r.Queries, r.Dim, r.Clusters, r.Dim, r.Noise, r.Dim, r.Seed)
}

// Corpus is the documents (row-major, unit length) and the queries.
type Corpus struct {
	Recipe
	Data    []float32 // Rows × Dim
	Queries [][]float32
}

// Generate draws the corpus. The same recipe gives the same bits on every
// machine: math/rand/v2's PCG and NormFloat64 are specified, and the sums
// are done in float64 in a fixed order.
func Generate(r Recipe) (*Corpus, error) {
	if r.Rows <= 0 || r.Dim <= 0 || r.Clusters <= 0 || r.Queries <= 0 {
		return nil, fmt.Errorf("corpus recipe %+v: sizes must be positive", r)
	}
	rng := rand.New(rand.NewPCG(r.Seed, 0x70656572))
	sd := 1 / math.Sqrt(float64(r.Dim))
	centres := make([][]float64, r.Clusters)
	for i := range centres {
		c := make([]float64, r.Dim)
		for j := range c {
			c[j] = sd * rng.NormFloat64()
		}
		centres[i] = c
	}
	draw := func(out []float32) {
		c := centres[rng.IntN(r.Clusters)]
		var norm float64
		tmp := make([]float64, r.Dim)
		for j := range tmp {
			tmp[j] = c[j] + r.Noise*sd*rng.NormFloat64()
			norm += tmp[j] * tmp[j]
		}
		norm = math.Sqrt(norm)
		for j := range tmp {
			out[j] = float32(tmp[j] / norm)
		}
	}
	c := &Corpus{Recipe: r, Data: make([]float32, r.Rows*r.Dim)}
	for i := range r.Rows {
		draw(c.Data[i*r.Dim : (i+1)*r.Dim])
	}
	for range r.Queries {
		q := make([]float32, r.Dim)
		draw(q)
		c.Queries = append(c.Queries, q)
	}
	return c, nil
}

// ID is document i's id in trawl: `router load` names .npy rows by their
// row number.
func ID(i int) string { return strconv.Itoa(i) }

// Exact is every query's exact top-k ids by brute force over the corpus,
// cosine (a dot product: rows and queries are unit vectors), with trawl's
// float32 kernel.
func Exact(ctx context.Context, c *Corpus, k int) ([][]string, error) {
	kern, err := vector.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("exact answers: %w", err)
	}
	ids := make([]string, c.Rows)
	for i := range ids {
		ids[i] = ID(i)
	}
	rows := vector.Rows{Data: c.Data, Dim: c.Dim, IDs: ids}
	qs := make([]vector.Query, len(c.Queries))
	for i, q := range c.Queries {
		qs[i] = vector.Query{Vector: q, K: k}
	}
	hits, err := kern.Scan(ctx, vector.Cosine, rows, qs)
	if err != nil {
		return nil, fmt.Errorf("exact answers: %w", err)
	}
	out := make([][]string, len(hits))
	for i, hs := range hits {
		for _, h := range hs {
			out[i] = append(out[i], h.ID)
		}
	}
	return out, nil
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
