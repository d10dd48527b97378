package app_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/trawl-search/trawl/internal/app"
)

// discard is a span exporter that drops what it is sent: tracing on, with
// the batch processor a real deployment runs, minus the network.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func BenchmarkHealthyQueryTraced(b *testing.B) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	// What internal/tracing hands out with no OTEL_* exporter set.
	b.Run("tracing=noop", func(b *testing.B) {
		tp := noop.NewTracerProvider()
		cfg := queryBenchCluster()
		cfg.TracerProvider, cfg.Propagator = tp, prop
		url, body := benchRouter(b, cfg, func(c app.Config) app.Config {
			c.TracerProvider, c.Propagator = tp, prop
			return c
		})
		runQueries(b, url, body)
	})
	b.Run("tracing=on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		cfg := queryBenchCluster()
		cfg.TracerProvider, cfg.Propagator = tp, prop
		url, body := benchRouter(b, cfg, func(c app.Config) app.Config {
			c.TracerProvider, c.Propagator = tp, prop
			return c
		})
		runQueries(b, url, body)
	})
}
