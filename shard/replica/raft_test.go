package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/faultproxy"
	"github.com/trawl-search/trawl/internal/localport"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// Test timings: generous for a loaded 2-core machine under -race, and
// MaxLeaderSilence at its minimum of 3x the election timeout.
const (
	testHeartbeat = 400 * time.Millisecond
	testSilence   = 3 * testHeartbeat
	testDim       = 8
)

// member is one in-process replica of a test group: a gRPC server on its
// own loopback port, reached by its peers through a fault proxy (its
// advertised address), and by the test directly.
type member struct {
	t      *testing.T
	dir    string
	listen string // the server's own address (stable across restarts)
	proxy  *faultproxy.Proxy
	peers  []string
	// cfg adjusts the replica's configuration at every start.
	cfg func(*Config)
	dim int // testDim if zero

	g    *grpc.Server
	rep  *Replica
	node *raftnode.Node // rep's
	srv  *server.Server // rep's
	mem  *store.Memory  // rep's
	conn *client.Conn
}

func (m *member) addr() string { return m.proxy.Addr() }

// start opens the replica and serves it.
func (m *member) start() error {
	if m.dim == 0 {
		m.dim = testDim
	}
	cfg := Config{
		Legacy: catalog.Settings{Dim: m.dim, Metric: vector.Euclidean}, Kernel: vector.Generic(),
		DataDir: m.dir, Advertise: m.addr(), Peers: m.peers,
		HeartbeatTimeout: testHeartbeat, ElectionTimeout: testHeartbeat, MaxLeaderSilence: testSilence,
		Logger: testLogger(m.t),
	}
	if m.cfg != nil {
		m.cfg(&cfg)
	}
	ln, err := listenRetry(m.listen)
	if err != nil {
		return err
	}
	rep, err := Open(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	m.rep, m.node, m.srv, m.mem = rep, rep.Node, rep.Server, rep.Store
	m.g = grpc.NewServer(shard.ServerOptions()...)
	rep.Register(m.g)
	go m.g.Serve(ln)
	m.conn, err = client.Dial(m.listen, client.DialConfig{})
	return err
}

// stop is a crash as far as the group can tell: the server vanishes.
func (m *member) stop() {
	if m.g == nil {
		return
	}
	m.conn.Close()
	m.g.Stop()
	require.NoError(m.t, m.rep.Close())
	m.g = nil
}

// listenRetry listens on addr again, as a restarted member must.
func listenRetry(addr string) (net.Listener, error) {
	return localport.Relisten(addr, 5*time.Second)
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("TRAWL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// group starts n replicas of one shard.
func group(t *testing.T, n int, cfg func(*Config)) []*member {
	t.Helper()
	return groupOf(t, n, testDim, cfg)
}

// groupDim starts n replicas of dim-dimensional vectors with the
// production raft timings (1 s heartbeat, 5 s leader silence): three
// replicas bulk-loading 1536-D vectors in one process on two cores starve
// the test timings' 200 ms leader lease.
func groupDim(t *testing.T, n, dim int) []*member {
	t.Helper()
	return groupOf(t, n, dim, func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.MaxLeaderSilence = 0, 0, 0
	})
}

// restartablePort is a free loopback address for a member that restarts
// on it (localport: below the ephemeral range, where no outgoing
// connection takes it while the member is down).
func restartablePort(t *testing.T) string {
	t.Helper()
	ln, err := localport.Listen()
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	return ln.Addr().String()
}

func groupOf(t *testing.T, n, dim int, cfg func(*Config)) []*member {
	t.Helper()
	ms := make([]*member, n)
	var peers []string
	for i := range ms {
		addr := restartablePort(t)
		p, err := faultproxy.StartLoopback(addr)
		require.NoError(t, err)
		ms[i] = &member{t: t, dir: filepath.Join(t.TempDir(), fmt.Sprint("r", i)), listen: addr, proxy: p, cfg: cfg, dim: dim}
		peers = append(peers, p.Addr())
	}
	for _, m := range ms {
		m.peers = peers
		require.NoError(t, m.start())
	}
	t.Cleanup(func() {
		for _, m := range ms {
			m.stop()
			m.proxy.Close()
		}
	})
	return ms
}

// waitLeader waits for a serving leader among the running members.
func waitLeader(t *testing.T, ms []*member) *member {
	t.Helper()
	var leader *member
	require.Eventually(t, func() bool {
		for _, m := range ms {
			if m.g != nil && m.node.IsLeader() && m.node.Serving() {
				leader = m
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "no leader")
	return leader
}

func testVec(id string, gen int) []float32 {
	r := rand.New(rand.NewPCG(uint64(len(id)), uint64(gen)))
	v := make([]float32, testDim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// write upserts ids on the leader, retrying on NOT_LEADER as a router
// would (the hint first), and returns the last index.
func write(t *testing.T, ms []*member, ids ...string) uint64 {
	t.Helper()
	vs := make([]*shardpb.Vector, len(ids))
	for i, id := range ids {
		vs[i] = &shardpb.Vector{Id: id, Vector: shard.EncodeVector(testVec(id, 0)), Payload: []byte(`{"id":"` + id + `"}`)}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range ms {
			if m.g == nil || !m.node.IsLeader() {
				continue
			}
			idx, err := m.conn.Upsert(ctx(t), place, vs)
			if err == nil {
				return idx
			}
			// NOT_LEADER, or a leader that lost its lease mid-commit on a
			// loaded machine (Unavailable, outcome unknown): the upsert is
			// keyed, so sending it again is safe.
			var nl *shard.NotLeaderError
			require.True(t, errors.As(err, &nl) || status.Code(err) == codes.Unavailable,
				"only NOT_LEADER or a lost leadership is expected here, got %v", err)
		}
		require.True(t, time.Now().Before(deadline), "no leader took the write")
		time.Sleep(20 * time.Millisecond)
	}
}

// complete reports whether m answers a full search, and if so, checks it
// holds every id in want (an answer counted as complete never lacks an
// acknowledged write).
func complete(t *testing.T, m *member, want []string, minIndex uint64) bool {
	t.Helper()
	resp, err := m.conn.Search(ctx(t), []client.Query{{Vector: testVec("q", 1), K: vector.MaxK}}, minIndex)
	if err != nil {
		var ns interface{ NotServing() bool }
		require.True(t, errors.As(err, &ns) && ns.NotServing(), "a replica that cannot answer says NOT_SERVING, got %v", err)
		return false
	}
	got := make([]string, 0, len(resp.Hits[0]))
	for _, h := range resp.Hits[0] {
		got = append(got, h.ID)
	}
	for _, id := range want {
		require.Contains(t, got, id, "a complete answer lacks an acknowledged write")
	}
	return true
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// TestRaftGroupReplicatesAndRefusesWritesOnFollowers: writes commit
// through the leader and reach every replica; a follower that cannot
// reach its leader refuses a write as NOT_LEADER (naming the leader; the
// write never entered the log, so a router may send it elsewhere), and
// one that can forwards it; reads wait for the index they ask for.
func TestRaftGroupReplicatesAndRefusesWritesOnFollowers(t *testing.T) {
	ms := group(t, 3, nil)
	leader := waitLeader(t, ms)
	idx := write(t, ms, "a", "b")
	require.Positive(t, idx)

	var followers []*member
	for _, m := range ms {
		st, err := m.conn.Stats(ctx(t))
		require.NoError(t, err)
		if m == leader {
			require.Equal(t, "leader", st.GetRole())
			continue
		}
		require.Equal(t, "follower", st.GetRole())
		followers = append(followers, m)
	}
	// The leader's own address refuses connections (its peers' raft
	// traffic to it too; its own to them goes on): the followers cannot
	// forward.
	c := []*shardpb.Vector{{Id: "c", Vector: shard.EncodeVector(testVec("c", 0))}}
	leader.proxy.Stop()
	for _, m := range followers {
		_, err := m.conn.Upsert(ctx(t), place, c)
		var nl *shard.NotLeaderError
		require.ErrorAs(t, err, &nl)
		require.Equal(t, leader.addr(), nl.Leader())
		require.True(t, nl.NeverSent())
		require.Equal(t, codes.Unavailable, status.Code(err))
		_, _, err = m.conn.Delete(ctx(t), place, "a")
		require.ErrorAs(t, err, &nl)
	}
	_, err := leader.conn.Get(ctx(t), "c", 0)
	require.Equal(t, codes.NotFound, status.Code(err), "a refused write is never applied")
	// Once the leader is reachable, a follower forwards the write to it.
	require.NoError(t, leader.proxy.Restore())
	deadline := time.Now().Add(10 * time.Second)
	for {
		i, err := followers[0].conn.Upsert(ctx(t), place, c)
		if err == nil {
			require.Greater(t, i, idx)
			idx = i
			break
		}
		// Until the follower has reconnected, still refused unsent.
		var nl *shard.NotLeaderError
		require.ErrorAs(t, err, &nl)
		require.True(t, time.Now().Before(deadline), "the follower never forwarded the write: %v", err)
		time.Sleep(50 * time.Millisecond)
	}

	// Every replica applies the writes; min_index reads wait for them.
	for _, m := range ms {
		require.Eventually(t, func() bool { return complete(t, m, []string{"a", "b", "c"}, idx) }, 10*time.Second, 20*time.Millisecond)
		v, err := m.conn.Get(ctx(t), "a", idx)
		require.NoError(t, err)
		require.Equal(t, shard.EncodeVector(testVec("a", 0)), v.GetVector())
		require.Equal(t, `{"id":"a"}`, string(v.GetPayload()))
		st, err := m.conn.Stats(ctx(t))
		require.NoError(t, err)
		require.True(t, st.GetServing())
		require.GreaterOrEqual(t, st.GetAppliedIndex(), idx)
		require.Equal(t, leader.addr(), st.GetLeader())
	}
	// A read asking for an index nobody has applied is refused as not
	// serving (after waiting half its budget for the index).
	short, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	_, err = ms[0].conn.Get(short, "a", idx+1000)
	require.Error(t, err)
	var ns interface{ NotServing() bool }
	require.ErrorAs(t, err, &ns)

	// The placement check is the state machine's: a reshard is refused.
	_, err = leader.conn.Upsert(ctx(t), shard.Placement{Fingerprint: "other", Shard: "shard-0"}, []*shardpb.Vector{{Id: "z", Vector: shard.EncodeVector(testVec("z", 0))}})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	found, didx, err := leader.conn.Delete(ctx(t), place, "a")
	require.NoError(t, err)
	require.True(t, found)
	require.Greater(t, didx, idx)

	// A trained value is committed through the log and reaches every
	// replica; a follower refuses to propose one, and its node says the
	// entry never entered the log.
	tidx, err := leader.srv.SetTrained(ctx(t), nil, "int8_scale", []byte{1, 2, 3})
	require.NoError(t, err)
	for _, m := range ms {
		require.Eventually(t, func() bool { return m.node.AppliedIndex() >= tidx }, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, []byte{1, 2, 3}, m.mem.Trained("int8_scale"))
		if m != leader {
			_, err := m.srv.SetTrained(ctx(t), nil, "int8_scale", nil)
			var nl *shard.NotLeaderError
			require.ErrorAs(t, shard.FromStatus(err), &nl)
			require.Equal(t, leader.addr(), nl.Leader())
			_, _, err = m.node.Propose(ctx(t), []byte("never applied"))
			var pe *raftnode.ProposeError
			require.ErrorAs(t, err, &pe)
			require.True(t, pe.NotLeader)
		}
	}
}

// raftClient is a Raft service client on m's own address (past its
// proxy), closed when the test ends.
func raftClient(t *testing.T, m *member) shardpb.RaftClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+m.listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return shardpb.NewRaftClient(cc)
}

// groupState is a replica's answer to a starting peer's question: its
// last log index and whether it holds a snapshot.
func groupState(t *testing.T, rc shardpb.RaftClient) *shardpb.GroupStateResponse {
	t.Helper()
	st, err := rc.GroupState(ctx(t), &shardpb.GroupStateRequest{})
	require.NoError(t, err)
	return st
}

// rejoin measures how long after start a member serves complete answers
// again, checking every answer it gives meanwhile.
func rejoin(t *testing.T, m *member, want []string, minIndex uint64) time.Duration {
	t.Helper()
	t0 := time.Now()
	require.NoError(t, m.start())
	require.False(t, complete(t, m, nil, 0), "a replica that has just started answers NOT_SERVING")
	require.Eventually(t, func() bool { return complete(t, m, want, minIndex) }, 60*time.Second, 10*time.Millisecond)
	return time.Since(t0)
}

// TestRaftReplicaAwayCatchesUpBeforeServing: with its float32 rows in
// memory or on disk, a replica restarted on its directory or on a wiped
// one (rebuilt from a snapshot installed over raft) serves only once it
// holds every acknowledged write.
func TestRaftReplicaAwayCatchesUpBeforeServing(t *testing.T) {
	longtest.Mark(t)
	for _, tc := range []struct {
		name    string
		wipe    bool
		float32 string
	}{
		{"restarted on its directory", false, catalog.Float32InMemory},
		{"restarted on a wiped directory", true, catalog.Float32InMemory},
		{"on disk, restarted on its directory", false, catalog.Float32OnDisk},
		{"on disk, restarted on a wiped directory", true, catalog.Float32OnDisk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A short trailing log keeps the writes below few (each is
			// fsynced by three replicas) while still outrunning it.
			const trailing = 16
			ms := group(t, 3, func(c *Config) { c.Legacy.Float32, c.TrailingLogs = tc.float32, trailing })
			leader := waitLeader(t, ms)
			before := ids("before", 20)
			write(t, ms, before...)
			away := ms[0]
			if away == leader {
				away = ms[1]
			}
			away.stop()
			if tc.wipe {
				require.NoError(t, os.RemoveAll(away.dir))
			}
			// The group keeps acknowledging writes with one replica down:
			// more than the trailing logs a snapshot leaves, so once the
			// leader takes one the writes made while the replica was away
			// are compacted into it, and the replica must install it.
			during := ids("during", trailing+50)
			var last uint64
			for _, id := range during {
				last = write(t, ms, id)
			}
			require.NoError(t, waitLeader(t, ms).node.Snapshot())
			all := append(before, during...)
			took := rejoin(t, away, all, 0)
			t.Logf("MEASURED: a replica %d writes behind, %s, serves complete answers %s after it starts", len(during), tc.name, took.Round(time.Millisecond))
			require.True(t, complete(t, away, all, last))
			require.True(t, away.node.MayVote())
			require.Equal(t, tc.float32 == catalog.Float32OnDisk, away.mem.OnDisk())
			if tc.wipe {
				require.True(t, groupState(t, raftClient(t, away)).GetHasSnapshot(), "the wiped replica rebuilt from an installed snapshot")
			}
		})
	}
}

func TestRaftFollowerCutOffStopsServing(t *testing.T) {
	ms := group(t, 3, nil)
	leader := waitLeader(t, ms)
	idx := write(t, ms, "a")
	f := ms[0]
	if f == leader {
		f = ms[1]
	}
	require.Eventually(t, func() bool { return complete(t, f, []string{"a"}, idx) }, 10*time.Second, 10*time.Millisecond)
	// Cut the follower off: its peers' traffic to it goes silent. It may
	// go on serving (as follower, then candidate) while its last word from
	// the leader is younger than the leader silence, and never after.
	require.NoError(t, f.proxy.Blackhole())
	t0 := time.Now()
	var last time.Duration
	for time.Since(t0) < testSilence+time.Second {
		if complete(t, f, []string{"a"}, 0) {
			last = time.Since(t0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("MEASURED: a cut-off follower's last complete answer came %s after the cut (max leader silence %s)", last.Round(time.Millisecond), testSilence)
	require.Less(t, last, testSilence+100*time.Millisecond, "a cut-off follower served past the leader silence")
	for range 20 {
		require.False(t, complete(t, f, nil, 0))
		time.Sleep(25 * time.Millisecond)
	}
	// …and serves again once reconnected.
	require.NoError(t, f.proxy.Restore())
	idx = write(t, ms, "b")
	require.Eventually(t, func() bool { return complete(t, f, []string{"a", "b"}, idx) }, 30*time.Second, 10*time.Millisecond)
}

func TestRaftWipedReplicaWithFrozenPeersDoesNothing(t *testing.T) {
	longtest.Mark(t)
	ms := group(t, 3, nil)
	waitLeader(t, ms)
	write(t, ms, ids("x", 10)...)
	wiped := ms[2]
	wiped.stop()
	require.NoError(t, os.RemoveAll(wiped.dir))
	// Freeze the others as SIGSTOP would: connections accepted, nothing
	// answered and nothing sent. Traffic to a replica passes its own
	// proxy, so the wiped replica's is silenced too: otherwise a peer still
	// leading (its lease not yet expired) would rightly catch it up.
	for _, m := range ms {
		require.NoError(t, m.proxy.Blackhole())
	}
	require.NoError(t, wiped.start())
	rc := raftClient(t, wiped)
	for range 3 * int(testSilence/(100*time.Millisecond)) {
		require.False(t, complete(t, wiped, nil, 0), "an empty replica answered as complete")
		require.NotEqual(t, "leader", wiped.node.Role())
		require.False(t, wiped.node.MayVote())
		require.Zero(t, groupState(t, rc).GetLastIndex(), "it bootstrapped a group of its own")
		time.Sleep(100 * time.Millisecond)
	}
	// It refuses to vote, at the transport.
	_, err := rc.RequestVote(ctx(t), &shardpb.RaftMessage{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.ErrorContains(t, err, "no part in elections")

	// The peers thaw: it joins, catches up and serves everything.
	for _, m := range ms {
		require.NoError(t, m.proxy.Restore())
	}
	require.Eventually(t, func() bool { return complete(t, wiped, ids("x", 10), 0) }, 60*time.Second, 20*time.Millisecond)
	require.True(t, wiped.node.MayVote())
}

// TestRaftStoredMembershipWinsOverPeers: once a group exists, its stored
// configuration is the truth; a --peers that differs only seeded it and
// is ignored (with a warning), so a stale seed list after a replace does
// not keep a replica down.
func TestRaftStoredMembershipWinsOverPeers(t *testing.T) {
	ms := group(t, 1, nil)
	waitLeader(t, ms)
	write(t, ms, "a")
	m := ms[0]
	m.stop()
	m.peers = []string{m.addr(), "127.0.0.1:1"}
	require.NoError(t, m.start())
	require.Eventually(t, func() bool { return complete(t, m, []string{"a"}, 0) }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, map[string]bool{m.addr(): true}, members(t, m), "the stored membership, not --peers")
	write(t, ms, "b")
}

// A new group elects its first leader without waiting out raft's
// heartbeat timeout: its lowest-sorted replica stands as soon as it has
// bootstrapped. At one-minute timings raft alone would take one to two
// minutes; waitLeader gives it 30 s.
func TestNewGroupElectsAtOnce(t *testing.T) {
	ms := group(t, 3, func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.MaxLeaderSilence = raftnode.MaxRaftTimeout, raftnode.MaxRaftTimeout, 3*raftnode.MaxRaftTimeout
	})
	leader := waitLeader(t, ms)
	first := slices.Min(ms[0].peers)
	require.Equal(t, first, leader.addr(), "the lowest-sorted replica stood first")
}
