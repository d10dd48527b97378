package coordinator

import (
	"context"
	"fmt"
	"slices"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// SparseQuery is a query by one named sparse vector of the collection.
type SparseQuery struct {
	Name   string
	Vector sparsevec.Vector
}

// CheckSparseQuery reports why q cannot query coll: a sparse vector the
// collection lacks, or an invalid vector.
func CheckSparseQuery(coll Collection, q SparseQuery) error {
	if _, ok := coll.Settings.Sparse[q.Name]; !ok {
		return fmt.Errorf("the collection has no sparse vector %q", q.Name)
	}
	return q.Vector.Validate()
}

// sparseStatsAnswer is one shard's statistics for every idf query of a
// search, in query order (nil for the others).
type sparseStatsAnswer struct {
	stats []*client.SparseStats
	docs  uint64
}

func (a sparseStatsAnswer) GetDocCount() uint64 { return a.docs }

// sparseStats is a search's statistics round: the weights of each idf
// query's terms, and the round's summary (a shard missing from it makes
// the search degraded, as its idf is then not the collection's).
type sparseStats struct {
	weights [][]float32 // per query; nil for queries without idf
	summary fanout.Summary
}

// sparseWeights runs the statistics round for the queries whose sparse
// vector has the idf modifier: every shard answers how many of its
// documents hold a vector of the name and the query terms' document
// frequencies, which are summed here, so idf is collection-wide: idf(t) =
// ln((N − df(t) + 0.5)/(df(t) + 0.5) + 1) with N the collection's
// documents holding a vector of the name and df(t) those whose vector
// holds t (Qdrant's formula and N, its indexed vectors of the name). It returns nil when no query needs
// it. It spends the search's budget.
func (c *Coordinator) sparseWeights(ctx context.Context, coll Collection, req fanout.Request, qs []Query) *sparseStats {
	var idf []int
	for i, q := range qs {
		if q.Sparse != nil && coll.Settings.Sparse[q.Sparse.Name].Modifier == catalog.ModifierIDF {
			idf = append(idf, i)
		}
	}
	if len(idf) == 0 {
		return nil
	}
	req.DeferReport = true
	results, sum := fanout.Gather(ctx, c.cluster, req, func(ctx context.Context, r *client.Conn) (sparseStatsAnswer, error) {
		m := c.minIndex(r)
		sc := r.In(coll.ref())
		out := sparseStatsAnswer{stats: make([]*client.SparseStats, len(qs))}
		for _, i := range idf {
			st, err := sc.SparseStats(ctx, qs[i].Sparse.Name, qs[i].Sparse.Vector.Indices, m, c.readSlots(coll, r))
			if err != nil {
				return sparseStatsAnswer{}, err
			}
			out.stats[i], out.docs = &st, st.Docs
		}
		c.served(r, m)
		return out, nil
	})
	out := &sparseStats{weights: make([][]float32, len(qs)), summary: sum}
	for _, i := range idf {
		terms := qs[i].Sparse.Vector.Indices
		var n uint64
		df := make([]uint64, len(terms))
		for _, res := range results {
			if res.Reason != "" {
				continue
			}
			st := res.Value.stats[i]
			n += st.Vectors
			for j := range df {
				if j < len(st.DF) {
					df[j] += st.DF[j]
				}
			}
		}
		w := make([]float32, len(terms))
		for j := range w {
			w[j] = sparsevec.IDF(n, df[j])
		}
		out.weights[i] = w
	}
	return out
}

// withMissing adds to a fan-out's summary the shards a search's
// statistics round missed: their answers were scored with an idf that
// lacks their documents, so the answer is degraded, counted once, by the
// search's own report. Coverage drops by their documents as the search
// saw them (at least 1 each).
func withMissing[T fanout.Answer](sum fanout.Summary, results []fanout.Result[T], stats fanout.Summary) fanout.Summary {
	var added []string
	for _, name := range stats.Unavailable {
		if !slices.Contains(sum.Unavailable, name) {
			added = append(added, name)
		}
	}
	if len(added) == 0 {
		return sum
	}
	// answered are the documents of the shards that answered the search,
	// total the search's estimate of all (answered / its coverage).
	var answered, lost float64
	unavailable := make([]string, 0, len(sum.Unavailable)+len(added))
	errs := make(map[string]fanout.Reason, len(sum.ShardErrors)+len(added))
	for k, v := range sum.ShardErrors {
		errs[k] = v
	}
	for _, r := range results {
		if r.Reason != "" {
			unavailable = append(unavailable, r.Shard)
			continue
		}
		docs := float64(r.Value.GetDocCount())
		answered += docs
		if slices.Contains(added, r.Shard) {
			unavailable = append(unavailable, r.Shard)
			errs[r.Shard] = stats.ShardErrors[r.Shard]
			lost += docs
		}
	}
	total := answered
	if sum.Coverage > 0 {
		total = answered / sum.Coverage
	}
	// Each missing shard counts at least 1, so coverage is below 1.
	kept := answered - lost
	total = max(total, kept+float64(len(added)))
	sum.Unavailable, sum.ShardErrors = unavailable, errs
	sum.ShardsQueried -= len(added)
	sum.Coverage = kept / total
	return sum
}
