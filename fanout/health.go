package fanout

import (
	"sync"
	"time"
)

// Health rules (DESIGN.md, "Replicas, health, failover, hedging").
const (
	// SuspectAfter consecutive connectivity failures make a replica suspect.
	SuspectAfter = 3
	// Cooldown is how long a suspect replica is skipped.
	Cooldown = 5 * time.Second
	// MinCountedBudget is the smallest attempt budget whose
	// DeadlineExceeded counts against a replica; with less, the client chose
	// a deadline no replica could meet (deadline_ms=1 floods).
	MinCountedBudget = 20 * time.Millisecond
	// CountedBudgetFactor: the budget must also be this many times the
	// replica's latency average for a timeout to count.
	CountedBudgetFactor = 4
)

// health is one replica's state. Two views of its latency: EWMAs in the
// style of TCP's RTT estimator (mean and mean deviation), which rank the
// candidates and judge whether a timeout was the replica's fault, and the
// distribution over a sliding window (window), whose quantiles set hedge
// delays: an EWMA tail (mean + 4·deviation) of a replica slow on one call in
// ten lands exactly where the slow answers arrive, so a hedge timed by it
// never cuts them.
type health struct {
	mu          sync.Mutex
	consecutive int
	suspectTill time.Time
	// marked is set when the replica becomes suspect and cleared by a
	// success, so the suspect gauge is cleared even when the success comes
	// after the cooldown ran out.
	marked      bool
	lastErr     string
	mean        time.Duration
	dev         time.Duration
	samples     int
	outstanding int
	// window is the latency distribution; nil until the first answer.
	window *latencyWindow
	// overloadedTill: the replica refused a read as overloaded; no hedge
	// goes to it before then.
	overloadedTill time.Time
	// lastAnswer is when the replica last answered a call (the engine's
	// clock): a replica with a read in flight that has answered nothing
	// since that read began, while a peer has, is stuck, not slow.
	lastAnswer time.Time
	// sampled is when the mean last took a sample (the engine's clock).
	sampled time.Time
}

// remeasureAfter is how long a replica's latency estimate stands without
// a sample before reads treat it as untried again: reads go to the
// cheapest replica, so one slow answer (a replica still catching up, a
// cold cache) would otherwise keep every read off it for good. One read
// in this long re-measures it.
const remeasureAfter = 10 * time.Second

// stale reports whether the latency estimate has had no sample for
// remeasureAfter: the replica sorts as untried.
func (h *health) stale(now time.Time) bool {
	return h.samples == 0 || now.Sub(h.sampled) > remeasureAfter
}

// ewmaWeight is the weight of a new latency sample (1/8, as TCP's SRTT).
const ewmaWeight = 8

func (h *health) observeLatency(now time.Time, d time.Duration) {
	if h.window == nil {
		h.window = newLatencyWindow(now)
	}
	h.window.record(now, d)
	if h.samples == 0 {
		h.mean, h.dev = d, d/2
	} else {
		diff := d - h.mean
		if diff < 0 {
			diff = -diff
		}
		h.dev += (diff - h.dev) / 4
		h.mean += (d - h.mean) / ewmaWeight
	}
	h.samples++
	h.sampled = now
}

// observePeak takes a lower bound of a latency (an attempt cancelled after
// took): the average rises to it at once if it is above.
func (h *health) observePeak(took time.Duration) {
	if took > h.mean {
		h.mean = took
	}
}

// profile is the replica's latency profile over the sliding window, and
// whether enough answers (MinHedgeSamples) back it.
func (h *health) profile(now time.Time) (profile, bool) {
	if h.window == nil {
		return profile{}, false
	}
	p, n := h.window.profile(now)
	return p, n >= MinHedgeSamples
}

// success ends any suspicion at once. It reports whether the replica had
// been marked suspect.
func (h *health) success() (wasSuspect bool) {
	wasSuspect = h.marked
	h.marked = false
	h.consecutive = 0
	h.suspectTill = time.Time{}
	h.lastErr = ""
	return wasSuspect
}

// failure counts one connectivity failure and reports whether the replica
// newly became suspect with it (a renewed cooldown is not news).
func (h *health) failure(now time.Time, err string) (becameSuspect bool) {
	h.consecutive++
	h.lastErr = err
	if h.consecutive >= SuspectAfter && !now.Before(h.suspectTill) {
		h.suspectTill = now.Add(Cooldown)
		becameSuspect = !h.marked
		h.marked = true
		return becameSuspect
	}
	return false
}

// counts reports whether a DeadlineExceeded after an attempt with this
// budget is the replica's fault.
func (h *health) counts(budget time.Duration) bool {
	return budget >= MinCountedBudget && budget >= CountedBudgetFactor*h.mean
}

func (h *health) suspect(now time.Time) bool { return now.Before(h.suspectTill) }
