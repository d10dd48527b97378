package loader

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoadSendsEveryRecordExactly(t *testing.T) {
	const n, dim = 95, 6
	rows := corpus(n, dim)
	for _, tc := range []struct {
		name    string
		src     func() Source
		id      func(i int) string
		payload func(i int) string
	}{
		{"npy", func() Source { return newNpySource(t, rows) }, strconv.Itoa, nil},
		{"fvecs", func() Source {
			b := fvecsBytes(rows)
			s, err := NewFvecs(bytes.NewReader(b), int64(len(b)))
			require.NoError(t, err)
			return s
		}, strconv.Itoa, nil},
		{"jsonl", func() Source { return NewJSONL(bytes.NewReader(jsonlBytes(t, rows))) },
			func(i int) string { return "j-" + strconv.Itoa(i) }, jsonlPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := startRouter(t, nil)
			var out bytes.Buffer
			cfg := testConfig(srv, newFakeClock(), &out)
			cfg.Batch, cfg.Concurrency = 7, 3
			sum, err := Run(context.Background(), tc.src(), cfg)
			require.NoError(t, err)

			// Batching: ceil(95/7) requests, each of at most 7 records, each
			// a contiguous run of the input.
			reqs := f.requests()
			require.Len(t, reqs, (n+6)/7)
			starts := map[string]bool{}
			for _, r := range reqs {
				require.LessOrEqual(t, len(r.Got), 7)
				starts[r.Got[0].ID] = true
			}
			for i := 0; i < n; i += 7 {
				require.True(t, starts[tc.id(i)], "a batch starts at record %d", i)
			}
			// Every record arrived exactly once, its vector and payload intact.
			byID := map[string]got{}
			for _, g := range f.received() {
				_, dup := byID[g.ID]
				require.False(t, dup, "id %s sent twice", g.ID)
				byID[g.ID] = g
			}
			require.Len(t, byID, n)
			for i := range n {
				g := byID[tc.id(i)]
				require.Equal(t, rows[i], g.Vector, "record %d", i)
				want := ""
				if tc.payload != nil {
					want = tc.payload(i)
				}
				require.Equal(t, want, g.Payload, "record %d: payload byte for byte", i)
			}
			require.Equal(t, "application/json", reqs[0].Header.Get("Content-Type"))
			require.Empty(t, reqs[0].Header.Get("Authorization"), "no key configured")

			require.True(t, sum.Complete)
			require.EqualValues(t, n, sum.Sent)
			require.EqualValues(t, n, sum.Acknowledged)
			require.Zero(t, sum.Failed)
			require.EqualValues(t, n, sum.Resume)
			require.Equal(t, len(reqs), sum.Batches)
			require.NotContains(t, out.String(), "resume with")
		})
	}
}

