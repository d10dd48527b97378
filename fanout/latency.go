package fanout

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency window (DESIGN.md, "Replicas, health, failover, hedging": a
// per-replica latency distribution over a sliding window).
const (
	// LatencyWindow is how far back a replica's latency distribution looks:
	// long enough to hold a few hundred answers at a quiet router's rate,
	// short enough that a replica that turned slow (or recovered) shows in
	// its quantiles within seconds.
	LatencyWindow = 10 * time.Second
	// latencySlices is how many histograms the window rotates through; the
	// oldest slice (a fifth of the window) is dropped at once.
	latencySlices = 5
	// MinHedgeSamples is how many answers a replica's window must hold
	// before its quantile is trusted; below that the hedge delay falls
	// back (see Cluster.hedgeDelay).
	MinHedgeSamples = 20
	// requantileEvery: the cached profile is recomputed after this many
	// new samples (or a rotation). Merging the slices costs a few
	// microseconds; doing it on every hedge decision would cost more than
	// the read it is for.
	requantileEvery = 32
)

// Histogram range in microseconds: 1 µs to 60 s at 2 significant digits
// (1 % resolution), a few KiB a slice.
const (
	latencyMinMicros = 1
	latencyMaxMicros = 60_000_000
	latencySigFigs   = 2
)

// latencyWindow is one replica's answer latencies over the last
// LatencyWindow, in HdrHistogram slices rotated by the engine's clock (so
// tests move it by hand). Its caller holds the replica's lock.
type latencyWindow struct {
	h *hdrhistogram.WindowedHistogram
	// sliceStart is when the current slice began.
	sliceStart time.Time
	// counts is each slice's sample count, in rotation order with the
	// current one last, so the window's total needs no merge.
	counts [latencySlices]int64
	total  int64

	// cached is the window's profile as of the last compute; fresh counts
	// samples since then (-1 forces a recompute).
	cached profile
	fresh  int
}

// hedgeGrid is how many quantiles of a replica's latency a read in flight
// on it may be hedged at (profile.at).
const hedgeGrid = 5

// profile is what hedging reads of one replica's latency distribution.
type profile struct {
	p50, p90, p99 time.Duration
	// at[i] is the latency at the i-th hedge point (the 50th, 75th, 90th,
	// 95th and 98th percentiles) and beyond[i] the median of the answers
	// slower than it (the 75th, 87.5th, 95th, 97.5th and 99th): half the
	// reads still running at at[i] run until beyond[i] or longer.
	at, beyond [hedgeGrid]time.Duration
}

// hedgeAt is how long a read in flight on this replica runs before a
// hedge to a replica whose typical (median) answer takes alt is likelier
// than not to answer first: the first hedge point whose slower half runs
// at least alt past it. A replica slow on one call in ten, say, passes its
// fast mode at its 90th percentile, past which half its reads run tens of
// milliseconds longer: hedged there. A healthy replica's reads, once past
// any quantile, mostly finish sooner than a fresh read elsewhere would, so
// hedging them only adds load: they are hedged only past the 99th
// percentile, the mark of a replica that may have stopped answering (a
// blackholed host) — its own, or the target's (altTail) if lower, so that
// stalls in this replica's window do not put that mark past the deadline.
func (p profile) hedgeAt(alt, altTail time.Duration) time.Duration {
	for i := range hedgeGrid {
		if p.beyond[i]-p.at[i] >= alt {
			return p.at[i]
		}
	}
	return min(p.p99, altTail)
}

func newLatencyWindow(now time.Time) *latencyWindow {
	return &latencyWindow{
		h:          hdrhistogram.NewWindowed(latencySlices, latencyMinMicros, latencyMaxMicros, latencySigFigs),
		sliceStart: now,
		fresh:      -1,
	}
}

// advance drops the slices older than the window as of now.
func (w *latencyWindow) advance(now time.Time) {
	slice := LatencyWindow / latencySlices
	n := int(now.Sub(w.sliceStart) / slice)
	if n <= 0 {
		return
	}
	w.sliceStart = w.sliceStart.Add(time.Duration(n) * slice)
	for range min(n, latencySlices) {
		w.h.Rotate()
		w.total -= w.counts[0]
		copy(w.counts[:], w.counts[1:])
		w.counts[latencySlices-1] = 0
	}
	w.fresh = -1
}

// record adds one answer's latency.
func (w *latencyWindow) record(now time.Time, d time.Duration) {
	w.advance(now)
	us := min(max(d.Microseconds(), latencyMinMicros), latencyMaxMicros)
	if w.h.Current.RecordValue(us) != nil {
		return // out of range: clamped above, so never
	}
	w.counts[latencySlices-1]++
	w.total++
	if w.fresh >= 0 {
		w.fresh++
	}
}

// profile is the window's profile and how many samples it rests on; the
// zero profile when the window is empty.
func (w *latencyWindow) profile(now time.Time) (profile, int64) {
	w.advance(now)
	if w.total == 0 {
		return profile{}, 0
	}
	if w.fresh < 0 || w.fresh >= requantileEvery {
		// The hedge points, the medians beyond them, then the 90th and
		// 99th: one pass over the merged slices for all of them (it sorts
		// the slice it is given, so it gets a copy).
		pcts := [...]float64{50, 75, 90, 95, 98, 75, 87.5, 95, 97.5, 99, 90, 99}
		byIdx := pcts
		vs := w.h.Merge().ValueAtPercentiles(pcts[:])
		at := func(pct float64) time.Duration { return time.Duration(vs[pct]) * time.Microsecond }
		var p profile
		for i := range hedgeGrid {
			p.at[i], p.beyond[i] = at(byIdx[i]), at(byIdx[hedgeGrid+i])
		}
		p.p50, p.p90, p.p99 = p.at[0], at(90), at(99)
		w.cached, w.fresh = p, 0
	}
	return w.cached, w.total
}
