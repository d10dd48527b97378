// Package app assembles a router from its parts: shard connections, the
// fanout engine and its prober, metrics, and the HTTP API, plus the start-up
// warm-up that gates /readyz. cmd/router's serve and dev commands and the
// end-to-end tests build routers through it, so they run the same code.
//
// It holds wiring only: no request handling (package api) and no fault
// logic (package fanout).
package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/api"
	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/qdrant/qdrantgrpc"
	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/metrics"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/vector"
)

// ShardSpec names a shard and its replicas' addresses.
type ShardSpec struct {
	Name  string
	Addrs []string
}

// Config is a router's configuration.
type Config struct {
	Shards []ShardSpec
	Dial   client.DialConfig
	Budget budget.Config
	// Keys are the API keys of --api-key-file and their scopes; nil: the
	// API is open.
	Keys *apikey.Keyring
	// Collection is the collection the collection-less paths act on
	// (--collection; api.DefaultCollection if empty).
	Collection string
	// EnsureCollections are created at start (--ensure-collection),
	// idempotently, before the router turns ready.
	EnsureCollections []catalog.Spec
	// MaxCollections bounds the catalog (--max-collections).
	MaxCollections int
	// CatalogRefresh is how often the router re-reads the catalog and
	// completes half-done changes (coordinator.DefaultCatalogRefresh if
	// zero). Tests that count shard RPCs set it long.
	CatalogRefresh time.Duration
	// MaxInflight is the hard cap on /v1/* requests in flight
	// (admission.DefaultMaxInflight if zero).
	MaxInflight int
	// BodyTimeout is --body-timeout (api.DefaultBodyTimeout if zero).
	BodyTimeout time.Duration
	// NoAdmission, NoHedge, NoFailover and NoPrewarm switch features off
	// for baselines (--admission=false, --hedge=false, --failover=false,
	// --prewarm=false); all are on by default. Without pre-warming no
	// replica is dialled before the first query needs it and /readyz is
	// ready at once.
	NoAdmission, NoHedge, NoFailover, NoPrewarm bool
	Logger                                      *slog.Logger
	// Kernel is reported as trawl_vector_kernel_info.
	Kernel vector.Kernel
	// WarmupTimeout is --ready-timeout: how long /readyz waits for every
	// shard to have a replica that serves (DefaultReadyTimeout if zero).
	// Past it the router turns ready anyway and its answers say what is
	// missing.
	WarmupTimeout time.Duration
	// Extra mounts more routes (router dev's fault endpoints).
	Extra func(chi.Router)
	// DisableProber turns the background prober off (tests of the query
	// path alone).
	DisableProber bool
	// Discover keeps each shard's replicas equal to its group's members
	// (discover), with Shards only seeding them: router serve. Off where
	// the router reaches replicas at other addresses than their groups
	// know them by (router dev's fault proxies).
	Discover bool
	// RetireAfter is how long discovery keeps a dropped replica's
	// connection open for the reads that picked it (15 s if zero).
	RetireAfter time.Duration
	// TracerProvider and Propagator trace requests, fan-outs and shard
	// RPCs (internal/tracing builds them from OTEL_*). A nil or noop
	// provider is tracing off: no instrumentation installed. They also
	// fill Dial's fields of the same names when those are unset.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// QdrantGRPCOptions add to the Qdrant gRPC server's options (its TLS
	// credentials, from --http-tls-cert/--http-tls-key).
	QdrantGRPCOptions []grpc.ServerOption
	// BackupDir is where backups are kept (--backup-dir): empty, the
	// backup routes answer that none is configured.
	BackupDir string
	// BackupS3, when set, keeps backups in an S3-compatible bucket
	// instead (--backup-s3-*).
	BackupS3 *backup.S3Config
	// BackupMaxAge is --backup-max-age: exported for the alert on an
	// overdue backup (0: not exported).
	BackupMaxAge time.Duration
}

