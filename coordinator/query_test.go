package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard/client"
)

// A query tree's rounds make one summary: a shard missing from any round
// is missing, in cluster order, with its first reason; coverage is the
// lowest; queried counts the shards never missing.
func TestQueryRunMerge(t *testing.T) {
	c := &Coordinator{shards: []fanout.Shard[*client.Conn]{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	ok := fanout.Summary{ShardsTotal: 3, ShardsQueried: 3, Unavailable: []string{}, ShardErrors: map[string]fanout.Reason{}, Coverage: 1}
	missing := func(cov float64, reasons map[string]fanout.Reason) fanout.Summary {
		s := fanout.Summary{ShardsTotal: 3, ShardErrors: reasons, Coverage: cov, Unavailable: []string{}}
		for _, n := range []string{"a", "b", "c"} {
			if _, ok := reasons[n]; ok {
				s.Unavailable = append(s.Unavailable, n)
			}
		}
		s.ShardsQueried = 3 - len(s.Unavailable)
		return s
	}
	for _, tc := range []struct {
		name   string
		rounds []fanout.Summary
		want   fanout.Summary
	}{
		{"one healthy round", []fanout.Summary{ok}, ok},
		{"healthy rounds", []fanout.Summary{ok, ok, ok}, ok},
		{"the second round degraded", []fanout.Summary{ok, missing(0.6, map[string]fanout.Reason{"c": fanout.ReasonDeadline})},
			missing(0.6, map[string]fanout.Reason{"c": fanout.ReasonDeadline})},
		{"different shards missing", []fanout.Summary{
			missing(0.7, map[string]fanout.Reason{"c": fanout.ReasonUnavailable}),
			missing(0.5, map[string]fanout.Reason{"a": fanout.ReasonDeadline, "c": fanout.ReasonDeadline}),
		}, missing(0.5, map[string]fanout.Reason{"a": fanout.ReasonDeadline, "c": fanout.ReasonUnavailable})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := queryRun{c: c, exact: true}
			for _, s := range tc.rounds {
				r.merge(Answer{Summary: s, Exact: true})
			}
			require.Equal(t, tc.want, r.sum)
			require.Equal(t, tc.want.Degraded(), r.sum.Degraded())
		})
	}
}

// planQuery lays stages out by height, propagates filters down and
// carries the answer's selection only to the stages whose points are
// the answer's.
func TestPlanQuery(t *testing.T) {
	f := func(key string) *filter.Filter {
		return &filter.Filter{Must: []filter.Condition{{Op: filter.OpIsNull, Key: key, Path: []string{key}}}}
	}
	v := []float32{1, 0}
	sel := &PayloadSelection{All: true}
	tree := Stage{Query: Query{K: 10, Filter: f("root"), WithPayload: sel, WithVector: true}, Fusion: &Fusion{Method: FusionRRF}, Prefetch: []Stage{
		{Name: "p0", Query: Query{K: 5, Vector: v, Filter: f("p0")}},
		{Name: "p1", Query: Query{K: 20, Vector: v}, Prefetch: []Stage{
			{Name: "p1.0", Query: Query{K: 30, Vector: v, Filter: f("p10")}},
		}},
	}}
	roots, byHeight, err := planQuery([]Stage{tree})
	require.NoError(t, err)
	require.Len(t, byHeight, 3)
	require.Len(t, byHeight[0], 2) // the leaves p0 and p1.0: one round
	require.Len(t, byHeight[1], 1) // the re-scoring p1
	require.Equal(t, []*node{roots[0]}, byHeight[2])

	p0, p1, p10 := roots[0].children[0], roots[0].children[1], roots[0].children[1].children[0]
	require.Equal(t, []*filter.Filter{f("root"), f("p0")}, p0.filters)
	require.Equal(t, []*filter.Filter{f("root")}, p1.filters)
	require.Equal(t, []*filter.Filter{f("root"), f("p10")}, p10.filters)
	require.Equal(t, sel, p0.leafQuery().WithPayload, "a fusion's prefetch carries the answer's payload")
	require.True(t, p0.leafQuery().WithVector)
	require.Nil(t, p10.leafQuery().WithPayload, "under a re-scoring, points are only candidates")

	p1.children[0].hits = []Hit{{ID: "x"}, {ID: "y"}}
	q, ok := p1.rescoreQuery()
	require.True(t, ok)
	require.True(t, q.Exact)
	require.Equal(t, 20, q.K)
	require.Len(t, q.Filter.Must, 2) // the root's filter and has_id
	require.Equal(t, []string{"x", "y"}, q.Filter.Must[1].Nested.Must[0].IDs)

	for _, bad := range []struct {
		st  Stage
		msg string
	}{
		{Stage{Query: Query{K: 10}, Fusion: &Fusion{Method: FusionDBSF}}, "query: fusion needs prefetches"},
		{Stage{Query: Query{K: 10}, Prefetch: []Stage{{Name: "p", Query: Query{K: 3, Vector: v}}}}, "query: a query is required"},
		{Stage{Query: Query{K: 10, Vector: v}, Prefetch: []Stage{{Name: "p", Query: Query{K: 0, Vector: v}}}}, "p: limit is 0"},
		{Stage{Query: Query{K: 10}, Fusion: &Fusion{Method: FusionRRF, Weights: []float32{1, 2}}, Prefetch: []Stage{{Name: "p", Query: Query{K: 3, Vector: v}}}},
			"rrf has 2 weights for 1 prefetches"},
	} {
		_, _, err := planQuery([]Stage{bad.st})
		require.Equal(t, CodeInvalid, CodeOf(err))
		require.ErrorContains(t, err, bad.msg)
	}
}
