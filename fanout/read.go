package fanout

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNoReplica is a shard's error when no replica could be asked: none is
// READY, or every one is suspect.
var ErrNoReplica = status.Error(codes.Unavailable, "no ready replica")

// attempt is one call's outcome, sent back to the read's loop.
type attempt[R Replica, T any] struct {
	r     *replicaState[R]
	v     T
	err   error
	took  time.Duration
	hedge bool
	// span is the attempt's span, left open for the read's loop to mark
	// the winner and end (see deliver).
	span trace.Span
}

// shardRead is one read of one shard: the best candidate first; on a
// connectivity error the next candidate with the remaining budget (each
// replica at most once); and, when the replica in flight is slower than the
// next candidate usually is (Cluster.hedgeDelay), a hedge to it, first
// answer winning and the loser cancelled. Its state belongs to the goroutine running run; attempts talk to
// it only through results.
type shardRead[R Replica, T any] struct {
	c      *Cluster[R]
	s      *shardState[R]
	call   Call[R, T]
	prefer func(shard int, replica string) bool
	cands  []*replicaState[R]

	ctx     context.Context // the shard's deadline
	actx    context.Context // the attempts': cancelled when the read ends
	results chan attempt[R, T]

	next, inflight int
	hedges         []*replicaState[R]
	failedHedges   map[*replicaState[R]]bool // made on the first failed hedge
	hedgeTimer     *time.Timer
	hedgeC         <-chan time.Time
	// launched is when the latest attempt began (the engine's clock);
	// hedgeLate, when non-zero, is how much longer than the armed timer a
	// hedge waits unless the replica in flight is stuck, -1 for no hedge
	// then at all (see armHedge).
	launched  time.Time
	hedgeLate time.Duration
	res       Result[T]

	// closed is set when the loop stops reading results: an attempt's span
	// the loop received is the loop's to end (it alone knows the winner);
	// any left in results after closed is ended by whoever drains it.
	closed atomic.Bool
	span   trace.Span
}

func newShardRead[R Replica, T any](c *Cluster[R], s *shardState[R], call Call[R, T], prefer func(shard int, replica string) bool) *shardRead[R, T] {
	return &shardRead[R, T]{c: c, s: s, call: call, prefer: prefer, res: Result[T]{Shard: s.name}}
}

