package fanout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a replica whose behaviour the test scripts per call.
type fake struct {
	addr  string
	ready atomic.Bool
	calls atomic.Int32
	mu    sync.Mutex
	// answer decides each call; nil means answer ok at once.
	answer func(ctx context.Context) (ans, error)
}

func (f *fake) script(answer func(ctx context.Context) (ans, error)) {
	f.mu.Lock()
	f.answer = answer
	f.mu.Unlock()
}

type ans struct{ docs uint64 }

func (a ans) GetDocCount() uint64 { return a.docs }

func (f *fake) Addr() string { return f.addr }
func (f *fake) Ready() bool  { return f.ready.Load() }

func newFake(addr string, answer func(ctx context.Context) (ans, error)) *fake {
	f := &fake{addr: addr, answer: answer}
	f.ready.Store(true)
	return f
}

func call(ctx context.Context, f *fake) (ans, error) {
	f.calls.Add(1)
	f.mu.Lock()
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		return ans{docs: 10}, nil
	}
	return answer(ctx)
}

func okAfter(d time.Duration, docs uint64) func(context.Context) (ans, error) {
	return func(ctx context.Context) (ans, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return ans{docs: docs}, nil
		case <-ctx.Done():
			return ans{}, status.FromContextError(ctx.Err()).Err()
		}
	}
}

func fails(c codes.Code) func(context.Context) (ans, error) {
	return func(context.Context) (ans, error) { return ans{}, status.Error(c, "scripted") }
}

// hang never answers until its context ends, like a blackholed peer.
func hang(ctx context.Context) (ans, error) {
	<-ctx.Done()
	return ans{}, status.FromContextError(ctx.Err()).Err()
}

// recorder is a Reporter that keeps counts.
type recorder struct {
	mu        sync.Mutex
	fanouts   int
	coll      string // the last fan-out's collection
	missing   map[string]Reason
	failovers map[string]int
	hedges    map[string]int
	suspect   map[string]bool
}

func newRecorder() *recorder {
	return &recorder{failovers: map[string]int{}, hedges: map[string]int{}, suspect: map[string]bool{}}
}

func (r *recorder) Fanout(_ Path, coll string, _ time.Duration, _ float64, missing map[string]Reason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fanouts++
	r.coll = coll
	r.missing = missing
}
func (r *recorder) ShardRPC(string, string, string, time.Duration) {}
func (r *recorder) Failover(shard string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failovers[shard]++
}
func (r *recorder) Hedge(shard string, outcome HedgeOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hedges[shard+"/"+string(outcome)]++
}
func (r *recorder) Suspect(shard, replica string, s bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.suspect[shard+"/"+replica] = s
}

// clock is an injected clock tests move by hand.
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

func req(deadline time.Duration) Request {
	return Request{Path: PathSearch, Start: time.Now(), Budget: budget.Budget{Deadline: deadline, Shard: deadline - 5*time.Millisecond}}
}

func TestGatherAllHealthy(t *testing.T) {
	rec := newRecorder()
	c := New([]Shard[*fake]{
		{Name: "a", Replicas: []*fake{newFake("a0", nil), newFake("a1", nil)}},
		{Name: "b", Replicas: []*fake{newFake("b0", nil)}},
	}, Options{Reporter: rec})
	res, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.Len(t, res, 2)
	require.False(t, sum.Degraded())
	require.Equal(t, 2, sum.ShardsQueried)
	require.Equal(t, []string{}, sum.Unavailable)
	require.Equal(t, 1.0, sum.Coverage)
	require.Equal(t, 1, rec.fanouts)
	require.Empty(t, rec.missing)
}

func TestFailoverWithinTheCall(t *testing.T) {
	rec := newRecorder()
	dead := newFake("a0", fails(codes.Unavailable))
	live := newFake("a1", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{dead, live}}}, Options{Reporter: rec, HedgeBudget: -1})
	res, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.False(t, sum.Degraded())
	require.Equal(t, "a1", res[0].Replica)
	require.True(t, res[0].FailedOver)
	require.Equal(t, 1, rec.failovers["a"])
	require.EqualValues(t, 1, dead.calls.Load(), "each replica at most once")
}

func TestAnswersAreNotFailedOver(t *testing.T) {
	bad := newFake("a0", fails(codes.Internal))
	other := newFake("a1", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{bad, other}}}, Options{HedgeBudget: -1})
	res, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.Equal(t, map[string]Reason{"a": ReasonInternal}, sum.ShardErrors)
	require.Equal(t, ReasonInternal, res[0].Reason)
	require.Zero(t, other.calls.Load(), "an Internal answer is the shard's answer, not a connectivity failure")
	st := c.Status()[0].Replicas[0]
	require.Zero(t, st.ConsecutiveFailures)
}