// A batch is cut at its count, before the router's body limit, and before
// an id it already holds; a record that could never fit is an error.
func TestBatchesAreCut(t *testing.T) {
	vec := le([]float32{1, 2, 3, 4})
	rec := func(id string, payload int) Record {
		r := Record{ID: id, Vector: vec}
		if payload > 0 {
			r.Payload = []byte(`{"p":"` + strings.Repeat("x", payload) + `"}`)
		}
		return r
	}
	entrySize := len(appendEntry(nil, rec("a", 100)))
	for _, tc := range []struct {
		name    string
		batch   int
		maxBody int
		recs    []Record
		want    [][]string // ids per batch
		err     string
	}{
		{"count", 2, 1 << 20, []Record{rec("a", 0), rec("b", 0), rec("c", 0), rec("d", 0), rec("e", 0)},
			[][]string{{"a", "b"}, {"c", "d"}, {"e"}}, ""},
		{"repeated id", 10, 1 << 20, []Record{rec("a", 0), rec("b", 0), rec("a", 0), rec("c", 0)},
			[][]string{{"a", "b"}, {"a", "c"}}, ""},
		{"body size", 10, bodySize(2, 2*entrySize), []Record{rec("a", 100), rec("b", 100), rec("c", 100)},
			[][]string{{"a", "b"}, {"c"}}, ""},
		{"record too big", 10, bodySize(1, entrySize), []Record{rec("a", 100), rec("b", 101), rec("c", 0)},
			[][]string{{"a"}}, `record 1 (id "b")`},
		{"id too long", 10, 1 << 20, []Record{rec("a", 0), rec(strings.Repeat("i", maxIDBytes+1), 0)},
			[][]string{{"a"}}, "record 1: id is 257 bytes"},
		{"empty id", 10, 1 << 20, []Record{rec("", 0)}, nil, "record 0: id is 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &loader{cfg: Config{Batch: tc.batch}, maxBody: tc.maxBody}
			ch := make(chan *batch, 10)
			end, err := l.produce(context.Background(), &sliceSource{recs: tc.recs}, ch)
			close(ch)
			var ids [][]string
			var next int64
			for b := range ch {
				require.Equal(t, next, b.start, "batches are contiguous")
				next += int64(len(b.ids))
				ids = append(ids, b.ids)
				require.LessOrEqual(t, len(b.body(all(len(b.ids)))), tc.maxBody)
			}
			require.Equal(t, tc.want, ids)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.EqualValues(t, -1, end)
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, len(tc.recs), end)
		})
	}
}