// Router is a running router minus its HTTP listener.
type Router struct {
	API         *api.Server
	Coordinator *coordinator.Coordinator
	Registry    *prometheus.Registry
	Cluster     *fanout.Cluster[*client.Conn]
	// Limiter is the router's admission.
	Limiter *admission.Limiter
	// QdrantGRPC serves Qdrant's gRPC API with the same use cases, keys and
	// limiter as API; the caller serves it on --qdrant-grpc-addr.
	QdrantGRPC *grpc.Server

	connsMu sync.Mutex
	conns   []*client.Conn   // every connection dialled, closed by Close
	shards  [][]*client.Conn // each shard's replicas as seeded, in shard order
	ready   chan struct{}    // closed when the warm-up ends
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New dials every replica, starts the prober and the warm-up, and returns
// at once; API turns ready when the warm-up ends.
func New(cfg Config) (*Router, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WarmupTimeout == 0 {
		cfg.WarmupTimeout = DefaultReadyTimeout
	}
	if cfg.Kernel.Name == "" {
		cfg.Kernel = vector.Generic()
	}
	if len(cfg.Shards) == 0 {
		return nil, fmt.Errorf("no shards configured")
	}
	backups, err := api.NewBackups(cfg.BackupDir, cfg.BackupS3, nil)
	if err != nil {
		return nil, err
	}
	if cfg.Dial.TracerProvider == nil {
		cfg.Dial.TracerProvider = cfg.TracerProvider
	}
	if cfg.Dial.Propagator == nil {
		cfg.Dial.Propagator = cfg.Propagator
	}
	reg := prometheus.NewRegistry()
	// The scheduler's metrics (go_sched_latencies_seconds: how long
	// goroutines wait runnable for a thread) tell a router starved of CPU,
	// whose refusals and answers wait for a core, from one whose own work
	// is slow.
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := &Router{Registry: reg, ready: make(chan struct{})}

	var mshards []metrics.Shard
	var fshards []fanout.Shard[*client.Conn]
	seen := map[string]bool{}
	for _, s := range cfg.Shards {
		if seen[s.Name] {
			r.closeConns()
			return nil, fmt.Errorf("shard %q given twice", s.Name)
		}
		seen[s.Name] = true
		if len(s.Addrs) == 0 {
			r.closeConns()
			return nil, fmt.Errorf("shard %q has no replicas", s.Name)
		}
		var conns []*client.Conn
		dial := cfg.Dial
		dial.Lazy = cfg.NoPrewarm
		for _, a := range s.Addrs {
			c, err := client.Dial(a, dial)
			if err != nil {
				r.closeConns()
				return nil, err
			}
			conns = append(conns, c)
			r.conns = append(r.conns, c)
		}
		mshards = append(mshards, metrics.Shard{Name: s.Name, Replicas: s.Addrs})
		fshards = append(fshards, fanout.Shard[*client.Conn]{Name: s.Name, Replicas: conns})
		r.shards = append(r.shards, conns)
	}
	m := metrics.NewRouter(reg, mshards, cfg.Kernel.Name)
	limiter := admission.NewLimiter(admission.LimiterConfig{Max: cfg.MaxInflight, Off: cfg.NoAdmission})
	metrics.AdmissionLimit(reg, limiter.Limit)
	r.Limiter = limiter
	fopts := fanout.Options{Reporter: m, Logger: cfg.Logger, TracerProvider: cfg.TracerProvider,
		HedgePaused: limiter.Refusing, NoFailover: cfg.NoFailover}
	if cfg.NoHedge {
		fopts.HedgeBudget = -1
	}
	r.Cluster = fanout.New(fshards, fopts)
	r.Coordinator = coordinator.New(coordinator.Config{Cluster: r.Cluster, Logger: cfg.Logger, MaxCollections: cfg.MaxCollections,
		CatalogRefresh: cfg.CatalogRefresh,
		Collections:    m})
	bm := metrics.NewBackups(reg)
	metrics.MaxAge(reg, cfg.BackupMaxAge)
	backups.Metrics = bm
	if backups.Store != nil {
		seenBackups(backups.Store, bm, cfg.Logger)
	}
	r.API = api.New(api.Config{
		Coordinator: r.Coordinator, Budget: cfg.Budget, Metrics: m, Gatherer: reg,
		Keys: cfg.Keys, Collection: cfg.Collection, Limiter: limiter, BodyTimeout: cfg.BodyTimeout, Logger: cfg.Logger, Extra: cfg.Extra,
		TracerProvider: cfg.TracerProvider, Propagator: cfg.Propagator,
		Backups: backups,
	})
	r.QdrantGRPC = qdrantgrpc.New(qdrantgrpc.Config{Coordinator: r.Coordinator, Budget: cfg.Budget, Keys: cfg.Keys,
		Limiter: limiter, Metrics: m, Logger: cfg.Logger, Backups: backups}, cfg.QdrantGRPCOptions...)

	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if !cfg.DisableProber {
		r.wg.Go(func() {
			r.Cluster.RunProber(ctx, fanout.ProbeInterval, fanout.ProbeTimeout, func(ctx context.Context, c *client.Conn) error {
				return c.Probe(ctx)
			})
		})
	}
	if cfg.Discover {
		r.wg.Go(func() { r.discover(ctx, cfg) })
	}
	r.wg.Go(func() { r.warmUp(ctx, cfg) })
	return r, nil
}

// untrackConn removes a connection discovery closed from those Close
// closes, so a router whose groups churn keeps no dead ones.
func (r *Router) untrackConn(c *client.Conn) {
	r.connsMu.Lock()
	r.conns = slices.DeleteFunc(r.conns, func(x *client.Conn) bool { return x == c })
	r.connsMu.Unlock()
}

// trackConns adds connections discovery dialled to those Close closes.
func (r *Router) trackConns(cs []*client.Conn) {
	r.connsMu.Lock()
	r.conns = append(r.conns, cs...)
	r.connsMu.Unlock()
}

// DefaultReadyTimeout is --ready-timeout's default.
const DefaultReadyTimeout = 30 * time.Second

// warmUp waits until every replica is READY or has failed to connect (TLS
// handshakes included) and every shard has a replica that serves, bounded
// by the ready timeout, learns the schema from the shards, and turns the
// API ready: the first query after readiness is complete. It stays ready
// afterwards: readiness is about the router, dead shards show in answers.
func (r *Router) warmUp(ctx context.Context, cfg Config) {
	wctx, cancel := context.WithTimeout(ctx, cfg.WarmupTimeout)
	defer cancel()
	if !cfg.NoPrewarm {
		var wg sync.WaitGroup
		for _, reps := range r.shards {
			for _, c := range reps {
				wg.Go(func() { c.WaitSettled(wctx) })
			}
		}
		wg.Wait()
		if missing := r.waitServing(wctx, cfg.Shards); len(missing) > 0 && ctx.Err() == nil {
			cfg.Logger.Warn("ready timeout passed with shards that have no serving replica; answers will say they are missing",
				"shards", missing, "ready_timeout", cfg.WarmupTimeout)
		}
	}
	if ctx.Err() != nil {
		return
	}
	r.ensureCollections(wctx, cfg)
	// The collections' series are on /metrics once the router is ready
	// (without pre-warming nothing is asked before the first query).
	if !cfg.NoPrewarm {
		if err := r.Coordinator.SurveyCollections(wctx); err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("collections not surveyed before ready; the catalog's refresh retries", "err", err)
		}
	}
	if ctx.Err() != nil {
		return
	}
	r.API.SetReady(true)
	close(r.ready)
	n := 0
	for _, s := range r.Cluster.Shards() {
		n += len(s.Replicas)
	}
	cfg.Logger.Info("router ready", "replicas", n)
	r.Coordinator.RunCatalog(ctx)
}