func TestNoReadyReplicaFailsFast(t *testing.T) {
	r0, r1 := newFake("a0", hang), newFake("a1", hang)
	r0.ready.Store(false)
	r1.ready.Store(false)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{r0, r1}}, {Name: "b", Replicas: []*fake{newFake("b0", nil)}}}, Options{})
	start := time.Now()
	_, sum := Gather(context.Background(), c, req(2*time.Second), call)
	require.Less(t, time.Since(start), time.Second, "no ready replica must not wait out the deadline")
	require.Equal(t, map[string]Reason{"a": ReasonUnavailable}, sum.ShardErrors)
	require.Zero(t, r0.calls.Load()+r1.calls.Load())
}

func TestHungShardCostsTheDeadline(t *testing.T) {
	rec := newRecorder()
	c := New([]Shard[*fake]{
		{Name: "a", Replicas: []*fake{newFake("a0", hang)}},
		{Name: "b", Replicas: []*fake{newFake("b0", nil)}},
	}, Options{Reporter: rec})
	const deadline = 200 * time.Millisecond
	start := time.Now()
	_, sum := Gather(context.Background(), c, req(deadline), call)
	took := time.Since(start)
	require.GreaterOrEqual(t, took, deadline-5*time.Millisecond-time.Millisecond)
	require.Less(t, took, deadline+50*time.Millisecond)
	require.Equal(t, map[string]Reason{"a": ReasonDeadline}, sum.ShardErrors)
	require.Less(t, sum.Coverage, 1.0)
	require.Equal(t, map[string]Reason{"a": ReasonDeadline}, rec.missing)
}

// A call that ignores its context cannot hold the answer past the deadline.
func TestGatherReturnsByDeadlineWhateverTheCallDoes(t *testing.T) {
	release := make(chan struct{})
	stubborn := newFake("a0", func(context.Context) (ans, error) { <-release; return ans{}, nil })
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{stubborn}}, {Name: "b", Replicas: []*fake{newFake("b0", nil)}}}, Options{})
	start := time.Now()
	_, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.Less(t, time.Since(start), 250*time.Millisecond)
	require.Equal(t, ReasonDeadline, sum.ShardErrors["a"])
	close(release)
}

func TestSuspectAfterThreeFailuresAndCooldown(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	rec := newRecorder()
	down := newFake("a0", fails(codes.Unavailable))
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{down}}}, Options{Reporter: rec, Now: clk.Now})
	for i := range SuspectAfter {
		_, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
		require.Equal(t, ReasonUnavailable, sum.ShardErrors["a"], "attempt %d", i)
	}
	require.True(t, rec.suspect["a/a0"])
	require.True(t, c.Status()[0].Replicas[0].Suspect)

	// Suspect: answered at once, without touching the replica.
	calls := down.calls.Load()
	_, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.Equal(t, ReasonSuspect, sum.ShardErrors["a"])
	require.Equal(t, calls, down.calls.Load())

	// After the cooldown it is tried again.
	clk.Add(Cooldown)
	down.script(nil)
	_, sum = Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.False(t, sum.Degraded())
	require.False(t, rec.suspect["a/a0"])
	require.Zero(t, c.Status()[0].Replicas[0].ConsecutiveFailures)
}

func TestTinyBudgetTimeoutsCountAgainstNobody(t *testing.T) {
	slow := newFake("a0", okAfter(50*time.Millisecond, 1))
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{slow}}}, Options{})
	for range 10 {
		_, sum := Gather(context.Background(), c, Request{Path: PathSearch, Start: time.Now(), Budget: budget.Budget{Deadline: time.Millisecond, Shard: time.Millisecond}}, call)
		require.Equal(t, ReasonDeadline, sum.ShardErrors["a"])
	}
	st := c.Status()[0].Replicas[0]
	require.False(t, st.Suspect)
	require.Zero(t, st.ConsecutiveFailures)
}

func TestRealBudgetTimeoutsCount(t *testing.T) {
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", hang)}}}, Options{})
	for range SuspectAfter {
		Gather(context.Background(), c, req(40*time.Millisecond), call)
	}
	// The last attempt is recorded as it ends, just after the answer.
	require.Eventually(t, func() bool { return c.Status()[0].Replicas[0].Suspect }, time.Second, time.Millisecond)
}

func TestNotServingIsSkippedWithoutBlame(t *testing.T) {
	loading := newFake("a0", func(context.Context) (ans, error) { return ans{}, notServing{} })
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{loading, newFake("a1", nil)}}}, Options{HedgeBudget: -1})
	for range 5 {
		res, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
		require.False(t, sum.Degraded())
		require.Equal(t, "a1", res[0].Replica)
	}
	require.Zero(t, c.Status()[0].Replicas[0].ConsecutiveFailures)
}

