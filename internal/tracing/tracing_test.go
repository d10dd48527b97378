package tracing

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clearEnv unsets every OTEL_* variable the builder or the SDK reads, so the
// machine's environment cannot change a case.
func clearEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME",
		"OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_SDK_DISABLED",
	} {
		t.Setenv(k, "")
	}
}

func TestOffUnlessConfigured(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"nothing set", nil},
		// Protocol or service name alone name no exporter.
		{"protocol and service name only", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "x"}},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{"SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tr, err := FromEnv(context.Background(), ServiceRouter)
			require.NoError(t, err)
			require.False(t, tr.Enabled)
			require.IsType(t, noop.TracerProvider{}, tr.TracerProvider)
			require.NotNil(t, tr.Propagator)
			require.ElementsMatch(t, []string{"traceparent", "tracestate", "baggage"}, tr.Propagator.Fields())
			require.NoError(t, tr.Shutdown(context.Background()))
		})
	}
}

func TestBadProtocolIsAnError(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
	_, err := FromEnv(context.Background(), ServiceRouter)
	require.Error(t, err)
}

// receiver is an in-test OTLP collector: it keeps the service.name of every
// span it is sent, by either protocol.
type receiver struct {
	mu       sync.Mutex
	posts    int
	services []string
}

func (r *receiver) take(req *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	for _, rs := range req.GetResourceSpans() {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for range ss.GetSpans() {
				r.services = append(r.services, svc)
			}
		}
	}
}

func (r *receiver) got() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts, append([]string(nil), r.services...)
}

// httpReceiver serves OTLP/HTTP (protobuf) on 127.0.0.1.
func httpReceiver(t *testing.T, r *receiver) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		b, err := io.ReadAll(req.Body)
		var m coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &m)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.take(&m)
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type grpcCollector struct {
	coltrace.UnimplementedTraceServiceServer
	r *receiver
}

func (g grpcCollector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.r.take(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// grpcReceiver serves OTLP/gRPC on 127.0.0.1.
func grpcReceiver(t *testing.T, r *receiver) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(g, grpcCollector{r: r})
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return "http://" + ln.Addr().String()
}

func TestExportsWhenConfigured(t *testing.T) {
	for _, tc := range []struct {
		name     string
		protocol string
		serve    func(*testing.T, *receiver) string
		env      map[string]string
		service  string
		want     []string // service.name of each span received
		sampled  bool
	}{
		{name: "http/protobuf, default service name", protocol: "http/protobuf", serve: httpReceiver,
			service: ServiceShard, want: []string{"trawl-shard"}, sampled: true},
		{name: "grpc, default service name", protocol: "grpc", serve: grpcReceiver,
			service: ServiceRouter, want: []string{"trawl-router"}, sampled: true},
		{name: "OTEL_SERVICE_NAME overrides", protocol: "http/protobuf", serve: httpReceiver,
			env: map[string]string{"OTEL_SERVICE_NAME": "edge-router"}, service: ServiceRouter, want: []string{"edge-router"}, sampled: true},
		// The SDK reads the sampler from the environment itself.
		{name: "OTEL_TRACES_SAMPLER=always_off", protocol: "http/protobuf", serve: httpReceiver,
			env: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, service: ServiceRouter, want: nil, sampled: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			r := &receiver{}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tc.serve(t, r))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tr, err := FromEnv(context.Background(), tc.service)
			require.NoError(t, err)
			require.True(t, tr.Enabled)
			_, span := tr.TracerProvider.Tracer("test").Start(context.Background(), "one")
			require.Equal(t, tc.sampled, span.IsRecording())
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, tr.Shutdown(ctx), "shutdown flushes")
			posts, services := r.got()
			require.Equal(t, tc.want, services)
			if tc.sampled {
				require.Positive(t, posts)
			}
		})
	}
}
