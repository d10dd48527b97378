package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
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
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/metrics"
)

// DefaultBodyTimeout is --body-timeout's default.
const DefaultBodyTimeout = 10 * time.Second

// Config wires a Server.
type Config struct {
	// Coordinator runs the use cases the handlers decode requests into.
	Coordinator *coordinator.Coordinator
	Budget      budget.Config
	Metrics     *metrics.Router
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// APIKey, when non-empty, is required as a Bearer token on /v1/*, and
	// as Qdrant's api-key header or a Bearer token on /collections/*.
	APIKey string
	// Collection is the name the Qdrant-compatible routes serve the
	// cluster's documents under (DefaultCollection if empty).
	Collection string
	// Limiter admits /v1/* requests (DESIGN.md, "Overload"); a default
	// admission.Limiter if nil.
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
}

// Server is the router's HTTP API.
type Server struct {
	cfg     Config
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
	s := &Server{cfg: cfg}

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
		r.Use(s.authenticate, s.checkAdmission)
		r.Post("/search", s.search)
		r.Post("/search/batch", s.searchBatch)
		r.Post("/vectors", s.upsert)
		r.Get("/vectors/{id}", s.getVector)
		r.Delete("/vectors/{id}", s.deleteVector)
	})
	s.mountQdrant(r)
	if cfg.Extra != nil {
		cfg.Extra(r)
	}
	s.handler = r
	return s
}

// ServeHTTP implements http.Handler. It keeps a ResponseController for the connection before any middleware
// wraps w (otelhttp's wrapper cannot be unwrapped), so the body timeout
// can set the connection's read deadline whatever wraps it later.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	s.handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), connKey, rc)))
}

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

const (
	requestIDKey ctxKey = iota
	connKey             // the request's *http.ResponseController
)

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

// Unwrap lets http.ResponseController reach the connection (the body
// timeout sets its read deadline through it).
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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

// checkAdmission refuses a /v1/* request on its line and headers when the
// limiter is full, before a byte of its body is read; it reserves nothing.
// Handlers acquire their slot once the body has arrived (admit).
func (s *Server) checkAdmission(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Limiter.Check(); err != nil {
			s.refuse(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// admit takes weight slots for a request whose body has arrived; on
// refusal it has answered 429 and returns nil.
func (s *Server) admit(w http.ResponseWriter, weight int, deadline time.Duration) *admission.Permit {
	p, err := s.cfg.Limiter.Acquire(weight, deadline)
	if err != nil {
		s.refuse(w, err)
		return nil
	}
	return p
}

// noteRefusal counts an admission refusal by its reason.
func (s *Server) noteRefusal(err error) {
	var ref *admission.Refusal
	if errors.As(err, &ref) && s.cfg.Metrics != nil {
		s.cfg.Metrics.Rejected(ref.Reason)
	}
}

// refuse answers an admission refusal: 429, code overloaded, Retry-After.
func (s *Server) refuse(w http.ResponseWriter, err error) {
	s.noteRefusal(err)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusTooManyRequests, codeOverloaded, err.Error())
}
