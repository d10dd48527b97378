package app_test

// The overload sweep: offered load from half to five times the measured
// capacity, open loop, with admission on and off in the same run. Run it
// alone on a quiet machine, without the race detector:
//
//	TRAWL_OVERLOAD_BENCH=1 go test -count=1 -run TestOverloadSweep -v -timeout 20m ./internal/app
//
// Figures go to docs/performance.md.

import (
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOverloadSweep(t *testing.T) {
	if os.Getenv("TRAWL_OVERLOAD_BENCH") == "" {
		t.Skip("the overload sweep runs only with TRAWL_OVERLOAD_BENCH=1 (see docs/performance.md)")
	}
	loadavg := func() string { b, _ := os.ReadFile("/proc/loadavg"); return strings.TrimSpace(string(b)) }
	t.Logf("GOMAXPROCS %d, load average at start: %s", runtime.GOMAXPROCS(0), loadavg())
	const (
		duration = 5 * time.Second
		deadline = 300 * time.Millisecond
	)
	type row struct {
		factor                                float64
		completeShare, refusedShare, degraded float64
		refusalP99, admittedP99, admittedMax  time.Duration
	}
	// capacity is measured once, on the first run's cluster (admission
	// on, which refuses nothing to 8 closed-loop clients), and both sweeps
	// offer the same absolute rates.
	var capacity float64
	sweep := func(t *testing.T, flags ...string) []row {
		h := startOverload(t, flags...)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
		t.Cleanup(c.CloseIdleConnections)
		body := b64Query(t, h.query)
		var wg sync.WaitGroup
		if capacity == 0 {
			// Complete answers per second from 8 closed-loop clients.
			var mu sync.Mutex
			done := 0
			t0 := time.Now()
			for range 8 {
				wg.Go(func() {
					for time.Since(t0) < 3*time.Second {
						if s := fire(c, h.url, body, t0); s.err == nil && s.code == http.StatusOK && !s.degraded {
							mu.Lock()
							done++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			capacity = float64(done) / time.Since(t0).Seconds()
			time.Sleep(time.Second)
		}
		var rows []row
		for _, f := range []float64{0.5, 1, 2, 3, 5} {
			rate := f * capacity
			n := int(rate * duration.Seconds())
			interval := time.Duration(float64(time.Second) / rate)
			shots := openLoop(c, h.url, body, n, interval)
			var refusals, admitted []time.Duration
			complete, degraded := 0, 0
			for _, s := range shots {
				switch {
				case s.err != nil:
					degraded++
				case s.code == http.StatusTooManyRequests:
					refusals = append(refusals, s.took)
				default:
					admitted = append(admitted, s.took)
					if s.code == http.StatusOK && !s.degraded {
						complete++
					} else {
						degraded++
					}
				}
			}
			r := row{factor: f,
				completeShare: float64(complete) / duration.Seconds() / capacity,
				refusedShare:  float64(len(refusals)) / float64(n),
				degraded:      float64(degraded) / float64(max(len(admitted), 1)),
				refusalP99:    p99(refusals), admittedP99: p99(admitted)}
			if len(admitted) > 0 {
				r.admittedMax = slices.Max(admitted)
			}
			rows = append(rows, r)
			time.Sleep(time.Second) // let the limiter's pressure window pass
		}
		return rows
	}
	var on, off []row
	t.Run("admission_on", func(t *testing.T) { on = sweep(t) })
	t.Run("admission_off", func(t *testing.T) { off = sweep(t, "--admission=false") })
	require.Len(t, on, 5)
	require.Len(t, off, 5)
	t.Logf("capacity (complete answers/s from 8 closed-loop clients, deadline %s): %.0f", deadline, capacity)
	t.Logf("| offered | complete/s ÷ capacity (on / off) | refused (on) | refusal p99 (on) | admitted p99 (on / off) | admitted max (on / off) | degraded share of admitted (on / off) |")
	t.Logf("|---|---|---|---|---|---|---|")
	for i := range on {
		a, b := on[i], off[i]
		t.Logf("| %.1f× | %.0f %% / %.0f %% | %.0f %% | %s | %s / %s | %s / %s | %.1f %% / %.1f %% |",
			a.factor, 100*a.completeShare, 100*b.completeShare, 100*a.refusedShare, dur(a.refusalP99),
			dur(a.admittedP99), dur(b.admittedP99), dur(a.admittedMax), dur(b.admittedMax), 100*a.degraded, 100*b.degraded)
	}
	t.Logf("load average at end: %s", loadavg())
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

func dur(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
