package httpx

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TraceIDHeader carries the request's trace id in every answer while
// tracing is on, so a client can look its query up without parsing logs.
const TraceIDHeader = "X-Trace-Id"

// TracingOn reports whether tp makes spans; nil and OpenTelemetry's noop
// provider do not, and then the tracing middleware is not installed at
// all.
func TracingOn(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, off := tp.(noop.TracerProvider)
	return !off
}

// semconvRoute is OpenTelemetry's http.route attribute.
const semconvRoute = attribute.Key("http.route")

// traced reports whether a request to path gets a span: not the paths
// probes and scrapers call every few seconds, whose spans would bury the
// queries.
func traced(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return false
	}
	return true
}

// Tracing is the request's span: it continues a client's W3C traceparent
// (read by prop; tracecontext and baggage if nil), is renamed to the route
// pattern once chi has matched it (AccessLog), and puts the trace id in
// the answer's headers. It goes outermost, so the access log and every
// handler see the span.
func Tracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) []func(http.Handler) http.Handler {
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	mw := otelhttp.NewMiddleware("http",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(prop),
		// trawl_http_requests_total is the HTTP metric.
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithFilter(func(r *http.Request) bool { return traced(r.URL.Path) }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }),
	)
	header := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
				w.Header().Set(TraceIDHeader, sc.TraceID().String())
			}
			next.ServeHTTP(w, r)
		})
	}
	return []func(http.Handler) http.Handler{mw, header}
}