// ensureCollections creates cfg.EnsureCollections (--ensure-collection),
// each idempotently, retrying while the shards elect and load, until ctx
// ends. One created with other settings is logged and left as it is, and
// so is a refusal no retry can change: shards that do not implement the
// catalog (Unimplemented) answer so until they are upgraded.
func (r *Router) ensureCollections(ctx context.Context, cfg Config) {
	for _, spec := range cfg.EnsureCollections {
		for {
			created, err := r.Coordinator.CreateCollection(ctx, spec.Name, spec.Settings)
			if err == nil {
				if created {
					cfg.Logger.Info("collection created", "collection", spec.Name, "settings", spec.Settings.String())
				}
				break
			}
			if coordinator.CodeOf(err) != coordinator.CodeUnavailable || status.Code(err) == codes.Unimplemented || ctx.Err() != nil {
				cfg.Logger.Error("--ensure-collection not done", "collection", spec.Name, "err", err)
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// waitServing asks every shard's replicas (grpc.health.v1) until each
// shard has one that serves, or ctx ends, and returns the names of the
// shards that have none.
func (r *Router) waitServing(ctx context.Context, specs []ShardSpec) []string {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		var missing []string
		for i, reps := range r.shards {
			if !anyServing(ctx, reps) {
				missing = append(missing, specs[i].Name)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return missing
		case <-t.C:
		}
	}
}

// anyServing reports whether one of reps answers its health check as
// serving.
func anyServing(ctx context.Context, reps []*client.Conn) bool {
	for _, c := range reps {
		pctx, cancel := context.WithTimeout(ctx, fanout.ProbeTimeout)
		err := c.Probe(pctx)
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

// WaitReady blocks until the warm-up has ended and the API is ready, or ctx
// ends.
func (r *Router) WaitReady(ctx context.Context) error {
	select {
	case <-r.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("router not ready: %w", ctx.Err())
	}
}

// Close stops the Qdrant gRPC server (at once: serving code drains it
// first with GracefulStop), the prober and warm-up, and closes every
// connection.
func (r *Router) Close() {
	r.QdrantGRPC.Stop()
	r.cancel()
	r.wg.Wait()
	r.closeConns()
}

func (r *Router) closeConns() {
	r.connsMu.Lock()
	defer r.connsMu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

// seenBackups starts each collection's last-success series at its newest
// complete backup in store, so a restarted router does not report a
// collection as never backed up (and the overdue alert stays quiet); the
// cluster backups' series is "@cluster"'s.
func seenBackups(store backup.Store, m *metrics.Backups, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names, err := store.List(ctx, "")
	if err != nil {
		log.Warn("backups not listed", "err", err)
		return
	}
	for _, name := range names {
		if name == backup.ClusterDir {
			cms, err := backup.ListCluster(ctx, store)
			if err != nil {
				log.Warn("cluster backups not listed", "err", err)
			}
			for _, b := range cms {
				m.Seen(name, b.Created)
			}
			continue
		}
		ms, err := backup.List(ctx, store, name)
		if err != nil {
			log.Warn("backups not listed", "collection", name, "err", err)
			continue
		}
		for _, b := range ms {
			m.Seen(name, b.Created)
		}
	}
}
