package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/trawl-search/trawl/bench/internal/procstat"
	"github.com/trawl-search/trawl/bench/internal/promtext"
)

// CounterNames are the router counters whose change over a run is
// reported: the features whose effect the baseline comparison shows.
var CounterNames = []string{
	"trawl_scatter_hedges_total",
	"trawl_scatter_failovers_total",
	"trawl_admission_rejected_total",
	"trawl_scatter_degraded_total",
	"trawl_scatter_queries_total",
	// Every shard RPC the router made (each attempt: first choice,
	// failover, hedge), so hedges can be given as a share of them.
	"trawl_shard_request_duration_seconds_count",
}

// Target is a router and how to ask it.
type Target struct {
	// Base is the router's URL, e.g. http://127.0.0.1:8080.
	Base string
	// DeadlineMS, when positive, is sent as ?deadline_ms; 0 leaves the
	// router's default.
	DeadlineMS int
	// APIKey, when set, is sent as a Bearer token.
	APIKey string
	// Timeout is the client's own limit on one request.
	Timeout time.Duration
	// NoMetrics skips reading /metrics before and after (a router behind
	// a proxy that hides it).
	NoMetrics bool
}

func (t Target) searchURL() string {
	u := strings.TrimRight(t.Base, "/") + "/v1/search"
	if t.DeadlineMS > 0 {
		u += fmt.Sprintf("?deadline_ms=%d", t.DeadlineMS)
	}
	return u
}

func (t Target) header() http.Header {
	h := http.Header{"Content-Type": []string{"application/json"}}
	if t.APIKey != "" {
		h.Set("Authorization", "Bearer "+t.APIKey)
	}
	return h
}

func (t Target) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return 10 * time.Second
}

// LateSlack is what the router may take past a query's deadline
// (DESIGN.md: deadline + 10 ms, measured; tests allow 50 ms on a loaded
// 2-core machine): a slower answer counts as late.
const LateSlack = 50 * time.Millisecond

func (t Target) newTally() *Tally {
	tl := NewTally()
	if t.DeadlineMS > 0 {
		tl.LateAfter(time.Duration(t.DeadlineMS)*time.Millisecond + LateSlack)
	}
	return tl
}

// scrape reads the counters, or nothing when NoMetrics.
func (t Target) scrape(ctx context.Context) (map[string]float64, error) {
	if t.NoMetrics {
		return nil, nil
	}
	c := &http.Client{Timeout: 5 * time.Second}
	return promtext.Scrape(ctx, c, strings.TrimRight(t.Base, "/")+"/metrics")
}

// The router histograms whose quantiles over a run tell where a
// refusal's time went: the router's own handling of each refusal, and how
// long its goroutines waited runnable for a thread.
const (
	refusalHist = "trawl_admission_refusal_duration_seconds_bucket"
	schedHist   = "go_sched_latencies_seconds_bucket"
)

// histograms reads the bucket series of refusalHist and schedHist, or
// nothing when NoMetrics.
func (t Target) histograms(ctx context.Context) (map[string][]promtext.Sample, error) {
	if t.NoMetrics {
		return nil, nil
	}
	c := &http.Client{Timeout: 5 * time.Second}
	out := map[string][]promtext.Sample{}
	for _, name := range []string{refusalHist, schedHist} {
		ss, err := promtext.ScrapeSamples(ctx, c, strings.TrimRight(t.Base, "/")+"/metrics", name)
		if err != nil {
			return nil, err
		}
		out[name] = ss
	}
	return out, nil
}

// withCounters runs f between two scrapes and puts the deltas in its
// summary, with the router's own refusal and scheduling quantiles over
// the run and this process's own wait for a core (the load generator's
// share of the latencies it measures).
func (t Target) withCounters(ctx context.Context, f func() (Summary, error)) (Summary, error) {
	before, err := t.scrape(ctx)
	if err != nil {
		return Summary{}, err
	}
	hBefore, err := t.histograms(ctx)
	if err != nil {
		return Summary{}, err
	}
	waitBefore, waitErr := procstat.RunQueueWait(os.Getpid())
	s, err := f()
	if err != nil {
		return s, err
	}
	if waitAfter, err := procstat.RunQueueWait(os.Getpid()); err == nil && waitErr == nil && s.Elapsed > 0 {
		s.ClientRunQueueWait = waitAfter - waitBefore
	}
	if !t.NoMetrics {
		after, err := t.scrape(ctx)
		if err != nil {
			return s, err
		}
		s.Counters = promtext.Delta(before, after, CounterNames...)
		hAfter, err := t.histograms(ctx)
		if err != nil {
			return s, err
		}
		s.RouterRefusal = quantiles(hBefore[refusalHist], hAfter[refusalHist])
		s.RouterSched = quantiles(hBefore[schedHist], hAfter[schedHist])
	}
	return s, nil
}

