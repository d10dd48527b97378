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
	ctx, span := c.start(ctx, SpanBroadcast)
	defer span.End()
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
	annotateWrite(span, shard, out)
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
