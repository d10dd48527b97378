package loadgen

import (
	"fmt"
	"net/http"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Outcome is what one request came back as.
type Outcome int

const (
	// Complete is a 200 whose scatter_gather.degraded is false.
	Complete Outcome = iota
	// Degraded is an answer missing a shard: a 200 marked degraded, or a
	// 503 (no shard answered, or allow_partial false).
	Degraded
	// Refused is a 429 from admission or --max-inflight.
	Refused
	// Failed is anything else: a transport error, a client timeout, or
	// another status.
	Failed
)

// Classify reads the outcome from the status and the X-Trawl-Degraded
// header, which the router sets on every degraded answer, so the body need
// not be read or parsed.
func Classify(code int, hdr http.Header, transportErr bool) Outcome {
	switch {
	case transportErr:
		return Failed
	case code == http.StatusTooManyRequests:
		return Refused
	case hdr.Get("X-Trawl-Degraded") == "true", code == http.StatusServiceUnavailable:
		return Degraded
	case code == http.StatusOK:
		return Complete
	}
	return Failed
}

// Histogram bounds: 1 µs to 60 s at 3 significant digits (0.1 % error),
// about 200 KiB.
const (
	histMin = int64(time.Microsecond)
	histMax = int64(60 * time.Second)
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, 3) }

// Tally accumulates outcomes and latencies; it is not safe for concurrent
// use (each closed-loop client keeps its own and they are merged).
type Tally struct {
	counts [4]int64
	// answered holds the latency of every request that was not refused,
	// transport failures and timeouts included at the time they took: an
	// answer that never came must not vanish from the tail.
	answered *hdrhistogram.Histogram
	complete *hdrhistogram.Histogram
	refused  *hdrhistogram.Histogram
	codes    map[int]int64
	// lateAfter, when positive, counts answers slower than it in late:
	// the router promises an answer within the deadline plus a slack.
	lateAfter time.Duration
	late      int64
}

// LateAfter makes t count requests that took longer than d (refusals
// included: a refusal is an answer too).
func (t *Tally) LateAfter(d time.Duration) { t.lateAfter = d }

// NewTally is an empty tally.
func NewTally() *Tally {
	return &Tally{answered: newHist(), complete: newHist(), refused: newHist(), codes: map[int]int64{}}
}

func clampNs(d time.Duration) int64 { return min(max(int64(d), histMin), histMax) }

// Add records one request.
func (t *Tally) Add(o Outcome, code int, took time.Duration) {
	t.counts[o]++
	t.codes[code]++
	if t.lateAfter > 0 && took > t.lateAfter {
		t.late++
	}
	ns := clampNs(took)
	if o == Refused {
		_ = t.refused.RecordValue(ns)
		return
	}
	_ = t.answered.RecordValue(ns)
	if o == Complete {
		_ = t.complete.RecordValue(ns)
	}
}

// Merge adds o into t.
func (t *Tally) Merge(o *Tally) {
	for i := range t.counts {
		t.counts[i] += o.counts[i]
	}
	for c, n := range o.codes {
		t.codes[c] += n
	}
	t.late += o.late
	t.answered.Merge(o.answered)
	t.complete.Merge(o.complete)
	t.refused.Merge(o.refused)
}

// Percentiles of a latency distribution.
type Percentiles struct {
	P50, P90, P99, P999, Max time.Duration
}

func percentiles(h *hdrhistogram.Histogram) Percentiles {
	if h.TotalCount() == 0 {
		return Percentiles{}
	}
	at := func(q float64) time.Duration { return time.Duration(h.ValueAtQuantile(q)) }
	return Percentiles{P50: at(50), P90: at(90), P99: at(99), P999: at(99.9), Max: time.Duration(h.Max())}
}

// Summary is one run's figures.
type Summary struct {
	Mode    string        // "open 120/s" or "closed 8"
	Elapsed time.Duration // first request sent to last answer received
	Sent    int64

	Complete, Degraded, Refused, Failed int64
	Codes                               map[int]int64
	// Late is how many took longer than the tally's LateAfter.
	Late int64

	// Latency is over every request not refused; CompleteLatency over
	// complete answers only; RefusalLatency over 429s.
	Latency, CompleteLatency, RefusalLatency Percentiles

	// Counters are the deltas of the router's /metrics counters over the
	// run (nil when not scraped).
	Counters map[string]float64
	// RouterRefusal is the router's own time per refusal over the run
	// (trawl_admission_refusal_duration_seconds: reaching its handler to
	// the 429 written), RouterSched how long its goroutines waited
	// runnable for a thread (go_sched_latencies_seconds); P50 and P99
	// only, zero when not scraped.
	RouterRefusal, RouterSched Percentiles
	// ClientRunQueueWait is how long the load generator's own threads
	// waited for a core during the run (Linux schedstat): latency it
	// measured that was its own.
	ClientRunQueueWait time.Duration

	// tally is what the figures came from, kept so that Pool can take
	// percentiles over several runs' requests rather than a median of
	// each run's: a p99 over one 130-request run is its second-worst
	// answer, and swings with one unlucky query.
	tally *Tally
}

