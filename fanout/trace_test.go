package fanout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// traced is a span recorder and the provider feeding it.
type traced struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newTraced(t *testing.T) traced {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return traced{rec, tp}
}

// query runs f under a fresh root span and returns its trace id, so a test
// looks at that query's spans only.
func (tr traced) query(f func(ctx context.Context)) trace.TraceID {
	ctx, root := tr.tp.Tracer("test").Start(context.Background(), "query")
	f(ctx)
	root.End()
	return root.SpanContext().TraceID()
}

// ended returns the ended spans of trace id named name.
func (tr traced) ended(id trace.TraceID, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.rec.Ended() {
		if s.SpanContext().TraceID() == id && s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// attemptView is what a test checks of one attempt span.
type attemptView struct {
	replica  string
	hedge    bool
	failover bool
	outcome  string
	winner   bool
}

func TestTraceOfAShardRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup builds the shard "a" (and teaches the engine whatever the
		// case needs) from a provider.
		setup    func(t *testing.T, tp trace.TracerProvider) *Cluster[*fake]
		read     map[attribute.Key]attribute.Value
		attempts []attemptView
	}{
		{
			name: "hedge wins over a silent replica",
			setup: func(t *testing.T, tp trace.TracerProvider) *Cluster[*fake] {
				silent := newFake("a0", okAfter(time.Millisecond, 5))
				fast := newFake("a1", okAfter(time.Millisecond, 5))
				c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{silent, fast}}}, Options{TracerProvider: tp})
				for range 20 {
					Gather(context.Background(), c, req(300*time.Millisecond), call)
				}
				silent.script(hang)
				for _, r := range c.shards[0].list() { // the silent one is first choice
					r.mu.Lock()
					r.mean, r.dev = time.Millisecond, 0
					if r.r == fast {
						r.mean = 2 * time.Millisecond
					}
					r.mu.Unlock()
				}
				return c
			},
			read: map[attribute.Key]attribute.Value{
				AttrShard: attribute.StringValue("a"), AttrOutcome: attribute.StringValue(StatusOK),
				AttrReplica: attribute.StringValue("a1"), AttrHedged: attribute.BoolValue(true),
				AttrFailedOver: attribute.BoolValue(false),
			},
			attempts: []attemptView{
				{replica: "a0", outcome: "canceled"},
				{replica: "a1", hedge: true, outcome: "ok", winner: true},
			},
		},
		{
			name: "failover within the call",
			setup: func(t *testing.T, tp trace.TracerProvider) *Cluster[*fake] {
				return New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", fails(codes.Unavailable)), newFake("a1", nil)}}},
					Options{TracerProvider: tp, HedgeBudget: -1})
			},
			read: map[attribute.Key]attribute.Value{
				AttrShard: attribute.StringValue("a"), AttrOutcome: attribute.StringValue(StatusOK),
				AttrReplica: attribute.StringValue("a1"), AttrHedged: attribute.BoolValue(false),
				AttrFailedOver: attribute.BoolValue(true),
			},
			attempts: []attemptView{
				{replica: "a0", outcome: "unavailable"},
				{replica: "a1", failover: true, outcome: "ok", winner: true},
			},
		},
		{
			name: "a loading replica is skipped",
			setup: func(t *testing.T, tp trace.TracerProvider) *Cluster[*fake] {
				loading := newFake("a0", func(context.Context) (ans, error) { return ans{}, notServing{} })
				return New([]Shard[*fake]{{Name: "a", Replicas: []*fake{loading, newFake("a1", nil)}}},
					Options{TracerProvider: tp, HedgeBudget: -1})
			},
			read: map[attribute.Key]attribute.Value{
				AttrShard: attribute.StringValue("a"), AttrOutcome: attribute.StringValue(StatusOK),
				AttrReplica: attribute.StringValue("a1"), AttrFailedOver: attribute.BoolValue(true),
			},
			attempts: []attemptView{
				{replica: "a0", outcome: "not_serving"},
				{replica: "a1", failover: true, outcome: "ok", winner: true},
			},
		},
		{
			name: "the shard answers with an error",
			setup: func(t *testing.T, tp trace.TracerProvider) *Cluster[*fake] {
				return New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", fails(codes.Internal)), newFake("a1", nil)}}},
					Options{TracerProvider: tp, HedgeBudget: -1})
			},
			read: map[attribute.Key]attribute.Value{
				AttrShard: attribute.StringValue("a"), AttrOutcome: attribute.StringValue(string(ReasonInternal)),
				AttrReplica: attribute.StringValue("a0"), AttrHedged: attribute.BoolValue(false),
				AttrFailedOver: attribute.BoolValue(false),
			},
			attempts: []attemptView{{replica: "a0", outcome: "internal"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTraced(t)
			c := tc.setup(t, tr.tp)
			var res []Result[ans]
			id := tr.query(func(ctx context.Context) {
				res, _ = Gather(ctx, c, req(300*time.Millisecond), call)
			})
			reads := tr.ended(id, SpanRead)
			require.Len(t, reads, 1)
			read := reads[0]
			got := attrs(read)
			for k, v := range tc.read {
				require.Equal(t, v, got[k], "read attribute %s", k)
			}
			// The answer's shard detail and the trace agree.
			require.Equal(t, res[0].Replica, got[AttrReplica].AsString())
			require.Equal(t, res[0].Hedged, got[AttrHedged].AsBool())
			require.Equal(t, res[0].FailedOver, got[AttrFailedOver].AsBool())

			gathers := tr.ended(id, SpanGather)
			require.Len(t, gathers, 1)
			require.Equal(t, gathers[0].SpanContext().SpanID(), read.Parent().SpanID(), "a read is a child of its fan-out")

			// A losing attempt's span ends when its call gives up, just after the answer.
			require.Eventually(t, func() bool { return len(tr.ended(id, SpanAttempt)) == len(tc.attempts) }, time.Second, time.Millisecond)
			var views []attemptView
			for _, s := range tr.ended(id, SpanAttempt) {
				require.Equal(t, read.SpanContext().SpanID(), s.Parent().SpanID(), "an attempt is a child of its shard read")
				a := attrs(s)
				views = append(views, attemptView{
					replica: a[AttrReplica].AsString(), hedge: a[AttrHedge].AsBool(), failover: a[AttrFailover].AsBool(),
					outcome: a[AttrOutcome].AsString(), winner: a[AttrWinner].AsBool(),
				})
			}
			require.ElementsMatch(t, tc.attempts, views)
		})
	}
}

