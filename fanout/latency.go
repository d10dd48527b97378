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
	// requantileEvery: the cached quantile is recomputed after this many
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

	// cached is the quantile cachedQ of the window as of the last compute;
	// fresh counts samples since then (-1 forces a recompute).
	cached  time.Duration
	cachedQ float64
	fresh   int
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

// quantile is the window's q-quantile (0 < q < 1) and how many samples it
// rests on; 0 when the window is empty.
func (w *latencyWindow) quantile(now time.Time, q float64) (time.Duration, int64) {
	w.advance(now)
	if w.total == 0 {
		return 0, 0
	}
	if w.fresh < 0 || w.fresh >= requantileEvery || w.cachedQ != q {
		us := w.h.Merge().ValueAtQuantile(q * 100)
		w.cached, w.cachedQ, w.fresh = time.Duration(us)*time.Microsecond, q, 0
	}
	return w.cached, w.total
}
