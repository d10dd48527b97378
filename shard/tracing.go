package shard

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
)

// tracerName is the instrumentation scope of the shard's own spans.
const tracerName = "github.com/trawl-search/trawl/shard"

// SpanScan is the shard server's span around one scan (one query or a
// whole batch).
const SpanScan = "shard.scan"

// Scan span attribute keys.
const (
	AttrRowsScanned = "trawl.rows_scanned"
	AttrQueries     = "trawl.queries"
	// AttrK is the largest k of the scan's queries.
	AttrK      = "trawl.k"
	AttrKernel = "trawl.kernel"
	AttrMetric = "trawl.metric"
)

// tracingOn reports whether tp makes spans: nil and OpenTelemetry's noop
// provider do not, and then no instrumentation is installed at all, so
// tracing off costs nothing on the RPC path.
func tracingOn(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, off := tp.(noop.TracerProvider)
	return !off
}

// propagatorOr is p, or W3C tracecontext and baggage when p is nil (never
// the otel global, whose default propagates nothing).
func propagatorOr(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p != nil {
		return p
	}
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// otelOptions are the otelgrpc options both ends use: the given provider
// and propagator, no metrics (trawl's Prometheus metrics are the metrics),
// and no spans for grpc.health.v1, which the router's prober calls every
// 500 ms per replica.
func otelOptions(tp trace.TracerProvider, p propagation.TextMapPropagator) []otelgrpc.Option {
	return []otelgrpc.Option{
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(propagatorOr(p)),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(filters.Not(filters.HealthCheck())),
	}
}

// ServerTracing is the server option that continues the caller's trace
// (W3C traceparent in the gRPC metadata) in a server span per RPC, the
// parent of the shard's scan span. It is empty when tp is nil or noop.
// Append it to ServerOptions wherever a shard's grpc.Server is built.
func ServerTracing(tp trace.TracerProvider, p propagation.TextMapPropagator) []grpc.ServerOption {
	if !tracingOn(tp) {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(otelOptions(tp, p)...))}
}

// ClientTracing is the dial option that makes a client span per RPC and
// sends the trace context to the replica. It is empty when tp is nil or
// noop.
func ClientTracing(tp trace.TracerProvider, p propagation.TextMapPropagator) []grpc.DialOption {
	if !tracingOn(tp) {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelOptions(tp, p)...))}
}

// Tracer is tp's tracer for the shard's own spans (SpanScan), or nil when
// tp makes no spans.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if !tracingOn(tp) {
		return nil
	}
	return tp.Tracer(tracerName)
}