// A shard whose every replica answers but refuses as not serving is
// missing as not_serving, so operators tell catching up from unreachable.
func TestEveryReplicaNotServingIsItsOwnReason(t *testing.T) {
	loading := func(context.Context) (ans, error) { return ans{}, notServing{} }
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", loading), newFake("a1", loading)}}}, Options{HedgeBudget: -1})
	res, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.True(t, sum.Degraded())
	require.Equal(t, ReasonNotServing, res[0].Reason)
	require.Equal(t, map[string]Reason{"a": ReasonNotServing}, sum.ShardErrors)
	for _, r := range c.Status()[0].Replicas {
		require.Zero(t, r.ConsecutiveFailures, "not serving is nobody's failure")
	}
}

type notServing struct{}

func (notServing) Error() string    { return "not serving" }
func (notServing) NotServing() bool { return true }

func TestHedgeWinsOverASilentReplica(t *testing.T) {
	rec := newRecorder()
	silent := newFake("a0", okAfter(time.Millisecond, 5))
	fast := newFake("a1", okAfter(time.Millisecond, 5))
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{silent, fast}}}, Options{Reporter: rec})
	// Teach the engine both replicas answer in ~1 ms.
	for range 20 {
		Gather(context.Background(), c, req(300*time.Millisecond), call)
	}
	silent.script(hang) // goes silent on a warm connection
	// Make the silent replica the preferred one.
	for _, r := range c.shards[0].list() {
		r.mu.Lock()
		r.mean = time.Millisecond
		if r.r == fast {
			r.mean = 2 * time.Millisecond
		}
		r.mu.Unlock()
	}
	start := time.Now()
	res, sum := Gather(context.Background(), c, req(300*time.Millisecond), call)
	require.False(t, sum.Degraded())
	require.Equal(t, "a1", res[0].Replica)
	require.True(t, res[0].Hedged)
	require.Less(t, time.Since(start), 150*time.Millisecond, "the hedge answers long before the deadline")
	require.Equal(t, 1, rec.hedges["a/won"])
}

func TestHedgesAreCapped(t *testing.T) {
	rec := newRecorder()
	a0 := newFake("a0", hang)
	a1 := newFake("a1", hang)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{a0, a1}}}, Options{Reporter: rec, HedgeBurst: 2, HedgeBudget: 0.01})
	for range 6 {
		Gather(context.Background(), c, req(60*time.Millisecond), call)
		for _, r := range c.shards[0].list() { // keep both choosable
			r.mu.Lock()
			r.success()
			r.mu.Unlock()
		}
	}
	total := 0
	rec.mu.Lock()
	for _, v := range rec.hedges {
		total += v
	}
	rec.mu.Unlock()
	require.Equal(t, 2, total, "every read wants a hedge: the burst of 2 is spent, and 6 RPCs earn only 0.06 more")
}

func TestCoverage(t *testing.T) {
	for _, tc := range []struct {
		name string
		// docs each shard reported in a first, healthy fan-out; 0 = never seen.
		first []uint64
		down  []bool
		want  float64
	}{
		{"all answer", []uint64{10, 20, 30}, []bool{false, false, false}, 1},
		{"last known count", []uint64{10, 20, 30}, []bool{false, false, true}, 30.0 / 60},
		{"never seen counts the mean of known", []uint64{10, 30, 0}, []bool{false, false, true}, 40.0 / 60},
		{"empty missing shard still counts 1", []uint64{10, 0, 0}, []bool{true, true, true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shards []Shard[*fake]
			fakes := make([]*fake, len(tc.first))
			for i, d := range tc.first {
				fakes[i] = newFake(string(rune('a'+i)), okAfter(0, d))
				shards = append(shards, Shard[*fake]{Name: fakes[i].addr, Replicas: []*fake{fakes[i]}})
			}
			c := New(shards, Options{})
			for i, d := range tc.first {
				if d == 0 {
					fakes[i].ready.Store(false)
				}
			}
			Gather(context.Background(), c, req(200*time.Millisecond), call)
			for i, down := range tc.down {
				fakes[i].ready.Store(!down)
			}
			_, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
			require.InDelta(t, tc.want, sum.Coverage, 1e-9)
			if sum.Degraded() {
				require.Less(t, sum.Coverage, 1.0)
			}
		})
	}
}

