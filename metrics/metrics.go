package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/fanout"
)

// The label values of the path, reason and outcome labels are fanout's
// vocabulary (fanout.Paths, fanout.Reasons, fanout.HedgeOutcomes), used as
// they are: there is no second copy to drift.

// Shard is one shard of the topology as the metrics see it.
type Shard struct {
	Name     string
	Replicas []string // addresses
}

// Router holds the router's collectors.
type Router struct {
	queries     *prometheus.CounterVec
	degraded    *prometheus.CounterVec
	unavailable *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	documents   *prometheus.GaugeVec
	coverage    *prometheus.HistogramVec
	shardRPC    *prometheus.HistogramVec
	suspect     *prometheus.GaugeVec
	failovers   *prometheus.CounterVec
	hedges      *prometheus.CounterVec
	http        *prometheus.CounterVec
	rejected    *prometheus.CounterVec
	refusal     prometheus.Histogram

	// mu guards colls, the collections that have series, each with its
	// series by path. Fan-outs record under the read lock and
	// ObserveCollections deletes under the write lock, so a series never
	// outlives its entry in colls (which would leave it undeletable).
	mu    sync.RWMutex
	colls map[string]map[fanout.Path]pathSeries
}

// pathSeries are one collection's series of one fan-out path.
type pathSeries struct {
	queries, degraded prometheus.Counter
	duration          prometheus.Observer
}

// NewRouter registers the router's collectors on reg and creates every
// labelled series for the given shards at zero. The series labelled by
// collection are created as collections appear (ObserveCollections, or a
// fan-out over one) and deleted when they are dropped.
func NewRouter(reg prometheus.Registerer, shards []Shard, kernel string) *Router {
	m := &Router{
		colls: map[string]map[fanout.Path]pathSeries{},
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_scatter_queries_total",
			Help: "Fan-outs, by path and collection. Each fan-out counts once, however many queries a batch holds.",
		}, []string{"path", "collection"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_scatter_degraded_total",
			Help: "Fan-outs answered without every shard (degraded), by path and collection.",
		}, []string{"path", "collection"}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_scatter_shard_unavailable_total",
			Help: "Shards missing from a fan-out's answer, by path, shard and reason.",
		}, []string{"path", "shard", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "trawl_scatter_duration_seconds",
			Help:    "Time from the start of a fan-out to its merged answer, by path and collection.",
			Buckets: []float64{.001, .0025, .005, .01, .02, .03, .045, .05, .075, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"path", "collection"}),
		documents: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trawl_collection_documents",
			Help: "Documents of a collection, summed over the shards (each shard's last count the router read; refreshed every few seconds).",
		}, []string{"collection"}),
		coverage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "trawl_scatter_coverage_ratio",
			Help:    "Share of documents on the shards that answered a fan-out, by path.",
			Buckets: []float64{.1, .2, .3, .4, .5, .6, .7, .8, .9, .95, .99, 1},
		}, []string{"path"}),
		shardRPC: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "trawl_shard_request_duration_seconds",
			Help:    "Shard RPC latency seen by the router, by shard, replica and outcome (ok or a gRPC code).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .02, .045, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"shard", "replica", "outcome"}),
		suspect: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trawl_replica_suspect",
			Help: "1 while a replica is suspect (skipped for its cooldown), else 0.",
		}, []string{"shard", "replica"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_scatter_failovers_total",
			Help: "Shard reads sent on to another replica after a connectivity error, by shard.",
		}, []string{"shard"}),
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_scatter_hedges_total",
			Help: "Hedged shard reads, by shard and outcome (won, lost, failed).",
		}, []string{"shard", "outcome"}),
		http: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_admission_rejected_total",
			Help: "Requests refused by admission with 429, by reason (limit, deadline, max_inflight).",
		}, []string{"reason"}),
		refusal: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "trawl_admission_refusal_duration_seconds",
			Help: "Time an HTTP request refused by admission spent in the router's handler: from reaching it to its 429 written.",
			// A refusal is decided on the request line and headers, in
			// microseconds when the router has a core: the low buckets
			// show that, the high ones a router starved of CPU.
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
	}
	reg.MustRegister(m.queries, m.degraded, m.unavailable, m.duration, m.documents, m.coverage,
		m.shardRPC, m.suspect, m.failovers, m.hedges, m.http, m.rejected, m.refusal)
	for _, r := range admission.Reasons() {
		m.rejected.WithLabelValues(string(r))
	}
	registerKernel(reg, kernel)

	for _, p := range fanout.Paths() {
		for _, s := range shards {
			for _, r := range fanout.Reasons() {
				m.unavailable.WithLabelValues(string(p), s.Name, string(r))
			}
		}
	}
	for _, s := range shards {
		m.failovers.WithLabelValues(s.Name)
		for _, o := range fanout.HedgeOutcomes() {
			m.hedges.WithLabelValues(s.Name, string(o))
		}
		for _, r := range s.Replicas {
			m.suspect.WithLabelValues(s.Name, r).Set(0)
		}
	}
	return m
}

