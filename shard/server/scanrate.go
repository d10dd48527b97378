package server

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/trawl-search/trawl/internal/threadclock"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/vector"
)

// Calibration sizes. The scratch buffer should be larger than the
// last-level cache, or the figure is a cache speed a shard of real size
// never sees: twice the largest cache the kernel reports, at least
// MinCalibrationBytes, at most MaxCalibrationBytes (a CPU with a larger
// cache gets an in-cache, optimistic figure; the log says so). Under a
// memory limit (GOMEMLIMIT, as the chart sets it) the buffer is at most
// a quarter of the limit, floor or not: a Xeon with a 105 MB cache asked
// for 256 MiB and a shard capped at 160 MiB was OOM-killed before it
// served its first call.
const (
	MinCalibrationBytes = 64 << 20
	MaxCalibrationBytes = 256 << 20
	// calibrationLimitShare: the buffer's share of the memory limit.
	calibrationLimitShare = 4
	// calibrationPasses: the best pass is kept, so a pass that lost
	// its core to another process does not set the figure.
	calibrationPasses = 3
	// calibrationChunk keeps every Scan call on one worker (below
	// vector's parallel threshold), so the figure is per core.
	calibrationChunk = 8192
)

// CalibrationBytes is the scratch size MeasureScanRate uses on this
// machine, and whether it exceeds the largest cache.
func CalibrationBytes() (int, bool) {
	return calibrationBytes(largestCache(), debug.SetMemoryLimit(-1))
}

// calibrationBytes sizes the buffer for a largest cache of llc bytes (0
// when unknown) under a memory limit of memLimit bytes (math.MaxInt64
// when none).
func calibrationBytes(llc int, memLimit int64) (int, bool) {
	n := max(2*llc, MinCalibrationBytes)
	n = min(n, MaxCalibrationBytes)
	if capped := memLimit / calibrationLimitShare; capped < int64(n) {
		n = int(max(capped, 1<<20))
	}
	return n, llc == 0 || n > llc
}

// largestCache reads the biggest cache of cpu0 from sysfs; 0 when unknown
// (not Linux, or no sysfs).
func largestCache() int {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	best := 0
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "size"))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		mult := 1
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if n, err := strconv.Atoi(s); err == nil {
			best = max(best, n*mult)
		}
	}
	return best
}

// Calibrate measures kernel k's scan rate for dim-D rows under metric m
// on a scratch buffer of CalibrationBytes (one core, some tens of ms: a
// 64 MiB buffer is faulted in, then scanned three times) and logs it. It
// reads no store and takes no lock, so a replica runs it in the
// background while it loads; loading then competes for the cores, which
// makes the figure conservative, never optimistic.
func Calibrate(ctx context.Context, log *slog.Logger, k vector.Kernel, m vector.Metric, dim int) (float64, error) {
	bytes, beyondCache := CalibrationBytes()
	start := time.Now()
	rate, err := MeasureScanRate(ctx, k, m, dim, bytes)
	if err != nil {
		return 0, err
	}
	log.Info("scan rate measured", "rows_per_second_per_core_1536d", math.Round(rate), "kernel", k.Name,
		"scratch_mib", bytes>>20, "beyond_last_level_cache", beyondCache, "took_ms", time.Since(start).Milliseconds())
	return rate, nil
}

// MeasureScanRate times kernel k scanning a scratch corpus of about bytes
// bytes of dim-D rows for one top-10 query under metric m, on one core
// (by the thread's CPU clock on Linux), and returns shard.RefDim-equivalent rows
// per second (the best of a few passes). It allocates the buffer for the call only.
func MeasureScanRate(ctx context.Context, k vector.Kernel, m vector.Metric, dim, bytes int) (float64, error) {
	if dim <= 0 {
		return 0, fmt.Errorf("scan rate: dimension %d", dim)
	}
	n := max(1, bytes/(4*dim))
	data := vector.Aligned(n * dim)
	// One pseudo-random row copied down the buffer (copy is cheap, even
	// under the race detector) with one element changed per row, so rows
	// differ; the scan's speed does not depend on the values.
	x := uint64(0x9e3779b97f4a7c15)
	for i := range dim {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		data[i] = float32(int64(x>>40)-(1<<23)) / (1 << 23)
	}
	for filled := dim; filled < len(data); filled *= 2 {
		copy(data[filled:], data[:filled])
	}
	for r := range n {
		data[r*dim] += float32(r) * 1e-6
	}
	ids := make([]string, n)
	q := []vector.Query{{Vector: append([]float32(nil), data[:dim]...), K: 10}}
	if m == vector.Cosine && !k.Normalize(q[0].Vector) {
		return 0, fmt.Errorf("scan rate: zero query")
	}
	// One thread, timed by its own CPU clock where there is one: every
	// chunk scans inline on the calling goroutine (one worker).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clock := func() time.Duration {
		if d, ok := threadclock.Now(); ok {
			return d
		}
		return time.Duration(time.Now().UnixNano())
	}
	best := time.Duration(math.MaxInt64)
	for range calibrationPasses {
		start := clock()
		for lo := 0; lo < n; lo += calibrationChunk {
			hi := min(n, lo+calibrationChunk)
			rows := vector.FlatRows(data[lo*dim:hi*dim], dim, ids[lo:hi])
			if _, err := k.Scan(ctx, m, rows, q); err != nil {
				return 0, fmt.Errorf("scan rate: %w", err)
			}
		}
		best = min(best, max(clock()-start, time.Microsecond))
	}
	runtime.KeepAlive(data)
	return rowsPerSecond(n, dim, 1, best), nil
}

// rowsPerSecond is rows dim-D rows read by workers cores in d, as shard.RefDim
// rows per second per core.
func rowsPerSecond(rows, dim, workers int, d time.Duration) float64 {
	if d <= 0 || workers <= 0 {
		return 0
	}
	return float64(rows) * float64(dim) / shard.RefDim / (d.Seconds() * float64(workers))
}

// scanRates holds a replica's two figures, as float64 bits: the start-up
// calibration and a running average of its real full exact scans.
type scanRates struct {
	calibrated atomic.Uint64
	live       atomic.Uint64
}

// liveWeight is the weight of each new scan in the running rate: about
// the last twenty scans count.
const liveWeight = 0.05

func (r *scanRates) setCalibrated(v float64) { r.calibrated.Store(math.Float64bits(v)) }
func (r *scanRates) getCalibrated() float64  { return math.Float64frombits(r.calibrated.Load()) }
func (r *scanRates) getLive() float64        { return math.Float64frombits(r.live.Load()) }

// observe folds one scan's rate into the running average (a lost race
// between two scans drops one sample, which an average can spare).
func (r *scanRates) observe(v float64) {
	if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return
	}
	old := r.live.Load()
	next := v
	if o := math.Float64frombits(old); o > 0 {
		next = o + liveWeight*(v-o)
	}
	r.live.CompareAndSwap(old, math.Float64bits(next))
}
