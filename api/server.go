package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/metrics"
)

// DefaultMaxInflight is --max-inflight's default: concurrent /v1/* requests
// before the router answers 429.
const DefaultMaxInflight = 256

// Config wires a Server.
type Config struct {
	// Coordinator runs the use cases the handlers decode requests into.
	Coordinator *coordinator.Coordinator
	Budget      budget.Config
	Metrics     *metrics.Router
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// APIKey, when non-empty, is required as a Bearer token on /v1/*.
	APIKey string
	// MaxInflight bounds concurrent /v1/* requests (DefaultMaxInflight if
	// zero).
	MaxInflight int
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
}

// Server is the router's HTTP API.
type Server struct {
	cfg      Config
	handler  http.Handler
	inflight chan struct{}
	ready    atomic.Bool
}

// New builds the server. It is not ready until SetReady(true).
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	s := &Server{cfg: cfg, inflight: make(chan struct{}, cfg.MaxInflight)}

	r := chi.NewRouter()
	if tracingOn(cfg.TracerProvider) {
		// Outermost, so the access log and every handler see the span.
		r.Use(s.tracing()...)
	}
	r.Use(s.requestID, s.accessLog)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, codeNotFound, "no such endpoint")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, codeMethod, "method not allowed on this endpoint")
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	r.Get("/cluster/status", s.clusterStatus)
	r.Route("/v1", func(r chi.Router) {
		r.Use(s.authenticate, s.limitInflight)
		r.Post("/search", s.search)
		r.Post("/search/batch", s.searchBatch)
		r.Post("/vectors", s.upsert)
		r.Get("/vectors/{id}", s.getVector)
		r.Delete("/vectors/{id}", s.deleteVector)
	})
	if cfg.Extra != nil {
		cfg.Extra(r)
	}
	s.handler = r
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// SetReady flips /readyz.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "not ready")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

type ctxKey int

const requestIDKey ctxKey = 0

// requestID echoes the caller's X-Request-Id or makes one.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// accessLog logs every request with its id, status and latency, and counts
// it by route pattern.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.HTTPRequest(route, rec.status)
		}
		id, _ := r.Context().Value(requestIDKey).(string)
		attrs := []slog.Attr{
			slog.String("request_id", id), slog.String("method", r.Method), slog.String("route", route),
			slog.String("path", r.URL.Path), slog.Int("status", rec.status),
			slog.Float64("latency_ms", float64(time.Since(start).Microseconds())/1000),
		}
		if span := trace.SpanFromContext(r.Context()); span.SpanContext().IsValid() {
			attrs = append(attrs, slog.String("trace_id", span.SpanContext().TraceID().String()))
			if span.IsRecording() {
				// otelhttp named the span before chi matched the route.
				span.SetName(r.Method + " " + route)
				span.SetAttributes(semconvRoute.String(route))
			}
		}
		s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "http", attrs...)
	})
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	want := []byte("Bearer " + s.cfg.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
			writeError(w, http.StatusUnauthorized, codeUnauthenticated, "missing or wrong API key: send Authorization: Bearer <key>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitInflight refuses work beyond --max-inflight at once instead of
// queueing it: a queue would only turn overload into missed deadlines.
func (s *Server) limitInflight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.inflight <- struct{}{}:
			defer func() { <-s.inflight }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, codeExhausted,
				"router is at --max-inflight="+strconv.Itoa(s.cfg.MaxInflight)+" concurrent requests; retry shortly")
		}
	})
}