func all(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

type sliceSource struct {
	recs []Record
	next int
}

func (s *sliceSource) Next() (Record, error) {
	if s.next == len(s.recs) {
		return Record{}, io.EOF
	}
	s.next++
	return s.recs[s.next-1], nil
}

func (s *sliceSource) Skip(n int64) error { s.next += int(n); return nil }
func (s *sliceSource) Total() int64       { return int64(len(s.recs)) }

func TestConcurrencyIsBounded(t *testing.T) {
	const conc = 3
	var inflight, peak atomic.Int32
	var reached atomic.Bool
	_, srv := startRouter(t, func(w http.ResponseWriter, r *request, _ int) {
		now := inflight.Add(1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		// Hold the first requests until conc are in flight together, so
		// the bound is seen reached as well as never passed.
		if now >= conc {
			reached.Store(true)
		}
		for deadline := time.Now().Add(5 * time.Second); !reached.Load() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		// Out before the answer: a worker's next request comes after it.
		inflight.Add(-1)
		answerOK(w, r)
	})
	cfg := testConfig(srv, newFakeClock(), &bytes.Buffer{})
	cfg.Batch, cfg.Concurrency = 5, conc
	_, err := Run(context.Background(), newNpySource(t, corpus(4*conc*5, 2)), cfg)
	require.NoError(t, err)
	require.EqualValues(t, conc, peak.Load())
}

func TestRetriesWhatTheRouterAsksToHaveRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  func(w http.ResponseWriter, r *request)
		resent []string // ids of the second request
		wait   time.Duration
	}{
		{"503 Retry-After, odd ids unavailable", func(w http.ResponseWriter, r *request) {
			w.Header().Set("Retry-After", "1")
			answerIDs(w, r, http.StatusServiceUnavailable, "unavailable", func(id string) bool { n, _ := strconv.Atoi(id); return n%2 == 1 })
		}, []string{"1", "3"}, time.Second},
		{"429 overloaded, whole batch", func(w http.ResponseWriter, r *request) {
			w.Header().Set("Retry-After", "2")
			writeJSON(w, http.StatusTooManyRequests, res{"error": res{"code": "overloaded", "message": "over the limit"}})
		}, []string{"0", "1", "2", "3"}, 2 * time.Second},
		{"502 outcome unknown", func(w http.ResponseWriter, r *request) {
			answerIDs(w, r, http.StatusBadGateway, "outcome_unknown", func(id string) bool { return id == "2" })
		}, []string{"2"}, 0},
		{"408 body timeout", func(w http.ResponseWriter, r *request) {
			writeJSON(w, http.StatusRequestTimeout, res{"error": res{"code": "request_timeout", "message": "slow body"}})
		}, []string{"0", "1", "2", "3"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := startRouter(t, func(w http.ResponseWriter, r *request, n int) {
				if n == 0 {
					tc.first(w, r)
					return
				}
				answerOK(w, r)
			})
			clk := newFakeClock()
			var out bytes.Buffer
			cfg := testConfig(srv, clk, &out)
			cfg.Batch, cfg.Concurrency = 4, 1
			sum, err := Run(context.Background(), newNpySource(t, corpus(4, 2)), cfg)
			require.NoError(t, err)
			reqs := f.requests()
			require.Len(t, reqs, 2)
			var resent []string
			for _, g := range reqs[1].Got {
				resent = append(resent, g.ID)
			}
			require.Equal(t, tc.resent, resent)
			slept := clk.Slept()
			require.Len(t, slept, 1)
			if tc.wait > 0 {
				require.GreaterOrEqual(t, slept[0], tc.wait, "Retry-After honoured")
				require.LessOrEqual(t, slept[0], tc.wait+tc.wait/4, "with at most a quarter of jitter")
			} else {
				require.Positive(t, slept[0])
				require.LessOrEqual(t, slept[0], 250*time.Millisecond)
			}
			require.EqualValues(t, 4, sum.Acknowledged)
			require.EqualValues(t, 4, sum.Sent, "a record sent twice is sent once")
			require.Equal(t, 1, sum.Retries)
			require.Equal(t, 1, sum.Batches, "only the 2xx answer's latency is a write latency")
		})
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	f, srv := startRouter(t, func(w http.ResponseWriter, r *request, n int) {
		if r.Got[0].ID == "0" {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, res{"error": res{"code": "unavailable", "message": "no leader"}})
			return
		}
		answerOK(w, r)
	})
	clk := newFakeClock()
	var out bytes.Buffer
	cfg := testConfig(srv, clk, &out)
	cfg.Batch, cfg.Concurrency, cfg.MaxAttempts = 5, 1, 3
	sum, err := Run(context.Background(), newNpySource(t, corpus(20, 2)), cfg)
	var fe *FatalError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, `records 0..4: gave up after 3 attempts: 503 Service Unavailable: no leader`, err.Error())
	require.Len(t, f.requests(), 3, "the batch, twice more, and nothing after it")
	require.Len(t, clk.Slept(), 2)
	require.Zero(t, sum.Resume)
	require.Contains(t, out.String(), "resume with --resume-from 0\n")
}

