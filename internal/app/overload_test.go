package app_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

// requireOverloadRun skips the overload tests unless TRAWL_OVERLOAD_TEST is
// set, as `make test-overload` does: they saturate both cores on purpose,
// and beside the rest of the suite (go test runs packages in parallel) they
// would measure the other packages' tests, not admission.
func requireOverloadRun(t *testing.T) {
	t.Helper()
	if os.Getenv("TRAWL_OVERLOAD_TEST") == "" {
		t.Skip("saturates the machine: run with make test-overload (TRAWL_OVERLOAD_TEST=1)")
	}
}

// overloadHarness is a router over an in-process cluster of 12 000
// 1536-D documents (the shape the overload was first measured on), scanned
// with the machine's best kernel (assembly, so the race detector does not
// slow the scans: the router's own work does the saturating too).
//
// Under load at 4x capacity router, shards and this test's client share
// one race-instrumented process on the machine's cores: a failure's
// message says how long the client waited for a connection, so a late
// answer can be told from one the router made late.
func overloadHarness(t *testing.T, cfg app.Config) *harness {
	t.Helper()
	k, err := vector.Select("")
	require.NoError(t, err)
	return startWith(t, devcluster.Config{Docs: 12000, Seed: 7, Kernel: k}, cfg)
}

// b64Query is a k=10 search body with its vector as vector_b64, the
// compact form bulk clients send (decoding 1536 JSON numbers would make
// the router's own decoding the bottleneck under the race detector).
func b64Query(t *testing.T, v []float32) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"vector_b64": base64.StdEncoding.EncodeToString(vector.EncodeLE(v)), "k": 10})
	require.NoError(t, err)
	return b
}

type shot struct {
	id   string        // its X-Request-Id
	at   time.Duration // since the run started
	code int
	took time.Duration
	// conn is how long the client waited for a connection, and fresh
	// whether it had to dial one (no idle connection to reuse).
	conn     time.Duration
	fresh    bool
	degraded bool
	retry    string
	errCode  string
	err      error
}

// openLoop sends n searches, one every interval whatever the answers do
// (open loop: slow answers cannot hide queueing), and returns them in
// order once all are answered.
func openLoop(c *http.Client, url string, body []byte, n int, interval time.Duration) []shot {
	shots := make([]shot, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() { shots[i] = fire(c, url, body, start) })
	}
	wg.Wait()
	return shots
}

