package coordinator

import (
	"context"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/vector"
)

// MaxExamples is the most examples (positive and negative) a
// recommendation may give.
const MaxExamples = 256

// Recommend is a recommendation query's examples (Qdrant's recommend
// with the average_vector strategy): it searches with
// avg(positive) when there are no negatives, else
// 2·avg(positive) − avg(negative) (Qdrant's formula), and leaves the
// example points out of the answer.
type Recommend struct {
	Positive []Example
	Negative []Example
}

// Example is a point given by its id (its stored vector), or a vector.
type Example struct {
	ID     string
	Vector []float32
}

// exampleIDs are the distinct ids among r's examples, in order.
func (r *Recommend) exampleIDs() []string {
	var ids []string
	for _, e := range slices.Concat(r.Positive, r.Negative) {
		if e.Vector == nil && !slices.Contains(ids, e.ID) {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// checkRecommend refuses what a recommendation could not run: no
// positive example, too many, or a limit that with the examples to leave
// out would ask the shards for more than vector.MaxK hits.
func checkRecommend(i int, q Query) error {
	r := q.Recommend
	switch {
	case len(r.Positive) == 0:
		return errorf(CodeInvalid, nil, "query %d: recommend needs at least one positive example with the average_vector strategy", i)
	case len(r.Positive)+len(r.Negative) > MaxExamples:
		return errorf(CodeInvalid, nil, "query %d: recommend has %d examples, want at most %d", i, len(r.Positive)+len(r.Negative), MaxExamples)
	}
	if n := len(r.exampleIDs()); q.K+n > vector.MaxK {
		return errorf(CodeInvalid, nil, "query %d: limit + offset (%d) and the %d example ids left out of the answer come to more than %d", i, q.K, n, vector.MaxK)
	}
	return nil
}

// resolveRecommend reads the stored vectors of q's example ids from
// their home shards (concurrently, within the request's shard deadline),
// sets q.Vector to the recommendation's search vector, and asks for as
// many more hits as there are example ids, which Search drops.
func (c *Coordinator) resolveRecommend(ctx context.Context, coll Collection, req fanout.Request, q *Query) error {
	r := q.Recommend
	ids := r.exampleIDs()
	vecs := make(map[string][]float32, len(ids))
	got := make([][]float32, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(retrieveConcurrency) // up to 256 examples: as Retrieve bounds its lookups
	for i, id := range ids {
		g.Go(func() error {
			d, err := c.lookup(gctx, coll, req, id)
			if err != nil {
				return err
			}
			got[i] = d.Vector
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, id := range ids {
		vecs[id] = got[i]
	}
	avg := func(es []Example) []float64 {
		sum := make([]float64, coll.Settings.Dim)
		for _, e := range es {
			v := e.Vector
			if v == nil {
				v = vecs[e.ID]
			}
			for j, x := range v {
				sum[j] += float64(x)
			}
		}
		for j := range sum {
			sum[j] /= float64(len(es))
		}
		return sum
	}
	pos := avg(r.Positive)
	if len(r.Negative) > 0 {
		neg := avg(r.Negative)
		for j := range pos {
			pos[j] += pos[j] - neg[j]
		}
	}
	q.Vector = make([]float32, len(pos))
	zero := true
	for j, x := range pos {
		q.Vector[j] = float32(x)
		zero = zero && q.Vector[j] == 0
	}
	if zero && coll.Settings.Metric == vector.Cosine {
		return errorf(CodeInvalid, nil, "the recommendation's examples average to a zero vector, which has no cosine direction")
	}
	q.exclude = ids
	q.K += len(ids)
	return nil
}

// dropExamples removes a recommendation's example points from its merged
// hits and keeps its asked K.
func dropExamples(q Query, hits []Hit) []Hit {
	if len(q.exclude) == 0 {
		return hits
	}
	out := hits[:0]
	for _, h := range hits {
		if !slices.Contains(q.exclude, h.ID) {
			out = append(out, h)
		}
	}
	return out[:min(len(out), q.K-len(q.exclude))]
}
