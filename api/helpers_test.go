package api_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/internal/apitest"
	"github.com/trawl-search/trawl/internal/devcluster"
)

// TestMain checks that no test leaves goroutines behind: every test closes
// its HTTP server, its router (prober, warm-up, gRPC channels) and its dev
// cluster (gRPC servers, fault proxies). goleak retries for a while, which
// covers the brief tail of grpc transports and net/http connections
// shutting down after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testDim = apitest.Dim

// testDeadline is the routers' default deadline in these tests.
const testDeadline = apitest.Deadline

// envConfig shapes a test cluster and its router.
type envConfig = apitest.Config

// env is apitest's cluster and router, answering in this package's
// response.
type env struct {
	*apitest.Env
	t  testing.TB
	dc *devcluster.Cluster
}

func newEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	e := apitest.New(t, cfg)
	return &env{Env: e, t: t, dc: e.DC}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return string(r.body) }

func fromAPITest(r apitest.Response) response {
	return response{status: r.Status, header: r.Header, body: r.Body}
}

// do sends one request to the router's API over HTTP.
func (e *env) do(method, path, body string, header map[string]string) response {
	e.t.Helper()
	return fromAPITest(e.Do(method, path, body, header))
}

func (e *env) doReader(method, path string, body io.Reader, header map[string]string) response {
	e.t.Helper()
	return fromAPITest(e.DoReader(method, path, body, header))
}

func (e *env) post(path string, body any) response {
	e.t.Helper()
	return fromAPITest(e.Post(path, body))
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
	require.ElementsMatch(t, want, apitest.Keys(top), "body: %s", res.body)
	var eb map[string]any
	require.NoError(t, json.Unmarshal(top["error"], &eb))
	require.ElementsMatch(t, []string{"code", "message"}, apitest.Keys(eb), "body: %s", res.body)
	require.Equal(t, code, eb["code"], "body: %s", res.body)
	msg, ok := eb["message"].(string)
	require.True(t, ok, "message is not a string: %s", res.body)
	require.NotEmpty(t, msg)
	return msg
}

// counter reads one counter series; ok is false when it does not exist.
func (e *env) counter(name string, labels map[string]string) (float64, bool) {
	e.t.Helper()
	mf := e.Gather()[name]
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
