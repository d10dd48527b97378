package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// A backup cut with a fence, asked of a follower: the follower streams
// the rows as of its cut; from the cut on, writes are refused SLOT_MOVED
// with retry (the router sends them again) on every replica alike — a
// follower restarted from a snapshot taken while fenced too, so the
// replicas stay identical — until the fence is lifted, once.
func TestBackupFencePausesWritesUntilLifted(t *testing.T) {
	ms := group(t, 3, nil)
	leader := waitLeader(t, ms)
	write(t, ms, ids("f", 10)...)
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
		}
	}
	in := func(m *member) client.Scoped { return m.conn.In(client.Collection{}) }
	// A follower serves reads once it has heard from the leader and
	// applied what it reported: on a loaded machine not at once.
	require.Eventually(t, follower.node.Serving, 30*time.Second, 10*time.Millisecond)

	var hdr *shardpb.BackupHeader
	got := map[string]bool{}
	require.NoError(t, in(follower).Backup(ctx(t), "b1", "fence-1",
		func(h *shardpb.BackupHeader) error { hdr = h; return nil },
		func(vs []*shardpb.Vector) error {
			for _, v := range vs {
				got[v.GetId()] = true
			}
			return nil
		}))
	require.NotZero(t, hdr.GetIndex())
	require.EqualValues(t, 10, hdr.GetCount())
	require.Len(t, got, 10)

	refused := func() {
		t.Helper()
		_, err := in(leader).Upsert(ctx(t), place, []*shardpb.Vector{{Id: "late", Vector: shard.EncodeVector(testVec("late", 0))}})
		var sm *shard.SlotMovedError
		require.True(t, errors.As(err, &sm), "a fenced write is refused SLOT_MOVED: %v", err)
		require.True(t, sm.Retry, "and may be sent again")
	}
	refused()

	// A follower restarted from its own snapshot holds the fence too.
	require.NoError(t, follower.node.Snapshot())
	follower.stop()
	require.NoError(t, follower.start())
	last := leader.node.AppliedIndex()
	require.Eventually(t, func() bool { return follower.node.AppliedIndex() >= last && follower.node.Serving() },
		30*time.Second, 10*time.Millisecond)
	refused()
	last = leader.node.AppliedIndex()
	for _, m := range ms {
		require.Eventually(t, func() bool { return m.node.AppliedIndex() >= last }, 20*time.Second, 10*time.Millisecond)
		require.Equal(t, 10, m.mem.Len(), "every replica refused the fenced write")
	}

	lifted, err := in(follower).LiftFence(ctx(t), "fence-1") // forwarded to the leader
	require.NoError(t, err)
	require.True(t, lifted)
	write(t, ms, "late")
	last = leader.node.AppliedIndex()
	for _, m := range ms {
		require.Eventually(t, func() bool { return m.node.AppliedIndex() >= last && m.mem.Len() == 11 }, 20*time.Second, 10*time.Millisecond)
	}
	lifted, err = in(leader).LiftFence(ctx(t), "fence-1")
	require.NoError(t, err)
	require.False(t, lifted, "a fence is lifted once")
}