func TestTraceOfAFanoutMissingShards(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       *fake
		opts    Options
		reason  Reason
		missing []string
	}{
		{name: "no ready replica", b: func() *fake { f := newFake("b0", nil); f.ready.Store(false); return f }(),
			reason: ReasonUnavailable, missing: []string{"b=unavailable"}},
		{name: "every replica refuses", b: newFake("b0", fails(codes.Unavailable)),
			reason: ReasonUnavailable, missing: []string{"b=unavailable"}},
		{name: "no answer in time", b: newFake("b0", hang),
			reason: ReasonDeadline, missing: []string{"b=deadline_exceeded"}},
		{name: "an error answer", b: newFake("b0", fails(codes.InvalidArgument)),
			reason: ReasonInternal, missing: []string{"b=internal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTraced(t)
			c := New([]Shard[*fake]{
				{Name: "a", Replicas: []*fake{newFake("a0", nil)}},
				{Name: "b", Replicas: []*fake{tc.b}},
			}, Options{TracerProvider: tr.tp})
			var sum Summary
			id := tr.query(func(ctx context.Context) { _, sum = Gather(ctx, c, req(200*time.Millisecond), call) })
			gathers := tr.ended(id, SpanGather)
			require.Len(t, gathers, 1)
			g := gathers[0]
			a := attrs(g)
			require.Equal(t, tc.missing, a[AttrMissing].AsStringSlice())
			require.True(t, a[AttrDegraded].AsBool())
			require.Equal(t, sum.Coverage, a[AttrCoverage].AsFloat64())
			require.EqualValues(t, 2, a[AttrShardsTotal].AsInt64())
			require.EqualValues(t, 1, a[AttrShardsQueried].AsInt64())
			require.EqualValues(t, 200, a[AttrDeadlineMS].AsInt64())
			require.EqualValues(t, 195, a[AttrShardDeadline].AsInt64())
			require.Equal(t, string(PathSearch), a[AttrPath].AsString())
			require.Len(t, g.Events(), 1)
			ev := g.Events()[0]
			require.Equal(t, EventMissing, ev.Name)
			ea := map[attribute.Key]attribute.Value{}
			for _, kv := range ev.Attributes {
				ea[kv.Key] = kv.Value
			}
			require.Equal(t, "b", ea[AttrShard].AsString())
			require.Equal(t, string(tc.reason), ea[AttrReason].AsString())
		})
	}
}

