package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard/client"
)

// A shard missing from the statistics round makes the search degraded
// (its idf lacked that shard's documents), in cluster order, with the
// round's reason and a coverage below 1; one missing from the search
// keeps its own reason.
func TestWithMissing(t *testing.T) {
	res := func(shard string, docs uint64, reason fanout.Reason) fanout.Result[client.SearchResult] {
		return fanout.Result[client.SearchResult]{Shard: shard, Value: client.SearchResult{Docs: docs}, Reason: reason}
	}
	results := []fanout.Result[client.SearchResult]{res("a", 10, ""), res("b", 30, ""), res("c", 0, fanout.ReasonDeadline)}
	search := fanout.Summary{ShardsTotal: 3, ShardsQueried: 2, Unavailable: []string{"c"},
		ShardErrors: map[string]fanout.Reason{"c": fanout.ReasonDeadline}, Coverage: 0.8}
	for _, tc := range []struct {
		name  string
		stats fanout.Summary
		want  fanout.Summary
	}{
		{"none missing", fanout.Summary{ShardErrors: map[string]fanout.Reason{}}, search},
		{"the same shard", fanout.Summary{Unavailable: []string{"c"}, ShardErrors: map[string]fanout.Reason{"c": fanout.ReasonUnavailable}}, search},
		{"another shard", fanout.Summary{Unavailable: []string{"b"}, ShardErrors: map[string]fanout.Reason{"b": fanout.ReasonOverloaded}},
			fanout.Summary{ShardsTotal: 3, ShardsQueried: 1, Unavailable: []string{"b", "c"},
				ShardErrors: map[string]fanout.Reason{"b": fanout.ReasonOverloaded, "c": fanout.ReasonDeadline}, Coverage: 10.0 / 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := withMissing(search, results, tc.stats)
			require.Equal(t, tc.want.Unavailable, got.Unavailable)
			require.Equal(t, tc.want.ShardErrors, got.ShardErrors)
			require.Equal(t, tc.want.ShardsQueried, got.ShardsQueried)
			require.InDelta(t, tc.want.Coverage, got.Coverage, 1e-9)
			require.Equal(t, len(got.Unavailable) > 0, got.Degraded())
		})
	}
	// A missing shard of no documents still leaves coverage below 1.
	empty := []fanout.Result[client.SearchResult]{res("a", 10, ""), res("b", 0, "")}
	got := withMissing(fanout.Summary{ShardsTotal: 2, ShardsQueried: 2, Unavailable: []string{}, ShardErrors: map[string]fanout.Reason{}, Coverage: 1},
		empty, fanout.Summary{Unavailable: []string{"b"}, ShardErrors: map[string]fanout.Reason{"b": fanout.ReasonDeadline}})
	require.Less(t, got.Coverage, 1.0)
	require.Equal(t, []string{"b"}, got.Unavailable)
}
