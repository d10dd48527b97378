package fanout

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
)

// Write outcomes per replica.
const (
	WriteOK = "ok"
	// WriteFailed: the replica refused or never received the write; it is
	// not applied there.
	WriteFailed = "failed"
	// WriteUnknown: the write may have been delivered (deadline after send,
	// reset mid-call); it is never replayed.
	WriteUnknown = "unknown"
)

// WriteResult is one replica's part of a write.
type WriteResult struct {
	Replica string
	Outcome string
	Err     error
}

// retryPause is the wait between attempts of a write that never left.
const retryPause = 50 * time.Millisecond

// Broadcast sends a write to every replica of the named shard at once and
// waits for all of them (a write succeeds only when every replica
// acknowledges it). Writes are never hedged. An attempt is retried only
// while it provably never left the router (the error says NeverSent: no
// ready connection, connection refused); anything that may have been
// delivered is reported WriteUnknown, never replayed. ctx bounds the whole
// write.
func Broadcast[R Replica](ctx context.Context, c *Cluster[R], shard string, call func(ctx context.Context, r R) error) ([]WriteResult, error) {
	s := c.shard(shard)
	if s == nil {
		return nil, fmt.Errorf("unknown shard %q", shard)
	}
	out := make([]WriteResult, len(s.replicas))
	done := make(chan struct{}, len(s.replicas))
	for i, r := range s.replicas {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i] = writeReplica(ctx, c, r, call)
		}()
	}
	for range s.replicas {
		<-done
	}
	return out, nil
}

func writeReplica[R Replica](ctx context.Context, c *Cluster[R], r *replicaState[R], call func(context.Context, R) error) WriteResult {
	res := WriteResult{Replica: r.r.Addr()}
	for {
		t0 := time.Now()
		err := call(ctx, r.r)
		c.opts.Reporter.ShardRPC(r.shard, r.r.Addr(), outcome(err), time.Since(t0))
		switch {
		case err == nil:
			res.Outcome, res.Err = WriteOK, nil
			return res
		case neverSent(err):
			res.Outcome, res.Err = WriteFailed, err
			t := time.NewTimer(retryPause)
			select {
			case <-ctx.Done():
				t.Stop()
				res.Err = fmt.Errorf("%w (write timeout: %w)", err, ctx.Err())
				return res
			case <-t.C:
			}
			continue
		case classify(err) == kindAnswer && code(err) != codes.Unknown:
			// The replica answered: it refused the write.
			res.Outcome, res.Err = WriteFailed, err
		default:
			res.Outcome, res.Err = WriteUnknown, err
		}
		return res
	}
}

// Lookup reads one document from the named shard. Replicas are asked in
// the engine's order until one finds it. A NotFound counts only when every
// replica says so: a NotFound while another replica is unreachable is an
// unavailable answer, never a not-found (field report 000).
func Lookup[R Replica, T any](ctx context.Context, c *Cluster[R], shard string, call func(ctx context.Context, r R) (T, error)) (T, error) {
	var zero T
	s := c.shard(shard)
	if s == nil {
		return zero, fmt.Errorf("unknown shard %q", shard)
	}
	cands, _ := c.candidates(s)
	notFound := 0
	var lastErr error = ErrNoReplica
	for i, r := range cands {
		if ctx.Err() != nil {
			break
		}
		// While another candidate remains, an attempt gets half the
		// remaining budget, so a silent first choice leaves time to ask
		// the next one.
		actx, cancel := ctx, context.CancelFunc(func() {})
		var budget time.Duration
		if dl, ok := ctx.Deadline(); ok {
			budget = time.Until(dl)
			if i < len(cands)-1 {
				budget /= 2
				actx, cancel = context.WithTimeout(ctx, budget)
			}
		}
		t0 := time.Now()
		v, err := call(actx, r.r)
		cancel()
		c.record(r, err, time.Since(t0), budget)
		if err == nil {
			return v, nil
		}
		if code(err) == codes.NotFound {
			notFound++
			lastErr = err
			continue
		}
		if classify(err) == kindAnswer {
			return zero, err
		}
		lastErr = err
	}
	if notFound == len(s.replicas) {
		return zero, lastErr
	}
	if code(lastErr) == codes.NotFound {
		return zero, fmt.Errorf("%w: %d of %d replicas said not found, the others could not be asked", ErrNoReplica, notFound, len(s.replicas))
	}
	return zero, lastErr
}
