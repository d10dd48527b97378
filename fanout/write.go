package fanout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
)

// Write outcomes.
const (
	WriteOK = "ok"
	// WriteFailed: the write was refused or never received; it is not
	// applied.
	WriteFailed = "failed"
	// WriteUnknown: the write may have been delivered (deadline after send,
	// reset mid-call); it is never replayed.
	WriteUnknown = "unknown"
)

// WriteResult is the outcome of a write to one shard.
type WriteResult struct {
	// Replica is the address that answered last.
	Replica string
	Outcome string
	Err     error
}

// retryPause is the wait before another round of a write no replica
// accepted (every one refused to connect or was not the leader): an
// election takes a few hundred milliseconds.
const retryPause = 50 * time.Millisecond

// ErrNoLeader wraps a write's error when every attempt was refused without
// being accepted until ctx ended: no replica could take it (no leader
// elected, or none reachable). The write was not applied; retrying is safe.
var ErrNoLeader = errors.New("no replica accepted the write (no leader, or none reachable)")

// Write sends a write to one replica of the named shard's consensus group
// and waits for its answer: the replica that last accepted a write (the
// leader) first, then the leader a refusing replica names, then the others.
// Writes are never hedged. An attempt goes on to another replica, or is
// retried after a pause, only while it provably never took effect: the
// error says NeverSent (not delivered: no ready connection, connection
// refused, or a replica that is not the leader and did not accept it).
// Anything that may have been delivered is reported WriteUnknown, never
// replayed (field report 001). ctx bounds the whole write.
//
// A refusal may name the leader through a Leader() string method on the
// error; the engine remembers it per shard.
func Write[R Replica](ctx context.Context, c *Cluster[R], shard string, call func(ctx context.Context, r R) error) WriteResult {
	s := c.shard(shard)
	if s == nil {
		return WriteResult{Outcome: WriteFailed, Err: fmt.Errorf("unknown shard %q", shard)}
	}
	ctx, span := c.start(ctx, SpanWrite)
	defer span.End()
	var lastErr error
	for {
		tried := map[*replicaState[R]]bool{}
		for r := s.writeTarget(tried); r != nil; r = s.writeTarget(tried) {
			tried[r] = true
			res, leader, done := c.writeOnce(ctx, r, call)
			annotateWriteAttempt(span, shard, res, done)
			if done {
				if res.Outcome == WriteOK {
					s.setLeader(r.r.Addr())
				}
				return res
			}
			lastErr = res.Err
			s.setLeader(leader)
			if ctx.Err() != nil {
				break
			}
		}
		t := time.NewTimer(retryPause)
		select {
		case <-ctx.Done():
			t.Stop()
			res := WriteResult{Outcome: WriteFailed, Err: fmt.Errorf("%w: last refusal: %w (write timeout: %w)", ErrNoLeader, lastErr, ctx.Err())}
			annotateWriteAttempt(span, shard, res, true)
			return res
		case <-t.C:
		}
	}
}

// writeOnce makes one attempt. done is false when the write provably did
// not take effect and may go to another replica; leader is the leader the
// refusal named, if any.
func (c *Cluster[R]) writeOnce(ctx context.Context, r *replicaState[R], call func(context.Context, R) error) (res WriteResult, leader string, done bool) {
	res.Replica = r.r.Addr()
	t0 := time.Now()
	if err := c.safely("write", r.shard, func() { res.Err = call(ctx, r.r) }); err != nil {
		// The call may have sent the write before it panicked.
		res.Outcome, res.Err = WriteUnknown, err
		return res, "", true
	}
	err := res.Err
	c.opts.Reporter.ShardRPC(r.shard, r.r.Addr(), outcome(err), time.Since(t0))
	switch {
	case err == nil:
		res.Outcome = WriteOK
		return res, "", true
	case neverSent(err):
		res.Outcome = WriteFailed
		var lh interface{ Leader() string }
		if errors.As(err, &lh) {
			leader = lh.Leader()
		}
		return res, leader, false
	case classify(err) == kindAnswer && code(err) != codes.Unknown:
		// The replica answered: it refused the write.
		res.Outcome = WriteFailed
	default:
		res.Outcome = WriteUnknown
	}
	return res, "", true
}

// writeTarget is the next replica to send a write to: the known leader if
// not tried yet, then the others in order, ready ones before the rest.
func (s *shardState[R]) writeTarget(tried map[*replicaState[R]]bool) *replicaState[R] {
	s.mu.Lock()
	leader := s.leader
	s.mu.Unlock()
	var notReady *replicaState[R]
	for _, r := range s.list() {
		if !tried[r] && leader != "" && r.r.Addr() == leader {
			return r
		}
	}
	for _, r := range s.list() {
		if tried[r] {
			continue
		}
		if r.r.Ready() {
			return r
		}
		if notReady == nil {
			notReady = r
		}
	}
	return notReady
}

// setLeader remembers the shard's leader; "" leaves the last one.
func (s *shardState[R]) setLeader(addr string) {
	if addr == "" {
		return
	}
	s.mu.Lock()
	s.leader = addr
	s.mu.Unlock()
}