// Fanout records one fan-out over collection: its duration, its
// coverage, and every shard missing from it with its reason. It is
// degraded exactly when missing is non-empty. A collection without series
// yet gets them all, at zero, first.
func (m *Router) Fanout(path fanout.Path, collection string, elapsed time.Duration, coverage float64, missing map[string]fanout.Reason) {
	p := string(path)
	m.collectionFanout(path, collection, len(missing) > 0, elapsed)
	m.coverage.WithLabelValues(p).Observe(coverage)
	for shard, reason := range missing {
		m.unavailable.WithLabelValues(p, shard, string(reason)).Inc()
	}
}

func (m *Router) collectionFanout(path fanout.Path, collection string, degraded bool, elapsed time.Duration) {
	record := func(ps pathSeries) {
		ps.queries.Inc()
		ps.duration.Observe(elapsed.Seconds())
		if degraded {
			ps.degraded.Inc()
		}
	}
	m.mu.RLock()
	ps, ok := m.colls[collection][path]
	if ok {
		record(ps)
	}
	m.mu.RUnlock()
	if ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addCollection(collection)
	if ps, ok = m.colls[collection][path]; !ok { // a path outside fanout.Paths()
		ps = m.series(path, collection)
		m.colls[collection][path] = ps
	}
	record(ps)
}

// ObserveCollections makes the series of the collections labelled
// collection match docs, which holds every collection of the catalog with
// its documents: a collection new to it gets every path's series at zero,
// its trawl_collection_documents is set, and the series of a collection
// no longer in it (dropped) are deleted. The collection label is so
// bounded by the catalog (--max-collections).
func (m *Router) ObserveCollections(docs map[string]uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, n := range docs {
		m.addCollection(name)
		m.documents.WithLabelValues(name).Set(float64(n))
	}
	for name, paths := range m.colls {
		if _, ok := docs[name]; ok {
			continue
		}
		for p := range paths {
			m.queries.DeleteLabelValues(string(p), name)
			m.degraded.DeleteLabelValues(string(p), name)
			m.duration.DeleteLabelValues(string(p), name)
		}
		m.documents.DeleteLabelValues(name)
		delete(m.colls, name)
	}
}

// addCollection creates collection's series of every path at zero, unless
// it has them. m.mu must be held for writing.
func (m *Router) addCollection(collection string) {
	if _, ok := m.colls[collection]; ok {
		return
	}
	paths := map[fanout.Path]pathSeries{}
	for _, p := range fanout.Paths() {
		paths[p] = m.series(p, collection)
	}
	m.colls[collection] = paths
}

func (m *Router) series(path fanout.Path, collection string) pathSeries {
	p := string(path)
	return pathSeries{
		queries:  m.queries.WithLabelValues(p, collection),
		degraded: m.degraded.WithLabelValues(p, collection),
		duration: m.duration.WithLabelValues(p, collection),
	}
}

// ShardRPC records one attempt against one replica.
func (m *Router) ShardRPC(shard, replica, outcome string, d time.Duration) {
	m.shardRPC.WithLabelValues(shard, replica, outcome).Observe(d.Seconds())
}

// Failover counts a read sent on to another replica.
func (m *Router) Failover(shard string) { m.failovers.WithLabelValues(shard).Inc() }

// Hedge counts a hedged read by its outcome.
func (m *Router) Hedge(shard string, outcome fanout.HedgeOutcome) {
	m.hedges.WithLabelValues(shard, string(outcome)).Inc()
}

// Suspect sets a replica's suspect gauge.
func (m *Router) Suspect(shard, replica string, suspect bool) {
	v := 0.0
	if suspect {
		v = 1
	}
	m.suspect.WithLabelValues(shard, replica).Set(v)
}

