package loader

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock moves only when told to, or when a load sleeps on it (at once,
// so retry delays cost a test nothing and are recorded exactly).
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.slept = append(c.slept, d)
	c.mu.Unlock()
	return nil
}

func (c *fakeClock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// got is one record as the router decoded it.
type got struct {
	ID      string
	Vector  []float32
	Payload string // verbatim bytes; "" for none
}

// entry is one element of POST /v1/vectors' "vectors", decoded the way the
// router decodes it (api/decode.go): unknown fields refused.
type entry struct {
	ID        string          `json:"id"`
	Vector    []float32       `json:"vector"`
	VectorB64 *string         `json:"vector_b64"`
	Payload   json.RawMessage `json:"payload"`
}

// request is what the fake router saw of one POST.
type request struct {
	Header  http.Header
	Entries []entry
	Got     []got
}

// fakeRouter is POST /v1/vectors: it decodes every request strictly,
// records it, and answers with answer (nil: every id ok).
type fakeRouter struct {
	t      *testing.T
	answer func(w http.ResponseWriter, r *request, n int) // n counts requests from 0
	// path is the route it serves: /v1/vectors if empty.
	path string

	mu   sync.Mutex
	reqs []*request
}

func (f *fakeRouter) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	path := f.path
	if path == "" {
		path = "/v1/vectors"
	}
	if hr.Method != http.MethodPost || hr.URL.Path != path {
		http.Error(w, "wrong route "+hr.Method+" "+hr.URL.Path, http.StatusNotFound)
		return
	}
	var body struct {
		Vectors []entry `json:"vectors"`
	}
	dec := json.NewDecoder(hr.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		f.t.Errorf("fake router: bad body: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r := &request{Header: hr.Header.Clone(), Entries: body.Vectors}
	for _, e := range body.Vectors {
		if e.Vector != nil || e.VectorB64 == nil {
			f.t.Errorf("fake router: id %q: want vector_b64 only", e.ID)
		}
		raw, err := base64.StdEncoding.DecodeString(*e.VectorB64)
		if err != nil || len(raw)%4 != 0 {
			f.t.Errorf("fake router: id %q: bad vector_b64 %q", e.ID, *e.VectorB64)
		}
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		r.Got = append(r.Got, got{ID: e.ID, Vector: v, Payload: string(e.Payload)})
	}
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if f.answer != nil {
		f.answer(w, r, n)
		return
	}
	answerOK(w, r)
}

func (f *fakeRouter) requests() []*request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*request(nil), f.reqs...)
}

// received is every record the router was sent, in request order.
func (f *fakeRouter) received() []got {
	var out []got
	for _, r := range f.requests() {
		out = append(out, r.Got...)
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type res = map[string]any

// answerOK answers as the router does when every write committed.
func answerOK(w http.ResponseWriter, r *request) {
	results := make([]res, len(r.Entries))
	for i, e := range r.Entries {
		results[i] = res{"id": e.ID, "status": "ok"}
	}
	writeJSON(w, http.StatusOK, res{"results": results})
}

// answerIDs answers status with the ids in bad failed as code, the rest ok.
func answerIDs(w http.ResponseWriter, r *request, status int, code string, bad func(id string) bool) {
	results := make([]res, len(r.Entries))
	for i, e := range r.Entries {
		results[i] = res{"id": e.ID, "status": "ok"}
		if bad(e.ID) {
			results[i] = res{"id": e.ID, "status": "error", "error": res{"code": code, "message": "no good: " + e.ID}}
		}
	}
	writeJSON(w, status, res{"results": results})
}

func startRouter(t *testing.T, answer func(http.ResponseWriter, *request, int)) (*fakeRouter, *httptest.Server) {
	f := &fakeRouter{t: t, answer: answer}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

// corpus is n vectors of dim, each value distinct.
func corpus(n, dim int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, dim)
		for j := range out[i] {
			out[i][j] = float32(i) + float32(j)/float32(dim) - 0.5
		}
	}
	return out
}

func npyBytes(version byte, rows [][]float32) []byte {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", len(rows), len(rows[0]))
	pre := 10
	if version > 1 {
		pre = 12
	}
	for (pre+len(header)+1)%64 != 0 {
		header += " "
	}
	header += "\n"
	b := []byte{0x93, 'N', 'U', 'M', 'P', 'Y', version, 0}
	if version == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(header)))
	}
	b = append(b, header...)
	for _, r := range rows {
		for _, f := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

func fvecsBytes(rows [][]float32) []byte {
	var b []byte
	for _, r := range rows {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r)))
		for _, f := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

// jsonlBytes writes rows as JSON Lines with ids "j-<i>" and, for every
// third, a payload written with odd spacing so that verbatim is tested.
func jsonlBytes(t *testing.T, rows [][]float32) []byte {
	var sb strings.Builder
	for i, r := range rows {
		v, err := json.Marshal(r)
		require.NoError(t, err)
		fmt.Fprintf(&sb, `{"id": "j-%d", "vector": %s`, i, v)
		if p := jsonlPayload(i); p != "" {
			fmt.Fprintf(&sb, `, "payload": %s`, p)
		}
		sb.WriteString("}\n")
		if i%10 == 0 {
			sb.WriteString("\n") // blank lines are not records
		}
	}
	return []byte(sb.String())
}

func jsonlPayload(i int) string {
	if i%3 != 0 {
		return ""
	}
	return fmt.Sprintf(`{"title":  "doc <%d> & co",  "n": %d, "tags": ["a", "b"], "meta": {"draft": false}}`, i, i)
}

func newNpySource(t *testing.T, rows [][]float32) Source {
	s, err := NewNpy(bytes.NewReader(npyBytes(1, rows)))
	require.NoError(t, err)
	return s
}

// testConfig is a Config for srv on the fake clock, writing to out.
func testConfig(srv *httptest.Server, clk *fakeClock, out *bytes.Buffer) Config {
	return Config{Router: srv.URL, Client: srv.Client(), Clock: clk, Out: out, Batch: 10, Concurrency: 2}
}

func jsonValid(b []byte) bool { return json.Valid(b) }

func jsonUnmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