// TestCoverageIsPerCollection: a shard's last known count is per
// collection. Missing from a fan-out over "small", shard c counts with
// what it held in "small", not in "big"; a collection c never answered
// for counts the mean of the others' counts in it. The reporter hears
// the fan-out's collection, and KeepCollections forgets dropped ones.
func TestCoverageIsPerCollection(t *testing.T) {
	docs := map[string]uint64{"big": 1000, "small": 10}
	var fakes []*fake
	var shards []Shard[*fake]
	for _, n := range []string{"a", "b", "c"} {
		f := newFake(n, nil)
		fakes = append(fakes, f)
		shards = append(shards, Shard[*fake]{Name: n, Replicas: []*fake{f}})
	}
	rec := newRecorder()
	c := New(shards, Options{Reporter: rec})
	in := func(coll string) Request {
		r := req(200 * time.Millisecond)
		r.Collection = coll
		return r
	}
	byColl := func(coll string) Call[*fake, ans] {
		return func(context.Context, *fake) (ans, error) { return ans{docs: docs[coll]}, nil }
	}
	for _, coll := range []string{"big", "small"} {
		_, sum := Gather(context.Background(), c, in(coll), byColl(coll))
		require.False(t, sum.Degraded())
		require.Equal(t, coll, rec.coll)
	}
	fakes[2].ready.Store(false)
	_, sum := Gather(context.Background(), c, in("small"), byColl("small"))
	require.InDelta(t, 20.0/30, sum.Coverage, 1e-9, "c counts its 10 documents of small, not its 1000 of big")
	_, sum = Gather(context.Background(), c, in("big"), byColl("big"))
	require.InDelta(t, 2000.0/3000, sum.Coverage, 1e-9)
	// "new" was never read on c: it counts the mean of a's and b's.
	docs["new"] = 40
	_, sum = Gather(context.Background(), c, in("new"), byColl("new"))
	require.InDelta(t, 80.0/120, sum.Coverage, 1e-9)
	require.Equal(t, uint64(1010), c.Status()[2].Docs, "c's counts over every collection")

	c.KeepCollections([]string{"small"})
	require.Equal(t, uint64(10), c.Status()[2].Docs, "big and new forgotten")
	require.Equal(t, uint64(10), c.Status()[0].Docs)
	fakes[2].ready.Store(true)
	fakes[0].ready.Store(false)
	_, sum = Gather(context.Background(), c, in("big"), byColl("big"))
	require.InDelta(t, 2000.0/3000, sum.Coverage, 1e-9, "a's count of big is forgotten: the mean of b's and c's")
}

type neverSentErr struct{ error }

func (neverSentErr) NeverSent() bool { return true }

func TestLookupNotFoundNeedsEveryReplica(t *testing.T) {
	notFound := func(context.Context, *fake) (string, error) { return "", status.Error(codes.NotFound, "no") }
	r0, r1 := newFake("a0", nil), newFake("a1", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{r0, r1}}}, Options{})
	_, err := Lookup(context.Background(), c, req(300*time.Millisecond), "a", notFound)
	require.Equal(t, codes.NotFound, status.Code(err))

	r1.ready.Store(false) // one replica unreachable: a NotFound proves nothing
	_, err = Lookup(context.Background(), c, req(300*time.Millisecond), "a", notFound)
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.True(t, errors.Is(err, ErrNoReplica))
	// One replica behind the read's index (NOT_SERVING): no witness, so the
	// other's NotFound stands.
	r1.ready.Store(true)
	_, err = Lookup(context.Background(), c, req(300*time.Millisecond), "a", func(_ context.Context, f *fake) (string, error) {
		if f == r1 {
			return "", notServingErr{status.Error(codes.Unavailable, "behind")}
		}
		return "", status.Error(codes.NotFound, "no")
	})
	require.Equal(t, codes.NotFound, status.Code(err))
}

type notServingErr struct{ error }

func (notServingErr) NotServing() bool { return true }

func TestProbeMakesSuspectAndRejoins(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	rec := newRecorder()
	r0 := newFake("a0", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{r0}}}, Options{Reporter: rec, Now: clk.Now})
	var up atomic.Bool
	probe := func(context.Context, *fake) error {
		if up.Load() {
			return nil
		}
		return status.Error(codes.Unavailable, "refused")
	}
	for range SuspectAfter {
		c.ProbeOnce(context.Background(), ProbeTimeout, probe)
	}
	require.True(t, c.Status()[0].Replicas[0].Suspect)
	require.True(t, rec.suspect["a/a0"])
	up.Store(true)
	c.ProbeOnce(context.Background(), ProbeTimeout, probe)
	require.False(t, c.Status()[0].Replicas[0].Suspect, "one good probe ends suspicion at once")
	require.False(t, rec.suspect["a/a0"])
}

func TestRunProberStopsWithItsContext(t *testing.T) {
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", nil)}}}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		c.RunProber(ctx, 10*time.Millisecond, 5*time.Millisecond, func(context.Context, *fake) error { n.Add(1); return nil })
		close(done)
	}()
	require.Eventually(t, func() bool { return n.Load() >= 3 }, 2*time.Second, 5*time.Millisecond)
	cancel()
	<-done
}

