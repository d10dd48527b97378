package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The service.name each process reports unless OTEL_SERVICE_NAME says
// otherwise.
const (
	ServiceRouter = "trawl-router"
	ServiceShard  = "trawl-shard"
)

// Tracing is what a process hands to its parts.
type Tracing struct {
	// TracerProvider is the SDK's when tracing is on, and otherwise
	// OpenTelemetry's noop provider, which trawl's packages treat as
	// "tracing off" and skip their instrumentation for.
	TracerProvider trace.TracerProvider
	// Propagator carries W3C tracecontext and baggage across HTTP and gRPC.
	Propagator propagation.TextMapPropagator
	// Enabled reports whether spans are exported.
	Enabled bool

	shutdown func(context.Context) error
}

// Shutdown flushes spans still queued in the batch processor and stops the
// exporter. Call it once, as the process exits, with a context bounding the
// flush; with tracing off it does nothing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.shutdown == nil {
		return nil
	}
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}

// Configured reports whether the environment asks for traces: one of
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_TRACES_EXPORTER is set (OTEL_TRACES_EXPORTER=none counts as set,
// and then exports nothing), and OTEL_SDK_DISABLED is not "true".
func Configured() bool {
	// The specification's switch for the whole SDK.
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	// Any one of these turns tracing on; with none set the process
	// exports nothing.
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// FromEnv builds the process's tracing from the environment. service is
// the default service.name (ServiceRouter or ServiceShard).
//
// Not configured, or OTEL_TRACES_EXPORTER=none: the noop provider, nothing
// started. Otherwise: the exporter autoexport picks (OTLP over gRPC or
// http/protobuf by OTEL_EXPORTER_OTLP_PROTOCOL, or console) behind a batch
// span processor (which reads OTEL_BSP_*), the sampler the SDK reads from
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (parent-based always-on
// by default), and a resource whose service.name is service unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
func FromEnv(ctx context.Context, service string) (*Tracing, error) {
	t := &Tracing{
		TracerProvider: noop.NewTracerProvider(),
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	if !Configured() {
		return t, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: span exporter from OTEL_* environment: %w", err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return t, nil
	}
	// Later options win: the environment overrides the default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	)
	t.TracerProvider, t.Enabled, t.shutdown = tp, true, tp.Shutdown
	return t, nil
}
