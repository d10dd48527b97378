package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// Members implements shardpb.ShardServer: the group's configuration as
// this replica knows it. Any replica answers, serving or not: a router
// discovering a shard's replicas must learn of one still catching up, and
// an operator must see a group without a leader.
func (s *Server) Members(ctx context.Context, req *shardpb.MembersRequest) (*shardpb.MembersResponse, error) {
	n := s.cfg.Node
	ms, err := n.Members()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "membership: %v", err)
	}
	resp := &shardpb.MembersResponse{Leader: n.Leader(), Self: n.Self(), LastIndex: n.LastIndex(), CommitIndex: n.CommitIndex(),
		Members: membersPB(ms, n.Leader())}
	if !req.GetProgress() {
		return resp, nil
	}
	var wg sync.WaitGroup
	for _, m := range resp.Members {
		wg.Go(func() {
			st, err := n.PeerState(ctx, m.Addr)
			if err != nil {
				m.Error = status.Convert(err).Message()
				return
			}
			m.Reachable, m.LastIndex = true, st.GetLastIndex()
		})
	}
	wg.Wait()
	return resp, nil
}

func membersPB(ms []raftnode.Member, leader string) []*shardpb.Member {
	out := make([]*shardpb.Member, len(ms))
	for i, m := range ms {
		out[i] = &shardpb.Member{Addr: m.Addr, Voter: m.Voter, Leader: m.Addr == leader}
	}
	return out
}

// ChangeMembers implements shardpb.ShardServer: a change of the group's
// configuration, on the leader; a follower forwards it (forward) or
// answers NOT_LEADER, as for writes. Every change is idempotent — adding a
// member, removing a non-member, or repeating a replace that went through
// changes nothing — so a caller that lost an answer sends it again.
func (s *Server) ChangeMembers(ctx context.Context, req *shardpb.ChangeMembersRequest) (*shardpb.ChangeMembersResponse, error) {
	if err := checkMembersChange(req); err != nil {
		return nil, err
	}
	n := s.cfg.Node
	var (
		changed bool
		err     error
	)
	switch op := req.GetOp().(type) {
	case *shardpb.ChangeMembersRequest_Add:
		changed, err = n.AddReplica(ctx, op.Add)
		if err == nil && req.GetWait() {
			err = s.waitVoter(ctx, op.Add)
		}
	case *shardpb.ChangeMembersRequest_Remove:
		changed, err = n.RemoveReplica(ctx, op.Remove)
	case *shardpb.ChangeMembersRequest_Replace:
		changed, err = s.replace(ctx, op.Replace.GetOld(), op.Replace.GetNew())
	}
	if err != nil {
		err = membersError(err)
		var resp *shardpb.ChangeMembersResponse
		leader, ferr := s.forward(ctx, err, func(ctx context.Context, c shardpb.ShardClient) (err error) {
			resp, err = c.ChangeMembers(ctx, req)
			return err
		})
		if ferr != nil {
			return nil, ferr
		}
		resp.ForwardedTo = leader
		return resp, nil
	}
	ms, err := n.Members()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "membership: %v", err)
	}
	return &shardpb.ChangeMembersResponse{Changed: changed, Members: membersPB(ms, n.Leader())}, nil
}

// replace adds newAddr, waits until the leader has promoted it, then
// removes oldAddr: the group holds one voter more for a moment instead of
// one fewer, so a replace never leaves it a replica short of its
// majority. Each step is idempotent, so a replace cut short (deadline,
// leader change) is finished by sending it again.
func (s *Server) replace(ctx context.Context, oldAddr, newAddr string) (bool, error) {
	n := s.cfg.Node
	ms, err := n.Members()
	if err != nil {
		return false, err
	}
	var oldIn, newVoter bool
	for _, m := range ms {
		oldIn = oldIn || m.Addr == oldAddr
		newVoter = newVoter || (m.Addr == newAddr && m.Voter)
	}
	if !oldIn {
		if newVoter {
			return false, nil // done before
		}
		return false, &raftnode.RefusedError{Reason: fmt.Sprintf("%s is not a member of the group (members: %s)", oldAddr, addrs(ms))}
	}
	added, err := n.AddReplica(ctx, newAddr)
	if err != nil {
		return false, err
	}
	if err := s.waitVoter(ctx, newAddr); err != nil {
		return added, err
	}
	removed, err := n.RemoveReplica(ctx, oldAddr)
	return added || removed, err
}

