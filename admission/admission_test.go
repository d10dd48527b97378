package admission

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func reason(t *testing.T, err error) Reason {
	t.Helper()
	var r *Refusal
	require.True(t, errors.As(err, &r), "not a refusal: %v", err)
	return r.Reason
}

// While admitted queries finish well inside their deadlines nothing but
// the hard cap refuses, however many arrive at once.
func TestLimiterRefusesNothingWhileAnswersAreFast(t *testing.T) {
	clk := &clock{now: time.Unix(0, 0)}
	for _, off := range []bool{false, true} {
		l := NewLimiter(LimiterConfig{Max: 100, Floor: 4, Off: off, Target: 0.5, Now: clk.Now})
		require.Equal(t, 100, l.Limit(), "the limit starts at the cap")
		for range 3 {
			var ps []*Permit
			for range 100 {
				require.NoError(t, l.Check())
				p, err := l.Acquire(1, 50*time.Millisecond)
				require.NoError(t, err)
				ps = append(ps, p)
			}
			_, err := l.Acquire(1, 50*time.Millisecond)
			require.Equal(t, ReasonMaxInflight, reason(t, err))
			require.Equal(t, ReasonMaxInflight, reason(t, l.Check()))
			clk.Add(5 * time.Millisecond)
			for _, p := range ps {
				p.Done(5*time.Millisecond, false)
			}
		}
	}
}

// A spike is felt as soon as the oldest query in flight has used more
// than Target of its deadline, before any answer comes back late: the limit
// drops below what is in flight, and the excess is refused.
func TestLimiterFeelsASpikeBeforeItsAnswers(t *testing.T) {
	clk := &clock{now: time.Unix(0, 0)}
	l := NewLimiter(LimiterConfig{Max: 256, Floor: 8, Target: 0.5, Now: clk.Now})
	var ps []*Permit
	for range 50 {
		p, err := l.Acquire(1, 100*time.Millisecond)
		require.NoError(t, err)
		ps = append(ps, p)
	}
	clk.Add(60 * time.Millisecond) // past half of the oldest's deadline
	require.Equal(t, ReasonLimit, reason(t, l.Check()))
	require.Equal(t, 40, l.Limit(), "what was in flight, less one backoff step")
	require.True(t, l.Refusing())
	for _, p := range ps {
		p.Done(90*time.Millisecond, false)
	}
}

// Queries that use most of their deadline shrink the limit toward the
// floor, never below it; once queries are fast again it grows back: by
// about one per round while under pressure, doubling per round after.
func TestLimiterShrinksUnderPressureAndRecovers(t *testing.T) {
	clk := &clock{now: time.Unix(0, 0)}
	l := NewLimiter(LimiterConfig{Max: 256, Floor: 8, Target: 0.5, Now: clk.Now})
	deadline := 50 * time.Millisecond
	var ps []*Permit
	for range 100 {
		p, err := l.Acquire(1, deadline)
		require.NoError(t, err)
		ps = append(ps, p)
	}
	for _, p := range ps[:50] { // slow answers: one shrink per interval
		clk.Add(10 * time.Millisecond)
		p.Done(45*time.Millisecond, false)
	}
	require.Less(t, l.Limit(), 100)
	for _, p := range ps[50:] {
		p.Done(45*time.Millisecond, false)
	}
	for range 40 { // keep missing deadlines: the limit reaches its floor and stays
		p, err := l.Acquire(1, deadline)
		require.NoError(t, err)
		clk.Add(60 * time.Millisecond)
		p.Done(0, true)
	}
	require.Equal(t, 8, l.Limit())
	var held []*Permit
	for range 8 {
		p, err := l.Acquire(1, deadline)
		require.NoError(t, err)
		held = append(held, p)
	}
	_, err := l.Acquire(1, deadline)
	require.Equal(t, ReasonLimit, reason(t, err))
	require.Equal(t, ReasonLimit, reason(t, l.Check()), "the header check refuses too, and reserves nothing")
	require.True(t, l.Refusing())
	held[0].Done(time.Millisecond, false)
	_, err = l.Acquire(2, deadline)
	require.Equal(t, ReasonLimit, reason(t, err), "a batch is charged per query")
	for _, p := range held[1:] {
		p.Done(time.Millisecond, false)
	}
	rounds(l, 20, time.Millisecond)
	require.Greater(t, l.Limit(), 20)
	require.Less(t, l.Limit(), 40)
	clk.Add(2 * time.Second)
	require.False(t, l.Refusing(), "refusing means within the last second")
	rounds(l, 4, time.Millisecond)
	require.Equal(t, 256, l.Limit())
}