// run reads the shard within ctx's deadline and returns its result, under
// a span that its attempts' spans are children of.
//
// Its frame is kept as small as before tracing (span work lives in begin
// and end, one deferred call as before): a few more bytes made the read's
// goroutine outgrow its first stack on every fan-out, a copy that cost more
// than the rest of the tracing-off path (BenchmarkGather).
func (sr *shardRead[R, T]) run(ctx context.Context) Result[T] {
	ctx = sr.begin(ctx)
	defer sr.end()
	cands, allSuspect := sr.c.candidates(sr.s, sr.prefer)
	if len(cands) == 0 {
		// Fail fast: nobody to ask, so nobody waits out the deadline.
		sr.res.Reason, sr.res.Err = ReasonUnavailable, ErrNoReplica
		if allSuspect {
			sr.res.Reason = ReasonSuspect
		}
		return sr.res
	}
	sr.cands, sr.ctx = cands, ctx
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	sr.actx = actx
	sr.results = make(chan attempt[R, T], len(cands)) // buffered: losers never block

	sr.launch(false)
	sr.armHedge()
	var lastErr error
	attempts, overloaded, notServing := 0, 0, 0
	for sr.inflight > 0 {
		select {
		case a := <-sr.results:
			sr.inflight--
			sr.res.Replica, sr.res.Latency = a.r.r.Addr(), a.took
			k := classify(a.err)
			switch k {
			case kindOK:
				endAttempt(a.span, a.err, true)
				sr.res.Value, sr.res.Err = a.v, nil
				return sr.finish(a.r)
			case kindAnswer:
				endAttempt(a.span, a.err, false)
				sr.res.Reason, sr.res.Err = ReasonInternal, a.err
				return sr.finish(nil)
			}
			endAttempt(a.span, a.err, false)
			if a.hedge {
				if sr.failedHedges == nil {
					sr.failedHedges = map[*replicaState[R]]bool{}
				}
				sr.failedHedges[a.r] = true
			}
			lastErr = a.err
			attempts++
			switch k {
			case kindOverloaded:
				overloaded++
			case kindNotServing:
				notServing++
			}
			if sr.inflight == 0 && sr.next < len(sr.cands) && ctx.Err() == nil && !sr.c.opts.NoFailover {
				sr.c.opts.Reporter.Failover(sr.s.name)
				sr.res.FailedOver = true
				sr.launch(false)
				sr.armHedge()
			}
		case <-sr.hedgeC:
			sr.hedgeC = nil
			if late := sr.hedgeLate; late != 0 {
				sr.hedgeLate = 0
				if !sr.stuck() {
					if late > 0 {
						sr.hedgeTimer = time.NewTimer(late)
						sr.hedgeC = sr.hedgeTimer.C
					}
					continue
				}
			}
			if sr.hedgeTarget() && sr.c.hedges.spend() {
				sr.launch(true)
				sr.armHedge()
			}
		case <-ctx.Done():
			sr.res.Reason, sr.res.Err = ReasonDeadline, ctx.Err()
			return sr.finish(nil)
		}
	}
	sr.res.Err = lastErr
	sr.res.Reason = ReasonUnavailable
	switch {
	case overloaded == attempts:
		sr.res.Reason = ReasonOverloaded
	case notServing == attempts && sr.next == len(sr.cands):
		// Every replica was asked and each refused as not serving.
		sr.res.Reason = ReasonNotServing
	case code(lastErr) == codes.DeadlineExceeded || errors.Is(ctx.Err(), context.DeadlineExceeded):
		sr.res.Reason = ReasonDeadline
	}
	return sr.finish(nil)
}

// hedgeTarget puts the best candidate a hedge may go to next in line and
// reports whether there is one: hedging is on and not paused, and some
// untried candidate neither refused a read as overloaded lately nor has
// HedgeMaxOutstanding of this router's calls in flight (a long queue the
// hedge would wait behind).
func (sr *shardRead[R, T]) hedgeTarget() bool {
	c := sr.c
	if c.opts.HedgePaused != nil && c.opts.HedgePaused() {
		return false
	}
	now := c.opts.Now()
	for j := sr.next; j < len(sr.cands); j++ {
		r := sr.cands[j]
		r.mu.Lock()
		ok := !now.Before(r.overloadedTill) && r.outstanding < c.opts.HedgeMaxOutstanding
		r.mu.Unlock()
		if ok {
			// Candidates stay in order otherwise: a failover after this
			// still takes the best of the rest.
			copy(sr.cands[sr.next+1:j+1], sr.cands[sr.next:j])
			sr.cands[sr.next] = r
			return true
		}
	}
	return false
}

// launch sends the read to the next candidate. An attempt that is not a
// hedge and not the first is a failover.
func (sr *shardRead[R, T]) launch(hedge bool) {
	failover := !hedge && sr.next > 0
	r := sr.cands[sr.next]
	sr.next++
	sr.inflight++
	if hedge {
		sr.hedges = append(sr.hedges, r)
	}
	r.mu.Lock()
	r.outstanding++
	r.mu.Unlock()
	sr.launched = sr.c.opts.Now()
	sr.c.hedges.earn()
	var budget time.Duration
	if dl, ok := sr.actx.Deadline(); ok {
		budget = time.Until(dl)
	}
	go sr.attempt(r, hedge, failover, budget)
}