// quantiles are p50 and p99 of what a histogram observed between two
// scrapes (zero when nothing was).
func quantiles(before, after []promtext.Sample) Percentiles {
	at := func(q float64) time.Duration {
		v, _ := promtext.Quantile(before, after, q)
		return time.Duration(v * float64(time.Second))
	}
	return Percentiles{P50: at(0.5), P99: at(0.99)}
}

// Open offers rate queries per second for d, open loop: vegeta sends on
// schedule whatever the answers do, starting more workers when all are
// waiting, so the latency of a slow answer includes the queueing it
// caused. Query bodies cycle through q.
func Open(ctx context.Context, t Target, q *Queries, rate float64, d time.Duration) (Summary, error) {
	if rate <= 0 || len(q.Bodies) == 0 {
		return Summary{}, fmt.Errorf("open loop: rate %.1f and %d queries", rate, len(q.Bodies))
	}
	return t.withCounters(ctx, func() (Summary, error) {
		url, hdr := t.searchURL(), t.header()
		var next atomic.Uint64
		targeter := func(tg *vegeta.Target) error {
			i := next.Add(1) - 1
			tg.Method, tg.URL, tg.Header = http.MethodPost, url, hdr
			tg.Body = q.Bodies[i%uint64(len(q.Bodies))]
			return nil
		}
		atk := vegeta.NewAttacker(
			vegeta.Timeout(t.timeout()),
			// The outcome is in the status and X-Trawl-Degraded: skip
			// reading bodies into memory.
			vegeta.MaxBody(0),
			vegeta.Workers(16),
			vegeta.MaxWorkers(100_000),
			vegeta.Connections(10_000),
			vegeta.KeepAlive(true),
			vegeta.Redirects(vegeta.NoFollow),
		)
		stop := context.AfterFunc(ctx, func() { atk.Stop() })
		defer stop()
		// Hits per 1000 s, so a low rate (4.35/s) is not rounded to 4.
		pacer := vegeta.ConstantPacer{Freq: max(1, int(rate*1000+0.5)), Per: 1000 * time.Second}
		tally := t.newTally()
		start := time.Now()
		last := start
		for r := range atk.Attack(vegeta.Targeter(targeter), pacer, d, "trawlbench") {
			tally.Add(Classify(int(r.Code), r.Headers, r.Code == 0), int(r.Code), r.Latency)
			if e := r.End(); e.After(last) {
				last = e
			}
		}
		if err := ctx.Err(); err != nil {
			return Summary{}, fmt.Errorf("open loop: %w", err)
		}
		return tally.Summarise(fmt.Sprintf("open %.0f/s", rate), last.Sub(start)), nil
	})
}

// Closed runs clients that each send a query, wait for its answer and
// send the next, for d.
func Closed(ctx context.Context, t Target, q *Queries, clients int, d time.Duration) (Summary, error) {
	if clients <= 0 || len(q.Bodies) == 0 {
		return Summary{}, fmt.Errorf("closed loop: %d clients and %d queries", clients, len(q.Bodies))
	}
	return t.withCounters(ctx, func() (Summary, error) {
		url, hdr := t.searchURL(), t.header()
		tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Timeout: t.timeout(), Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		tallies := make([]*Tally, clients)
		var next atomic.Uint64
		var wg sync.WaitGroup
		start := time.Now()
		for c := range clients {
			tallies[c] = t.newTally()
			wg.Go(func() {
				for ctx.Err() == nil {
					body := q.Bodies[(next.Add(1)-1)%uint64(len(q.Bodies))]
					o, code, took := Do(hc, url, hdr, body)
					if ctx.Err() != nil && o == Failed {
						return // cut short by the end of the run, not an answer
					}
					tallies[c].Add(o, code, took)
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		all := t.newTally()
		for _, t := range tallies {
			all.Merge(t)
		}
		return all.Summarise(fmt.Sprintf("closed %d", clients), elapsed), nil
	})
}

// Do sends one search and classifies its answer; the body is drained so
// the connection is reused.
func Do(hc *http.Client, url string, hdr http.Header, body []byte) (Outcome, int, time.Duration) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Failed, 0, 0
	}
	req.Header = hdr.Clone()
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return Failed, 0, time.Since(t0)
	}
	_, cerr := drain(resp)
	took := time.Since(t0)
	return Classify(resp.StatusCode, resp.Header, cerr != nil), resp.StatusCode, took
}
