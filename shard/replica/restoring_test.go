package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/shard/shardpb"
)

// A collection created restoring holds the flag on every replica, through
// a restart from a snapshot and from the log; the restored change clears
// it, stamped as a settings version (a repeat changes nothing), and that
// survives a restart too. Another group receives the cleared entry as a
// create push of a higher version; an older push, still restoring, is
// stale and changes nothing.
func TestRestoringFlagIsReplicatedAndCleared(t *testing.T) {
	ms := groupOf(t, 3, testDim, nil)
	leader := waitLeader(t, ms)
	c := pbClient(t, leader.listen)
	create := createReq(true, "r", 0, testDim, "l2", "none", "")
	create.GetCreate().Restoring = true
	resp, err := c.ChangeCatalog(ctx(t), create)
	require.NoError(t, err)
	uid := resp.GetEntry().GetUid()
	require.True(t, resp.GetEntry().GetRestoring())

	entries := func() []*shardpb.CollectionEntry {
		t.Helper()
		leader := waitLeader(t, ms)
		var out []*shardpb.CollectionEntry
		for _, m := range ms {
			// A follower refuses reads until it hears from the leader.
			var cat *shardpb.CatalogResponse
			require.Eventually(t, func() bool {
				var err error
				cat, err = pbClient(t, m.listen).Catalog(ctx(t), &shardpb.CatalogRequest{MinIndex: leader.node.AppliedIndex()})
				return err == nil
			}, 10*time.Second, 20*time.Millisecond)
			require.Len(t, cat.GetCollections(), 1)
			out = append(out, cat.GetCollections()[0])
		}
		return out
	}
	restart := func() {
		t.Helper()
		require.NoError(t, ms[1].node.Snapshot())
		for _, m := range ms {
			m.stop()
		}
		for _, m := range ms {
			require.NoError(t, m.start())
		}
	}
	for _, e := range entries() {
		require.True(t, e.GetRestoring())
	}
	restart()
	for _, e := range entries() {
		require.True(t, e.GetRestoring(), "after a restart (replica 1 from a snapshot)")
		require.Equal(t, uid, e.GetUid())
	}

	done := &shardpb.ChangeCatalogRequest{Authority: true, Op: &shardpb.ChangeCatalogRequest_Restored{Restored: &shardpb.CollectionRef{Name: "r", Uid: uid}}}
	c = pbClient(t, waitLeader(t, ms).listen)
	resp, err = c.ChangeCatalog(ctx(t), done)
	require.NoError(t, err)
	require.True(t, resp.GetChanged())
	cleared := resp.GetEntry()
	require.False(t, cleared.GetRestoring())
	require.Equal(t, resp.GetIndex(), cleared.GetSettingsVersion())
	resp, err = c.ChangeCatalog(ctx(t), done)
	require.NoError(t, err)
	require.False(t, resp.GetChanged(), "a repeat changes nothing")
	_, err = c.ChangeCatalog(ctx(t), &shardpb.ChangeCatalogRequest{Op: done.GetOp()})
	require.Error(t, err, "only the authority decides")
	restart()
	for _, e := range entries() {
		require.False(t, e.GetRestoring(), "after a restart")
		require.Equal(t, cleared.GetSettingsVersion(), e.GetSettingsVersion())
	}

	// Another group: the pushes the router sends.
	other := groupOf(t, 1, testDim, nil)
	oc := pbClient(t, waitLeader(t, other).listen)
	pushed := proto.Clone(create.GetCreate()).(*shardpb.CollectionEntry)
	pushed.Uid = uid
	_, err = oc.ChangeCatalog(ctx(t), &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: pushed}})
	require.NoError(t, err)
	resp, err = oc.ChangeCatalog(ctx(t), &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: cleared}})
	require.NoError(t, err)
	require.True(t, resp.GetChanged())
	require.False(t, resp.GetEntry().GetRestoring())
	resp, err = oc.ChangeCatalog(ctx(t), &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: pushed}})
	require.NoError(t, err)
	require.False(t, resp.GetChanged(), "a stale push changes nothing")
	require.False(t, resp.GetEntry().GetRestoring())
}
