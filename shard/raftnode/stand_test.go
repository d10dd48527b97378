package raftnode

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// slowTimings are raft timings under which a follower waits at least a
// minute before it stands: a replica that leads well within that stood
// at once.
var slowTimings = Config{HeartbeatTimeout: MaxRaftTimeout, ElectionTimeout: MaxRaftTimeout, MaxLeaderSilence: 3 * MaxRaftTimeout}

// leadsWithin is far under slowTimings' minute, far over an election.
const leadsWithin = 30 * time.Second

// seedConfiguration writes a bootstrap configuration into a data
// directory, as a group's first start leaves it.
func seedConfiguration(t *testing.T, dir string, servers []raft.Server) {
	t.Helper()
	bolt, snaps, err := openDisk(dir, slog.New(slog.DiscardHandler), io.Discard)
	require.NoError(t, err)
	_, trans := raft.NewInmemTransport("")
	rc := raft.DefaultConfig()
	rc.LocalID = servers[0].ID
	require.NoError(t, raft.BootstrapCluster(rc, bolt, bolt, snaps, trans, raft.Configuration{Servers: servers}))
	require.NoError(t, trans.Close())
	require.NoError(t, bolt.Close())
}

func TestOnlyVoterStandsAtOnce(t *testing.T) {
	const self, b, c = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
	voter := func(a string) raft.Server {
		return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(a), Address: raft.ServerAddress(a)}
	}
	nonvoter := func(a string) raft.Server {
		return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(a), Address: raft.ServerAddress(a)}
	}
	for _, tc := range []struct {
		name    string
		servers []raft.Server // the stored configuration; the node is self
		stands  bool
	}{
		{"only voter", []raft.Server{voter(self)}, true},
		{"only voter beside a non-voter", []raft.Server{voter(self), nonvoter(b)}, true},
		{"one of three voters", []raft.Server{voter(self), voter(b), voter(c)}, false},
		{"non-voter beside the only voter", []raft.Server{nonvoter(self), voter(b)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			seedConfiguration(t, dir, tc.servers)
			cfg := slowTimings
			cfg.DataDir, cfg.Advertise, cfg.StateMachine = dir, self, &counter{}
			n, err := Open(cfg)
			require.NoError(t, err)
			defer func() { require.NoError(t, n.Close()) }()
			term := n.raft.CurrentTerm()
			// Open hands raft the TimeoutNow before it returns: a replica
			// that stands is no longer a follower now; one that does not
			// has a minute to wait.
			if !tc.stands {
				require.Equal(t, "follower", n.Role())
				require.Equal(t, term, n.raft.CurrentTerm(), "no election started")
			} else {
				require.NotEqual(t, "follower", n.Role())
				require.Eventually(t, n.ServingLeader, leadsWithin, 5*time.Millisecond)
			}
			rc := n.raft.ReloadableConfig()
			require.Equal(t, MaxRaftTimeout, rc.HeartbeatTimeout, "the configured timings, untouched")
			require.Equal(t, MaxRaftTimeout, rc.ElectionTimeout)
		})
	}
}

func TestGroupOfOneRestartsToLeadingAtOnce(t *testing.T) {
	dir := t.TempDir()
	open := func(timings Config) *Node {
		timings.DataDir, timings.Advertise, timings.StateMachine = dir, "127.0.0.1:1", &counter{}
		n, err := Open(timings)
		require.NoError(t, err)
		return n
	}
	// A new group of one stands as soon as it has bootstrapped, whatever
	// its timings.
	n := open(slowTimings)
	require.Eventually(t, n.ServingLeader, leadsWithin, 5*time.Millisecond, "a new group of one stands at once")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 10 {
		_, _, err := n.Propose(ctx, entry(uint64(i+1)))
		require.NoError(t, err)
		if i == 4 {
			require.NoError(t, n.Snapshot(), "half the writes in a snapshot, half in the log after it")
		}
	}
	require.NoError(t, n.Close())

	for restart := range 2 {
		n = open(slowTimings)
		require.Eventually(t, n.ServingLeader, leadsWithin, 5*time.Millisecond, "restart %d: the only voter leads at once", restart)
		res, _, err := n.Propose(ctx, entry(0))
		require.NoError(t, err)
		require.EqualValues(t, 55, res, "restart %d: the snapshot and the log after it are applied", restart)
		rc := n.raft.ReloadableConfig()
		require.Equal(t, MaxRaftTimeout, rc.HeartbeatTimeout, "the configured timings")
		require.Equal(t, MaxRaftTimeout, rc.ElectionTimeout)
		require.NoError(t, n.Close())
	}
}
