package metrics

import (
	"fmt"
	"strings"
	"sync"
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
	// path × shard × reason + failovers + hedges × outcome; the series by
	// collection wait for the catalog.
	require.Zero(t, testutil.CollectAndCount(m.queries))
	require.Zero(t, testutil.CollectAndCount(m.degraded))
	require.Zero(t, testutil.CollectAndCount(m.documents))
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
		"trawl_scatter_shard_unavailable_total",
		"trawl_replica_suspect", "trawl_scatter_failovers_total", "trawl_scatter_hedges_total", "trawl_vector_kernel_info",
	} {
		require.True(t, names[n], n)
	}
}

func TestFanoutCountsDegradedOnceAndEachMissingShard(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRouter(reg, []Shard{{Name: "s0"}, {Name: "s1"}, {Name: "s2"}}, "generic")
	m.ObserveCollections(map[string]uint64{"docs": 7, "img": 0})
	m.Fanout(fanout.PathSearch, "docs", time.Millisecond, 1, nil)
	require.Equal(t, 1.0, testutil.ToFloat64(m.queries.WithLabelValues("search", "docs")))
	require.Zero(t, testutil.ToFloat64(m.degraded.WithLabelValues("search", "docs")))

	m.Fanout(fanout.PathSearch, "docs", time.Millisecond, 0.4, map[string]fanout.Reason{"s1": fanout.ReasonDeadline, "s2": fanout.ReasonSuspect})
	require.Equal(t, 2.0, testutil.ToFloat64(m.queries.WithLabelValues("search", "docs")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.degraded.WithLabelValues("search", "docs")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.unavailable.WithLabelValues("search", "s1", "deadline_exceeded")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.unavailable.WithLabelValues("search", "s2", "suspect")))
	require.Zero(t, testutil.ToFloat64(m.degraded.WithLabelValues("search_batch", "docs")))
	require.Zero(t, testutil.ToFloat64(m.queries.WithLabelValues("search", "img")), "another collection's fan-outs")
	require.Zero(t, testutil.ToFloat64(m.degraded.WithLabelValues("search", "img")))
}

// series lists name's series as "label=value,..." (labels sorted) → value;
// a histogram's value is its sample count.
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out[strings.Join(ls, ",")] = v
		}
	}
	return out
}

// TestCollectionSeriesFollowTheCatalog: a collection that appears gets
// every path's series at 0 and its documents gauge; one fan-out moves
// exactly its collection's and path's series by one; a dropped collection's
// series are gone; the labels are exactly path and collection.
func TestCollectionSeriesFollowTheCatalog(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRouter(reg, []Shard{{Name: "s0"}}, "generic")
	zero := func(colls ...string) map[string]float64 {
		out := map[string]float64{}
		for _, c := range colls {
			for _, p := range fanout.Paths() {
				out["collection="+c+",path="+string(p)] = 0
			}
		}
		return out
	}
	m.ObserveCollections(map[string]uint64{"trawl": 300, "notes": 0})
	for _, name := range []string{"trawl_scatter_queries_total", "trawl_scatter_degraded_total", "trawl_scatter_duration_seconds"} {
		require.Equal(t, zero("notes", "trawl"), series(t, reg, name), name)
	}
	require.Equal(t, map[string]float64{"collection=trawl": 300, "collection=notes": 0}, series(t, reg, "trawl_collection_documents"))

	m.Fanout(fanout.PathSearchBatch, "notes", time.Millisecond, 0.5, map[string]fanout.Reason{"s0": fanout.ReasonUnavailable})
	want := zero("notes", "trawl")
	want["collection=notes,path=search_batch"] = 1
	require.Equal(t, want, series(t, reg, "trawl_scatter_queries_total"))
	require.Equal(t, want, series(t, reg, "trawl_scatter_degraded_total"))
	require.Equal(t, want, series(t, reg, "trawl_scatter_duration_seconds"))

	// notes dropped, img created; trawl's count moved.
	m.ObserveCollections(map[string]uint64{"trawl": 310, "img": 5})
	for _, name := range []string{"trawl_scatter_queries_total", "trawl_scatter_degraded_total", "trawl_scatter_duration_seconds"} {
		require.Equal(t, zero("img", "trawl"), series(t, reg, name), name)
	}
	require.Equal(t, map[string]float64{"collection=trawl": 310, "collection=img": 5}, series(t, reg, "trawl_collection_documents"))

	// A fan-out over a collection not yet observed (created a moment ago)
	// creates its series; the next observation without it deletes them.
	m.Fanout(fanout.PathCount, "fresh", time.Millisecond, 1, nil)
	require.Equal(t, 1.0, series(t, reg, "trawl_scatter_queries_total")["collection=fresh,path=count"])
	require.Len(t, series(t, reg, "trawl_scatter_queries_total"), 3*len(fanout.Paths()))
	m.ObserveCollections(map[string]uint64{})
	require.Empty(t, series(t, reg, "trawl_scatter_queries_total"))
	require.Empty(t, series(t, reg, "trawl_collection_documents"))
}

// Fan-outs racing the catalog's observations: the race detector has its
// say, and no series survives the collection's last observation.
func TestCollectionSeriesUnderConcurrency(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRouter(reg, []Shard{{Name: "s0"}}, "generic")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				m.Fanout(fanout.PathSearch, fmt.Sprintf("c%d", (i+j)%3), 0, 1, nil)
			}
		})
	}
	wg.Go(func() {
		for j := range 50 {
			m.ObserveCollections(map[string]uint64{fmt.Sprintf("c%d", j%3): 1})
		}
	})
	wg.Wait()
	m.ObserveCollections(map[string]uint64{"c0": 1})
	for k := range series(t, reg, "trawl_scatter_queries_total") {
		require.Contains(t, k, "collection=c0,")
	}
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

func TestCollectionBytesAreReadAtScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	held := map[string]int{"a": 4096, "b": 0}
	CollectionBytes(reg, func() map[string]int { return held })
	const head = "# HELP trawl_shard_collection_bytes Memory a collection holds on this shard replica: float32 rows, payloads, int8 codes and index.\n# TYPE trawl_shard_collection_bytes gauge\n"
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(head+
		"trawl_shard_collection_bytes{collection=\"a\"} 4096\ntrawl_shard_collection_bytes{collection=\"b\"} 0\n")))
	held = map[string]int{"a": 8192} // b dropped
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(head+
		"trawl_shard_collection_bytes{collection=\"a\"} 8192\n")))
}
