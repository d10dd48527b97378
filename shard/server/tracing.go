package server

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/vector"
)

// startScan begins the scan span; with tracing off it calls no tracer
// and returns OpenTelemetry's non-recording span.
func (s *Server) startScan(ctx context.Context) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return s.tracer.Start(ctx, shard.SpanScan)
}

// endScan records a scan on its span and ends it. Rows scanned is the
// replica's row count: an exact scan scores every row in float32, an int8
// scan every row's codes (and re-scores a shortlist).
func (s *Server) endScan(span trace.Span, m vector.Metric, qs scanQueries, rows int, err error) {
	if span.IsRecording() {
		k := 0
		for _, q := range qs {
			k = max(k, q.K)
		}
		span.SetAttributes(
			attribute.Int(shard.AttrRowsScanned, rows),
			attribute.Int(shard.AttrQueries, len(qs)),
			attribute.Int(shard.AttrK, k),
			attribute.String(shard.AttrKernel, s.cfg.Kernel.Name),
			attribute.String(shard.AttrMetric, m.String()),
		)
		if err != nil {
			span.SetStatus(otelcodes.Error, err.Error())
		}
	}
	span.End()
}