// attempt runs one call and sends its outcome back. A panic in the call or
// in the bookkeeping after it becomes that attempt's internal error, so the
// loop always hears back and the process lives.
func (sr *shardRead[R, T]) attempt(r *replicaState[R], hedge, failover bool, budget time.Duration) {
	ctx, span := sr.c.startAttempt(sr.actx, r.r, hedge, failover)
	t0 := time.Now()
	a := attempt[R, T]{r: r, hedge: hedge, span: span}
	counted := false
	defer func() {
		if p := recover(); p != nil {
			a.err = sr.c.recovered(p, "call", sr.s.name)
			if !counted {
				r.mu.Lock()
				r.outstanding--
				r.mu.Unlock()
			}
		}
		sr.deliver(a)
	}()
	a.v, a.err = sr.call(ctx, r.r)
	a.took = time.Since(t0)
	if code(a.err) == codes.Canceled && pastDeadline(sr.ctx) {
		// The shard's deadline passed; that a cancel (the loop's, or
		// Gather's at its hard stop) reached the attempt a moment before the
		// deadline did is a race the replica's record must not depend on.
		a.err = status.Error(codes.DeadlineExceeded, "shard deadline passed during the attempt")
	}
	// Recorded here, not by the loop, so an attempt that ends after the
	// shard gave up on it still counts for the replica's health.
	r.mu.Lock()
	r.outstanding--
	r.mu.Unlock()
	counted = true
	sr.c.record(r, a.err, a.took, budget)
}

// begin starts the read's span.
func (sr *shardRead[R, T]) begin(ctx context.Context) context.Context {
	ctx, sr.span = sr.c.start(ctx, SpanRead)
	return ctx
}

// end stops the hedge timer and closes the read's span with its result
// (every return of run returns sr.res).
func (sr *shardRead[R, T]) end() {
	sr.stopHedgeTimer()
	sr.close()
	annotateRead(sr.span, sr.res)
	sr.span.End()
}

// deliver hands an attempt's outcome to the read's loop; if the loop has
// ended, the attempt lost (or came too late) and its span is ended here.
//
// No lock: an attempt sends, then looks at closed; the loop sets closed,
// then drains. If the attempt saw closed unset, its send came before the
// loop's drain, which finds it; if it saw closed set, it drains itself.
// Either way every span is ended exactly once, by whoever receives it.
func (sr *shardRead[R, T]) deliver(a attempt[R, T]) {
	sr.results <- a // buffered for every candidate: never blocks
	if sr.closed.Load() {
		sr.drain()
	}
}

// close ends the loop's ownership of attempt spans: the ones delivered but
// never read are ended here, the ones still running end their own.
func (sr *shardRead[R, T]) close() {
	if sr.results == nil {
		return
	}
	sr.closed.Store(true)
	sr.drain()
}

// drain ends the spans of the attempts waiting in results: after the loop,
// they all lost.
func (sr *shardRead[R, T]) drain() {
	for {
		select {
		case a := <-sr.results:
			endAttempt(a.span, a.err, false)
		default:
			return
		}
	}
}

// armHedge schedules a hedge to the next candidate after the current one's
// hedge delay, if the budget can hold it. When the candidate's p90 comes
// sooner, the timer is set for that instead, and a hedge goes out then
// only if the replica in flight is stuck (stuck); otherwise the timer is
// set again for the rest of the delay.
func (sr *shardRead[R, T]) armHedge() {
	sr.stopHedgeTimer()
	sr.hedgeLate = 0
	if sr.next >= len(sr.cands) {
		return
	}
	d, early, ok := sr.c.hedgeDelay(sr.ctx, sr.cands[sr.next-1], sr.cands[sr.next])
	if !ok {
		return
	}
	switch {
	case early > 0 && d == 0:
		sr.hedgeLate, d = -1, early // only if stuck: no room later
	case early > 0 && early < d:
		sr.hedgeLate, d = d-early, early
	}
	sr.hedgeTimer = time.NewTimer(d)
	sr.hedgeC = sr.hedgeTimer.C
}

// stuck reports whether the replica in flight has answered no call since
// the latest attempt began while an untried candidate has: that replica is
// not slow but has stopped (a host powered off, a blackholed link), and
// its own tail, which times hedges otherwise, says nothing of that. When
// no call is answered anywhere (the router or the host stalled), nothing is
// stuck and no hedge adds to the stall.
func (sr *shardRead[R, T]) stuck() bool {
	cur := sr.cands[sr.next-1]
	cur.mu.Lock()
	answered := !cur.lastAnswer.Before(sr.launched)
	cur.mu.Unlock()
	if answered {
		return false
	}
	for _, r := range sr.cands[sr.next:] {
		r.mu.Lock()
		alive := !r.lastAnswer.Before(sr.launched)
		r.mu.Unlock()
		if alive {
			return true
		}
	}
	return false
}

