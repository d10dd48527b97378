package api

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant"
	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/metrics"
)

// DefaultBodyTimeout is --body-timeout's default.
const DefaultBodyTimeout = httpx.DefaultBodyTimeout

// DefaultCollection is --collection's default: the collection the
// Qdrant-compatible routes serve the cluster's documents under.
const DefaultCollection = qdrant.DefaultCollection

// TraceIDHeader carries the request's trace id in every answer while
// tracing is on.
const TraceIDHeader = httpx.TraceIDHeader

// Config wires a Server.
type Config struct {
	// Coordinator runs the use cases the handlers decode requests into.
	Coordinator *coordinator.Coordinator
	Budget      budget.Config
	Metrics     *metrics.Router
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// Keys, when not nil (--api-key-file), are the API keys required as a
	// Bearer token on /v1/* and /cluster/status, and as Qdrant's api-key
	// header or a Bearer token on /collections/*, with the collections
	// each may read or write.
	Keys *apikey.Keyring
	// Collection is the collection the collection-less /v1 paths act on
	// (--collection; DefaultCollection if empty).
	Collection string
	// Limiter admits /v1/* and /collections/* requests (DESIGN.md,
	// "Overload"); a default admission.Limiter if nil.
	Limiter *admission.Limiter
	// BodyTimeout bounds the time from the end of a request's headers to
	// the end of its body (DefaultBodyTimeout if zero): a slower client is
	// answered 408 and its connection closed. A client still sending its
	// body holds no admission slot, so this bounds only its connection.
	BodyTimeout time.Duration
	Logger      *slog.Logger
	// Extra, when set, mounts more routes (router dev's fault endpoints).
	Extra func(chi.Router)
	// TracerProvider, when set (and not OpenTelemetry's noop provider),
	// makes a span per request (probes and /metrics excepted), continuing
	// a client's W3C traceparent; the access log and the X-Trace-Id header
	// then carry the trace id. Nil: no tracing middleware at all.
	TracerProvider trace.TracerProvider
	// Propagator reads the client's trace context; W3C tracecontext and
	// baggage if nil.
	Propagator propagation.TextMapPropagator
	// Backups is where backups are kept (--backup-dir) and their series;
	// nil: the backup routes answer that none is configured.
	Backups *Backups
}

// Backups is the router's backup storage and metrics (httpx.Backups).
type Backups = httpx.Backups

// NewBackups keeps backups in dir, or in the bucket s3 names (none when
// neither is set), and records them in m.
func NewBackups(dir string, s3 *backup.S3Config, m *metrics.Backups) (*Backups, error) {
	b := &Backups{Metrics: m, Dir: dir}
	switch {
	case s3 != nil:
		st, err := backup.NewS3(*s3)
		if err != nil {
			return nil, err
		}
		b.Store, b.Dir = st, ""
	case dir != "":
		b.Store = backup.Dir(dir)
	}
	return b, nil
}

// Server is the router's HTTP API.
type Server struct {
	cfg     Config
	http    httpx.Dialect
	handler http.Handler
	ready   atomic.Bool
}

// New builds the server. It is not ready until SetReady(true).
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Limiter == nil {
		cfg.Limiter = admission.NewLimiter(admission.LimiterConfig{})
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.Collection == "" {
		cfg.Collection = DefaultCollection
	}
	s := &Server{cfg: cfg, http: httpx.Dialect{
		Envelope: envelope, Keys: cfg.Keys, DefaultCollection: cfg.Collection, Limiter: cfg.Limiter,
		Metrics: cfg.Metrics, Logger: cfg.Logger, BodyTimeout: cfg.BodyTimeout, Backups: cfg.Backups,
	}}

	r := chi.NewRouter()
	if httpx.TracingOn(cfg.TracerProvider) {
		r.Use(httpx.Tracing(cfg.TracerProvider, cfg.Propagator)...)
	}
	r.Use(httpx.RequestID, httpx.AccessLog(cfg.Logger, cfg.Metrics))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.http.Error(w, r, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: "no such endpoint"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.http.Error(w, r, &wire.Error{Status: http.StatusMethodNotAllowed, Code: wire.CodeMethod, Msg: "method not allowed on this endpoint"})
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	r.With(s.http.Global("/cluster/status")).Get("/cluster/status", s.clusterStatus)
	r.Route("/v1", func(r chi.Router) {
		r.Use(s.http.Auth, s.http.Admission)
		read, write := s.http.Scope(apikey.Read), s.http.Scope(apikey.Write)
		s.dataRoutes(r, read, write)
		r.Get("/collections", s.listCollections)
		// Cluster backups hold every collection: a key scoped to all (*).
		all := s.http.Global("a cluster backup")
		r.With(all).Post("/backups", s.createClusterBackup)
		r.With(all).Get("/backups", s.listClusterBackups)
		r.With(all).Delete("/backups/{id}", s.deleteClusterBackup)
		r.With(all).Post("/backups/{id}/restore", s.restoreCluster)
		r.Route("/collections/{collection}", func(r chi.Router) {
			r.With(read).Get("/", s.getCollection)
			r.With(write).Put("/", s.createCollection)
			r.With(write).Patch("/", s.updateCollection)
			r.With(write).Delete("/", s.dropCollection)
			r.With(read).Post("/backups", s.createBackup)
			r.With(read).Get("/backups", s.listBackups)
			r.With(write).Delete("/backups/{id}", s.deleteBackup)
			r.With(write).Post("/restore", s.restore)
			s.dataRoutes(r, read, write)
		})
	})
	qdrant.New(qdrant.Config{Coordinator: cfg.Coordinator, Budget: cfg.Budget, Collection: cfg.Collection, HTTP: s.http}).Mount(r)
	if cfg.Extra != nil {
		cfg.Extra(r)
	}
	s.handler = httpx.KeepConn(r)
	return s
}

// dataRoutes are the document routes, on the default collection under
// /v1 and on {collection} under /v1/collections/{collection}: each needs
// the key's read or write on its collection.
func (s *Server) dataRoutes(r chi.Router, read, write func(http.Handler) http.Handler) {
	r.With(read).Post("/search", s.search)
	r.With(read).Post("/search/batch", s.searchBatch)
	r.With(write).Post("/vectors", s.upsert)
	r.With(read).Get("/vectors/{id}", s.getVector)
	r.With(write).Delete("/vectors/{id}", s.deleteVector)
	r.With(write).Patch("/vectors/{id}", s.patchPayload)
	r.With(write).Put("/vectors/{id}", s.putVector)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// SetReady flips /readyz.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		s.http.Error(w, r, &wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Msg: "not ready"})
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// collection resolves the collection a /v1 request acts on: the path's
// {collection}, or the default collection (--collection) on the
// collection-less paths.
func (s *Server) collection(r *http.Request) (coordinator.Collection, error) {
	name := chi.URLParam(r, "collection")
	if name == "" {
		name = s.cfg.Collection
	}
	return s.cfg.Coordinator.Collection(r.Context(), name)
}
