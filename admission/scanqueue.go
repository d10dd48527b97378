package admission

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// ErrWouldMiss is wrapped by the error of a scan refused because, given
// the scans ahead of it, it could not finish by its deadline.
var ErrWouldMiss = errors.New("scan would not finish by its deadline")

// ScanQueueConfig tunes a ScanQueue.
type ScanQueueConfig struct {
	// Slots is how many scans run at once: GOMAXPROCS if zero. A scan
	// beyond them waits its turn, earliest deadline first.
	Slots int
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// ScanQueue admits a shard's scans: Slots at a time, the rest waiting
// earliest-deadline-first; one that could not finish by its deadline,
// given the scans running and waiting ahead of it and the measured scan
// time, is refused before it starts, so the shard never spends a core on an
// answer nobody will wait for.
type ScanQueue struct {
	cfg ScanQueueConfig

	mu       sync.Mutex
	running  int
	waiting  waiters
	estimate time.Duration // EWMA of recent scans' durations; 0 until one ran
}

// NewScanQueue returns an empty queue.
func NewScanQueue(cfg ScanQueueConfig) *ScanQueue {
	if cfg.Slots <= 0 {
		cfg.Slots = runtime.GOMAXPROCS(0)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &ScanQueue{cfg: cfg}
}

type waiter struct {
	deadline time.Time
	ready    chan struct{} // closed when the waiter is given a slot
	index    int
}

type waiters []*waiter

func (w waiters) Len() int           { return len(w) }
func (w waiters) Less(i, j int) bool { return w[i].deadline.Before(w[j].deadline) }
func (w waiters) Swap(i, j int)      { w[i], w[j] = w[j], w[i]; w[i].index = i; w[j].index = j }
func (w *waiters) Push(x any)        { x.(*waiter).index = len(*w); *w = append(*w, x.(*waiter)) }
func (w *waiters) Pop() any {
	old := *w
	x := old[len(old)-1]
	*w = old[:len(old)-1]
	x.index = -1
	return x
}

// Acquire waits for a scan slot, in deadline order, and returns the
// function that gives it back with the scan's duration. It refuses at once,
// with an error wrapping ErrWouldMiss, a scan that would have to wait and
// whose predicted finish (the scans ahead of it in deadline order, spread
// over the slots, then its own) is past ctx's deadline; and it returns
// ctx's error if ctx ends while it waits. A scan without a deadline, or
// one a free slot takes at once, is never refused.
func (q *ScanQueue) Acquire(ctx context.Context) (release func(took time.Duration), err error) {
	dl, hasDeadline := ctx.Deadline()
	q.mu.Lock()
	ahead := q.running
	for _, w := range q.waiting {
		if !w.deadline.After(dl) {
			ahead++
		}
	}
	// Only a scan that would wait is judged: one that gets a free slot
	// starts now, whatever the estimate says. Judging it too latched the
	// queue shut: once the estimate grew past the deadlines callers send
	// (a burst on a busy machine), every scan was refused, none ran, and
	// the estimate never came down again (found by the bench harness).
	if hasDeadline && q.estimate > 0 && ahead >= q.cfg.Slots {
		// The rest wait for rounds of the scans ahead.
		rounds := ahead / q.cfg.Slots
		finish := q.cfg.Now().Add(time.Duration(rounds+1) * q.estimate)
		if finish.After(dl) {
			est := q.estimate
			q.mu.Unlock()
			return nil, fmt.Errorf("%w: %d scans ahead on %d slots at ~%s each", ErrWouldMiss, ahead, q.cfg.Slots, est.Round(time.Microsecond))
		}
	}
	if q.running < q.cfg.Slots && len(q.waiting) == 0 {
		q.running++
		q.mu.Unlock()
		return q.release, nil
	}
	if !hasDeadline {
		dl = q.cfg.Now().Add(24 * time.Hour)
	}
	w := &waiter{deadline: dl, ready: make(chan struct{})}
	heap.Push(&q.waiting, w)
	q.mu.Unlock()
	select {
	case <-w.ready:
		return q.release, nil
	case <-ctx.Done():
		q.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&q.waiting, w.index)
			q.mu.Unlock()
			return nil, ctx.Err()
		}
		q.mu.Unlock()
		// Given a slot as ctx ended: hand it on.
		q.release(0)
		return nil, ctx.Err()
	}
}

// release gives a slot back, learning the scan's duration (0: not run).
func (q *ScanQueue) release(took time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if took > 0 {
		if q.estimate == 0 {
			q.estimate = took
		} else {
			q.estimate += (took - q.estimate) / 8
		}
	}
	if len(q.waiting) > 0 {
		w := heap.Pop(&q.waiting).(*waiter)
		close(w.ready) // the slot passes to it: running stays the same
		return
	}
	q.running--
}

// Estimate is the measured duration of one scan, 0 before any.
func (q *ScanQueue) Estimate() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.estimate
}
