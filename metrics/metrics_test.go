package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/fanout"
)

// The label values operators' alerts and dashboards match on are
// DESIGN.md's, spelled as it spells them: if fanout's vocabulary drifts from
// the contract, this fails.
func TestLabelValuesAreTheContracts(t *testing.T) {
	str := func(vs ...any) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = fmt.Sprint(v)
		}
		return out
	}
	var paths, reasons, hedges []any
	for _, p := range fanout.Paths() {
		paths = append(paths, p)
	}
	for _, r := range fanout.Reasons() {
		reasons = append(reasons, r)
	}
	for _, o := range fanout.HedgeOutcomes() {
		hedges = append(hedges, o)
	}
	require.Equal(t, []string{"search", "search_batch", "scroll", "count"}, str(paths...))
	require.Equal(t, []string{"deadline_exceeded", "unavailable", "suspect", "overloaded", "not_serving", "internal"}, str(reasons...))
	require.Equal(t, []string{"won", "lost", "failed"}, str(hedges...))
}

func TestRouterSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRouter(reg, []Shard{{Name: "shard-0", Replicas: []string{"a:1", "b:1"}}, {Name: "shard-1", Replicas: []string{"c:1"}}}, "avx2")
	// path × {queries, degraded} + path × shard × reason + failovers + hedges × outcome
	require.Equal(t, len(fanout.Paths()), testutil.CollectAndCount(m.queries))
	require.Equal(t, len(fanout.Paths()), testutil.CollectAndCount(m.degraded))
	require.Equal(t, len(fanout.Paths())*2*len(fanout.Reasons()), testutil.CollectAndCount(m.unavailable))
	require.Equal(t, 2, testutil.CollectAndCount(m.failovers))
	require.Equal(t, 2*3, testutil.CollectAndCount(m.hedges))
	require.Equal(t, 3, testutil.CollectAndCount(m.suspect))
	require.Zero(t, testutil.ToFloat64(m.unavailable.WithLabelValues("search_batch", "shard-1", "suspect")))
	require.Zero(t, testutil.ToFloat64(m.suspect.WithLabelValues("shard-0", "a:1")))

	names := map[string]bool{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{
		"trawl_scatter_queries_total", "trawl_scatter_degraded_total", "trawl_scatter_shard_unavailable_total",
		"trawl_replica_suspect", "trawl_scatter_failovers_total", "trawl_scatter_hedges_total", "trawl_vector_kernel_info",
	} {
		require.True(t, names[n], n)
	}
}

func TestFanoutCountsDegradedOnceAndEachMissingShard(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRouter(reg, []Shard{{Name: "s0"}, {Name: "s1"}, {Name: "s2"}}, "generic")
	m.Fanout(fanout.PathSearch, time.Millisecond, 1, nil)
	require.Equal(t, 1.0, testutil.ToFloat64(m.queries.WithLabelValues("search")))
	require.Zero(t, testutil.ToFloat64(m.degraded.WithLabelValues("search")))

	m.Fanout(fanout.PathSearch, time.Millisecond, 0.4, map[string]fanout.Reason{"s1": fanout.ReasonDeadline, "s2": fanout.ReasonSuspect})
	require.Equal(t, 2.0, testutil.ToFloat64(m.queries.WithLabelValues("search")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.degraded.WithLabelValues("search")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.unavailable.WithLabelValues("search", "s1", "deadline_exceeded")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.unavailable.WithLabelValues("search", "s2", "suspect")))
	require.Zero(t, testutil.ToFloat64(m.degraded.WithLabelValues("search_batch")))
}

func TestShardScanQueriesByKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewShardServer(reg, "avx2")
	require.Equal(t, 3, testutil.CollectAndCount(m.queries), "every kind starts at 0")
	m.Queries("int8", 3)
	m.Queries("exact", 1)
	require.Equal(t, 3.0, testutil.ToFloat64(m.queries.WithLabelValues("int8")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.queries.WithLabelValues("exact")))
}