// rounds runs n rounds of as many concurrent queries as the limiter
// admits, each finishing in took.
func rounds(l *Limiter, n int, took time.Duration) {
	for range n {
		var ps []*Permit
		for {
			p, err := l.Acquire(1, 50*time.Millisecond)
			if err != nil {
				break
			}
			ps = append(ps, p)
		}
		for _, p := range ps {
			p.Done(took, false)
		}
	}
}

// Under pressure, a query whose deadline is shorter than what queries have
// been taking is refused as deadline.
func TestLimiterRefusesWhatCannotFinishInTime(t *testing.T) {
	clk := &clock{now: time.Unix(0, 0)}
	l := NewLimiter(LimiterConfig{Max: 256, Floor: 2, Target: 0.5, Now: clk.Now})
	var ps []*Permit
	for range 6 {
		p, err := l.Acquire(1, time.Second)
		require.NoError(t, err)
		ps = append(ps, p)
	}
	ps[0].Done(800*time.Millisecond, false) // slow for its deadline: pressure
	for _, p := range ps[1:4] {
		p.Done(time.Millisecond, false)
	}
	_, err := l.Acquire(1, 5*time.Millisecond)
	require.Equal(t, ReasonDeadline, reason(t, err))
	p, err := l.Acquire(1, time.Second)
	require.NoError(t, err, "a query with time enough is admitted")
	for _, p := range append(ps[4:], p) {
		p.Done(time.Millisecond, false)
	}
}

func TestScanQueue(t *testing.T) {
	q := NewScanQueue(ScanQueueConfig{Slots: 1})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()

	rel, err := q.Acquire(ctx)
	require.NoError(t, err)
	rel(10 * time.Millisecond) // the first scan teaches the estimate
	require.Equal(t, 10*time.Millisecond, q.Estimate())

	// A free slot is never refused, even for a deadline shorter than the
	// estimate: refusing it would leave the estimate stuck (the latch the
	// bench harness found), and it starts at once.
	short, cancelShort := context.WithTimeout(context.Background(), 5*time.Millisecond)
	free, err := q.Acquire(short)
	cancelShort()
	require.NoError(t, err)
	free(0) // not run: the estimate stays
	require.Equal(t, 10*time.Millisecond, q.Estimate())

	running, err := q.Acquire(ctx)
	require.NoError(t, err)

	// With one scan running, a scan due in 15 ms would wait ~10 ms and run
	// ~10 ms: refused before it starts.
	tight, cancelTight := context.WithTimeout(context.Background(), 15*time.Millisecond)
	defer cancelTight()
	_, err = q.Acquire(tight)
	require.ErrorIs(t, err, ErrWouldMiss)

	// Waiters are served earliest deadline first.
	order := make(chan string, 2)
	var wg sync.WaitGroup
	for _, w := range []struct {
		name string
		in   time.Duration
	}{{"late", 50 * time.Minute}, {"early", 40 * time.Minute}} {
		wctx, wcancel := context.WithTimeout(context.Background(), w.in)
		defer wcancel()
		wg.Go(func() {
			rel, err := q.Acquire(wctx)
			if err != nil {
				order <- "error: " + err.Error()
				return
			}
			order <- w.name
			rel(10 * time.Millisecond)
		})
		require.Eventually(t, func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.waiting) >= 1 && (w.name == "late" || len(q.waiting) == 2)
		}, time.Second, time.Millisecond)
	}
	running(10 * time.Millisecond)
	wg.Wait()
	require.Equal(t, "early", <-order)
	require.Equal(t, "late", <-order)

	// A waiter whose context ends leaves the queue.
	hold, err := q.Acquire(ctx)
	require.NoError(t, err)
	gone, cancelGone := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := q.Acquire(gone); errc <- err }()
	require.Eventually(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.waiting) == 1 }, time.Second, time.Millisecond)
	cancelGone()
	require.ErrorIs(t, <-errc, context.Canceled)
	hold(0)
	rel, err = q.Acquire(ctx)
	require.NoError(t, err, "the slot is free again")
	rel(0)
}