// Rejected counts a request refused by admission.
func (m *Router) Rejected(reason admission.Reason) { m.rejected.WithLabelValues(string(reason)).Inc() }

// RefusalTime records how long an HTTP refusal took in the router's
// handler.
func (m *Router) RefusalTime(d time.Duration) { m.refusal.Observe(d.Seconds()) }

// AdmissionLimit exports the learned concurrency limit as the gauge
// trawl_admission_limit, read at every scrape.
func AdmissionLimit(reg prometheus.Registerer, limit func() int) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "trawl_admission_limit",
		Help: "The router's learned concurrency limit (queries in flight it admits under pressure).",
	}, func() float64 { return float64(limit()) }))
}

// HTTPRequest counts an answered HTTP request by its route pattern (never
// the raw path, which would make a series per document id).
func (m *Router) HTTPRequest(route string, code int) {
	m.http.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

// ShardServer holds a shard server's collectors.
type ShardServer struct {
	documents *prometheus.GaugeVec
	searches  *prometheus.HistogramVec
	queries   *prometheus.CounterVec
}

// NewShardServer registers a shard server's collectors on reg.
func NewShardServer(reg prometheus.Registerer, kernel string) *ShardServer {
	m := &ShardServer{
		documents: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trawl_shard_documents",
			Help: "Documents this shard replica holds, by collection (a dropped collection's series is deleted).",
		}, []string{"collection"}),
		searches: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "trawl_shard_scan_duration_seconds",
			Help:    "Time a shard spends scanning for one search RPC (any batch size), by outcome: ok, overloaded (refused before it started), cancelled (its caller gave up mid-scan, as a losing hedge does: the _sum is the time such scans spent before they stopped), deadline_exceeded, error.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .02, .045, .1, .25, .5, 1},
		}, []string{"outcome"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_shard_scan_queries_total",
			Help: "Queries a shard scanned, by kind: exact (float32 over every matching row), int8 (int8 codes chose the candidates, float32 re-scored them) or ivf (an IVF index probe chose them, float32 re-scored them).",
		}, []string{"kind"}),
	}
	for _, k := range []string{"exact", "int8", "ivf"} {
		m.queries.WithLabelValues(k)
	}
	for _, o := range []string{"ok", "overloaded", "cancelled", "deadline_exceeded", "error"} {
		m.searches.WithLabelValues(o)
	}
	reg.MustRegister(m.documents, m.searches, m.queries)
	registerKernel(reg, kernel)
	return m
}

// Documents sets a collection's document count.
func (m *ShardServer) Documents(collection string, n int) {
	m.documents.WithLabelValues(collection).Set(float64(n))
}

// ForgetCollection deletes a dropped collection's document series, so the
// label stays bounded by the collections that exist.
func (m *ShardServer) ForgetCollection(collection string) {
	m.documents.DeleteLabelValues(collection)
}

// Queries counts n queries scanned by kind ("exact", "int8" or "ivf").
func (m *ShardServer) Queries(kind string, n int) { m.queries.WithLabelValues(kind).Add(float64(n)) }

// Scan records one scan.
func (m *ShardServer) Scan(outcome string, d time.Duration) {
	m.searches.WithLabelValues(outcome).Observe(d.Seconds())
}

func registerKernel(reg prometheus.Registerer, kernel string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trawl_vector_kernel_info",
		Help: "The vector kernel in use (generic, avx2, avx512); always 1.",
	}, []string{"impl"})
	reg.MustRegister(g)
	g.WithLabelValues(kernel).Set(1)
}

// CollectionBytes exports the memory each of a replica's collections
// holds (rows, payloads, int8 codes, index) as
// trawl_shard_collection_bytes{collection}, read from bytes at every
// scrape: a dropped collection's series is gone at the next one.
func CollectionBytes(reg prometheus.Registerer, bytes func() map[string]int) {
	reg.MustRegister(collectionBytes{fn: bytes, desc: prometheus.NewDesc("trawl_shard_collection_bytes",
		"Memory a collection holds on this shard replica: float32 rows, payloads, int8 codes and index.",
		[]string{"collection"}, nil)})
}

type collectionBytes struct {
	fn   func() map[string]int
	desc *prometheus.Desc
}

func (c collectionBytes) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c collectionBytes) Collect(ch chan<- prometheus.Metric) {
	for name, n := range c.fn() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), name)
	}
}
