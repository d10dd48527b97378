package server

import (
	"context"
	"errors"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// forwardedKey marks a write a follower forwarded to its leader: the
// leader, if it is no longer one, refuses it instead of forwarding it
// again, so a write makes at most two hops.
const forwardedKey = "x-trawl-forwarded"

// notLeaderError is propose's refusal on a replica that does not lead its
// group: the entry never entered the log. It is the NOT_LEADER answer
// naming leader when it reaches the router.
type notLeaderError struct{ leader string }

func (e notLeaderError) Error() string {
	return status.Convert(shard.NotLeaderStatus(e.leader)).Message()
}

// GRPCStatus is the NOT_LEADER answer.
func (e notLeaderError) GRPCStatus() *status.Status {
	return status.Convert(shard.NotLeaderStatus(e.leader))
}

// leaders keeps a follower's connections to the leaders it forwards
// writes to, over the shard port with the peers' credentials.
type leaders struct {
	opts []grpc.DialOption

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (l *leaders) client(addr string) (shardpb.ShardClient, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cc, ok := l.conns[addr]; ok {
		return shardpb.NewShardClient(cc), nil
	}
	opts := append(slices.Clip(l.opts), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, err
	}
	if l.conns == nil {
		l.conns = map[string]*grpc.ClientConn{}
	}
	l.conns[addr] = cc
	return shardpb.NewShardClient(cc), nil
}

func (l *leaders) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, cc := range l.conns {
		_ = cc.Close()
		delete(l.conns, a)
	}
}

// forward sends a write this follower refused as not the leader on to
// its leader, so a router that cannot reach the leader still writes to a
// healthy group. Seed 001's rule holds on this hop as on the router's: a
// forward that provably never reached the leader, or that the leader
// refused without accepting, answers NOT_LEADER (the router may try
// another replica); one that may have been delivered answers Unavailable
// as "may or may not have committed" (the router reports the outcome
// unknown and never replays it); the leader's own answers pass through.
// On success it returns the leader's address, which the answer names
// (forwarded_to) so the router knows which replica applied the write.
func (s *Server) forward(ctx context.Context, refusal error, call func(context.Context, shardpb.ShardClient) error) (string, error) {
	var nl notLeaderError
	if !errors.As(refusal, &nl) || nl.leader == "" || nl.leader == s.cfg.Node.Self() || wasForwarded(ctx) {
		return "", refusal
	}
	c, err := s.leaders.client(nl.leader)
	if err != nil {
		return "", refusal
	}
	err = shard.MarkNeverSent(shard.FromStatus(call(metadata.AppendToOutgoingContext(ctx, forwardedKey, "1"), c)))
	var (
		ns interface{ NeverSent() bool }
		nf *shard.CollectionNotFoundError
	)
	switch {
	case err == nil:
		return nl.leader, nil
	case errors.As(err, &nf):
		// The leader's own answer about the collection, not about
		// leadership: it passes through.
		return "", err
	case errors.As(err, &ns) && ns.NeverSent():
		var hint interface{ Leader() string }
		if errors.As(err, &hint) && hint.Leader() != "" {
			return "", notLeaderError{leader: hint.Leader()}
		}
		return "", refusal
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown:
		return "", status.Errorf(codes.Unavailable, "write may or may not have committed: forwarded to the leader %s: %v", nl.leader, err)
	}
	return "", err
}

// wasForwarded reports whether the write came from a follower.
func wasForwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(forwardedKey)) > 0
}
