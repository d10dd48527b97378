package fanout

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
)

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/trawl-search/trawl/fanout"

// Span names: one fan-out has one SpanGather, one SpanRead per shard, and
// one SpanAttempt per replica asked (first choice, failovers, hedges).
const (
	SpanGather  = "fanout.gather"
	SpanRead    = "fanout.read"
	SpanAttempt = "fanout.attempt"
	SpanLookup  = "fanout.lookup"
	SpanWrite   = "fanout.write"
	SpanSurvey  = "fanout.survey"
)

// Span attribute keys. The values mean what the same words mean in an
// answer's scatter_gather block and its ?shard_detail=true rows, so a trace
// and the answer tell the same story.
const (
	AttrPath          = attribute.Key("trawl.path")
	AttrDeadlineMS    = attribute.Key("trawl.deadline_ms")
	AttrShardDeadline = attribute.Key("trawl.shard_deadline_ms")
	AttrDegraded      = attribute.Key("trawl.degraded")
	AttrCoverage      = attribute.Key("trawl.coverage")
	AttrShardsTotal   = attribute.Key("trawl.shards_total")
	AttrShardsQueried = attribute.Key("trawl.shards_queried")
	// AttrMissing lists the missing shards as "shard=reason".
	AttrMissing = attribute.Key("trawl.missing")

	AttrShard   = attribute.Key("trawl.shard")
	AttrReplica = attribute.Key("trawl.replica")
	// AttrOutcome is, on a read, StatusOK or the missing Reason; on an
	// attempt or a lookup, the RPC's outcome label as in
	// trawl_shard_request_duration_seconds ("ok", "unavailable",
	// "deadline_exceeded", "canceled" for a loser cancelled by the winner,
	// …, and "not_serving" for a replica still loading); on a write's
	// replica event, WriteOK, WriteFailed or WriteUnknown.
	AttrOutcome    = attribute.Key("trawl.outcome")
	AttrReason     = attribute.Key("trawl.reason")
	AttrHedged     = attribute.Key("trawl.hedged")
	AttrFailedOver = attribute.Key("trawl.failed_over")
	AttrLatencyMS  = attribute.Key("trawl.latency_ms")

	AttrHedge    = attribute.Key("trawl.hedge")
	AttrFailover = attribute.Key("trawl.failover")
	// AttrWinner is true on the attempt whose answer the read returned.
	AttrWinner = attribute.Key("trawl.winner")

	// AttrReplicas is how many replicas a survey asked.
	AttrReplicas = attribute.Key("trawl.replicas")
)

// EventMissing is the fan-out span's event for each missing shard.
const EventMissing = "shard missing"

// nonRecording is the span start returns with tracing off (OpenTelemetry's
// own no-op span; never changed).
var nonRecording = trace.SpanFromContext(context.Background())

// start begins a span, or, with tracing off, returns ctx and a
// non-recording span without calling anything: even the noop tracer
// allocates a context, and any extra call depth made the engine's
// short-lived goroutines outgrow their first stack, a copy that measured
// about 8 µs a fan-out (BenchmarkGather against the build before tracing).
// The traced work is in functions of its own so that start and
// startAttempt stay small enough to inline.
func (c *Cluster[R]) start(ctx context.Context, name string) (context.Context, trace.Span) {
	if !c.traced {
		return ctx, nonRecording
	}
	return c.startTraced(ctx, name)
}

func (c *Cluster[R]) startTraced(ctx context.Context, name string) (context.Context, trace.Span) {
	return c.tracer.Start(ctx, name)
}

// startAttempt begins an attempt's span.
func (c *Cluster[R]) startAttempt(ctx context.Context, r R, hedge, failover bool) (context.Context, trace.Span) {
	if !c.traced {
		return ctx, nonRecording
	}
	return c.startAttemptTraced(ctx, r, hedge, failover)
}

func (c *Cluster[R]) startAttemptTraced(ctx context.Context, r R, hedge, failover bool) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(ctx, SpanAttempt)
	if span.IsRecording() {
		span.SetAttributes(AttrReplica.String(r.Addr()), AttrHedge.Bool(hedge), AttrFailover.Bool(failover))
	}
	return ctx, span
}

