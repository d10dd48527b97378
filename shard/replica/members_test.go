package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/internal/faultproxy"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// membersCfg makes the group compact its log early, so a replica added
// later catches up from a snapshot, not from the log alone.
func membersCfg(c *Config) { c.SnapshotThreshold, c.TrailingLogs = 16, 4 }

// newJoiner is a replica started with an empty data directory to join an
// existing group (router shard --join): it seeds nothing.
func newJoiner(t *testing.T) *member {
	t.Helper()
	addr := restartablePort(t)
	p, err := faultproxy.StartLoopback(addr)
	require.NoError(t, err)
	m := &member{t: t, dir: filepath.Join(t.TempDir(), "joiner"), listen: addr, proxy: p,
		cfg: func(c *Config) { membersCfg(c); c.Join = true }}
	require.NoError(t, m.start())
	t.Cleanup(func() { m.stop(); m.proxy.Close() })
	return m
}

func members(t *testing.T, m *member) map[string]bool {
	t.Helper()
	resp, err := m.conn.Members(ctx(t), false)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, x := range resp.GetMembers() {
		out[x.GetAddr()] = x.GetVoter()
	}
	return out
}

func changeMembers(m *member, req *shardpb.ChangeMembersRequest, within time.Duration) (*shardpb.ChangeMembersResponse, error) {
	c, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return m.conn.ChangeMembers(c, req)
}

func addReq(addr string, wait bool) *shardpb.ChangeMembersRequest {
	return &shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Add{Add: addr}, Wait: wait}
}

func removeReq(addr string) *shardpb.ChangeMembersRequest {
	return &shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Remove{Remove: addr}}
}

// bruteIDs is the exact top-k of ids under l2 (the test groups' metric)
// for q.
func bruteIDs(q []float32, k int, all []string) []string {
	type scored struct {
		id string
		d  float64
	}
	var ss []scored
	for _, id := range all {
		v := testVec(id, 0)
		var d float64
		for i := range v {
			x := float64(v[i]) - float64(q[i])
			d += x * x
		}
		ss = append(ss, scored{id, d})
	}
	slices.SortFunc(ss, func(a, b scored) int { return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.id, b.id)) })
	out := make([]string, 0, k)
	for _, s := range ss[:min(k, len(ss))] {
		out = append(out, s.id)
	}
	return out
}

// exactTopK checks m answers q's top-k exactly as the brute force over
// all does, having applied minIndex.
func exactTopK(t *testing.T, m *member, all []string, minIndex uint64) {
	t.Helper()
	for i := range 5 {
		q := testVec(fmt.Sprint("query-", i), 7)
		resp := searchServing(t, m, []client.Query{{Vector: q, K: 10}}, minIndex)
		got := make([]string, 0, 10)
		for _, h := range resp.Hits[0] {
			got = append(got, h.ID)
		}
		require.Equal(t, bruteIDs(q, 10, all), got, "query %d on %s", i, m.addr())
	}
}

