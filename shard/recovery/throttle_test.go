package recovery

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/internal/threadclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock whose time moves only by the work Do runs (at full
// speed on one core: its CPU time is its wall time) and by Do's waits.
type fakeClock struct {
	t    time.Time
	cost time.Duration // the CPU each piece of work takes
}

func (f *fakeClock) clock() clock {
	return clock{
		now: func() time.Time { return f.t },
		sleep: func(_ context.Context, d time.Duration) error {
			f.t = f.t.Add(d)
			return nil
		},
		measure: func(work func()) time.Duration {
			work()
			f.t = f.t.Add(f.cost)
			return f.cost
		},
	}
}

func TestThrottleHoldsWorkToItsShare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		share  float64
		procs  int
		pieces int
		cost   time.Duration
	}{
		{"a quarter of two cores", 0.25, 2, 10, 50 * time.Millisecond},
		{"half of four cores, small pieces", 0.5, 4, 400, time.Millisecond},
		{"a tenth of one core", 0.1, 1, 5, 10 * time.Millisecond},
		{"one piece larger than the burst", 0.25, 2, 1, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeClock{t: time.Unix(1000, 0), cost: tc.cost}
			th, err := newThrottle(tc.share, tc.procs, f.clock())
			require.NoError(t, err)
			start := f.t
			ran := 0
			for range tc.pieces {
				require.NoError(t, th.Do(context.Background(), func() { ran++ }))
			}
			require.Equal(t, tc.pieces, ran)
			cpu := time.Duration(tc.pieces) * tc.cost
			require.Equal(t, cpu, th.Stats().CPU)
			// A token bucket of burstCPU refilled at share × procs cores:
			// work at full speed on one core drains the burst, then runs
			// at the refill rate, so it ends when the refill has paid for
			// all but the burst — or, with a share of over one core, it
			// never waits.
			cores := tc.share * float64(tc.procs)
			want := max(cpu, time.Duration(float64(cpu-burstCPU)/cores))
			elapsed := f.t.Sub(start)
			require.InDelta(t, float64(want), float64(elapsed), float64(time.Microsecond),
				"%s of CPU at %.2f cores took %s", cpu, cores, elapsed)
			require.Equal(t, elapsed-cpu, th.Stats().Waited)
		})
	}
}

func TestThrottleAtEveryCoreIsNone(t *testing.T) {
	th, err := New(1, 2)
	require.NoError(t, err)
	require.Nil(t, th)
	ran := false
	require.NoError(t, th.Do(context.Background(), func() { ran = true }))
	require.True(t, ran)
	require.Equal(t, Stats{}, th.Stats())
}

func TestCheckShare(t *testing.T) {
	for _, tc := range []struct {
		share float64
		ok    bool
	}{
		{0.25, true}, {1, true}, {0.01, true},
		{0, false}, {-0.5, false}, {1.5, false}, {math.NaN(), false}, {math.Inf(1), false},
	} {
		err := CheckShare(tc.share)
		if tc.ok {
			require.NoError(t, err, "share %v", tc.share)
			continue
		}
		require.Error(t, err, "share %v", tc.share)
		_, err = New(tc.share, 2)
		require.Error(t, err, "share %v", tc.share)
	}
}

// spin burns about d of the calling thread's CPU.
func spin(d time.Duration) {
	start, _ := threadclock.Now()
	x := 1.0
	for now, _ := threadclock.Now(); now-start < d; now, _ = threadclock.Now() {
		for range 1000 {
			x = x*1.0000001 + 1e-9
		}
	}
	_ = x
}

