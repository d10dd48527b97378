package httpx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawl-search/trawl/metrics"
)

// RequestID echoes the caller's X-Request-Id or makes one, and keeps it
// for the access log.
func RequestID(next http.Handler) http.Handler {
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

// AccessLog logs every request with its id, status and latency, and
// counts it by route pattern in m (when not nil). It goes inside
// RequestID and Tracing, whose id and span it logs.
func AccessLog(log *slog.Logger, m *metrics.Router) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
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
			if m != nil {
				m.HTTPRequest(route, rec.status)
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
			log.LogAttrs(r.Context(), slog.LevelInfo, "http", attrs...)
		})
	}
}
