package recovery

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/trawl-search/trawl/internal/threadclock"
)

// DefaultShare is `router shard --recovery-cpu`'s default: recovery work
// may use a tenth of the replica's cores (GOMAXPROCS; 0.2 of a core under
// the Helm chart's 2-core limit, within the pod's 300m request). Measured
// with `trawlbench rebuild` on a 3 × 3 cluster sharing two cores
// (docs/performance.md): a rebuilding replica used about 0.2 of a core
// unthrottled, so a quarter of the cores never held it back, while a
// tenth did, and rebuilds still finished in about 15 s for 10 000 rows.
const DefaultShare = 0.1

// burstCPU is how much CPU recovery work may spend at full speed before Do
// makes it wait: a stretch of that much work on one core delays a query
// scanning beside it on a shared core by at most about as much.
const burstCPU = 20 * time.Millisecond

// CheckShare refuses a share outside (0, 1]: 1 means not throttled.
func CheckShare(share float64) error {
	if !(share > 0 && share <= 1) { // also refuses NaN
		return fmt.Errorf("recovery CPU share %v: want more than 0 and at most 1 (1: not throttled)", share)
	}
	return nil
}

// Throttle runs recovery work at a bounded share of the cores. A nil
// *Throttle runs work unthrottled. Its methods are safe for concurrent
// use; concurrent work shares one budget.
type Throttle struct {
	lim   *rate.Limiter
	burst int64 // ns of CPU; no one charge to lim exceeds it
	clk   clock

	spent  atomic.Int64 // ns of CPU charged
	waited atomic.Int64 // ns Do waited
}

// clock is what a Throttle reads and waits on; tests give a fake one.
type clock struct {
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	// measure runs work and returns the CPU it cost.
	measure func(work func()) time.Duration
	// process reads the whole process's CPU time.
	process func() time.Duration
}

// New returns a throttle that lets recovery work use share of procs cores
// (runtime.GOMAXPROCS(0) if procs < 1) on average. share 1 returns nil: a
// throttle at every core bounds nothing, so none is set.
func New(share float64, procs int) (*Throttle, error) {
	return newThrottle(share, procs, clock{now: time.Now, sleep: sleep, measure: measure, process: processCPU})
}

func newThrottle(share float64, procs int, clk clock) (*Throttle, error) {
	if err := CheckShare(share); err != nil {
		return nil, err
	}
	if share == 1 {
		return nil, nil
	}
	if procs < 1 {
		procs = runtime.GOMAXPROCS(0)
	}
	burst := int64(burstCPU)
	// Tokens are nanoseconds of CPU: share × procs cores refill
	// share × procs × 1e9 of them a second.
	return &Throttle{lim: rate.NewLimiter(rate.Limit(share*float64(procs)*1e9), int(burst)), burst: burst, clk: clk}, nil
}

// Do runs work on the calling goroutine, then waits until the budget has
// paid for the CPU it took, or for half what is left of ctx's deadline,
// whichever is sooner (what is left stays owed). It returns ctx's error if
// ctx ends during the wait (work has run by then). work must not hand its work to other
// goroutines (see the package doc).
func (t *Throttle) Do(ctx context.Context, work func()) error {
	if t == nil {
		work()
		return nil
	}
	start := t.clk.now()
	return t.charge(ctx, start, t.clk.measure(work))
}

// processGap is the longest pause between two pieces of a ProcessPacer's
// work whose CPU is charged to the second: past it the process was idle
// or doing something else, and only the piece itself is charged.
const processGap = time.Second

// ProcessPacer paces work through a Throttle's budget, charging for each
// piece all the CPU the process used since the previous piece ended (or,
// after a pause over processGap, since this one began): the receiving,
// storing and garbage collection that feed the work are charged too, not
// only the calling thread's share. It is for work done while the process
// does nothing else — a replica that is not serving, alone in its process
// (`router shard`) — and must never pace a process that serves queries
// meanwhile, whose CPU it would charge to recovery.
type ProcessPacer struct {
	t *Throttle

	mu     sync.Mutex
	last   time.Duration // process CPU when the previous piece ended
	lastAt time.Time
}

// WholeProcess returns a pacer over t's budget that charges the process's
// CPU (see ProcessPacer); nil for a nil t.
func (t *Throttle) WholeProcess() *ProcessPacer {
	if t == nil {
		return nil
	}
	return &ProcessPacer{t: t}
}

// Do runs work on the calling goroutine, then waits until the budget has
// paid for the process CPU since the previous piece (see ProcessPacer).
// Where the process's CPU cannot be read, it is Throttle.Do.
func (p *ProcessPacer) Do(ctx context.Context, work func()) error {
	if p == nil {
		work()
		return nil
	}
	t := p.t
	if !measuresCPU {
		return t.Do(ctx, work)
	}
	start := t.clk.now()
	c0 := t.clk.process()
	work()
	c1 := t.clk.process()
	p.mu.Lock()
	from, at := c0, start
	if !p.lastAt.IsZero() && start.Sub(p.lastAt) <= processGap {
		from, at = p.last, p.lastAt
	}
	p.last, p.lastAt = c1, t.clk.now()
	p.mu.Unlock()
	return t.charge(ctx, at, c1-from)
}

// charge takes cpu, spent by work that began at start, from the budget
// and waits until it is paid for. It is reserved as of start: the bucket
// cannot refill past its burst while the work runs, so charging it as of
// the end would forgive part of every stretch longer than the burst.
func (t *Throttle) charge(ctx context.Context, start time.Time, cpu time.Duration) error {
	if cpu <= 0 {
		return nil
	}
	t.spent.Add(int64(cpu))
	now := t.clk.now()
	var delay time.Duration
	// The limiter refuses a charge over its burst, so a long stretch of
	// work is charged in pieces; each piece is reserved behind the ones
	// before it, so the last one's delay is the wait for all of them.
	for n := int64(cpu); n > 0; {
		take := min(n, t.burst)
		delay = t.lim.ReserveN(start, int(take)).DelayFrom(now)
		n -= take
	}
	// Work whose answer someone awaits under a deadline (a follower's
	// AppendEntries, which its leader abandons after 5 s and sends again)
	// waits at most half what is left of it: the rest stays owed in the
	// bucket, and the next pieces pay it.
	if dl, ok := ctx.Deadline(); ok {
		delay = min(delay, dl.Sub(now)/2)
	}
	if delay <= 0 {
		return nil
	}
	t.waited.Add(int64(delay))
	return t.clk.sleep(ctx, delay)
}

// Stats is what a throttle has done since it was made.
type Stats struct {
	// CPU is the CPU time of the work run through Do.
	CPU time.Duration
	// Waited is how long Do waited to keep that work within its share.
	Waited time.Duration
}

// Stats reports the CPU charged and the time waited; zero for nil.
func (t *Throttle) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	return Stats{CPU: time.Duration(t.spent.Load()), Waited: time.Duration(t.waited.Load())}
}

// measure runs work held on its OS thread and returns the thread's CPU
// time it took (its wall time where there is no thread CPU clock). Held
// on the thread, a goroutine that blocks leaves the thread idle, so time
// spent waiting (for a peer's answer, say) is not charged.
func measure(work func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok := threadclock.Now()
	if !ok {
		t0 := time.Now()
		work()
		return time.Since(t0)
	}
	work()
	c1, _ := threadclock.Now()
	return c1 - c0
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("recovery throttle: %w", ctx.Err())
	}
}
