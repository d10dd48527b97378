package raftnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trawl-search/trawl/shard/shardpb"
)

// Membership settings.
const (
	// promoteLag is how far behind the leader's last log index a
	// non-voter's log may be when it is promoted: a few entries in flight,
	// so a group under a steady write stream still promotes it, while one
	// still installing a snapshot or receiving the log since does not
	// count toward the majority before it can ack at the group's pace. An
	// entry is one write request (up to ~1.5 MiB at 1536-D): at 64, a
	// one-batch lag, a newcomer was promoted ~50 entries (10 000 rows of
	// 1536-D) behind under a bulk load, and a group with a replica dead
	// would then have waited for it to catch up before committing.
	promoteLag = 8
	// promoteEvery is how often a leader looks for non-voters to promote.
	promoteEvery = 500 * time.Millisecond
	// peerTimeout bounds one question to a peer about its log state.
	peerTimeout = time.Second
	// changeTimeout bounds a configuration change without a deadline.
	changeTimeout = 10 * time.Second
)

// Member is one replica of the group's configuration.
type Member struct {
	Addr  string
	Voter bool
}

// anyConfig is the prevIndex given to raft's configuration changes: apply
// the change to whatever configuration is latest. A compare-and-set on the
// configuration's index would need that index, and raft (v1.7) does not
// expose it; each change is idempotent and checked against the leader's
// latest configuration just before, so nothing relies on one.
const anyConfig = 0

// RefusedError is a membership change the leader refused because it
// would be unsafe or cannot be done (gRPC FailedPrecondition): nothing was
// changed.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Members returns the group's latest configuration as this replica knows
// it (sorted by address), possibly not yet committed. hashicorp/raft (v1.7)
// does not say at which log index: its GetConfiguration reports 0.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read membership: %w", err)
	}
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Addr, b.Addr) })
	return out, nil
}

// LastIndex is the last index of this replica's log.
func (n *Node) LastIndex() uint64 { return n.raft.LastIndex() }