// A healthy fan-out's span says so.
func TestTraceOfAHealthyFanout(t *testing.T) {
	tr := newTraced(t)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", nil)}}, {Name: "b", Replicas: []*fake{newFake("b0", nil)}}},
		Options{TracerProvider: tr.tp})
	id := tr.query(func(ctx context.Context) { Gather(ctx, c, req(200*time.Millisecond), call) })
	g := tr.ended(id, SpanGather)
	require.Len(t, g, 1)
	a := attrs(g[0])
	require.False(t, a[AttrDegraded].AsBool())
	require.Empty(t, a[AttrMissing].AsStringSlice())
	require.Equal(t, 1.0, a[AttrCoverage].AsFloat64())
	require.Empty(t, g[0].Events())
	require.Len(t, tr.ended(id, SpanRead), 2)
	require.Eventually(t, func() bool { return len(tr.ended(id, SpanAttempt)) == 2 }, time.Second, time.Millisecond)
}

// A lookup's span and its attempts: the first replica's NotFound, then the
// one that had it.
func TestTraceOfALookup(t *testing.T) {
	tr := newTraced(t)
	r0, r1 := newFake("a0", nil), newFake("a1", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{r0, r1}}}, Options{TracerProvider: tr.tp})
	id := tr.query(func(ctx context.Context) {
		_, err := Lookup(ctx, c, req(300*time.Millisecond), "a", func(_ context.Context, f *fake) (string, error) {
			if f == r0 {
				return "", status.Error(codes.NotFound, "no")
			}
			return "found", nil
		})
		require.NoError(t, err)
	})
	l := tr.ended(id, SpanLookup)
	require.Len(t, l, 1)
	require.Equal(t, "ok", attrs(l[0])[AttrOutcome].AsString())
	var views []attemptView
	for _, s := range tr.ended(id, SpanAttempt) {
		require.Equal(t, l[0].SpanContext().SpanID(), s.Parent().SpanID())
		a := attrs(s)
		views = append(views, attemptView{replica: a[AttrReplica].AsString(), failover: a[AttrFailover].AsBool(),
			outcome: a[AttrOutcome].AsString(), winner: a[AttrWinner].AsBool()})
	}
	require.ElementsMatch(t, []attemptView{{replica: "a0", outcome: "not_found"}, {replica: "a1", failover: true, outcome: "ok", winner: true}}, views)
}

// A write's span has one event per attempt with its outcome, and the final
// outcome and replica as attributes.
func TestTraceOfAWrite(t *testing.T) {
	tr := newTraced(t)
	r0, r1 := newFake("a0", nil), newFake("a1", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{r0, r1}}}, Options{TracerProvider: tr.tp})
	id := tr.query(func(ctx context.Context) {
		res := Write(ctx, c, "a", func(_ context.Context, f *fake) error {
			if f == r0 {
				return notLeader{status.Error(codes.Unavailable, "not the leader"), "a1"}
			}
			return nil
		})
		require.Equal(t, WriteOK, res.Outcome)
	})
	w := tr.ended(id, SpanWrite)
	require.Len(t, w, 1)
	a := attrs(w[0])
	require.Equal(t, "a", a[AttrShard].AsString())
	require.Equal(t, WriteOK, a[AttrOutcome].AsString())
	require.Equal(t, "a1", a[AttrReplica].AsString())
	var got []string
	for _, ev := range w[0].Events() {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range ev.Attributes {
			m[kv.Key] = kv.Value
		}
		got = append(got, m[AttrReplica].AsString()+"="+m[AttrOutcome].AsString())
	}
	require.Equal(t, []string{"a0=" + WriteFailed, "a1=" + WriteOK}, got)
}