// fire sends one search and describes its answer; safe in goroutines.
func fire(c *http.Client, url string, body []byte, start time.Time) shot {
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := shot{id: hex.EncodeToString(id[:]), at: time.Since(start)}
	t0 := time.Now()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/search?deadline_ms=300", strings.NewReader(string(body)))
	if err != nil {
		s.err = err
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", s.id)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) { s.conn, s.fresh = time.Since(t0), !ci.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		s.err = err
		return s
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.took, s.code, s.retry = time.Since(t0), resp.StatusCode, resp.Header.Get("Retry-After")
	if err != nil {
		s.err = err
		return s
	}
	var a struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		ScatterGather struct {
			Degraded bool `json:"degraded"`
		} `json:"scatter_gather"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		s.err = fmt.Errorf("%w: %s", err, raw)
		return s
	}
	s.degraded, s.errCode = a.ScatterGather.Degraded, a.Error.Code
	return s
}

// warmConnections leaves n idle connections to url in c's pool, opened
// with concurrent GET /healthz requests (outside admission).
func warmConnections(t *testing.T, c *http.Client, url string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			resp, err := c.Get(url + "/healthz")
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// accessTimes keeps the router's own time for each request, read from its
// access log (the "http" records: request_id and latency_ms, the time from
// the request reaching the router's handler to its answer written).
type accessTimes struct {
	mu   sync.Mutex
	took map[string]time.Duration
}

func newAccessTimes() *accessTimes { return &accessTimes{took: map[string]time.Duration{}} }

func (a *accessTimes) Enabled(context.Context, slog.Level) bool { return true }
func (a *accessTimes) WithAttrs([]slog.Attr) slog.Handler       { return a }
func (a *accessTimes) WithGroup(string) slog.Handler            { return a }

func (a *accessTimes) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "http" {
		return nil
	}
	var id string
	var ms float64
	r.Attrs(func(at slog.Attr) bool {
		switch at.Key {
		case "request_id":
			id = at.Value.String()
		case "latency_ms":
			ms = at.Value.Float64()
		}
		return true
	})
	a.mu.Lock()
	a.took[id] = time.Duration(ms * float64(time.Millisecond))
	a.mu.Unlock()
	return nil
}

func (a *accessTimes) get(id string) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, ok := a.took[id]
	return d, ok
}

// Offered several times the measured capacity, open loop (a fixed arrival
// rate, so slow answers cannot hide queueing), the router keeps answering
// complete queries, refuses the excess with 429 and Retry-After, answers
// every admitted query within its deadline plus slack, and serves normally
// once the load stops.
//
// "Within its deadline" is the router's own time for each answer, from its
// access log: the router, nine replicas and this client are one
// race-instrumented process at 4x capacity on two cores, so the client
// reads some finished answers hundreds of milliseconds late, for want of a
// core, not because the router was late (see docs/performance.md). The
// client's view is logged beside it.
func TestOverloadKeepsCompleteAnswersFlowing(t *testing.T) {
	requireOverloadRun(t)
	access := newAccessTimes()
	h := overloadHarness(t, app.Config{Logger: slog.New(access)})
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	t.Cleanup(c.CloseIdleConnections)
	body := b64Query(t, h.dc.Corpus[0].Vector)

	// Capacity: four closed-loop clients for a second, or until they have
	// 20 complete answers (10 s at most): on a machine other work loads, a
	// second could end before the first answer, and a rate from a handful
	// is noise.
	var mu sync.Mutex
	done := 0
	t0 := time.Now()
	measuring := func() bool {
		mu.Lock()
		defer mu.Unlock()
		el := time.Since(t0)
		return el < 10*time.Second && (el < time.Second || done < 20)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for measuring() {
				if s := fire(c, h.srv.URL, body, t0); s.err == nil && s.code == http.StatusOK && !s.degraded {
					mu.Lock()
					done++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	capacity := float64(done) / time.Since(t0).Seconds()
	require.Positive(t, capacity)

	// The open loop needs about a hundred connections at once. Dialled
	// during it, in this starved process, each took 150-430 ms, and the
	// queries they carried reached the router late and together: the
	// client's burst, not the router's. Open them first, on a probe that
	// admission does not see.
	warmConnections(t, c, h.srv.URL, 128)

	// Four times that, open loop, for three seconds.
	const (
		factor   = 4
		duration = 3 * time.Second
		deadline = 300 * time.Millisecond
		slack    = 300 * time.Millisecond
	)
	rate := factor * capacity
	n := int(rate * duration.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	shots := openLoop(c, h.srv.URL, body, n, interval)

	buckets := make([]int, int(duration/(500*time.Millisecond))+1)
	complete, refused, degraded := 0, 0, 0
	clientLate, worstRouter, worstClient := 0, time.Duration(0), time.Duration(0)
	for i, s := range shots {
		require.NoError(t, s.err, "shot %d", i)
		switch s.code {
		case http.StatusTooManyRequests:
			refused++
			require.Equal(t, "overloaded", s.errCode)
			require.Equal(t, "1", s.retry)
		case http.StatusOK, http.StatusServiceUnavailable:
			took, ok := access.get(s.id)
			require.True(t, ok, "shot %d: no access log record for request %s", i, s.id)
			worstRouter, worstClient = max(worstRouter, took), max(worstClient, s.took)
			if took > deadline+slack {
				t.Errorf("shot %d at %s: the router answered an admitted query after %s, past its deadline (the client saw %s)", i, s.at, took, s.took)
			}
			if s.took > deadline+slack {
				clientLate++
				t.Logf("shot %d at %s: the client read its answer after %s, the router's own time %s (waited %s for a connection, new: %t)",
					i, s.at, s.took, took, s.conn, s.fresh)
			}
			if s.code == http.StatusOK && !s.degraded {
				complete++
				buckets[min(int(s.at/(500*time.Millisecond)), len(buckets)-1)]++
			} else {
				degraded++
			}
		default:
			t.Fatalf("shot %d: status %d", i, s.code)
		}
	}
	t.Logf("capacity %.0f q/s; offered %.0f q/s for %s: %d complete (%.0f/s, %.0f%% of capacity), %d refused, %d degraded; limit now %d",
		capacity, rate, duration, complete, float64(complete)/duration.Seconds(),
		100*float64(complete)/duration.Seconds()/capacity, refused, degraded, h.r.Limiter.Limit())
	t.Logf("admitted answers: slowest %s by the router's own time, %s as the client read it; %d read by the client past deadline + slack",
		worstRouter, worstClient, clientLate)
	require.Positive(t, refused, "the excess is refused")
	for i, b := range buckets[:len(buckets)-1] {
		require.Positive(t, b, "no complete answer in the half second from %s", time.Duration(i)*500*time.Millisecond)
	}

	// The load gone, queries are answered as before.
	require.Eventually(t, func() bool {
		s := fire(c, h.srv.URL, body, start)
		return s.err == nil && s.code == http.StatusOK && !s.degraded
	}, 5*time.Second, 10*time.Millisecond)
	for range 20 {
		s := fire(c, h.srv.URL, body, start)
		require.NoError(t, s.err)
		require.Equal(t, http.StatusOK, s.code)
		require.False(t, s.degraded)
	}
}

// Hundreds of clients that send a search's headers and then trickle its
// body hold no query slot: real queries are answered, complete and in time,
// throughout; the trickling ones are answered 408 after --body-timeout and
// their connections closed.
func TestTricklingBodiesCannotHoldTheRouter(t *testing.T) {
	requireOverloadRun(t)
	const (
		trickers    = 300
		bodyTimeout = 2 * time.Second
	)
	h := overloadHarness(t, app.Config{BodyTimeout: bodyTimeout, MaxInflight: 64})
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	type trickled struct {
		status string
		after  time.Duration
		err    error
	}
	out := make(chan trickled, trickers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range trickers {
		wg.Go(func() {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				out <- trickled{err: err}
				return
			}
			defer conn.Close()
			t0 := time.Now()
			_, err = fmt.Fprintf(conn, "POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
			if err != nil {
				out <- trickled{err: err}
				return
			}
			// One byte every 200 ms until the router gives up on us.
			go func() {
				tk := time.NewTicker(200 * time.Millisecond)
				defer tk.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tk.C:
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(bodyTimeout + 10*time.Second))
			line, err := bufio.NewReader(conn).ReadString('\n')
			out <- trickled{status: strings.TrimSpace(line), after: time.Since(t0), err: err}
		})
	}
	c := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	body := b64Query(t, h.dc.Corpus[0].Vector)
	t0 := time.Now()
	real := 0
	for time.Since(t0) < bodyTimeout {
		s := fire(c, h.srv.URL, body, t0)
		require.NoError(t, s.err)
		require.Equal(t, http.StatusOK, s.code, "a real query while %d bodies trickle", trickers)
		require.False(t, s.degraded)
		require.LessOrEqual(t, s.took, 300*time.Millisecond+200*time.Millisecond)
		real++
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	close(stop)
	close(out)
	n := 0
	for tr := range out {
		require.NoError(t, tr.err)
		require.Equal(t, "HTTP/1.1 408 Request Timeout", tr.status)
		require.GreaterOrEqual(t, tr.after, bodyTimeout)
		n++
	}
	require.Equal(t, trickers, n)
	t.Logf("%d real queries answered complete while %d bodies trickled; every trickler got 408", real, trickers)
}