// PeerState asks a replica for its raft state (its GroupState answer),
// within peerTimeout; for this replica it answers itself.
func (n *Node) PeerState(ctx context.Context, addr string) (*shardpb.GroupStateResponse, error) {
	if addr == n.cfg.Advertise {
		return n.groupState(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	return n.trans.GroupState(ctx, addr)
}

// notLeader is the refusal of a change asked of a follower: nothing entered
// the log, so the change may go to the leader.
func (n *Node) notLeader() error {
	return &ProposeError{NotLeader: true, Leader: n.Leader(), Err: raft.ErrNotLeader}
}

// changeError classifies a failed configuration change as Propose does.
func (n *Node) changeError(err error) error {
	return &ProposeError{NotLeader: errors.Is(err, raft.ErrNotLeader), Leader: n.Leader(), Err: err}
}

// changeWithin is the timeout of a configuration change under ctx.
func changeWithin(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return changeTimeout
}

// AddReplica adds addr to the group as a non-voter, on the leader: it
// receives the leader's snapshot and log like any follower, and the leader
// promotes it to voter once its log has caught up (promote). A non-voter
// never counts toward the majority, so adding one cannot cost the group
// its writes, however long it takes to catch up. The replica must answer
// on addr, so an address mistyped is refused instead of sitting in the
// configuration. Adding a member is a no-op (changed false).
func (n *Node) AddReplica(ctx context.Context, addr string) (changed bool, err error) {
	if n.raft.State() != raft.Leader {
		return false, n.notLeader()
	}
	ms, err := n.Members()
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(ms, func(m Member) bool { return m.Addr == addr }) {
		return false, nil
	}
	if _, err := n.PeerState(ctx, addr); err != nil {
		return false, &RefusedError{Reason: fmt.Sprintf("no replica answers at %s (%v): start it first (router shard --join, empty --data-dir)", addr, err)}
	}
	if err := n.raft.AddNonvoter(raft.ServerID(addr), raft.ServerAddress(addr), anyConfig, changeWithin(ctx)).Error(); err != nil {
		return false, n.changeError(err)
	}
	n.log.Info("replica added as a non-voter; promoted once caught up", "replica", addr)
	return true, nil
}

// RemoveReplica removes addr from the group, on the leader. Removing a
// voter is refused when the voters left would not include a live
// majority (each asked for its state now), or none would be left: the
// group must keep its writes through the change. A leader may remove
// itself; it steps down once the change commits. Removing a non-member is
// a no-op (changed false).
func (n *Node) RemoveReplica(ctx context.Context, addr string) (changed bool, err error) {
	if n.raft.State() != raft.Leader {
		return false, n.notLeader()
	}
	ms, err := n.Members()
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(ms, func(m Member) bool { return m.Addr == addr })
	if i < 0 {
		return false, nil
	}
	if ms[i].Voter {
		var left []string
		for _, m := range ms {
			if m.Voter && m.Addr != addr {
				left = append(left, m.Addr)
			}
		}
		if len(left) == 0 {
			return false, &RefusedError{Reason: fmt.Sprintf("%s is the group's last voter: a group cannot be emptied", addr)}
		}
		live := n.live(ctx, left)
		if need := len(left)/2 + 1; live < need {
			return false, &RefusedError{Reason: fmt.Sprintf("removing %s would leave %d voters of which %d answer, and a majority needs %d: replace or restart the dead ones first",
				addr, len(left), live, need)}
		}
	}
	if err := n.raft.RemoveServer(raft.ServerID(addr), anyConfig, changeWithin(ctx)).Error(); err != nil {
		return false, n.changeError(err)
	}
	n.log.Info("replica removed from the group", "replica", addr)
	return true, nil
}

// live counts the replicas of addrs that answer now (this one always).
func (n *Node) live(ctx context.Context, addrs []string) int {
	var (
		mu    sync.Mutex
		count int
		wg    sync.WaitGroup
	)
	for _, a := range addrs {
		wg.Go(func() {
			if _, err := n.PeerState(ctx, a); err == nil {
				mu.Lock()
				count++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return count
}

// WaitVoter waits until addr is a voter of the group, or ctx ends. It
// runs on the leader, which promotes caught-up non-voters; a leader that
// steps down meanwhile answers as a follower would (NOT_LEADER), and the
// caller repeats on the new leader.
func (n *Node) WaitVoter(ctx context.Context, addr string) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if n.raft.State() != raft.Leader {
			return n.notLeader()
		}
		ms, err := n.Members()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ms, func(m Member) bool { return m.Addr == addr })
		switch {
		case i < 0:
			return &RefusedError{Reason: fmt.Sprintf("%s is no longer a member of the group", addr)}
		case ms[i].Voter:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// promote runs on the leader: every non-voter whose log has caught up
// with the leader's (within promoteLag) becomes a voter. It is the
// leader's job rather than the adding call's, so a promotion survives the
// call's end and a change of leader: whichever replica leads finishes it.
func (n *Node) promote() {
	ms, err := n.Members()
	if err != nil {
		return
	}
	for _, m := range ms {
		if m.Voter || n.raft.State() != raft.Leader {
			continue
		}
		st, err := n.PeerState(context.Background(), m.Addr)
		if err != nil || st.GetLastIndex() == 0 {
			continue // down, or has not received a snapshot yet
		}
		last := n.raft.LastIndex()
		if st.GetLastIndex()+promoteLag < last {
			continue
		}
		if err := n.raft.AddVoter(raft.ServerID(m.Addr), raft.ServerAddress(m.Addr), anyConfig, changeTimeout).Error(); err != nil {
			n.log.Warn("promoting a caught-up replica failed; trying again", "replica", m.Addr, "err", err)
			return // read the configuration again next time
		}
		n.log.Info("replica caught up: promoted to voter", "replica", m.Addr, "its_last_index", st.GetLastIndex(), "leader_last_index", last)
		return
	}
}

// runPromoter promotes caught-up non-voters while this replica leads.
func (n *Node) runPromoter() {
	defer n.wg.Done()
	t := time.NewTicker(promoteEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if n.raft.State() == raft.Leader {
			n.promote()
		}
	}
}
