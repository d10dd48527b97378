package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

// TestMain checks that no test leaves goroutines behind: every test closes
// its HTTP server, its router (prober, warm-up, gRPC channels) and its dev
// cluster (gRPC servers, fault proxies). goleak retries for a while, which
// covers the brief tail of grpc transports and net/http connections
// shutting down after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testDim = 8

// envConfig shapes a test cluster and its router.
type envConfig struct {
	Metric      vector.Metric
	APIKey      string
	MaxInflight int
	Docs        int
	// Prober runs the background health prober. Off by default so that
	// replica health (and so shard_errors reasons) moves only with the
	// queries a test sends.
	Prober bool
	// ScanRateBytes is devcluster.Config.ScanRateBytes: 0, no scan-rate
	// measurement.
	ScanRateBytes int
}

// env is a dev cluster (3 shards × 2 replicas behind fault proxies), a
// router over it, and an HTTP server for the router's API.
type env struct {
	t   testing.TB
	dc  *devcluster.Cluster
	r   *app.Router
	srv *httptest.Server
}

func newEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	if cfg.Docs == 0 {
		cfg.Docs = 300
	}
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 2, Dim: testDim, Metric: cfg.Metric, Docs: cfg.Docs, Seed: 1,
		ScanRateBytes: cfg.ScanRateBytes})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	specs := dc.Specs()
	r, err := app.New(app.Config{Shards: specs, APIKey: cfg.APIKey, MaxInflight: cfg.MaxInflight,
		WarmupTimeout: 5 * time.Second, DisableProber: !cfg.Prober})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	srv := httptest.NewServer(r.API)
	t.Cleanup(srv.Close) // runs first: cleanups are LIFO
	e := &env{t: t, dc: dc, r: r, srv: srv}
	e.waitReady()
	return e
}

// waitReady polls /readyz until it answers 200: the router learns the
// dimension and metric from the shards during its warm-up.
func (e *env) waitReady() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := e.do(http.MethodGet, "/readyz", "", nil)
		if res.status == http.StatusOK {
			return
		}
		require.True(e.t, time.Now().Before(deadline), "router not ready after 10 s: %d %s", res.status, res.body)
		time.Sleep(20 * time.Millisecond)
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return string(r.body) }

// do sends one request to the router's API over HTTP.
func (e *env) do(method, path, body string, header map[string]string) response {
	e.t.Helper()
	return e.doReader(method, path, strings.NewReader(body), header)
}

func (e *env) doReader(method, path string, body io.Reader, header map[string]string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	require.NoError(e.t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) post(path string, body any) response {
	e.t.Helper()
	s, ok := body.(string)
	if !ok {
		b, err := json.Marshal(body)
		require.NoError(e.t, err)
		s = string(b)
	}
	return e.do(http.MethodPost, path, s, nil)
}

// requireError checks the exact JSON error shape: an object whose only
// member is "error" (plus "scatter_gather" when withSG), and whose error
// has exactly a non-empty string code and message. It returns the message.
func requireError(t testing.TB, res response, status int, code string, withSG bool) string {
	t.Helper()
	require.Equal(t, status, res.status, "body: %s", res.body)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(res.body, &top), "body: %s", res.body)
	want := []string{"error"}
	if withSG {
		want = append(want, "scatter_gather")
	}
	require.ElementsMatch(t, want, keys(top), "body: %s", res.body)
	var eb map[string]any
	require.NoError(t, json.Unmarshal(top["error"], &eb))
	require.ElementsMatch(t, []string{"code", "message"}, keys(eb), "body: %s", res.body)
	require.Equal(t, code, eb["code"], "body: %s", res.body)
	msg, ok := eb["message"].(string)
	require.True(t, ok, "message is not a string: %s", res.body)
	require.NotEmpty(t, msg)
	return msg
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// storeState is every replica's document count, [shard][replica].
func (e *env) storeState() [][]int {
	var out [][]int
	for _, reps := range e.dc.Replicas {
		var row []int
		for _, r := range reps {
			row = append(row, r.Store.Len())
		}
		out = append(out, row)
	}
	return out
}

// requireAbsent checks that no replica stores any of ids.
func (e *env) requireAbsent(ids ...string) {
	e.t.Helper()
	for _, reps := range e.dc.Replicas {
		for _, r := range reps {
			for _, id := range ids {
				_, ok := r.Store.Get(id)
				require.False(e.t, ok, "replica %s/%d stores %q", r.Shard, r.Index, id)
			}
		}
	}
}

// gather returns the router registry's metric families by name.
func (e *env) gather() map[string]*dto.MetricFamily {
	e.t.Helper()
	mfs, err := e.r.Registry.Gather()
	require.NoError(e.t, err)
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// shardRPCs is how many shard RPCs the router has recorded: the sample
// count summed over every trawl_shard_request_duration_seconds series.
func (e *env) shardRPCs() uint64 {
	e.t.Helper()
	var n uint64
	if mf := e.gather()["trawl_shard_request_duration_seconds"]; mf != nil {
		for _, m := range mf.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// counter reads one counter series; ok is false when it does not exist.
func (e *env) counter(name string, labels map[string]string) (float64, bool) {
	e.t.Helper()
	mf := e.gather()[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if matches(m.GetLabel(), labels) {
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// mustCounter reads a counter series that must exist.
func (e *env) mustCounter(name string, labels map[string]string) float64 {
	e.t.Helper()
	v, ok := e.counter(name, labels)
	require.True(e.t, ok, "no series %s%v", name, labels)
	return v
}

func matches(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, lp := range got {
		if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
			return false
		}
	}
	return true
}

// b64 encodes float32s as little-endian base64, as vector_b64 wants.
func b64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// vec makes a testDim-long vector, every element x.
func vec(x float64) []float64 {
	v := make([]float64, testDim)
	for i := range v {
		v[i] = x
	}
	return v
}

// f32 makes a testDim-long float32 vector, every element x.
func f32(x float32) []float32 {
	v := make([]float32, testDim)
	for i := range v {
		v[i] = x
	}
	return v
}

// compactJSON strips insignificant whitespace.
func compactJSON(t testing.TB, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, b))
	return buf.String()
}