func TestFatalAnswersStopTheLoad(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   any
		want   string
	}{
		{"400 names the record", http.StatusBadRequest,
			res{"error": res{"code": "invalid_argument", "message": "vectors[3]: vector has 2 dimensions, want 8"}},
			`records 10..19: router answered 400 Bad Request: vectors[3] (record 13, id "13"): vector has 2 dimensions, want 8`},
		{"401", http.StatusUnauthorized,
			res{"error": res{"code": "unauthenticated", "message": "missing or wrong API key: send Authorization: Bearer <key>"}},
			"records 10..19: router answered 401 Unauthorized: missing or wrong API key: send Authorization: Bearer <key>"},
		{"409 per id", http.StatusConflict,
			res{"results": []res{{"id": "10", "status": "error", "error": res{"code": "failed_precondition", "message": "shard list fingerprint mismatch"}}}},
			`records 10..19: router answered 409 Conflict: id "10": failed_precondition: shard list fingerprint mismatch`},
		{"413 not JSON", http.StatusRequestEntityTooLarge, "too big",
			`records 10..19: router answered 413 Request Entity Too Large: "too big"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := startRouter(t, func(w http.ResponseWriter, r *request, n int) {
				if r.Got[0].ID == "10" {
					writeJSON(w, tc.status, tc.body)
					return
				}
				answerOK(w, r)
			})
			var out bytes.Buffer
			cfg := testConfig(srv, newFakeClock(), &out)
			cfg.Concurrency = 1
			sum, err := Run(context.Background(), newNpySource(t, corpus(50, 2)), cfg)
			var fe *FatalError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.want, err.Error())
			require.Len(t, f.requests(), 2, "nothing is sent after a fatal answer")
			require.EqualValues(t, 10, sum.Resume)
			require.EqualValues(t, 10, sum.Acknowledged)
			require.Contains(t, out.String(), "resume with --resume-from 10\n")
		})
	}
}

func TestPerIDFailuresAreCountedAndReported(t *testing.T) {
	_, srv := startRouter(t, func(w http.ResponseWriter, r *request, n int) {
		switch r.Got[0].ID {
		case "10": // a 500 names its failed id: counted, not retried
			answerIDs(w, r, http.StatusInternalServerError, "internal", func(id string) bool { return id == "12" })
		case "20": // a 200 with an id missing from its results
			results := []res{}
			for _, g := range r.Got[1:] {
				results = append(results, res{"id": g.ID, "status": "ok"})
			}
			writeJSON(w, http.StatusOK, res{"results": results})
		default:
			answerOK(w, r)
		}
	})
	var out bytes.Buffer
	cfg := testConfig(srv, newFakeClock(), &out)
	cfg.Concurrency = 1
	sum, err := Run(context.Background(), newNpySource(t, corpus(40, 2)), cfg)
	require.EqualError(t, err, "2 records failed")
	require.EqualValues(t, 40, sum.Sent)
	require.EqualValues(t, 38, sum.Acknowledged)
	require.EqualValues(t, 2, sum.Failed)
	require.Len(t, sum.Errors, 2)
	require.Equal(t, `record 12 (id "12"): 500 internal: no good: 12`, sum.Errors[0])
	require.True(t, strings.HasPrefix(sum.Errors[1], `record 20 (id "20"): 200 with no result for this id`), sum.Errors[1])
	require.EqualValues(t, 12, sum.Resume, "the first failed record")
	require.Contains(t, out.String(), "failed: record 12 (id \"12\"): 500 internal: no good: 12\n")
	require.Contains(t, out.String(), "resume with --resume-from 12\n")
}

func TestResumeFromSkipsExactlyN(t *testing.T) {
	rows := corpus(30, 3)
	for _, tc := range []struct {
		name  string
		src   func() Source
		first string
	}{
		{"npy", func() Source { return newNpySource(t, rows) }, "13"},
		{"jsonl", func() Source { return NewJSONL(bytes.NewReader(jsonlBytes(t, rows))) }, "j-13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := startRouter(t, nil)
			var out bytes.Buffer
			cfg := testConfig(srv, newFakeClock(), &out)
			cfg.ResumeFrom = 13
			sum, err := Run(context.Background(), tc.src(), cfg)
			require.NoError(t, err)
			recv := f.received()
			require.Len(t, recv, 30-13)
			ids := map[string]bool{}
			for _, g := range recv {
				ids[g.ID] = true
			}
			require.True(t, ids[tc.first])
			for _, r := range f.requests() {
				if r.Got[0].ID == tc.first {
					require.Equal(t, rows[13], r.Got[0].Vector)
				}
			}
			require.EqualValues(t, 13, sum.Skipped)
			require.EqualValues(t, 17, sum.Acknowledged)
			require.EqualValues(t, 30, sum.Resume)
			require.Contains(t, out.String(), "skipped 13 (--resume-from)")
		})
	}
	t.Run("past the end", func(t *testing.T) {
		_, srv := startRouter(t, nil)
		cfg := testConfig(srv, newFakeClock(), &bytes.Buffer{})
		cfg.ResumeFrom = 31
		_, err := Run(context.Background(), newNpySource(t, rows), cfg)
		require.ErrorContains(t, err, "--resume-from 31")
	})
}

// Batches finish out of order; an interrupt waits for those in flight and
// the resume offset is the contiguous acknowledged prefix.
func TestInterruptPrintsTheResumeOffset(t *testing.T) {
	arrived := map[string]chan struct{}{"20": make(chan struct{}), "50": make(chan struct{})}
	release := map[string]chan int{"20": make(chan int), "50": make(chan int)}
	_, srv := startRouter(t, func(w http.ResponseWriter, r *request, _ int) {
		if ch, ok := arrived[r.Got[0].ID]; ok {
			close(ch)
			if st := <-release[r.Got[0].ID]; st != http.StatusOK {
				w.Header().Set("Retry-After", "1")
				writeJSON(w, st, res{"error": res{"code": "unavailable", "message": "no leader"}})
				return
			}
		}
		answerOK(w, r)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	cfg := Config{Router: srv.URL, Client: srv.Client(), Clock: newFakeClock(), Out: &out, Batch: 10, Concurrency: 2}
	type result struct {
		sum Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := Run(ctx, newNpySource(t, corpus(100, 2)), cfg)
		done <- result{sum, err}
	}()
	// One worker holds records 20..29; the other loads 30..49 past it and
	// then holds 50..59.
	<-arrived["20"]
	<-arrived["50"]
	cancel()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), interruptedNotice) }, 5*time.Second, time.Millisecond)
	release["20"] <- http.StatusOK                 // in flight at the interrupt: waited for, acknowledged
	release["50"] <- http.StatusServiceUnavailable // not retried after an interrupt
	r := <-done
	require.ErrorIs(t, r.err, context.Canceled)
	require.ErrorContains(t, r.err, "load interrupted")
	require.EqualValues(t, 50, r.sum.Acknowledged)
	require.EqualValues(t, 60, r.sum.Sent)
	require.EqualValues(t, 50, r.sum.Resume)
	require.False(t, r.sum.Complete)
	require.True(t, strings.HasSuffix(out.String(), "resume with --resume-from 50\n"), out.String())
}

// An interrupt after the last batch went out, answered ok, loses nothing.
func TestInterruptAfterTheLastBatchIsComplete(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	_, srv := startRouter(t, func(w http.ResponseWriter, r *request, _ int) {
		if r.Got[0].ID == "10" {
			close(arrived)
			<-release
		}
		answerOK(w, r)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testConfig(srv, newFakeClock(), &bytes.Buffer{})
	src := &eofSource{Source: newNpySource(t, corpus(20, 2)), eof: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, src, cfg)
		done <- err
	}()
	<-arrived
	<-src.eof
	cancel()
	close(release)
	require.NoError(t, <-done)
}

// eofSource says when its input has been read to the end.
type eofSource struct {
	Source
	eof chan struct{}
}

func (s *eofSource) Next() (Record, error) {
	rec, err := s.Source.Next()
	if err == io.EOF {
		close(s.eof)
	}
	return rec, err
}

func TestPlainProgressLines(t *testing.T) {
	clk := newFakeClock()
	_, srv := startRouter(t, func(w http.ResponseWriter, r *request, _ int) {
		clk.Advance(time.Second) // every batch of 10 takes a second
		answerOK(w, r)
	})
	for _, tc := range []struct {
		name string
		src  func() Source
		skip int64
		want []string
	}{
		{"known total: every tenth", func() Source { return newNpySource(t, corpus(50, 2)) }, 0, []string{
			"loaded 10/50 (20.0%) 10 vectors/s ETA 4s",
			"loaded 20/50 (40.0%) 10 vectors/s ETA 3s",
			"loaded 30/50 (60.0%) 10 vectors/s ETA 2s",
			"loaded 40/50 (80.0%) 10 vectors/s ETA 1s",
			"loaded 50/50 (100.0%) 10 vectors/s",
		}},
		{"resumed", func() Source { return newNpySource(t, corpus(50, 2)) }, 25, []string{
			"loaded 35/50 (70.0%) 10 vectors/s ETA 2s",
			"loaded 45/50 (90.0%) 10 vectors/s ETA 1s",
			"loaded 50/50 (100.0%) 8 vectors/s",
		}},
		{"unknown total: every 2 s", func() Source { return NewJSONL(bytes.NewReader(jsonlBytes(t, corpus(50, 2)))) }, 0, []string{
			"loaded 20 10 vectors/s",
			"loaded 40 10 vectors/s",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := testConfig(srv, clk, &out)
			cfg.Concurrency, cfg.ResumeFrom = 1, tc.skip
			_, err := Run(context.Background(), tc.src(), cfg)
			require.NoError(t, err)
			var progress []string
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(l, "loaded ") {
					progress = append(progress, l)
				}
			}
			require.Equal(t, tc.want, progress)
		})
	}
}

func TestSummary(t *testing.T) {
	clk := newFakeClock()
	_, srv := startRouter(t, func(w http.ResponseWriter, r *request, n int) {
		// Batch n takes (n+1)·10 ms: p50 of 1..10 is 50 ms, p99 100 ms.
		clk.Advance(time.Duration(n+1) * 10 * time.Millisecond)
		if r.Got[0].ID == "30" {
			answerIDs(w, r, http.StatusOK, "internal", func(id string) bool { return id == "31" || id == "33" })
			return
		}
		answerOK(w, r)
	})
	var out bytes.Buffer
	cfg := testConfig(srv, clk, &out)
	cfg.Concurrency = 1
	sum, err := Run(context.Background(), newNpySource(t, corpus(100, 2)), cfg)
	require.EqualError(t, err, "2 records failed")
	require.Equal(t, Summary{
		Total: 100, Sent: 100, Acknowledged: 98, Failed: 2,
		Errors:  []string{`record 31 (id "31"): 200 internal: no good: 31`, `record 33 (id "33"): 200 internal: no good: 33`},
		Elapsed: 550 * time.Millisecond, Batches: 10, P50: 50 * time.Millisecond, P99: 100 * time.Millisecond,
		Resume: 31,
	}, sum)
	require.InDelta(t, 98/0.55, sum.Rate(), 1e-9)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, []string{
		"sent 100, acknowledged 98, failed 2 in 550ms (178.2 vectors/s)",
		"write latency per batch: p50 50ms p99 100ms (10 batches, 0 retries)",
		`failed: record 31 (id "31"): 200 internal: no good: 31`,
		`failed: record 33 (id "33"): 200 internal: no good: 33`,
		"resume with --resume-from 31",
	}, lines[len(lines)-5:])
}

func TestPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		in       []time.Duration
		p50, p99 time.Duration
	}{
		{nil, 0, 0},
		{ms(7), 7 * time.Millisecond, 7 * time.Millisecond},
		{ms(3, 1, 2), 2 * time.Millisecond, 3 * time.Millisecond},
		{ms(4, 3, 2, 1), 2 * time.Millisecond, 4 * time.Millisecond},
	} {
		p50, p99 := percentiles(tc.in)
		require.Equal(t, tc.p50, p50, "%v", tc.in)
		require.Equal(t, tc.p99, p99, "%v", tc.in)
	}
}

func TestAPIKeyAndTLSCA(t *testing.T) {
	f := &fakeRouter{t: t}
	srv := httptest.NewUnstartedServer(f)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake refused below
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte("s3cret\n"), 0o600))
	key, err := ReadAPIKey(keyFile)
	require.NoError(t, err)

	client, err := NewClient(ca, 2)
	require.NoError(t, err)
	defer client.CloseIdleConnections()
	cfg := Config{Router: srv.URL, Client: client, APIKey: key, Clock: newFakeClock(), Batch: 10}
	_, err = Run(context.Background(), newNpySource(t, corpus(25, 2)), cfg)
	require.NoError(t, err)
	require.Len(t, f.requests(), 3)
	for _, r := range f.requests() {
		require.Equal(t, "Bearer s3cret", r.Header.Get("Authorization"))
	}

	// Without the CA the router is not trusted: fatal at once, not retried.
	plain, err := NewClient("", 2)
	require.NoError(t, err)
	defer plain.CloseIdleConnections()
	cfg.Client = plain
	_, err = Run(context.Background(), newNpySource(t, corpus(25, 2)), cfg)
	var fe *FatalError
	require.ErrorAs(t, err, &fe)
	require.ErrorContains(t, err, "certificate")
	require.ErrorContains(t, err, "--tls-ca")
	require.Len(t, f.requests(), 3, "nothing reached the router")
}

func TestConfigFilesAndBounds(t *testing.T) {
	dir := t.TempDir()
	_, err := NewClient(filepath.Join(dir, "missing.pem"), 1)
	require.ErrorIs(t, err, os.ErrNotExist)
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	_, err = NewClient(notPEM, 1)
	require.ErrorContains(t, err, "no PEM certificate")
	empty := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	_, err = ReadAPIKey(empty)
	require.ErrorContains(t, err, "empty")

	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Router: "localhost:8080"}, "want http://HOST:PORT"},
		{Config{Router: "ftp://x"}, "want http://HOST:PORT"},
		{Config{Router: "http://x", Batch: MaxBatch + 1}, fmt.Sprintf("--batch 257: want 1..%d", MaxBatch)},
		{Config{Router: "http://x", Batch: -1}, "--batch -1"},
		{Config{Router: "http://x", Concurrency: MaxConcurrency + 1}, "--concurrency 65: want 1..64"},
		{Config{Router: "http://x", ResumeFrom: -1}, "--resume-from -1"},
		{Config{Router: "http://x", Rate: -5}, "--rate -5"},
	} {
		_, err := Run(context.Background(), &sliceSource{}, tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
}

// syncBuffer is a bytes.Buffer safe to read while a load writes to it.
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

// With Collection set the records go to that collection's vectors route,
// the name escaped; without, to the default collection's /v1/vectors.
func TestCollectionPicksTheRoute(t *testing.T) {
	for _, tc := range []struct{ collection, path string }{
		{"", "/v1/vectors"},
		{"notes", "/v1/collections/notes/vectors"},
		{"my_docs.v2-en", "/v1/collections/my_docs.v2-en/vectors"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			f := &fakeRouter{t: t, path: tc.path}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			var out bytes.Buffer
			cfg := testConfig(srv, newFakeClock(), &out)
			cfg.Collection = tc.collection
			_, err := Run(context.Background(), newNpySource(t, corpus(12, 4)), cfg)
			require.NoError(t, err, out.String())
			require.Len(t, f.received(), 12)
		})
	}
	require.Equal(t, "http://r:1/v1/collections/a%2Fb/vectors", vectorsURL("http://r:1/", "a/b"))
}

// A rate spaces the batches so that no second carries more than rate
// records past the first batch: 95 records in batches of 10 at 20 a
// second sleep 8 × 0.5 s for the full batches after the first and 0.25 s
// for the last 5 — on the load's clock, so exactly.
func TestRateSpacesTheBatches(t *testing.T) {
	rows := make([][]float32, 95)
	for i := range rows {
		rows[i] = []float32{float32(i), 1}
	}
	f, srv := startRouter(t, nil)
	clk := newFakeClock()
	cfg := testConfig(srv, clk, &bytes.Buffer{})
	cfg.Rate = 20
	sum, err := Run(context.Background(), newNpySource(t, rows), cfg)
	require.NoError(t, err)
	require.EqualValues(t, 95, sum.Acknowledged)
	require.Len(t, f.received(), 95)
	var slept time.Duration
	for _, d := range clk.Slept() {
		slept += d
	}
	require.Equal(t, 4250*time.Millisecond, slept)
}