// After a hedge beats a replica that went silent, the silent one is no
// longer first choice: the next read goes to the live replica directly
// instead of spending another hedge (and the hedge budget) on it.
func TestLosingToAHedgeDemotesTheSilentReplica(t *testing.T) {
	rec := newRecorder()
	silent := newFake("a0", okAfter(time.Millisecond, 5))
	live := newFake("a1", okAfter(time.Millisecond, 5))
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{silent, live}}}, Options{Reporter: rec})
	for range 10 {
		Gather(context.Background(), c, req(300*time.Millisecond), call)
	}
	for _, r := range c.shards[0].list() { // equal: the first (silent) one is preferred
		r.mu.Lock()
		r.mean, r.dev = time.Millisecond, 0
		r.mu.Unlock()
	}
	silent.script(hang)
	res, sum := Gather(context.Background(), c, req(300*time.Millisecond), call)
	require.False(t, sum.Degraded())
	require.True(t, res[0].Hedged)
	// The loser's attempt is recorded as it ends, just after the answer.
	require.Eventually(t, func() bool {
		st := c.Status()[0].Replicas
		return st[0].Latency > st[1].Latency
	}, time.Second, time.Millisecond)
	cands, _ := c.candidates(c.shards[0], nil)
	require.Same(t, live, cands[0].r, "the live replica is asked first from now on")
}

// A lookup whose first replica is silent leaves time to ask the next one.
func TestLookupSplitsItsBudget(t *testing.T) {
	silent := newFake("a0", nil)
	live := newFake("a1", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{silent, live}}}, Options{})
	v, err := Lookup(context.Background(), c, req(305*time.Millisecond), "a", func(ctx context.Context, f *fake) (string, error) {
		if f == silent {
			_, err := hang(ctx)
			return "", err
		}
		return "found", nil
	})
	require.NoError(t, err)
	require.Equal(t, "found", v)
}

// A call function that panics costs its shard (missing, internal), not the
// process; the other shards answer as usual.
func TestPanickingCallIsThatShardsInternalError(t *testing.T) {
	boom := newFake("b0", nil)
	c := New([]Shard[*fake]{
		{Name: "a", Replicas: []*fake{newFake("a0", nil)}},
		{Name: "b", Replicas: []*fake{boom}},
	}, Options{})
	res, sum := Gather(context.Background(), c, req(300*time.Millisecond), func(ctx context.Context, f *fake) (ans, error) {
		if f == boom {
			panic("scripted panic")
		}
		return call(ctx, f)
	})
	require.Equal(t, []string{"b"}, sum.Unavailable)
	require.Equal(t, map[string]Reason{"b": ReasonInternal}, sum.ShardErrors)
	require.Equal(t, codes.Internal, status.Code(res[1].Err))
	require.Contains(t, res[1].Err.Error(), "scripted panic")
	require.Empty(t, res[0].Reason)
	require.False(t, c.Status()[1].Replicas[0].Suspect, "a panic is no connectivity failure")
}

// panicky is a Reporter whose every method panics.
type panicky struct{}

func (panicky) Fanout(Path, string, time.Duration, float64, map[string]Reason) { panic("fanout") }
func (panicky) ShardRPC(string, string, string, time.Duration)                 { panic("rpc") }
func (panicky) Failover(string)                                                { panic("failover") }
func (panicky) Hedge(string, HedgeOutcome)                                     { panic("hedge") }
func (panicky) Suspect(string, string, bool)                                   { panic("suspect") }

// A reporter that panics cannot take the router down either: the read it
// was reporting on ends as that shard's internal error.
func TestPanickingReporterIsContained(t *testing.T) {
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", nil)}}}, Options{Reporter: panicky{}})
	res, sum := Gather(context.Background(), c, req(300*time.Millisecond), call)
	require.Equal(t, map[string]Reason{"a": ReasonInternal}, sum.ShardErrors)
	require.Equal(t, codes.Internal, status.Code(res[0].Err))
	c.ProbeOnce(context.Background(), ProbeTimeout, func(context.Context, *fake) error { return nil })
	_, err := Lookup(context.Background(), c, req(300*time.Millisecond), "a", func(context.Context, *fake) (string, error) { return "x", nil })
	require.Equal(t, codes.Internal, status.Code(err))
}

// A survey asks every replica, suspect and not-ready ones included, and
// leaves their health as it was.
func TestSurveyAsksEveryReplicaAndChangesNoHealth(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	down, notReady := newFake("a0", nil), newFake("a1", nil)
	notReady.ready.Store(false)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{down, notReady}}}, Options{Now: clk.Now})
	for range SuspectAfter {
		c.ProbeOnce(context.Background(), ProbeTimeout, func(_ context.Context, f *fake) error {
			if f == down {
				return status.Error(codes.Unavailable, "refused")
			}
			return nil
		})
	}
	before := c.Status()
	require.True(t, before[0].Replicas[0].Suspect)
	got := Survey(context.Background(), c, time.Second, func(ctx context.Context, f *fake) (string, error) {
		if f == down {
			return "", status.Error(codes.Unavailable, "refused")
		}
		return f.addr, nil
	})
	require.Len(t, got, 1)
	require.Len(t, got[0], 2)
	require.Equal(t, codes.Unavailable, status.Code(got[0][0].Err))
	require.Equal(t, "a1", got[0][1].Value)
	require.Equal(t, before, c.Status(), "a survey changes no health state")
}

