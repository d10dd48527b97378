package fanout

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"
)

// teach records answers of the given latencies on replica i of shard 0, at
// the clock's time.
func teach(c *Cluster[*fake], clk *clock, i int, lat ...time.Duration) {
	r := c.shards[0].list()[i]
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range lat {
		r.observeLatency(clk.Now(), d)
	}
}

// times repeats d n times.
func times(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// within1pct: HdrHistogram at 2 significant digits reports a value within
// 1 % of the one recorded.
func within1pct(t *testing.T, want, got time.Duration) {
	t.Helper()
	require.InDelta(t, float64(want), float64(got), float64(want)/100, "want ~%s, got %s", want, got)
}

// spread is n answers evenly spaced from lo to hi.
func spread(n int, lo, hi time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = lo + (hi-lo)*time.Duration(i)/time.Duration(n-1)
	}
	return out
}

func TestHedgeDelay(t *testing.T) {
	const (
		fast = 2 * time.Millisecond
		slow = 60 * time.Millisecond
	)
	tests := []struct {
		name string
		// answers each replica's window holds (cur, alt)
		cur, alt []time.Duration
		want     time.Duration
		ok       bool
	}{
		{
			// The replica in flight is slow on one call in ten: past its
			// fast mode (its 90th percentile) half its reads run tens of
			// milliseconds on, so it is hedged there, long before its own
			// tail (the slow mode) would say.
			name: "a replica slow on some calls: hedged past its fast mode",
			cur:  append(times(90, fast), times(10, slow)...),
			alt:  append(times(85, time.Millisecond), times(15, 3*time.Millisecond)...),
			want: fast, ok: true,
		},
		{
			// Healthy replicas alike: a read past any quantile mostly ends
			// sooner than a fresh one on alt would, so only a read past the
			// 99th percentile (a replica that may have gone silent) is
			// hedged.
			name: "a healthy replica: hedged only past its p99",
			cur:  spread(101, 2*time.Millisecond, 7*time.Millisecond),
			alt:  spread(101, 2*time.Millisecond, 7*time.Millisecond),
			want: 6950 * time.Microsecond, ok: true,
		},
		{
			// A tail that is long next to alt's median: the first hedge
			// point past which the slower half runs alt's median longer.
			name: "a long tail next to a fast peer: the first point it pays",
			cur:  spread(101, 2*time.Millisecond, 40*time.Millisecond),
			alt:  times(50, 5*time.Millisecond),
			want: 21 * time.Millisecond, ok: true,
		},
		{
			// Stalls in the replica's own window (2.25 % of its answers:
			// past its p98, so no hedge point's slower half is longer than
			// the rest's) would put its p99 past the deadline: the
			// target's p99 bounds the mark.
			name: "stalls in the replica's window: the target's p99 bounds it",
			cur:  append(spread(391, 2*time.Millisecond, 7*time.Millisecond), times(9, 250*time.Millisecond)...),
			alt:  spread(101, 2*time.Millisecond, 7*time.Millisecond),
			want: 6950 * time.Microsecond, ok: true,
		},
		{
			name: "the target unmeasured: the replica's own median stands in for it",
			cur:  append(times(95, fast), times(5, slow)...),
			alt:  times(MinHedgeSamples-1, time.Millisecond),
			want: fast, ok: true,
		},
		{
			name: "the replica unmeasured: the target's p90",
			cur:  times(MinHedgeSamples-1, slow),
			alt:  append(times(90, time.Millisecond), times(10, 3*time.Millisecond)...),
			want: time.Millisecond, ok: true,
		},
		{
			name: "neither measured: a quarter of the budget",
			want: 300 * time.Millisecond / 4, ok: true,
		},
		{
			name: "never below the minimum delay",
			cur:  times(50, 10*time.Microsecond),
			alt:  times(50, 10*time.Microsecond),
			want: time.Millisecond, ok: true,
		},
		{
			name: "no room for a second attempt",
			cur:  times(50, fast),
			alt:  times(50, 299*time.Millisecond),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{now: time.Unix(1000, 0)}
			c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", nil), newFake("a1", nil)}}}, Options{Now: clk.Now})
			teach(c, clk, 0, tc.cur...)
			teach(c, clk, 1, tc.alt...)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			d, _, ok := c.hedgeDelay(ctx, c.shards[0].list()[0], c.shards[0].list()[1])
			require.Equal(t, tc.ok, ok)
			if !ok {
				return
			}
			if tc.cur == nil {
				// A quarter of what remained when it was asked.
				require.InDelta(t, float64(tc.want), float64(d), float64(10*time.Millisecond))
				return
			}
			within1pct(t, tc.want, d)
		})
	}
}