// Pool is the summary of several runs taken as one: counts and counters
// summed, elapsed times added, percentiles over every request of every
// run. Runs summarised before tallies were kept (none here) add their
// counts but no latencies.
func Pool(ss []Summary) Summary {
	all := NewTally()
	var elapsed time.Duration
	counters := map[string]float64{}
	mode := ""
	for _, s := range ss {
		if s.tally != nil {
			all.Merge(s.tally)
		}
		elapsed += s.Elapsed
		for k, v := range s.Counters {
			counters[k] += v
		}
		mode = s.Mode
	}
	p := all.Summarise(fmt.Sprintf("%s, %d runs pooled", mode, len(ss)), elapsed)
	p.Counters = counters
	return p
}

// Summarise turns a tally into a Summary.
func (t *Tally) Summarise(mode string, elapsed time.Duration) Summary {
	s := Summary{Mode: mode, Elapsed: elapsed,
		Complete: t.counts[Complete], Degraded: t.counts[Degraded], Refused: t.counts[Refused], Failed: t.counts[Failed],
		Codes: map[int]int64{}, Late: t.late,
		Latency: percentiles(t.answered), CompleteLatency: percentiles(t.complete), RefusalLatency: percentiles(t.refused),
		tally: t}
	for c, n := range t.codes {
		s.Codes[c] = n
	}
	s.Sent = s.Complete + s.Degraded + s.Refused + s.Failed
	return s
}

// Throughput is answers of any kind per second.
func (s Summary) Throughput() float64 { return perSec(s.Sent, s.Elapsed) }

// Goodput is complete answers per second.
func (s Summary) Goodput() float64 { return perSec(s.Complete, s.Elapsed) }

// Share is n as a fraction of everything sent.
func (s Summary) Share(n int64) float64 {
	if s.Sent == 0 {
		return 0
	}
	return float64(n) / float64(s.Sent)
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// String is a human-readable report of the run.
func (s Summary) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }
	out := fmt.Sprintf("%s: %d requests in %s: %.1f answers/s, %.1f complete/s\n",
		s.Mode, s.Sent, s.Elapsed.Round(time.Millisecond), s.Throughput(), s.Goodput())
	out += fmt.Sprintf("  latency ms (not refused): p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		ms(s.Latency.P50), ms(s.Latency.P90), ms(s.Latency.P99), ms(s.Latency.P999), ms(s.Latency.Max))
	out += fmt.Sprintf("  complete %.1f%%  degraded %.1f%%  refused (429) %.1f%%  failed %.1f%%  codes %v\n",
		100*s.Share(s.Complete), 100*s.Share(s.Degraded), 100*s.Share(s.Refused), 100*s.Share(s.Failed), s.Codes)
	if s.Late > 0 {
		out += fmt.Sprintf("  late (past deadline + %s): %.1f%%\n", LateSlack, 100*s.Share(s.Late))
	}
	if s.Refused > 0 {
		out += fmt.Sprintf("  refusal latency ms: p50 %s  p99 %s\n", ms(s.RefusalLatency.P50), ms(s.RefusalLatency.P99))
		if s.RouterRefusal.P99 > 0 {
			out += fmt.Sprintf("  refusal in the router's handler ms: p50 %s  p99 %s\n", ms(s.RouterRefusal.P50), ms(s.RouterRefusal.P99))
		}
	}
	if s.RouterSched.P99 > 0 {
		out += fmt.Sprintf("  router goroutines' wait for a thread ms: p50 %s  p99 %s\n", ms(s.RouterSched.P50), ms(s.RouterSched.P99))
	}
	if s.ClientRunQueueWait > 0 && s.Elapsed > 0 {
		out += fmt.Sprintf("  load generator's threads waited for a core: %.0f ms per s of run\n",
			float64(s.ClientRunQueueWait.Milliseconds())/s.Elapsed.Seconds())
	}
	for _, name := range CounterNames {
		if v, ok := s.Counters[name]; ok {
			out += fmt.Sprintf("  %s +%.0f\n", name, v)
		}
	}
	if share, ok := s.HedgeShare(); ok {
		out += fmt.Sprintf("  extra shard RPCs from hedging: %.2f%% (hedges ÷ shard RPCs without them)\n", 100*share)
	}
	return out
}

// HedgeShare is the extra shard RPCs hedging cost: the run's hedges over
// the shard RPCs the router would have made without them (every RPC it
// made, less the hedges). ok is false when the counters were not read or
// no RPC was made.
func (s Summary) HedgeShare() (float64, bool) {
	rpcs, ok := s.Counters["trawl_shard_request_duration_seconds_count"]
	hedges := s.Counters["trawl_scatter_hedges_total"]
	if !ok || rpcs-hedges <= 0 {
		return 0, false
	}
	return hedges / (rpcs - hedges), true
}
