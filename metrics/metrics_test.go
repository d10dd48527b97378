package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestRouterSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRouter(reg, []Shard{{Name: "shard-0", Replicas: []string{"a:1", "b:1"}}, {Name: "shard-1", Replicas: []string{"c:1"}}}, "avx2")
	// path × {queries, degraded} + path × shard × reason + failovers + hedges × outcome
	require.Equal(t, 2, testutil.CollectAndCount(m.queries))
	require.Equal(t, 2, testutil.CollectAndCount(m.degraded))
	require.Equal(t, 2*2*4, testutil.CollectAndCount(m.unavailable))
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
	m.Fanout(PathSearch, time.Millisecond, 1, nil)
	require.Equal(t, 1.0, testutil.ToFloat64(m.queries.WithLabelValues(PathSearch)))
	require.Zero(t, testutil.ToFloat64(m.degraded.WithLabelValues(PathSearch)))

	m.Fanout(PathSearch, time.Millisecond, 0.4, map[string]string{"s1": ReasonDeadlineExceeded, "s2": ReasonSuspect})
	require.Equal(t, 2.0, testutil.ToFloat64(m.queries.WithLabelValues(PathSearch)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.degraded.WithLabelValues(PathSearch)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.unavailable.WithLabelValues(PathSearch, "s1", ReasonDeadlineExceeded)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.unavailable.WithLabelValues(PathSearch, "s2", ReasonSuspect)))
	require.Zero(t, testutil.ToFloat64(m.degraded.WithLabelValues(PathSearchBatch)))
}