// The distribution is over a sliding window of the engine's clock: a
// replica that was slow and recovered is judged by its recent answers.
func TestLatencyWindowSlides(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", nil)}}}, Options{Now: clk.Now})
	r := c.shards[0].list()[0]
	q := func() (time.Duration, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		p, ok := r.profile(clk.Now())
		return p.p90, ok
	}
	teach(c, clk, 0, times(100, 40*time.Millisecond)...)
	d, ok := q()
	require.True(t, ok)
	within1pct(t, 40*time.Millisecond, d)

	clk.Add(LatencyWindow / 2)
	teach(c, clk, 0, times(100, 2*time.Millisecond)...)
	d, _ = q()
	within1pct(t, 40*time.Millisecond, d) // half of the window is still slow

	clk.Add(LatencyWindow/2 + LatencyWindow/latencySlices)
	d, ok = q()
	require.True(t, ok)
	within1pct(t, 2*time.Millisecond, d)

	clk.Add(LatencyWindow)
	_, ok = q()
	require.False(t, ok, "an empty window backs no quantile")
}

// A replica slow on this call, past its own 99th percentile, is hedged to
// the fastest of its peers, and the loser is cancelled.
func TestSlowCallIsHedgedAndTheLoserCancelled(t *testing.T) {
	rec := newRecorder()
	clk := &clock{now: time.Unix(1000, 0)}
	var loserErr atomic.Value
	slow := newFake("a0", func(ctx context.Context) (ans, error) {
		<-ctx.Done()
		loserErr.Store(ctx.Err())
		return ans{}, ctx.Err()
	})
	a1, a2 := newFake("a1", nil), newFake("a2", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{slow, a1, a2}}}, Options{Reporter: rec, Now: clk.Now})
	teach(c, clk, 0, times(50, time.Millisecond)...)
	teach(c, clk, 1, times(50, time.Millisecond)...)
	teach(c, clk, 2, times(50, time.Millisecond)...)
	setOrder(c, 0, 1, 2)

	res, sum := Gather(context.Background(), c, req(300*time.Millisecond), call)
	require.False(t, sum.Degraded())
	require.Equal(t, "a1", res[0].Replica)
	require.True(t, res[0].Hedged)
	require.Equal(t, 1, rec.hedges["a/won"])
	require.Eventually(t, func() bool {
		err, _ := loserErr.Load().(error)
		return errors.Is(err, context.Canceled)
	}, time.Second, time.Millisecond, "the losing attempt is cancelled, not left to run to the deadline")
}

