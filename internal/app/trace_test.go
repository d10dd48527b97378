package app_test

// End-to-end tracing over real gRPC on loopback: the router and the dev
// cluster's replicas share one in-memory span recorder, so a test sees the
// whole tree a collector would assemble from both services.

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawl-search/trawl/api"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard"
)

// syncBuffer is a log sink the router writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type tracedHarness struct {
	*harness
	rec *tracetest.SpanRecorder
	log *syncBuffer
}

// startTraced is start with tracing on in the router and every replica.
func startTraced(t *testing.T, cfg devcluster.Config) *tracedHarness {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	cfg.TracerProvider, cfg.Propagator = tp, prop
	dc, err := devcluster.Start(cfg)
	require.NoError(t, err)
	logs := &syncBuffer{}
	r, err := app.New(app.Config{Shards: dc.Specs(), Kernel: cfg.Kernel, WarmupTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), TracerProvider: tp, Propagator: prop})
	require.NoError(t, err)
	srv := httptest.NewServer(r.API)
	t.Cleanup(func() {
		srv.Close()
		r.Close()
		dc.Close()
		_ = tp.Shutdown(t.Context())
	})
	h := &harness{dc: dc, r: r, srv: srv}
	require.NoError(t, r.WaitReady(t.Context()))
	return &tracedHarness{harness: h, rec: rec, log: logs}
}

// tracedQuery sends one search with the client's traceparent and returns
// the answer and the response headers.
func (h *tracedHarness) tracedQuery(t *testing.T, c *http.Client, traceparent, params string) (faultAnswer, http.Header) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"vector": h.dc.Corpus[1].Vector, "k": 5})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/search"+params, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("traceparent", traceparent)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var a faultAnswer
	require.NoError(t, json.Unmarshal(raw, &a), string(raw))
	return a, resp.Header
}

// spans returns the ended spans of trace id, by span id.
func (h *tracedHarness) spans(id trace.TraceID) map[trace.SpanID]sdktrace.ReadOnlySpan {
	out := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range h.rec.Ended() {
		if s.SpanContext().TraceID() == id {
			out[s.SpanContext().SpanID()] = s
		}
	}
	return out
}