func (sr *shardRead[R, T]) stopHedgeTimer() {
	if sr.hedgeTimer != nil {
		sr.hedgeTimer.Stop()
		sr.hedgeTimer, sr.hedgeC = nil, nil
	}
}

// finish counts every hedge of the read by its outcome and returns the
// result; winner is the replica that answered, nil if none did.
func (sr *shardRead[R, T]) finish(winner *replicaState[R]) Result[T] {
	for _, h := range sr.hedges {
		switch {
		case h == winner:
			sr.c.opts.Reporter.Hedge(sr.s.name, HedgeWon)
		case sr.failedHedges[h]:
			sr.c.opts.Reporter.Hedge(sr.s.name, HedgeFailed)
		default:
			sr.c.opts.Reporter.Hedge(sr.s.name, HedgeLost)
		}
	}
	sr.res.Hedged = len(sr.hedges) > 0
	return sr.res
}

// hedgeDelay is how long to wait on replica cur before hedging to alt, and
// whether to arm a hedge at all. The hedge should be likelier than not to
// answer first, so the delay is cur's profile.hedgeAt alt's median: the
// point past which cur's own slower reads run on for longer than a fresh
// read on alt usually takes (the past-its-fast-mode point of a replica slow
// on some calls), or else the lower of cur's and alt's 99th percentiles (a
// replica that may have stopped answering). Timed at a quantile of alt's latency alone, as
// hedging first was, a hedge fires on a healthy replica's every
// tenth read, where cur almost always answers first: in the bench 91 % of
// such hedges lost, and they lengthened the healthy tail they were meant to
// cut (docs/performance.md). Until cur has MinHedgeSamples answers in its
// window alt's p90 stands in (a new replica is judged by its peer), and
// until alt has them too, a quarter of the remaining budget; until alt has
// them, cur's own median stands in for alt's. Never below MinHedgeDelay.
// It reports false when the remaining budget could not hold a second
// attempt (alt's p90, or the stand-in) after the delay, nor after early;
// delay is 0 when only early's hedge fits. early, when
// non-zero, is alt's p90 where that comes sooner: a replica that has
// answered nothing since the read began, while alt has, is hedged then
// (shardRead.stuck), as its own latencies cannot say it has stopped.
func (c *Cluster[R]) hedgeDelay(ctx context.Context, cur, alt *replicaState[R]) (delay, early time.Duration, ok bool) {
	if c.opts.HedgeBudget < 0 {
		return 0, 0, false
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, 0, false
	}
	remaining := time.Until(dl)
	now := c.opts.Now()
	alt.mu.Lock()
	ap, altMeasured := alt.profile(now)
	alt.mu.Unlock()
	cur.mu.Lock()
	cp, curMeasured := cur.profile(now)
	cur.mu.Unlock()
	var need time.Duration
	switch {
	case curMeasured && altMeasured:
		delay, need = cp.hedgeAt(max(ap.p50, c.opts.MinHedgeDelay), ap.p99), ap.p90
		early = max(ap.p90, c.opts.MinHedgeDelay)
	case curMeasured:
		delay, need = cp.hedgeAt(max(cp.p50, c.opts.MinHedgeDelay), cp.p99), cp.p90
	case altMeasured:
		delay, need = ap.p90, ap.p90
	default:
		delay = remaining / 4
		need = delay
	}
	delay = max(delay, c.opts.MinHedgeDelay)
	if early >= delay {
		early = 0
	}
	if remaining < delay+need {
		// Too late for a hedge at the delay; one that goes out early,
		// if the replica proves stuck, may still fit.
		if early == 0 || remaining < early+need {
			return 0, 0, false
		}
		delay = 0
	}
	return delay, early, true
}

// pastDeadline reports whether ctx's deadline has passed, whatever its Err
// says.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