// waitVoter is Node.WaitVoter, its deadline answered with the catch-up
// progress so far.
func (s *Server) waitVoter(ctx context.Context, addr string) error {
	err := s.cfg.Node.WaitVoter(ctx, addr)
	if ctx.Err() == nil || err == nil {
		return err
	}
	progress := "not answering"
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if st, perr := s.cfg.Node.PeerState(sctx, addr); perr == nil {
		progress = fmt.Sprintf("at log index %d of the leader's %d", st.GetLastIndex(), s.cfg.Node.LastIndex())
	}
	return status.Errorf(codes.DeadlineExceeded, "%s was added and is still catching up (%s); the leader promotes it once caught up: repeat the request to wait again", addr, progress)
}

func addrs(ms []raftnode.Member) string {
	out := ""
	for i, m := range ms {
		if i > 0 {
			out += ","
		}
		out += m.Addr
	}
	return out
}

// membersError turns the node's refusals into the shard's gRPC answers: a
// follower's as NOT_LEADER (forwarded or passed to the caller), an unsafe
// or impossible change as FailedPrecondition, a change that may have
// committed as Unavailable.
func membersError(err error) error {
	var (
		pe *raftnode.ProposeError
		re *raftnode.RefusedError
	)
	switch {
	case errors.As(err, &pe) && pe.NotLeader:
		return notLeaderError{leader: pe.Leader}
	case errors.As(err, &pe):
		return status.Errorf(codes.Unavailable, "membership change may or may not have committed (it is idempotent: send it again): %v", pe.Err)
	case errors.As(err, &re):
		return status.Error(codes.FailedPrecondition, re.Reason)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Internal, "membership change: %v", err)
}

// checkMembersChange refuses a malformed change (InvalidArgument) before
// the leader is asked.
func checkMembersChange(req *shardpb.ChangeMembersRequest) error {
	invalid := func(format string, a ...any) error { return status.Errorf(codes.InvalidArgument, format, a...) }
	switch op := req.GetOp().(type) {
	case *shardpb.ChangeMembersRequest_Add:
		return checkAddr("add", op.Add)
	case *shardpb.ChangeMembersRequest_Remove:
		return checkAddr("remove", op.Remove)
	case *shardpb.ChangeMembersRequest_Replace:
		if err := checkAddr("replace.old", op.Replace.GetOld()); err != nil {
			return err
		}
		if err := checkAddr("replace.new", op.Replace.GetNew()); err != nil {
			return err
		}
		if op.Replace.GetOld() == op.Replace.GetNew() {
			return invalid("replace: old and new are both %s: a replica is replaced by one at another address", op.Replace.GetOld())
		}
		return nil
	case nil:
		return invalid("no change given: add, remove or replace")
	}
	return invalid("unknown membership change %T", req.GetOp())
}

// checkAddr checks a replica address: HOST:PORT, as peers reach it.
func checkAddr(what, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%s: %q is not HOST:PORT: %v", what, addr, err)
	}
	if host == "" {
		return status.Errorf(codes.InvalidArgument, "%s: %q has no host: give the address its peers reach it at", what, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return status.Errorf(codes.InvalidArgument, "%s: %q: port %q is not 1..65535", what, addr, port)
	}
	return nil
}

// Join asks the group at seeds (any replicas of it) to add this replica,
// until one accepts or ctx ends: `router shard --join`. The replica
// serves its gRPC port first, since the leader checks it answers before
// adding it. A replica already in its group's configuration is a no-op
// for the leader, so a restarted joiner asks again harmlessly.
func (s *Server) Join(ctx context.Context, seeds []string) error {
	self := s.cfg.Node.Self()
	req := &shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Add{Add: self}}
	var last error
	for attempt := 0; ; attempt++ {
		for _, seed := range seeds {
			if seed == self {
				continue
			}
			c, err := s.leaders.client(seed)
			if err != nil {
				last = err
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := c.ChangeMembers(cctx, req)
			cancel()
			if err == nil {
				s.cfg.Logger.Info("joined the group as a non-voter; promoted once caught up", "via", seed, "changed", resp.GetChanged())
				return nil
			}
			last = fmt.Errorf("%s: %w", seed, err)
			if status.Code(err) == codes.InvalidArgument {
				return last
			}
		}
		if attempt%10 == 0 {
			s.cfg.Logger.Warn("joining the group: no replica of --join accepted yet; retrying", "err", last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
