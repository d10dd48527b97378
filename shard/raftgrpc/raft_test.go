package raftgrpc

import (
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/trawl-search/trawl/shard"
)

// listFSM records the data of every entry it applies.
type listFSM struct {
	mu   sync.Mutex
	data []string
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = append(f.data, string(l.Data))
	return nil
}

func (f *listFSM) applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.data)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots here") }
func (f *listFSM) Restore(io.ReadCloser) error         { return fmt.Errorf("no snapshots here") }

// TestRaftGroupReplicatesThroughThePipeline: a three-node hashicorp/raft
// group over this transport (real gRPC servers, in-memory logs) commits a
// stream of writes, every follower applies all of them in order, and the
// followers were sent entries over the pipeline, not only one
// AppendEntries at a time.
func TestRaftGroupReplicatesThroughThePipeline(t *testing.T) {
	type node struct {
		r   *raft.Raft
		t   *Transport
		fsm *listFSM
	}
	var (
		nodes   []*node
		servers []raft.Server
		lis     []net.Listener
	)
	for i := range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lis = append(lis, l)
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprint("n", i)), Address: raft.ServerAddress(l.Addr().String())})
	}
	for i := range 3 {
		tr := New(Config{Local: string(servers[i].Address), DialOptions: shard.DialOptions(nil, nil)})
		g := grpc.NewServer(shard.ServerOptions()...)
		tr.Register(g)
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = g.Serve(lis[i])
		}()
		cfg := raft.DefaultConfig()
		cfg.LocalID = servers[i].ID
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, time.Second
		cfg.LogOutput = io.Discard
		fsm := &listFSM{}
		logs, stable, snaps := raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		require.NoError(t, raft.BootstrapCluster(cfg, logs, stable, snaps, tr, raft.Configuration{Servers: servers}))
		r, err := raft.NewRaft(cfg, fsm, logs, stable, snaps, tr)
		require.NoError(t, err)
		nodes = append(nodes, &node{r: r, t: tr, fsm: fsm})
		t.Cleanup(func() {
			_ = r.Shutdown().Error()
			_ = tr.Close()
			g.Stop()
			<-served
		})
	}
	var leader *node
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if n.r.State() == raft.Leader {
				leader = n
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond)

	const writes = 300
	var want []string
	futures := make([]raft.ApplyFuture, 0, writes)
	for i := range writes {
		want = append(want, fmt.Sprint("w", i))
		futures = append(futures, leader.r.Apply([]byte(want[i]), 10*time.Second))
	}
	for _, f := range futures {
		require.NoError(t, f.Error())
	}
	var pipelined uint64
	for _, n := range nodes {
		require.Eventually(t, func() bool { return len(n.fsm.applied()) == writes }, 20*time.Second, 10*time.Millisecond)
		require.Equal(t, want, n.fsm.applied())
		if n != leader {
			pipelined += n.t.pipelined.Load()
		}
	}
	require.NotZero(t, pipelined, "the leader pipelined its AppendEntries")
}