// notLeader is a follower's refusal: not accepted, naming the leader.
type notLeader struct {
	error
	leader string
}

func (notLeader) NeverSent() bool  { return true }
func (e notLeader) Leader() string { return e.leader }

func TestWriteGoesToOneReplicaAndFollowsTheLeader(t *testing.T) {
	tests := []struct {
		name string
		// answer scripts replica i's answer to its n-th write (from 1).
		answer      func(i int, n int32) error
		wantOutcome string
		wantReplica string
		wantCalls   []int32
	}{
		{
			name:        "the first replica is the leader",
			answer:      func(int, int32) error { return nil },
			wantOutcome: WriteOK, wantReplica: "a0", wantCalls: []int32{1, 0, 0},
		},
		{
			name: "a follower names the leader",
			answer: func(i int, _ int32) error {
				if i == 2 {
					return nil
				}
				return notLeader{status.Error(codes.Unavailable, "not the leader"), "a2"}
			},
			wantOutcome: WriteOK, wantReplica: "a2", wantCalls: []int32{1, 0, 1},
		},
		{
			name: "an election: nobody accepts, then the leader does",
			answer: func(i int, n int32) error {
				if i == 1 && n >= 2 {
					return nil
				}
				return notLeader{status.Error(codes.Unavailable, "no leader"), ""}
			},
			wantOutcome: WriteOK, wantReplica: "a1", wantCalls: []int32{2, 2, 1},
		},
		{
			name: "a write that may have been delivered is never replayed",
			answer: func(i int, _ int32) error {
				return status.Error(codes.Unavailable, "connection reset mid-call")
			},
			wantOutcome: WriteUnknown, wantReplica: "a0", wantCalls: []int32{1, 0, 0},
		},
		{
			name: "a refusal on its merits is final",
			answer: func(int, int32) error {
				return status.Error(codes.FailedPrecondition, "placement")
			},
			wantOutcome: WriteFailed, wantReplica: "a0", wantCalls: []int32{1, 0, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reps := []*fake{newFake("a0", nil), newFake("a1", nil), newFake("a2", nil)}
			c := New([]Shard[*fake]{{Name: "a", Replicas: reps}}, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			calls := make([]atomic.Int32, len(reps))
			res := Write(ctx, c, "a", func(_ context.Context, f *fake) error {
				for i, r := range reps {
					if r == f {
						return tc.answer(i, calls[i].Add(1))
					}
				}
				panic("unknown replica")
			})
			require.Equal(t, tc.wantOutcome, res.Outcome, "err: %v", res.Err)
			require.Equal(t, tc.wantReplica, res.Replica)
			got := make([]int32, len(reps))
			for i := range calls {
				got[i] = calls[i].Load()
			}
			require.Equal(t, tc.wantCalls, got)
		})
	}
}

// Once a replica accepted a write, the next write goes to it first.
func TestWriteRemembersTheLeader(t *testing.T) {
	reps := []*fake{newFake("a0", nil), newFake("a1", nil)}
	c := New([]Shard[*fake]{{Name: "a", Replicas: reps}}, Options{})
	var toA0 atomic.Int32
	write := func(_ context.Context, f *fake) error {
		if f == reps[0] {
			toA0.Add(1)
			return notLeader{status.Error(codes.Unavailable, "not the leader"), ""}
		}
		return nil
	}
	require.Equal(t, WriteOK, Write(context.Background(), c, "a", write).Outcome)
	require.Equal(t, WriteOK, Write(context.Background(), c, "a", write).Outcome)
	require.EqualValues(t, 1, toA0.Load(), "the second write went to the leader directly")
}

func TestWriteWithoutALeaderFailsAtItsTimeout(t *testing.T) {
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{newFake("a0", nil), newFake("a1", nil)}}}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res := Write(ctx, c, "a", func(context.Context, *fake) error {
		return notLeader{status.Error(codes.Unavailable, "no leader"), ""}
	})
	require.Equal(t, WriteFailed, res.Outcome)
	require.ErrorIs(t, res.Err, ErrNoLeader)
	require.ErrorIs(t, res.Err, context.DeadlineExceeded)
}

