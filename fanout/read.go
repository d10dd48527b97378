package fanout

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNoReplica is a shard's error when no replica could be asked: none is
// READY, or every one is suspect.
var ErrNoReplica = status.Error(codes.Unavailable, "no ready replica")

type attempt[R Replica, T any] struct {
	r     *replicaState[R]
	v     T
	err   error
	took  time.Duration
	hedge bool
}

// readShard reads one shard: the best candidate first; on a connectivity
// error the next candidate with the remaining budget (each replica at most
// once); and, when the replica in flight is slower than its own recent tail
// latency, a hedge to the next candidate, first answer winning.
func readShard[R Replica, T any](ctx context.Context, c *Cluster[R], s *shardState[R], call Call[R, T]) Result[T] {
	res := Result[T]{Shard: s.name}
	cands, allSuspect := c.candidates(s)
	if len(cands) == 0 {
		// Fail fast: nobody to ask, so nobody waits out the deadline.
		res.Reason, res.Err = reasonUnavailable, ErrNoReplica
		if allSuspect {
			res.Reason = reasonSuspect
		}
		return res
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan attempt[R, T], len(cands)) // buffered: losers never block
	next, inflight := 0, 0
	var hedges []*replicaState[R]
	launch := func(hedge bool) {
		r := cands[next]
		next++
		inflight++
		if hedge {
			hedges = append(hedges, r)
		}
		r.mu.Lock()
		r.outstanding++
		r.mu.Unlock()
		c.hedges.earn()
		var budget time.Duration
		if dl, ok := actx.Deadline(); ok {
			budget = time.Until(dl)
		}
		go func() {
			t0 := time.Now()
			v, err := call(actx, r.r)
			took := time.Since(t0)
			if code(err) == codes.Canceled && pastDeadline(ctx) {
				// The shard's deadline passed; that a cancel (the loop's, or
				// Gather's at its hard stop) reached the attempt a moment
				// before the deadline did is a race the replica's record
				// must not depend on.
				err = status.Error(codes.DeadlineExceeded, "shard deadline passed during the attempt")
			}
			// Recorded here, not by the loop, so an attempt that ends after
			// the shard gave up on it still counts for the replica's health.
			r.mu.Lock()
			r.outstanding--
			r.mu.Unlock()
			c.record(r, err, took, budget)
			results <- attempt[R, T]{r: r, v: v, err: err, took: took, hedge: hedge}
		}()
	}
	var timer *time.Timer
	var hedgeC <-chan time.Time
	armHedge := func() {
		if timer != nil {
			timer.Stop()
			hedgeC = nil
		}
		if next >= len(cands) {
			return
		}
		if d, ok := c.hedgeDelay(ctx, cands[next-1], cands[next]); ok {
			timer = time.NewTimer(d)
			hedgeC = timer.C
		}
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()

	launch(false)
	armHedge()
	var lastErr error
	failedHedges := map[*replicaState[R]]bool{}
	finish := func(winner *replicaState[R]) Result[T] {
		for _, h := range hedges {
			switch {
			case h == winner:
				c.opts.Reporter.Hedge(s.name, "won")
			case failedHedges[h]:
				c.opts.Reporter.Hedge(s.name, "failed")
			default:
				c.opts.Reporter.Hedge(s.name, "lost")
			}
		}
		res.Hedged = len(hedges) > 0
		return res
	}
	for inflight > 0 {
		select {
		case a := <-results:
			inflight--
			res.Replica, res.Latency = a.r.r.Addr(), a.took
			switch classify(a.err) {
			case kindOK:
				res.Value, res.Err = a.v, nil
				return finish(a.r)
			case kindAnswer:
				res.Reason, res.Err = reasonInternal, a.err
				return finish(nil)
			}
			if a.hedge {
				failedHedges[a.r] = true
			}
			lastErr = a.err
			if inflight == 0 && next < len(cands) && ctx.Err() == nil {
				c.opts.Reporter.Failover(s.name)
				res.FailedOver = true
				launch(false)
				armHedge()
			}
		case <-hedgeC:
			hedgeC = nil
			if next < len(cands) && c.hedges.spend() {
				launch(true)
				armHedge()
			}
		case <-ctx.Done():
			res.Reason, res.Err = reasonDeadline, ctx.Err()
			return finish(nil)
		}
	}
	res.Err = lastErr
	res.Reason = reasonUnavailable
	if code(lastErr) == codes.DeadlineExceeded || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.Reason = reasonDeadline
	}
	return finish(nil)
}

// hedgeDelay is how long to wait on replica cur before hedging to alt: its
// recent tail latency (never below MinHedgeDelay). It reports false when
// the remaining budget could not hold a second attempt after the delay.
func (c *Cluster[R]) hedgeDelay(ctx context.Context, cur, alt *replicaState[R]) (time.Duration, bool) {
	if c.opts.HedgeBudget < 0 {
		return 0, false
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	remaining := time.Until(dl)
	cur.mu.Lock()
	delay := cur.tail()
	cur.mu.Unlock()
	if delay == 0 {
		// Never measured: hedge at a quarter of the budget.
		delay = remaining / 4
	}
	delay = max(delay, c.opts.MinHedgeDelay)
	alt.mu.Lock()
	need := alt.mean
	alt.mu.Unlock()
	if need == 0 {
		need = delay
	}
	if remaining < delay+need {
		return 0, false
	}
	return delay, true
}

// pastDeadline reports whether ctx's deadline has passed, whatever its Err
// says.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