// A replica that has answered nothing since the read began, while a peer
// has, is stuck: it is hedged at the peer's p90 even where its own tail
// (and the peer's) would time the hedge past the deadline. When nobody
// has answered (a stall of the router or the host), or the replica has,
// no such hedge goes out.
func TestStuckReplicaIsHedgedEarly(t *testing.T) {
	const stall = 250 * time.Millisecond
	tests := []struct {
		name                string
		curAnswered, altAns bool
		hedged              bool
	}{
		{name: "the replica silent, its peer answering: hedged", altAns: true, hedged: true},
		{name: "nobody answering: no hedge", hedged: false},
		{name: "the replica answering other calls: no hedge", curAnswered: true, altAns: true, hedged: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{now: time.Unix(1000, 0)}
			silent := newFake("a0", func(ctx context.Context) (ans, error) {
				<-ctx.Done()
				return ans{}, ctx.Err()
			})
			a1 := newFake("a1", nil)
			c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{silent, a1}}}, Options{Now: clk.Now})
			// Both replicas' tails put a hedge at the delay past the
			// deadline; the peer's p90 is a millisecond.
			teach(c, clk, 0, times(50, stall)...)
			teach(c, clk, 1, append(times(90, time.Millisecond), times(10, stall)...)...)
			setOrder(c, 0, 1)
			for i, answered := range []bool{tc.curAnswered, tc.altAns} {
				if answered {
					r := c.shards[0].list()[i]
					r.mu.Lock()
					r.lastAnswer = clk.Now() // the fake clock stands still: "since the read began"
					r.mu.Unlock()
				}
			}
			res, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
			require.Equal(t, tc.hedged, res[0].Hedged)
			require.Equal(t, !tc.hedged, sum.Degraded())
			if tc.hedged {
				require.Equal(t, "a1", res[0].Replica)
			} else {
				require.Zero(t, a1.calls.Load(), "nobody else asked")
			}
		})
	}
}

// No hedge goes to a replica with a long queue of this router's calls: it
// goes to the next one that has none, or nowhere.
func TestNoHedgeToALongQueue(t *testing.T) {
	tests := []struct {
		name   string
		queued []int // outstanding calls on a1, a2
		want   string
	}{
		{name: "the next candidate queued: the one after", queued: []int{DefaultHedgeMaxOutstanding, 0}, want: "a2"},
		{name: "every other queued: no hedge", queued: []int{DefaultHedgeMaxOutstanding, DefaultHedgeMaxOutstanding}, want: "a0"},
		{name: "short queues: the next candidate", queued: []int{DefaultHedgeMaxOutstanding - 1, 0}, want: "a1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			clk := &clock{now: time.Unix(1000, 0)}
			// Only the expected hedge target answers at once; the other
			// stays silent, so a second hedge that a loaded machine lets
			// fire before the first one's answer is read cannot win the
			// race and hide which replica the first hedge went to.
			silent := func(ctx context.Context) (ans, error) {
				<-ctx.Done()
				return ans{}, status.FromContextError(ctx.Err()).Err()
			}
			a0 := newFake("a0", okAfter(80*time.Millisecond, 5))
			a1, a2 := newFake("a1", silent), newFake("a2", silent)
			for _, f := range []*fake{a1, a2} {
				if f.addr == tc.want {
					f.answer = nil
				}
			}
			c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{a0, a1, a2}}}, Options{Reporter: rec, Now: clk.Now})
			for i := range 3 {
				teach(c, clk, i, times(50, time.Millisecond)...)
			}
			// Rank a0, a1, a2 even with a1's queue (candidates weighs the
			// mean by the calls outstanding).
			for i, mean := range []time.Duration{time.Microsecond, 2 * time.Microsecond, 100 * time.Microsecond} {
				r := c.shards[0].list()[i]
				r.mu.Lock()
				r.mean = mean
				if i > 0 {
					r.outstanding = tc.queued[i-1]
				}
				r.mu.Unlock()
			}
			res, sum := Gather(context.Background(), c, req(300*time.Millisecond), call)
			require.False(t, sum.Degraded())
			require.Equal(t, tc.want, res[0].Replica)
			require.Equal(t, tc.want != "a0", res[0].Hedged)
			if tc.want == "a0" {
				require.Zero(t, a1.calls.Load()+a2.calls.Load(), "nobody else asked")
			}
		})
	}
}

// setOrder makes the replicas of shard 0 rank in the given order
// (candidates sorts by mean latency × outstanding calls).
func setOrder(c *Cluster[*fake], order ...int) {
	for rank, i := range order {
		r := c.shards[0].list()[i]
		r.mu.Lock()
		r.mean = time.Duration(rank+1) * time.Microsecond
		r.mu.Unlock()
	}
}