func TestDoChargesRealCPUAndWaitsHalfItsDeadline(t *testing.T) {
	if !measuresCPU {
		t.Skip("no thread CPU clock on this platform")
	}
	// A hundredth of one core: 60 ms of work owes 4 s of waiting past the
	// 20 ms burst, far longer than the context allows; Do waits half of
	// what the context has left, and returns without an error.
	th, err := New(0.01, 1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.NoError(t, th.Do(ctx, func() { spin(60 * time.Millisecond) }))
	require.Less(t, time.Since(start), 400*time.Millisecond+500*time.Millisecond, "returns within its deadline")
	st := th.Stats()
	require.GreaterOrEqual(t, st.CPU, 60*time.Millisecond, "the thread's CPU time is charged")
	require.LessOrEqual(t, st.Waited, 200*time.Millisecond, "at most half of the deadline")
	require.Positive(t, st.Waited)
	// A context that ends during the wait ends it.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	require.ErrorIs(t, th.Do(ctx2, func() { spin(time.Millisecond) }), context.Canceled)
}

func TestWaitOwedPastADeadlineIsPaidByTheNextPieces(t *testing.T) {
	f := &fakeClock{t: time.Unix(1000, 0), cost: 120 * time.Millisecond}
	th, err := newThrottle(0.5, 1, f.clock())
	require.NoError(t, err)
	start := f.t
	ctx, cancel := context.WithDeadline(context.Background(), f.t.Add(120*time.Millisecond+100*time.Millisecond))
	defer cancel()
	// 120 ms of work at half a core owes 200 ms past the burst; the
	// deadline leaves 100 ms after the work, so it waits 50.
	require.NoError(t, th.Do(ctx, func() {}))
	require.Equal(t, 170*time.Millisecond, f.t.Sub(start))
	// The next piece pays the 150 ms still owed besides its own 240 ms.
	require.NoError(t, th.Do(context.Background(), func() {}))
	require.Equal(t, time.Duration(float64(240*time.Millisecond-burstCPU)/0.5), f.t.Sub(start))
}

// procClock is a fake clock with a process CPU counter the test moves.
type procClock struct {
	t    time.Time
	proc time.Duration
}

func (f *procClock) clock() clock {
	return clock{
		now: func() time.Time { return f.t },
		sleep: func(_ context.Context, d time.Duration) error {
			f.t = f.t.Add(d)
			return nil
		},
		measure: func(work func()) time.Duration { work(); return 0 },
		process: func() time.Duration { return f.proc },
	}
}

func TestProcessPacerChargesTheProcessCPUBetweenPieces(t *testing.T) {
	if !measuresCPU {
		t.Skip("no process CPU clock on this platform")
	}
	const (
		pieces = 20
		work   = 5 * time.Millisecond // each piece, on the calling thread
		feed   = 3 * time.Millisecond // other goroutines between pieces (receiving, storing, GC)
	)
	for _, tc := range []struct {
		name    string
		gap     time.Duration // wall time between pieces
		charged time.Duration
	}{
		{"pieces back to back: the feeding work is charged", 10 * time.Millisecond, pieces*work + (pieces-1)*feed},
		{"pieces after pauses: only the pieces", processGap + time.Millisecond, pieces * work},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &procClock{t: time.Unix(1000, 0)}
			th, err := newThrottle(0.05, 2, f.clock())
			require.NoError(t, err)
			p := th.WholeProcess()
			start := f.t
			for i := range pieces {
				if i > 0 {
					f.t, f.proc = f.t.Add(tc.gap), f.proc+feed
				}
				require.NoError(t, p.Do(context.Background(), func() { f.t, f.proc = f.t.Add(work), f.proc+work }))
			}
			require.Equal(t, tc.charged, th.Stats().CPU)
			// What was charged fits the bucket: the burst plus a tenth of
			// a core over the time it took.
			elapsed := f.t.Sub(start)
			require.LessOrEqual(t, float64(tc.charged), float64(burstCPU)+0.1*float64(elapsed)+1)
		})
	}
	var none *ProcessPacer
	ran := false
	require.NoError(t, none.Do(context.Background(), func() { ran = true }))
	require.True(t, ran)
	require.Nil(t, (*Throttle)(nil).WholeProcess())
}
