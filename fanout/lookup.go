package fanout

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
)

// Lookup reads one document from the named shard within req's shard
// deadline. Replicas are asked in the engine's order until one finds it. A
// NotFound counts only when every replica says so, or is behind (answers
// NOT_SERVING: loading, catching up, or short of the read's index, so no
// witness): a NotFound while another replica is unreachable is an
// unavailable answer, never a not-found (field report 000).
func Lookup[R Replica, T any](ctx context.Context, c *Cluster[R], req Request, shard string, call Call[R, T]) (_ T, err error) {
	var zero T
	// Deferred before the recover below, so it runs after it and sees a
	// panic's error.
	ctx, span := c.start(ctx, SpanLookup)
	defer func() { endLookup(span, shard, err) }()
	defer func() {
		if p := recover(); p != nil {
			err = c.recovered(p, "lookup", shard)
		}
	}()
	s := c.shard(shard)
	if s == nil {
		return zero, fmt.Errorf("unknown shard %q", shard)
	}
	ctx, cancel := context.WithDeadline(ctx, req.ShardDeadline())
	defer cancel()
	cands, _ := c.candidates(s, req.Prefer)
	notFound, behind := 0, 0
	var lastErr error = ErrNoReplica
	for i, r := range cands {
		if ctx.Err() != nil {
			break
		}
		// While another candidate remains, an attempt gets half the
		// remaining budget, so a silent first choice leaves time to ask
		// the next one.
		budget := time.Until(req.ShardDeadline())
		actx, acancel := ctx, context.CancelFunc(func() {})
		if i < len(cands)-1 {
			budget /= 2
			actx, acancel = context.WithTimeout(ctx, budget)
		}
		actx, aspan := c.startAttempt(actx, r.r, false, i > 0)
		t0 := time.Now()
		v, err := call(actx, r.r)
		acancel()
		endAttempt(aspan, err, err == nil)
		c.recordAs(r, err, time.Since(t0), budget, !req.Control)
		if err == nil {
			return v, nil
		}
		if code(err) == codes.NotFound {
			notFound++
			lastErr = err
			continue
		}
		if classify(err) == kindNotServing {
			// Behind (loading, catching up, short of the read's index): it
			// is no witness either way, so it neither blocks nor counts
			// toward a not-found.
			behind++
			if lastErr == ErrNoReplica || code(lastErr) != codes.NotFound {
				lastErr = err
			}
			continue
		}
		if classify(err) == kindAnswer {
			return zero, err
		}
		lastErr = err
	}
	if notFound > 0 && notFound+behind == len(s.list()) {
		return zero, lastErr // a NotFound
	}
	if code(lastErr) == codes.NotFound {
		return zero, fmt.Errorf("%w: %d of %d replicas said not found, the others could not be asked", ErrNoReplica, notFound, len(s.list()))
	}
	return zero, lastErr
}