func named(spans map[trace.SpanID]sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// ancestry lists the names from s up to the first span whose parent is not
// in the trace's recorded spans, and returns that last parent id.
func ancestry(spans map[trace.SpanID]sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan) ([]string, trace.SpanID) {
	var names []string
	for {
		names = append(names, s.Name())
		p, ok := spans[s.Parent().SpanID()]
		if !ok {
			return names, s.Parent().SpanID()
		}
		s = p
	}
}

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

// A client's traceparent reaches every shard's scan span through the HTTP
// span, the fan-out, the shard read, the attempt and both ends of the RPC;
// the answer and the access log carry the trace id.
func TestTraceFromClientToShardScan(t *testing.T) {
	h := startTraced(t, devcluster.Config{Dim: 32, Docs: 600, Seed: 51, Kernel: faultCluster().Kernel})
	c := faultClient(t)
	a, hdr := h.tracedQuery(t, c, "00-"+clientTraceID+"-"+clientSpanID+"-01", "?deadline_ms=2000")
	require.False(t, a.ScatterGather.Degraded)
	require.Equal(t, clientTraceID, hdr.Get(api.TraceIDHeader))

	id, err := trace.TraceIDFromHex(clientTraceID)
	require.NoError(t, err)
	parent, err := trace.SpanIDFromHex(clientSpanID)
	require.NoError(t, err)
	// The HTTP span ends as the handler returns, which may be just after the
	// client has read the answer.
	require.Eventually(t, func() bool { return len(named(h.spans(id), "POST /v1/search")) == 1 }, 5*time.Second, time.Millisecond)
	spans := h.spans(id)

	scans := named(spans, shard.SpanScan)
	require.Len(t, scans, len(h.dc.Names), "one scan per shard, all in the client's trace")
	rows := int64(0)
	for _, s := range scans {
		require.EqualValues(t, 1, attr(s, shard.AttrQueries).AsInt64())
		require.EqualValues(t, 5, attr(s, shard.AttrK).AsInt64())
		require.Equal(t, "generic", attr(s, shard.AttrKernel).AsString())
		rows += attr(s, shard.AttrRowsScanned).AsInt64()
		chain, root := ancestry(spans, s)
		require.Equal(t, []string{shard.SpanScan, "trawl.shard.v1.Shard/Search", "trawl.shard.v1.Shard/Search",
			fanout.SpanAttempt, fanout.SpanRead, fanout.SpanGather, "POST /v1/search"}, chain)
		require.Equal(t, parent, root, "the tree hangs off the client's span")
	}
	require.EqualValues(t, len(h.dc.Corpus), rows, "every row scanned once, across shards")

	g := named(spans, fanout.SpanGather)
	require.Len(t, g, 1)
	require.Equal(t, string(fanout.PathSearch), attr(g[0], fanout.AttrPath).AsString())
	require.EqualValues(t, 2000, attr(g[0], fanout.AttrDeadlineMS).AsInt64())
	require.False(t, attr(g[0], fanout.AttrDegraded).AsBool())

	// Probes and scrapes make no spans.
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := c.Get(h.srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Empty(t, resp.Header.Get(api.TraceIDHeader), path)
	}
	for _, s := range h.rec.Ended() {
		require.NotEqual(t, "GET", s.Name()[:min(3, len(s.Name()))], "no span for a probe: %s", s.Name())
	}

	require.Eventually(t, func() bool {
		for _, line := range strings.Split(h.log.String(), "\n") {
			if strings.Contains(line, `"msg":"http"`) && strings.Contains(line, `"trace_id":"`+clientTraceID+`"`) {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "the access log line carries the trace id:\n%s", h.log.String())
}

// ?shard_detail=true and the trace tell the same story: per shard, the same
// status, replica, hedged and failed_over, and the winning attempt is the
// replica that answered.
func TestShardDetailAndTraceAgree(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, h *tracedHarness)
	}{
		{name: "healthy", fault: func(*testing.T, *tracedHarness) {}},
		{name: "preferred replica of shard-1 silent", fault: func(t *testing.T, h *tracedHarness) {
			require.NoError(t, h.replica(t, "shard-1", h.preferred(t, "shard-1")).Proxy.Blackhole())
		}},
		{name: "both replicas of shard-0 refused", fault: func(t *testing.T, h *tracedHarness) {
			h.replica(t, "shard-0", 0).Proxy.Stop()
			h.replica(t, "shard-0", 1).Proxy.Stop()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startTraced(t, faultCluster())
			c := faultClient(t)
			h.warm(t, c)
			tc.fault(t, h)
			tid := trace.TraceID{0x7a, byte(len(tc.name))}
			tid[15] = 1
			a, _ := h.tracedQuery(t, c, "00-"+tid.String()+"-"+clientSpanID+"-01", "?deadline_ms=1000&shard_detail=true")
			require.Len(t, a.ScatterGather.Shards, len(h.dc.Names))
			require.Eventually(t, func() bool { return len(named(h.spans(tid), fanout.SpanGather)) == 1 }, 5*time.Second, time.Millisecond)
			spans := h.spans(tid)
			reads := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range named(spans, fanout.SpanRead) {
				reads[attr(s, fanout.AttrShard).AsString()] = s
			}
			var missing []string
			for _, d := range a.ScatterGather.Shards {
				r, ok := reads[d.Shard]
				require.True(t, ok, "a read span for %s", d.Shard)
				require.Equal(t, d.Status, attr(r, fanout.AttrOutcome).AsString(), d.Shard)
				require.Equal(t, d.Replica, attr(r, fanout.AttrReplica).AsString(), d.Shard)
				require.Equal(t, d.Hedged, attr(r, fanout.AttrHedged).AsBool(), d.Shard)
				require.Equal(t, d.FailedOver, attr(r, fanout.AttrFailedOver).AsBool(), d.Shard)
				if d.Status != fanout.StatusOK {
					missing = append(missing, d.Shard+"="+d.Status)
					continue
				}
				var winners []string
				for _, s := range named(spans, fanout.SpanAttempt) {
					if s.Parent().SpanID() == r.SpanContext().SpanID() && attr(s, fanout.AttrWinner).AsBool() {
						winners = append(winners, attr(s, fanout.AttrReplica).AsString())
					}
				}
				require.Equal(t, []string{d.Replica}, winners, "%s: the winning attempt is the replica that answered", d.Shard)
			}
			g := named(spans, fanout.SpanGather)[0]
			require.Equal(t, a.ScatterGather.Degraded, attr(g, fanout.AttrDegraded).AsBool())
			require.Equal(t, missing, nilIfEmpty(attr(g, fanout.AttrMissing).AsStringSlice()))
			t.Logf("%s: %+v", tc.name, a.ScatterGather.Shards)
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// With tracing off the answer carries no trace id.
func TestNoTraceIDWhenTracingIsOff(t *testing.T) {
	h := start(t, faultCluster())
	c := faultClient(t)
	b, err := json.Marshal(map[string]any{"vector": h.dc.Corpus[1].Vector, "k": 5})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/search?deadline_ms=2000", bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Header.Get(api.TraceIDHeader))
}

// A batch is one fan-out, and each shard's scan span counts the batch's
// queries.
func TestTraceOfABatch(t *testing.T) {
	h := startTraced(t, devcluster.Config{Dim: 32, Docs: 300, Seed: 52, Kernel: faultCluster().Kernel})
	qs := []map[string]any{
		{"vector": h.dc.Corpus[1].Vector, "k": 3},
		{"vector": h.dc.Corpus[2].Vector, "k": 7},
		{"like_id": h.dc.Corpus[3].ID, "k": 2},
	}
	b, err := json.Marshal(map[string]any{"queries": qs})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/search/batch?deadline_ms=2000", bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	resp, err := faultClient(t).Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))

	id, err := trace.TraceIDFromHex(clientTraceID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(named(h.spans(id), "POST /v1/search/batch")) == 1 }, 5*time.Second, time.Millisecond)
	spans := h.spans(id)
	g := named(spans, fanout.SpanGather)
	require.Len(t, g, 1, "one fan-out for the batch")
	require.Equal(t, string(fanout.PathSearchBatch), attr(g[0], fanout.AttrPath).AsString())
	require.Len(t, named(spans, fanout.SpanLookup), 1, "the like_id lookup")
	scans := named(spans, shard.SpanScan)
	require.Len(t, scans, len(h.dc.Names))
	for _, s := range scans {
		require.EqualValues(t, len(qs), attr(s, shard.AttrQueries).AsInt64())
		require.EqualValues(t, 7, attr(s, shard.AttrK).AsInt64())
	}
}