// RESOURCE_EXHAUSTED fails over within the budget and changes no health
// state; a shard whose every replica refuses is missing as overloaded.
func TestOverloadedReplicas(t *testing.T) {
	rec := newRecorder()
	busy, idle := newFake("a0", fails(codes.ResourceExhausted)), newFake("a1", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{busy, idle}}}, Options{Reporter: rec})
	res, sum := Gather(context.Background(), c, req(300*time.Millisecond), call)
	require.False(t, sum.Degraded())
	require.True(t, res[0].FailedOver)
	require.Equal(t, "a1", res[0].Replica)

	idle.script(fails(codes.ResourceExhausted))
	for range SuspectAfter + 1 {
		_, sum = Gather(context.Background(), c, req(300*time.Millisecond), call)
		require.Equal(t, map[string]Reason{"a": ReasonOverloaded}, sum.ShardErrors)
	}
	for _, r := range c.Status()[0].Replicas {
		require.False(t, r.Suspect, r.Addr)
		require.Zero(t, r.ConsecutiveFailures, r.Addr)
	}
}

// A replica that refused as overloaded is not hedged to, and no hedge goes
// out while the router's admission is refusing.
func TestNoHedgeToTheOverloaded(t *testing.T) {
	tests := []struct {
		name   string
		paused bool
		busy   bool
	}{
		{name: "hedges paused by admission", paused: true},
		{name: "the alternative refused as overloaded", busy: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			slow, alt := newFake("a0", nil), newFake("a1", nil)
			c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{slow, alt}}},
				Options{HedgePaused: func() bool { return tc.paused }})
			for range 10 { // both measured fast
				Gather(context.Background(), c, req(300*time.Millisecond), call)
			}
			if tc.busy {
				c.shards[0].list()[1].mu.Lock()
				c.shards[0].list()[1].overloadedTill = time.Now().Add(time.Minute)
				c.shards[0].list()[1].mu.Unlock()
			}
			for _, r := range c.shards[0].list() {
				r.mu.Lock()
				r.mean, r.dev = time.Millisecond, 0
				r.mu.Unlock()
			}
			slow.script(okAfter(60*time.Millisecond, 5))
			alt.script(nil)
			n := alt.calls.Load()
			res, sum := Gather(context.Background(), c, req(300*time.Millisecond), call)
			require.False(t, sum.Degraded())
			require.False(t, res[0].Hedged)
			require.Equal(t, n, alt.calls.Load())
		})
	}
}

// Shards gives back the topology the cluster was built with, in order.
func TestShardsIsTheTopology(t *testing.T) {
	a0, a1, b0 := newFake("a0", nil), newFake("a1", nil), newFake("b0", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{a0, a1}}, {Name: "b", Replicas: []*fake{b0}}}, Options{})
	require.Equal(t, []Shard[*fake]{{Name: "a", Replicas: []*fake{a0, a1}}, {Name: "b", Replicas: []*fake{b0}}}, c.Shards())
}

// absentErr is a replica's "what you asked for is not here".
type absentErr struct{}

func (absentErr) Error() string    { return "collection not found" }
func (absentErr) NotServing() bool { return true }
func (absentErr) Absent() bool     { return true }

// A fan-out a shard answered "not here" on every replica is no answer:
// the caller turns it into not found, so it is not counted at all —
// neither as a fan-out nor as degraded.
func TestAbsentIsNotCounted(t *testing.T) {
	a, b := newFake("a", nil), newFake("b", nil)
	rec := newRecorder()
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{a}}, {Name: "b", Replicas: []*fake{b}}}, Options{Reporter: rec})
	b.script(func(context.Context) (ans, error) { return ans{}, absentErr{} })
	results, sum := Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.True(t, sum.Degraded())
	require.Equal(t, ReasonNotServing, results[1].Reason)
	require.ErrorAs(t, results[1].Err, new(absentErr))
	rec.mu.Lock()
	require.Zero(t, rec.fanouts, "an absent answer is not counted")
	rec.mu.Unlock()

	b.script(nil)
	_, sum = Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.False(t, sum.Degraded())
	rec.mu.Lock()
	require.Equal(t, 1, rec.fanouts)
	rec.mu.Unlock()
}

// setMean gives every replica of shard 0 a measured latency, so the
// engine's own order is known: a0 cheapest, then a1, then a2.
func setMeans(c *Cluster[*fake]) {
	for i, r := range c.shards[0].list() {
		r.mu.Lock()
		r.mean, r.dev, r.samples = time.Duration(i+1)*time.Millisecond, 0, 10
		r.mu.Unlock()
	}
}

// preferring is a Request.Prefer that names one replica of shard 0.
func preferring(addr string) func(shard int, replica string) bool {
	return func(shard int, replica string) bool { return shard == 0 && replica == addr }
}