// annotateGather records a fan-out's summary on its span.
func annotateGather(span trace.Span, req Request, sum Summary) {
	if !span.IsRecording() {
		return
	}
	missing := make([]string, 0, len(sum.Unavailable))
	for _, name := range sum.Unavailable {
		missing = append(missing, name+"="+string(sum.ShardErrors[name]))
	}
	span.SetAttributes(
		AttrPath.String(string(req.Path)),
		AttrDeadlineMS.Int64(req.Budget.Deadline.Milliseconds()),
		AttrShardDeadline.Int64(req.Budget.Shard.Milliseconds()),
		AttrDegraded.Bool(sum.Degraded()),
		AttrCoverage.Float64(sum.Coverage),
		AttrShardsTotal.Int(sum.ShardsTotal),
		AttrShardsQueried.Int(sum.ShardsQueried),
		AttrMissing.StringSlice(missing),
	)
	if sum.Degraded() {
		span.SetStatus(otelcodes.Error, "degraded: "+missing[0]+moreThan(len(missing)))
	}
}

// annotateMissing adds an event per missing shard to a fan-out's span.
func annotateMissing[T any](span trace.Span, results []Result[T]) {
	if !span.IsRecording() {
		return
	}
	for _, r := range results {
		if r.Reason == "" {
			continue
		}
		attrs := []attribute.KeyValue{AttrShard.String(r.Shard), AttrReason.String(string(r.Reason))}
		if r.Replica != "" {
			attrs = append(attrs, AttrReplica.String(r.Replica))
		}
		if r.Err != nil {
			attrs = append(attrs, attribute.String("error.message", r.Err.Error()))
		}
		span.AddEvent(EventMissing, trace.WithAttributes(attrs...))
	}
}

func moreThan(n int) string {
	if n <= 1 {
		return ""
	}
	return " and others"
}

// annotateRead records how one shard was read on its span.
func annotateRead[T any](span trace.Span, res Result[T]) {
	if !span.IsRecording() {
		return
	}
	st := StatusOK
	if res.Reason != "" {
		st = string(res.Reason)
	}
	span.SetAttributes(
		AttrShard.String(res.Shard),
		AttrOutcome.String(st),
		AttrReplica.String(res.Replica),
		AttrHedged.Bool(res.Hedged),
		AttrFailedOver.Bool(res.FailedOver),
		AttrLatencyMS.Float64(float64(res.Latency.Microseconds())/1000),
	)
	if res.Reason != "" {
		msg := st
		if res.Err != nil {
			msg += ": " + res.Err.Error()
		}
		span.SetStatus(otelcodes.Error, msg)
	}
}

// endAttempt records an attempt's outcome on its span and ends it.
func endAttempt(span trace.Span, err error, winner bool) {
	if span.IsRecording() {
		o := outcome(err)
		k := classify(err)
		if k == kindNotServing {
			o = "not_serving"
		}
		span.SetAttributes(AttrOutcome.String(o), AttrWinner.Bool(winner))
		if k == kindConnectivity || (k == kindAnswer && code(err) != codes.NotFound) {
			span.SetStatus(otelcodes.Error, err.Error())
		}
	}
	span.End()
}

// endLookup records a lookup's outcome on its span and ends it.
func endLookup(span trace.Span, shard string, err error) {
	if span.IsRecording() {
		span.SetAttributes(AttrShard.String(shard), AttrOutcome.String(outcome(err)))
		if err != nil && code(err) != codes.NotFound {
			span.SetStatus(otelcodes.Error, err.Error())
		}
	}
	span.End()
}

// annotateWriteAttempt records one attempt of a leader-aware write as an
// event on the write's span, and the outcome once it is final.
func annotateWriteAttempt(span trace.Span, shard string, res WriteResult, final bool) {
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{AttrReplica.String(res.Replica), AttrOutcome.String(res.Outcome)}
	if res.Err != nil {
		attrs = append(attrs, attribute.String("error.message", res.Err.Error()))
	}
	span.AddEvent("write attempt", trace.WithAttributes(attrs...))
	if final {
		span.SetAttributes(AttrShard.String(shard), AttrOutcome.String(res.Outcome), AttrReplica.String(res.Replica))
		if res.Outcome != WriteOK {
			span.SetStatus(otelcodes.Error, "the write was not acknowledged")
		}
	}
}

// annotateSurvey records a survey's size on its span.
func annotateSurvey[T any](span trace.Span, out [][]Answered[T]) {
	if !span.IsRecording() {
		return
	}
	n := 0
	for _, row := range out {
		n += len(row)
	}
	span.SetAttributes(AttrShardsTotal.Int(len(out)), AttrReplicas.Int(n))
}