// TestMembersAddAReplicaThenRemoveIt: a fourth replica started with
// --join and an empty data directory is added through a follower (which
// forwards the change to its leader), joins as a non-voter, installs the
// leader's snapshot, is promoted once caught up, and then answers
// complete, exact reads; removed again, the group writes on with three.
// Bad changes are refused with their reason, and a removal that would
// leave no live majority is refused.
func TestMembersAddAReplicaThenRemoveIt(t *testing.T) {
	ms := group(t, 3, membersCfg)
	leader := waitLeader(t, ms)
	all := ids("a", 200)
	for i := 0; i < len(all); i += 10 {
		write(t, ms, all[i:i+10]...)
	}
	require.NoError(t, leader.node.Snapshot(), "compact the log: the newcomer must install a snapshot")
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
		}
	}

	j := newJoiner(t)
	require.Zero(t, j.node.LastIndex(), "a joiner never bootstraps a group of its own")
	// Bad input: refused before the leader is asked, with the reason.
	for _, tc := range []struct {
		req  *shardpb.ChangeMembersRequest
		code codes.Code
		msg  string
	}{
		{&shardpb.ChangeMembersRequest{}, codes.InvalidArgument, "no change given"},
		{addReq("nohost", false), codes.InvalidArgument, `add: "nohost" is not HOST:PORT`},
		{addReq(":7070", false), codes.InvalidArgument, "has no host"},
		{addReq("127.0.0.1:0", false), codes.InvalidArgument, "is not 1..65535"},
		{&shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Replace{Replace: &shardpb.ReplaceMember{Old: j.addr(), New: j.addr()}}},
			codes.InvalidArgument, "old and new are both"},
		{addReq("127.0.0.1:1", false), codes.FailedPrecondition, "no replica answers at 127.0.0.1:1"},
		{&shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Replace{Replace: &shardpb.ReplaceMember{Old: "127.0.0.1:2", New: j.addr()}}},
			codes.FailedPrecondition, "127.0.0.1:2 is not a member of the group"},
	} {
		_, err := changeMembers(follower, tc.req, 10*time.Second)
		require.Equal(t, tc.code, status.Code(err), "%v: %v", tc.req, err)
		require.ErrorContains(t, err, tc.msg)
	}
	require.Len(t, members(t, leader), 3, "a refused change changes nothing")

	// Added through a follower; the answer waits for the promotion.
	resp, err := changeMembers(follower, addReq(j.addr(), true), 60*time.Second)
	require.NoError(t, err)
	require.True(t, resp.GetChanged())
	require.Equal(t, leader.addr(), resp.GetForwardedTo())
	require.Len(t, resp.GetMembers(), 4)
	for _, m := range append(ms, j) {
		require.Eventually(t, func() bool { return members(t, m)[j.addr()] }, 10*time.Second, 20*time.Millisecond,
			"%s never saw the newcomer as a voter", m.addr())
	}
	rc := raftClient(t, j)
	require.True(t, groupState(t, rc).GetHasSnapshot(), "the newcomer caught up from the leader's snapshot")
	// On a loaded machine the group may be electing now: a change the
	// member asked did not accept is sent again to whoever leads.
	// The condition runs on another goroutine, where require's FailNow
	// would not stop the test: the error is checked after.
	var (
		again     *shardpb.ChangeMembersResponse
		changeErr error
	)
	require.Eventually(t, func() bool {
		var err error
		again, err = changeMembers(waitLeader(t, append(ms, j)), addReq(j.addr(), false), 10*time.Second)
		var nl *shard.NotLeaderError
		if errors.As(err, &nl) || (status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "not accepted")) {
			return false
		}
		changeErr = err
		return true
	}, 30*time.Second, 50*time.Millisecond, "no leader took the change")
	require.NoError(t, changeErr)
	require.False(t, again.GetChanged(), "adding a member is a no-op")

	// A voter now: writes commit with it, and it answers exactly.
	more := ids("b", 20)
	idx := write(t, append(ms, j), more...)
	all = append(all, more...)
	require.Eventually(t, func() bool { return complete(t, j, all, idx) }, 30*time.Second, 20*time.Millisecond)
	exactTopK(t, j, all, idx)

	// Removed through itself (forwarded to the leader).
	resp, err = changeMembers(j, removeReq(j.addr()), 10*time.Second)
	require.NoError(t, err)
	require.True(t, resp.GetChanged())
	require.NotContains(t, members(t, leader), j.addr())
	again, err = changeMembers(leader, removeReq(j.addr()), 10*time.Second)
	require.NoError(t, err)
	require.False(t, again.GetChanged(), "removing a non-member is a no-op")
	idx = write(t, ms, "c")
	for _, m := range ms {
		require.Eventually(t, func() bool { return complete(t, m, append(all, "c"), idx) }, 30*time.Second, 20*time.Millisecond)
	}

	// With one follower down, removing the other would leave the leader
	// and a dead replica: no live majority, refused.
	follower.stop()
	var other *member
	for _, m := range ms {
		if m != leader && m != follower {
			other = m
		}
	}
	_, err = changeMembers(leader, removeReq(other.addr()), 10*time.Second)
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "would leave 2 voters of which 1 answer")
	require.Len(t, members(t, leader), 3)
}

// TestMembersJoinAndReplaceADeadReplica: a follower dies for good; a fresh
// replica on a new address asks to join (Server.Join, --join), and a
// replace through the leader makes it a voter before it removes the dead
// one. Writes go on throughout and each is acknowledged; the newcomer
// holds every one and answers exactly.
func TestMembersJoinAndReplaceADeadReplica(t *testing.T) {
	ms := group(t, 3, membersCfg)
	leader := waitLeader(t, ms)
	all := ids("a", 100)
	for i := 0; i < len(all); i += 10 {
		write(t, ms, all[i:i+10]...)
	}
	var dead *member
	for _, m := range ms {
		if m != leader {
			dead = m
		}
	}
	dead.stop()
	live := slices.DeleteFunc(slices.Clone(ms), func(m *member) bool { return m == dead })

	stop := make(chan struct{})
	written := make(chan []string)
	go func() {
		var acked []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				written <- acked
				return
			default:
			}
			id := fmt.Sprint("w-", i)
			write(t, live, id)
			acked = append(acked, id)
		}
	}()

	j := newJoiner(t)
	joinCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, j.srv.Join(joinCtx, []string{dead.addr(), live[1].addr(), live[0].addr()}))
	req := &shardpb.ChangeMembersRequest{Op: &shardpb.ChangeMembersRequest_Replace{Replace: &shardpb.ReplaceMember{Old: dead.addr(), New: j.addr()}}}
	resp, err := changeMembers(leader, req, 60*time.Second)
	require.NoError(t, err)
	require.True(t, resp.GetChanged())
	got := map[string]bool{}
	for _, m := range resp.GetMembers() {
		got[m.GetAddr()] = m.GetVoter()
	}
	require.Equal(t, map[string]bool{live[0].addr(): true, live[1].addr(): true, j.addr(): true}, got)
	again, err := changeMembers(live[1], req, 10*time.Second)
	require.NoError(t, err)
	require.False(t, again.GetChanged(), "a replace that went through is a no-op")

	close(stop)
	acked := <-written
	require.NotEmpty(t, acked, "writes went on during the replace")
	all = append(all, acked...)
	idx := write(t, live, "last")
	all = append(all, "last")
	require.Eventually(t, func() bool { return complete(t, j, all, idx) }, 30*time.Second, 20*time.Millisecond)
	exactTopK(t, j, all, idx)
	// The group writes with the newcomer as one of its majority: with
	// one of the old replicas stopped, the other and the newcomer commit.
	var follower *member
	for _, m := range live {
		if !m.node.IsLeader() {
			follower = m
		}
	}
	follower.stop()
	idx = write(t, []*member{live[0], live[1], j}, "after")
	require.Positive(t, idx)
}