// A read that must see a write goes first to the replica known to have
// applied it (the acknowledging leader), even when another one is
// cheaper, and hedges to the others when it is slow; a lookup does the
// same.
func TestPreferredReplicaIsAskedFirst(t *testing.T) {
	a0, a1, a2 := newFake("a0", nil), newFake("a1", nil), newFake("a2", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{a0, a1, a2}}, {Name: "b", Replicas: []*fake{newFake("b0", nil)}}},
		Options{HedgeBudget: -1})
	setMeans(c)
	r := req(200 * time.Millisecond)
	r.Prefer = preferring("a2")
	res, sum := Gather(context.Background(), c, r, call)
	require.False(t, sum.Degraded())
	require.Equal(t, "a2", res[0].Replica)
	require.False(t, res[0].FailedOver)
	require.EqualValues(t, 1, a2.calls.Load())
	require.Zero(t, a0.calls.Load()+a1.calls.Load(), "the others are not asked")

	_, err := Lookup(context.Background(), c, r, "a", call)
	require.NoError(t, err)
	require.EqualValues(t, 2, a2.calls.Load(), "a lookup asks it first too")
	require.Zero(t, a0.calls.Load()+a1.calls.Load())

	// Without a preference the engine's own order holds.
	res, _ = Gather(context.Background(), c, req(200*time.Millisecond), call)
	require.Equal(t, "a0", res[0].Replica)
}

func TestPreferredReplicaIsHedged(t *testing.T) {
	rec := newRecorder()
	a0, a1, a2 := newFake("a0", nil), newFake("a1", nil), newFake("a2", hang)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{a0, a1, a2}}}, Options{Reporter: rec})
	setMeans(c)
	r := req(300 * time.Millisecond)
	r.Prefer = preferring("a2")
	res, sum := Gather(context.Background(), c, r, call)
	require.False(t, sum.Degraded())
	require.EqualValues(t, 1, a2.calls.Load(), "asked first")
	require.Equal(t, "a0", res[0].Replica, "the hedge goes to the cheapest of the others")
	require.True(t, res[0].Hedged)
	require.Equal(t, 1, rec.hedges["a/won"])
}

// Preference never overrides health: a preferred replica that is suspect
// or not ready is not asked, and the read goes to the others as it would
// without a preference.
func TestPreferenceDoesNotOverrideHealth(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(c *Cluster[*fake], clk *clock, f *fake)
	}{
		{"suspect", func(c *Cluster[*fake], clk *clock, f *fake) {
			r := c.shards[0].list()[2]
			r.mu.Lock()
			for range SuspectAfter {
				r.failure(clk.Now(), "scripted")
			}
			r.mu.Unlock()
		}},
		{"not ready", func(_ *Cluster[*fake], _ *clock, f *fake) { f.ready.Store(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{now: time.Unix(1000, 0)}
			a0, a1, a2 := newFake("a0", nil), newFake("a1", nil), newFake("a2", nil)
			c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{a0, a1, a2}}}, Options{HedgeBudget: -1, Now: clk.Now})
			setMeans(c)
			tc.spoil(c, clk, a2)
			r := req(200 * time.Millisecond)
			r.Prefer = preferring("a2")
			res, sum := Gather(context.Background(), c, r, call)
			require.False(t, sum.Degraded())
			require.Equal(t, "a0", res[0].Replica)
			require.Zero(t, a2.calls.Load(), "the preferred replica is skipped")
		})
	}
}

// TestASlowEstimateIsMeasuredAgain: a replica whose one answer was slow
// sorts last, but once its estimate has had no sample for
// remeasureAfter it sorts as untried for one read, which measures it
// again (the reads after it keep the estimate); a fresh estimate keeps
// its place.
func TestASlowEstimateIsMeasuredAgain(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	fast := newFake("a0", okAfter(0, 0))
	slow := newFake("a1", okAfter(0, 0))
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{fast, slow}}}, Options{Now: clk.Now})
	for _, r := range c.shards[0].list() {
		r.mu.Lock()
		r.observeLatency(clk.Now(), map[*fake]time.Duration{fast: time.Millisecond, slow: 200 * time.Millisecond}[r.r])
		r.mu.Unlock()
	}
	first := func() *fake {
		cands, _ := c.candidates(c.shards[0], nil)
		return cands[0].r
	}
	require.Same(t, fast, first())
	clk.Add(remeasureAfter / 2)
	require.Same(t, fast, first(), "a fresh estimate keeps its place")
	observeFast := func() {
		for _, r := range c.shards[0].list() {
			if r.r == fast {
				r.mu.Lock()
				r.observeLatency(clk.Now(), time.Millisecond)
				r.mu.Unlock()
			}
		}
	}
	observeFast()
	clk.Add(remeasureAfter/2 + time.Millisecond)
	require.Same(t, slow, first(), "the slow replica's estimate is stale: it is asked again")
	require.Same(t, fast, first(), "one read re-measures it: the next ones keep its estimate")
	clk.Add(remeasureAfter + time.Millisecond)
	observeFast()
	require.Same(t, slow, first(), "a read that never answered leaves it stale again after remeasureAfter")
}
