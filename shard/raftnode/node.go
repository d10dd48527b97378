package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/trawl-search/trawl/internal/cpuprio"
	"go.etcd.io/bbolt"
	"google.golang.org/grpc"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftgrpc"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// Defaults of Config.
const (
	// DefaultMaxLeaderSilence is how long a replica keeps serving reads
	// without hearing from a leader (DESIGN.md: 5 s, at least 3× the
	// election timeout so a leader change does not flap a healthy shard).
	DefaultMaxLeaderSilence = 5 * time.Second
	// DefaultSnapshotThreshold is how many log entries since the last
	// snapshot trigger a new one, besides DefaultSnapshotLogBytes of them
	// (logbudget.go): the count bounds a log of small writes, the bytes
	// one of large writes (an entry is one write RPC, up to 256 vectors,
	// ~1.5 MiB at 1536-D).
	DefaultSnapshotThreshold = 512
	// DefaultTrailingLogs is the most entries a snapshot leaves in the
	// log, so a follower a little behind catches up from the log, not a
	// snapshot; a snapshot taken by bytes leaves fewer of large entries
	// (DefaultTrailingLogBytes).
	DefaultTrailingLogs = 512
	// snapshotsRetained is how many snapshots the store keeps (raft
	// reaps older ones, with their files).
	snapshotsRetained = 2
	// servingLag is how many committed entries a serving replica may trail
	// its leader by while it keeps serving: applying is asynchronous, so a
	// replica under a write stream is always an entry or two behind for a
	// moment. A replica that falls further behind stops serving until it has
	// applied everything its leader reported. Read-after-write does not
	// depend on it: min_index reads refuse any replica that has not applied
	// the index asked for.
	servingLag = 64
	// monitorEvery is how often the serving state is recomputed.
	monitorEvery = 100 * time.Millisecond
)

// Config is one replica's membership of its shard's raft group.
type Config struct {
	// DataDir holds the raft log and stable store (raft.db, bbolt) and the
	// snapshots (snapshots/). Required; created if missing.
	DataDir string
	// Advertise is this replica's address as its peers reach it (its entry
	// in Peers, and its raft server id). Required.
	Advertise string
	// Peers lists every replica of the shard, this one included, to seed
	// a new group. Empty means a group of one (Advertise alone). Once the
	// group exists its configuration, stored in DataDir, is the truth:
	// membership changes go through AddReplica and RemoveReplica, and a
	// Peers that differs from the stored membership is ignored with a
	// warning.
	Peers []string
	// Join: the replica joins an existing group (it is added through
	// AddReplica, by an operator or by its own request): with no raft
	// state it never bootstraps a group, and waits for a leader to send it
	// a snapshot and the log. Peers is then empty.
	Join bool
	// MaxLeaderSilence: DefaultMaxLeaderSilence if zero; at least
	// 3× ElectionTimeout.
	MaxLeaderSilence time.Duration
	// HeartbeatTimeout and ElectionTimeout are raft's
	// (DefaultHeartbeatTimeout and DefaultElectionTimeout if zero; within
	// MinRaftTimeout..MaxRaftTimeout, the election timeout at least the
	// heartbeat timeout: CheckTimings). The leader's lease is the
	// heartbeat timeout.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// SnapshotThreshold and TrailingLogs: the defaults above if zero.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SnapshotLogBytes and TrailingLogBytes bound the log by bytes
	// (DefaultSnapshotLogBytes and DefaultTrailingLogBytes if zero).
	SnapshotLogBytes uint64
	TrailingLogBytes uint64
	// SnapshotInterval is how often raft checks the threshold (30 s if
	// zero).
	SnapshotInterval time.Duration
	// DialOptions reach the peers (the shard's client credentials and
	// connection settings, shard.DialOptions).
	DialOptions []grpc.DialOption
	// Pace throttles the recovery traffic this replica sends as a leader
	// (raftgrpc.Config.Pace); nil: full speed. The state machine paces
	// its own side of a recovery.
	Pace raftgrpc.Pacer
	// ReceivePace throttles this replica's side of its own recovery:
	// storing the entries and snapshot chunks a leader sends it while it
	// does not serve (raftgrpc.Config.ReceivePace). Nil: full speed.
	ReceivePace raftgrpc.Pacer
	// StateMachine is what the log's commands are applied to. Required,
	// and empty: the node loads it from DataDir.
	StateMachine StateMachine
	// InMemory keeps the log, stable store and snapshots in memory
	// instead of DataDir (tests: a real group without a disk).
	InMemory bool
	// RaftLogLevel is the least level of the raft library's own lines
	// that reach Logger (slog.LevelWarn if zero: its INFO lines are
	// chatter on a console).
	RaftLogLevel slog.Level
	Logger       *slog.Logger
	// BackgroundNice is how far below the process's CPU priority the
	// thread that stores log entries runs (cpuprio): on a machine short of
	// cores searches run first and a bulk load's bolt writes take what is
	// left. Entries are applied at the process's priority: applying takes
	// the store's write lock, which a search may be waiting for. 0: the
	// process's priority.
	BackgroundNice int
}

// Node is one replica's membership of its shard's raft group: the
// replicated log (hashicorp/raft), its durable stores in the data
// directory, and the rule that decides whether the replica may serve reads.
//
// hashicorp/raft is the consensus library under Consul, Nomad and Vault,
// and comes with what a shard needs besides the algorithm: log, stable and
// snapshot stores, snapshot installation on lagging followers, log
// compaction, leadership transfer, and a Transport interface that lets
// raft traffic share the shard's gRPC port (transport.go). The log and
// stable store is raft-boltdb/v2 (bbolt): one file, fsync on every commit,
// proven in Consul and Nomad for years; raft-wal is faster but younger, and
// a shard's write rate is bounded by its vector bytes long before bolt's
// fsyncs. bolt's file never shrinks, so the log is kept small by
// snapshotting by bytes as well as by entry count (logbudget.go).
// Snapshots use raft's FileSnapshotStore.
type Node struct {
	cfg    Config
	log    *slog.Logger
	peers  []string
	raft   *raft.Raft
	fsm    *fsm
	trans  *raftgrpc.Transport
	logs   raft.LogStore // the durable log, read by commandScan
	snaps  raft.SnapshotStore
	silent time.Duration
	closer func() error // closes the log and stable stores

	// mayVote: the replica takes part in elections. False from the start
	// only for a replica that started with no raft state, until it has
	// applied the commit index a leader first reported (or it bootstrapped a
	// brand-new group): an empty replica voting could elect a peer that
	// lacks writes this replica had acknowledged before its disk was lost.
	mayVote atomic.Bool
	// firstCommit is the first non-zero commit index a leader reported to a
	// replica that started empty.
	firstCommit atomic.Uint64
	// leaderCommit is the commit index in the last AppendEntries received.
	leaderCommit atomic.Uint64
	serving      atomic.Bool
	// servingBy is the rule serving was last granted under (byLeader or
	// byContact), zero when it was not; Serving re-checks that rule's
	// condition at the moment of each read.
	servingBy atomic.Uint32
	readyTerm atomic.Uint64 // the term in which this leader's barrier completed

	mu        sync.Mutex
	onServing func(bool)

	stop chan struct{}
	wg   sync.WaitGroup
}

// Open opens (or creates) the replica's raft state in cfg.DataDir,
// restores its latest snapshot into cfg.StateMachine (logging progress),
// and starts raft. Register its service on the shard's gRPC server before
// serving. A replica with no raft state bootstraps a group only when
// every peer answers that it is as new (see bootstrap), and never with
// cfg.Join; one with state follows its stored membership
// (checkMembership).
func Open(cfg Config) (n *Node, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if (cfg.DataDir == "" && !cfg.InMemory) || cfg.Advertise == "" || cfg.StateMachine == nil {
		return nil, errors.New("raft node: data directory, advertise address and state machine are required")
	}
	peers := slices.Clone(cfg.Peers)
	if len(peers) == 0 {
		peers = []string{cfg.Advertise}
	}
	slices.Sort(peers)
	peers = slices.Compact(peers)
	if !slices.Contains(peers, cfg.Advertise) {
		return nil, fmt.Errorf("--advertise-addr %s is not one of --peers %s", cfg.Advertise, strings.Join(peers, ","))
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = DefaultElectionTimeout
	}
	if cfg.MaxLeaderSilence == 0 {
		cfg.MaxLeaderSilence = DefaultMaxLeaderSilence
	}
	if err := CheckTimings(cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.MaxLeaderSilence); err != nil {
		return nil, err
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = DefaultTrailingLogs
	}
	if cfg.SnapshotInterval == 0 {
		cfg.SnapshotInterval = 30 * time.Second
	}
	if cfg.SnapshotLogBytes == 0 {
		cfg.SnapshotLogBytes = DefaultSnapshotLogBytes
	}
	if cfg.TrailingLogBytes == 0 {
		cfg.TrailingLogBytes = DefaultTrailingLogBytes
	}
	if cfg.RaftLogLevel == 0 {
		cfg.RaftLogLevel = slog.LevelWarn
	}
	log := cfg.Logger.With("component", "raft")
	n = &Node{cfg: cfg, log: log, peers: peers, silent: cfg.MaxLeaderSilence, stop: make(chan struct{})}

	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()
	lw := &slogWriter{log: log, min: cfg.RaftLogLevel}
	var stable raft.StableStore
	if cfg.InMemory {
		mem := raft.NewInmemStore()
		n.logs, stable, n.snaps = mem, mem, raft.NewInmemSnapshotStore()
	} else {
		bolt, snaps, err := openDisk(cfg.DataDir, log, lw)
		if err != nil {
			return nil, err
		}
		closers = append(closers, bolt.Close)
		n.logs, stable, n.snaps = bolt, bolt, snaps
	}
	logs := n.logs
	if cfg.BackgroundNice > 0 {
		w, err := cpuprio.Start(cfg.BackgroundNice)
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() error { w.Close(); return nil })
		logs = backgroundLogs{LogStore: n.logs, w: w}
	}
	n.closer = func() error {
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i](); err != nil {
				return err
			}
		}
		return nil
	}
	hadState, err := raft.HasExistingState(n.logs, stable, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("read raft state: %w", err)
	}
	n.mayVote.Store(hadState)

	n.trans = raftgrpc.New(raftgrpc.Config{
		Local:       cfg.Advertise,
		DialOptions: cfg.DialOptions,
		MayVote:     n.mayVote.Load,
		SawAppend:   n.sawAppend,
		GroupState:  n.groupState,
		Pace:        cfg.Pace,
		ReceivePace: unlessServing{n: n, p: cfg.ReceivePace},
	})
	closers = append(closers, n.trans.Close)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.Advertise)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	// A leader steps down when no majority has answered it for its lease.
	// At raft's default, half the heartbeat timeout, the leader is the
	// first to give up when its process stalls: in a bulk load at full
	// speed (TestMeasureHeartbeatsUnderBulkLoad: three replicas, 2 cores)
	// the age of a follower's last answer at the lease check reached
	// 500-550 ms on a quiet machine, and with the CPU short (GC pauses and
	// run-queue waits of 0.1-0.9 s) both followers' did: 6 runs in 16 at
	// the 1 s default lost their leader to the lease, and the shard its
	// writes for 1-4 s, while no follower had missed a heartbeat for its
	// own 1-2 s. A lease of the whole heartbeat timeout (raft's upper
	// bound) tolerates what the followers tolerate: none of 14 runs lost
	// its leader, 8 of them with the CPU as short. The cost: a leader cut
	// off from its group keeps leading, and serving reads, for up to twice
	// the heartbeat timeout instead of once; that is well inside
	// --max-leader-silence (at least 3x the election timeout), the
	// staleness a cut-off follower is allowed anyway, and reads with
	// min_index stay exact, as a replica applies only committed entries.
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	// raft re-sends AppendEntries to each follower every CommitTimeout
	// even when idle; that is how a follower learns the commit index of
	// the last write, so it bounds how stale a follower is after a write
	// stream stops (≤ 2× this). raft's default 50 ms: followers see a
	// write within ~100 ms for ~15 small RPCs a second per follower when
	// idle (5 ms cost a quarter of a core for an idle dev cluster of nine
	// replicas, 20 ms still a sixth). Read-after-write through the
	// acknowledging router does not wait for it: min_index reads go to a
	// replica that has applied the write (the leader at once).
	rc.CommitTimeout = 50 * time.Millisecond
	// One AppendEntries carries at most this many entries, and the leader
	// stores at most one more than this with one fsync (raft's group
	// commit takes them from its apply queue together). An entry is one
	// write request (~1.5 MiB for 256 vectors of 1536-D without
	// payloads); the transport sends a request over 32 MiB as
	// consecutive smaller ones, so the follower's 64 MiB receive limit
	// does not bound this. raft's default, 64: a bulk load's writes,
	// queued while the last fsync ran, go to disk together, where 3 made
	// a load wait for an fsync every few writes.
	rc.MaxAppendEntries = 64
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclogLevel(cfg.RaftLogLevel), Output: lw})
	n.fsm = &fsm{sm: cfg.StateMachine, serving: n.Serving,
		meter: &logMeter{budget: cfg.SnapshotLogBytes}, due: make(chan struct{}, 1)}
	if fs, ok := n.snaps.(*fileStore); ok {
		n.fsm.store = fs
	}

	if hadState {
		log.Info("loading replica from its data directory", "dir", cfg.DataDir)
	}
	// The cache keeps recent entries in memory for replication; writes
	// still go through to the store (and its fsync) before raft counts
	// them.
	cache, err := raft.NewLogCache(256, logs)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	n.raft, err = raft.NewRaft(rc, n.fsm, cache, stable, n.snaps, n.trans)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	if hadState {
		log.Info("snapshot loaded; the log after it is applied once a leader confirms the commit index",
			"took", time.Since(t0).Round(time.Millisecond), "applied_index", n.AppliedIndex(), "last_index", n.raft.LastIndex())
		if err := n.checkMembership(); err != nil {
			_ = n.raft.Shutdown().Error()
			return nil, err
		}
		n.standIfAlone()
	}
	n.wg.Add(3)
	go n.monitor()
	go n.runPromoter()
	go n.snapshotByBytes()
	if !hadState && !cfg.Join {
		n.wg.Add(1)
		go n.bootstrap()
	}
	return n, nil
}

// openDisk opens the raft log and stable store (raft.db) and the snapshot
// store in dir.
func openDisk(dir string, log *slog.Logger, lw io.Writer) (*raftboltdb.BoltStore, *fileStore, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, fmt.Errorf("data directory: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(dir, "raft.db"),
		// A second process on the same directory fails instead of waiting.
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open raft log %s: %w", filepath.Join(dir, "raft.db"), err)
	}
	// A snapshot cut short by a crash stays behind as a .tmp directory
	// that raft's store only warns about; the bolt file lock held from
	// here on means no other process is writing one.
	if tmps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.tmp")); len(tmps) > 0 {
		for _, d := range tmps {
			_ = os.RemoveAll(d)
		}
		log.Info("removed snapshots left unfinished by a crash", "count", len(tmps))
	}
	snaps, err := raft.NewFileSnapshotStore(dir, snapshotsRetained, lw)
	if err != nil {
		bolt.Close()
		return nil, nil, fmt.Errorf("snapshot store: %w", err)
	}
	return bolt, &fileStore{FileSnapshotStore: snaps, dir: filepath.Join(dir, "snapshots")}, nil
}

// Register adds the Raft service to g, the shard's gRPC server.
func (n *Node) Register(g *grpc.Server) { n.trans.Register(g) }

// checkMembership compares --peers with the membership stored in the log
// or snapshot, which is the truth once a group exists (members change
// through AddReplica and RemoveReplica): a --peers that differs is
// ignored with a warning. It is not refused, because it is not unsafe —
// raft never reads it again once the group exists — and after a replace
// the Helm chart and scripts still render the old seed list, which only
// shares this replica with the stored one. What would be unsafe, a second
// group bootstrapped beside an existing one, bootstrap never does. A replica the
// stored configuration does not list (removed from its group) starts, and
// takes no part in the group until a leader adds it again.
func (n *Node) checkMembership() error {
	ms, err := n.Members()
	if err != nil {
		return fmt.Errorf("read stored membership: %w", err)
	}
	stored := make([]string, len(ms))
	for i, m := range ms {
		stored[i] = m.Addr
	}
	if len(stored) == 0 {
		return nil
	}
	if len(n.cfg.Peers) > 0 && !slices.Equal(stored, n.peers) {
		n.log.Warn("--peers differs from the stored membership, which is used: --peers only seeds a new group; change members with router admin",
			"peers", n.peers, "stored", stored)
	}
	if !slices.Contains(stored, n.cfg.Advertise) {
		n.log.Warn("this replica is not in its group's stored membership (removed?): it takes no part until a leader adds it again (router admin add-replica)",
			"self", n.cfg.Advertise, "stored", stored)
	}
	return nil
}

// standTimeout bounds how long standIfAlone waits for raft to take its
// TimeoutNow; raft's loop is idle then, so it takes it at once.
const standTimeout = 5 * time.Second

// standIfAlone makes a follower whose group's latest configuration has it
// as the only voter stand for election now. raft makes a follower wait a
// random 1-2× the heartbeat timeout without a word from a leader before it
// stands (1-2 s at the default), so that followers of a live leader do not
// depose it; a group's only voter has no leader but itself to wait for, so
// after a restart that wait was all of its time to serving beyond loading
// its snapshot. It hands raft the TimeoutNow of a leadership transfer
// instead of lowering the timeouts: raft (v1.7) cannot reload the leader
// lease, which must not exceed the heartbeat timeout, so short timeouts at
// start would leave a group that grows later with a short lease. The
// timings stay the configured ones throughout, and a replica that shares
// its group with another voter (or is a non-voter) waits as raft does.
func (n *Node) standIfAlone() {
	ms, err := n.Members()
	if err != nil || !onlyVoter(ms, n.cfg.Advertise) || n.raft.State() != raft.Follower {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), standTimeout)
	defer cancel()
	if err := n.trans.TimeoutNowSelf(ctx); err != nil {
		// raft still stands once its heartbeat timeout runs out.
		n.log.Warn("the group's only voter could not stand for election at once", "err", err)
		return
	}
	n.log.Info("the group's only voter: standing for election at once")
}

// standFirst makes the lowest-sorted replica of a group it has just
// bootstrapped stand for election as soon as every peer has bootstrapped
// too, by the same TimeoutNow as standIfAlone. A new group has no leader
// to depose, yet raft would make every replica wait a random 1-2x the
// heartbeat timeout before the first election: that wait was most of the
// time a new collection or a test cluster took to serve. It waits for the
// peers because a replica votes only once it has bootstrapped (mayVote),
// and a candidate refused waits out its election timeout. One replica
// standing early cannot split the vote (the others still wait out their
// timeouts), and the timings stay the configured ones; past the heartbeat
// timeout raft's own timer has taken over and this gives up.
func (n *Node) standFirst() {
	give := time.NewTimer(n.cfg.HeartbeatTimeout)
	defer give.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if n.raft.State() != raft.Follower {
			return
		}
		if addr, _ := n.raft.LeaderWithID(); addr != "" {
			return
		}
		if n.peersBootstrapped() {
			break
		}
		select {
		case <-n.stop:
			return
		case <-give.C:
			return
		case <-tick.C:
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), standTimeout)
	defer cancel()
	if err := n.trans.TimeoutNowSelf(ctx); err != nil {
		n.log.Warn("could not stand for the new group's first election at once", "err", err)
		return
	}
	n.log.Info("the new group's first replica: standing for election at once")
}

// peersBootstrapped reports whether every other peer answers that it
// holds raft state (its bootstrap configuration at least).
func (n *Node) peersBootstrapped() bool {
	for _, p := range n.peers {
		if p == n.cfg.Advertise {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := n.trans.GroupState(ctx, p)
		cancel()
		if err != nil || !st.GetHasState() {
			return false
		}
	}
	return true
}

// onlyVoter reports whether self is the one voter of ms.
func onlyVoter(ms []Member, self string) bool {
	voters, selfVotes := 0, false
	for _, m := range ms {
		if m.Voter {
			voters++
			selfVotes = selfVotes || m.Addr == self
		}
	}
	return voters == 1 && selfVotes
}

// groupState answers a starting peer's GroupState question.
func (n *Node) groupState() *shardpb.GroupStateResponse {
	last := n.raft.LastIndex()
	snaps, _ := n.snaps.List()
	return &shardpb.GroupStateResponse{HasState: last > 0 || len(snaps) > 0, LastIndex: last, HasSnapshot: len(snaps) > 0}
}

// bootstrap runs on a replica that started with no raft state. It
// bootstraps the group (every replica with the same configuration, from
// the sorted --peers) only once every peer has answered and none holds
// more than a bootstrap configuration (log index ≤ 1, no snapshot): then
// nothing was ever written, so nothing can be lost. If any peer holds
// more, the group exists: this replica never bootstraps, waits for the
// leader to send it the log or a snapshot, and stays out of elections
// until it has caught up (mayVote). An unanswered peer (down, frozen)
// means "ask again": a new group forms only once all its replicas are up.
func (n *Node) bootstrap() {
	defer n.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-n.stop:
				return
			case <-t.C:
			}
		}
		if n.raft.LastIndex() > 0 {
			return // a leader reached us first
		}
		fresh, known := n.peersFresh()
		switch {
		case !fresh:
			n.log.Info("empty data directory and the group exists: joining it; no votes until caught up", "peers", n.peers)
			return
		case !known:
			continue
		}
		servers := make([]raft.Server, len(n.peers))
		for i, p := range n.peers {
			servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p), Address: raft.ServerAddress(p)}
		}
		err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.log.Error("bootstrap failed", "err", err)
			continue
		}
		n.mayVote.Store(true)
		n.log.Info("bootstrapped a new group", "peers", n.peers)
		if n.peers[0] == n.cfg.Advertise && len(n.peers) > 1 {
			n.standFirst()
		} else {
			n.standIfAlone()
		}
		return
	}
}

// peersFresh asks every other peer for its raft state: fresh is false as
// soon as one holds more than a bootstrap configuration; known is true
// when all answered.
func (n *Node) peersFresh() (fresh, known bool) {
	known = true
	for _, p := range n.peers {
		if p == n.cfg.Advertise {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := n.trans.GroupState(ctx, p)
		cancel()
		if err != nil {
			known = false
			continue
		}
		if st.GetHasSnapshot() || st.GetLastIndex() > 1 {
			return false, true
		}
	}
	return true, known
}

// sawAppend records the commit index a leader reported and proved
// (provenCommit). raft's heartbeats carry none, and a new leader's carries
// none it has proved yet (zero), so they do not count.
func (n *Node) sawAppend(commit uint64) {
	if commit == 0 {
		return
	}
	n.leaderCommit.Store(commit)
	if !n.mayVote.Load() {
		n.firstCommit.CompareAndSwap(0, commit)
	}
}

// OnServing registers fn to be told each change of the serving state (and
// the current one at once); the shard server flips grpc.health.v1 with it.
func (n *Node) OnServing(fn func(bool)) {
	n.mu.Lock()
	n.onServing = fn
	n.mu.Unlock()
	fn(n.serving.Load())
}

// The two rules the monitor grants serving under.
const (
	// byLeader: a leader whose barrier in its term has applied.
	byLeader uint32 = iota + 1
	// byContact: a replica that heard from a leader within
	// MaxLeaderSilence and is caught up with it — a follower, a candidate,
	// or a just-elected leader whose barrier has not applied yet.
	byContact
)

// Serving reports whether the replica may answer reads now: the monitor's
// verdict, provided the rule it was granted under still holds at this
// moment — a leader serving as one stops at once when it steps down, not at
// the next tick, and a replica serving by contact stops exactly
// --max-leader-silence after its last word from a leader.
//
// An election alone does not stop a replica serving by contact: a follower
// that turns candidate, or is elected, holds the same data it served a
// moment before, and its freshness still bounds how stale it can be. Going
// dark on every role change made all live replicas of a shard refuse at
// once for the election's 100-200 ms whenever its leader died (the chaos
// test's degraded bursts).
func (n *Node) Serving() bool {
	// serving is false until the monitor (started after raft) first says
	// otherwise, so n.raft is set whenever it is read below.
	if !n.serving.Load() {
		return false
	}
	switch n.servingBy.Load() {
	case byLeader:
		return n.raft.State() == raft.Leader
	case byContact:
		return n.raft.State() != raft.Shutdown && time.Since(n.raft.LastContact()) < n.silent
	}
	return false
}

// monitor recomputes the serving state every monitorEvery:
//
//   - a leader serves once a barrier in its term has applied everything
//     committed before it (a new leader may hold committed entries it has
//     not applied), while it stays leader (raft steps a leader down when
//     a quorum is silent for the leader lease), and while it has applied
//     all but servingLag of its commit index; until its barrier applies, a
//     just-elected leader serves by the follower rule below, on the
//     contact and commit index it had as a follower;
//   - a replica that has led serves by the follower rule only once a new
//     leader has proved a commit index to it;
//   - a follower serves while it has heard from a leader within
//     MaxLeaderSilence and, since it last did not serve, has applied the
//     commit index its leader reported, and trails it by at most
//     servingLag;
//   - a replica that started empty serves only once it has caught up.
//
// Loading, catching up, installing a snapshot (the follower's raft loop is
// busy, its leader contact ages and its lag is large) and silence are all
// NOT_SERVING.
func (n *Node) monitor() {
	defer n.wg.Done()
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	var (
		barrierTerm uint64
		caughtUp    bool
		lastLog     time.Time
		scan        commandScan
	)
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		upTo := func(i uint64) bool { return scan.appliedUpTo(n, i) }
		if !n.mayVote.Load() {
			if fc := n.firstCommit.Load(); fc > 0 && upTo(fc) {
				n.mayVote.Store(true)
				n.log.Info("caught up with the group; taking part in elections", "applied_index", n.AppliedIndex())
			}
		}
		serving, by := false, uint32(0)
		state := n.raft.State()
		// byContact: heard from a leader lately and caught up with it.
		contact := func() bool {
			fresh := time.Since(n.raft.LastContact()) < n.silent
			lc := n.leaderCommit.Load()
			switch {
			case !fresh || lc == 0:
				caughtUp = false
			case upTo(lc):
				caughtUp = true
			case lc > servingLag && !upTo(lc-servingLag):
				caughtUp = false
			}
			return fresh && caughtUp && n.mayVote.Load() && n.cfg.StateMachine.Ready()
		}
		switch state {
		case raft.Leader:
			term := n.raft.CurrentTerm()
			if barrierTerm != term {
				barrierTerm = term
				n.wg.Add(1)
				go func() {
					defer n.wg.Done()
					if n.raft.Barrier(time.Minute).Error() == nil {
						n.readyTerm.Store(term)
					}
				}()
			}
			if n.readyTerm.Load() != term {
				// Just elected: serve on as the follower it was a moment
				// ago (its last contact is its old leader's) until the
				// barrier applies or that contact grows too old.
				serving, by = contact(), byContact
				break
			}
			commit := n.raft.CommitIndex()
			serving, by = (commit <= servingLag || upTo(commit-servingLag)) && n.cfg.StateMachine.Ready(), byLeader
			// Once it has led, the commit index it last heard as a
			// follower proves nothing: after stepping down (raft then
			// resets its last contact to now) it serves again only once a
			// new leader has proved one.
			caughtUp = false
			n.leaderCommit.Store(0)
		case raft.Follower, raft.Candidate:
			serving, by = contact(), byContact
		}
		applied := n.AppliedIndex()
		// Progress of a replica not serving yet while it applies the log
		// (replaying it after a restart, or catching up with a leader),
		// every 2 s: restart time is the log written since the snapshot.
		if target := max(n.leaderCommit.Load(), n.raft.CommitIndex()); !serving && target > applied && time.Since(lastLog) > 2*time.Second {
			lastLog = time.Now()
			n.log.Info("catching up: applying the log", "applied_index", applied, "commit_index", target)
		}
		if !serving {
			by = 0
		}
		n.servingBy.Store(by)
		if n.serving.Swap(serving) != serving {
			n.log.Info("serving changed", "serving", serving, "state", n.raft.State().String(),
				"applied_index", applied, "commit_index", n.raft.CommitIndex())
			n.mu.Lock()
			fn := n.onServing
			n.mu.Unlock()
			if fn != nil {
				fn(serving)
			}
		}
	}
}

// AppliedIndex is the index of the last write applied to the store: a
// write acknowledged with index i is visible once AppliedIndex() >= i.
func (n *Node) AppliedIndex() uint64 { return n.fsm.applied.Load() }

// WaitApplied blocks until the replica has applied the write at index, or
// ctx ends (its error then).
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	return n.fsm.waitApplied(ctx, index)
}

// commandScan decides whether every write up to an index is applied. The
// state machine's applied index only moves on writes, while the commit
// index a leader reports may point past them at entries that never reach
// the state machine (a new leader's no-op, configurations, barriers); the
// scan reads those entries from the log once and remembers how far it got.
type commandScan struct{ through uint64 }

// appliedUpTo reports whether every write with index <= i is applied.
func (c *commandScan) appliedUpTo(n *Node, i uint64) bool {
	applied := n.fsm.applied.Load()
	if i <= applied {
		return true
	}
	if n.raft.AppliedIndex() < i {
		return false // raft has not even handed them over yet
	}
	for j := max(applied, c.through) + 1; j <= i; j++ {
		var l raft.Log
		if err := n.logs.GetLog(j, &l); err == nil && l.Type == raft.LogCommand {
			return false // handed to the state machine, not applied yet
		}
		// Not found: compacted into a snapshot this replica took or
		// installed, so its state includes it.
		c.through = j
	}
	return true
}

// CommitIndex is the commit index this replica knows.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// IsLeader reports whether this replica is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader is the leader's address, empty when unknown.
func (n *Node) Leader() string {
	a, _ := n.raft.LeaderWithID()
	return string(a)
}

// Self is this replica's advertised address, its name in the group.
func (n *Node) Self() string { return n.cfg.Advertise }

// Role is leader, follower, candidate or shutdown.
func (n *Node) Role() string { return strings.ToLower(n.raft.State().String()) }

// unlessServing paces recovery traffic a replica receives only while it
// does not serve: a serving follower's AppendEntries (the first after a
// leader change) carry ordinary writes, which are never throttled.
type unlessServing struct {
	n *Node
	p raftgrpc.Pacer
}

func (u unlessServing) Do(ctx context.Context, work func()) error {
	if u.p == nil || u.n.Serving() {
		work()
		return nil
	}
	return u.p.Do(ctx, work)
}

// Snapshot takes a snapshot now (tests; raft also takes them by itself
// past SnapshotThreshold).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// MayVote reports whether the replica takes part in elections (false for
// a replica that started empty, until it has caught up).
func (n *Node) MayVote() bool { return n.mayVote.Load() }

// ProposeError is why Propose did not commit an entry.
type ProposeError struct {
	// NotLeader: the entry never entered the log (this replica does not
	// lead), so another replica may take it.
	NotLeader bool
	// Leader is the known leader's address, for the NOT_LEADER hint.
	Leader string
	Err    error
}

func (e *ProposeError) Error() string { return e.Err.Error() }
func (e *ProposeError) Unwrap() error { return e.Err }

// Propose commits data through the log and returns what the state
// machine's Apply returned for it and its log index. It returns a
// *ProposeError when the entry was not committed: with NotLeader set when
// it provably never entered the log; otherwise (leadership lost, shutdown,
// a timeout after the entry entered the log) it may still commit. ctx's
// deadline bounds the wait (shard.WriteTimeout without one).
func (n *Node) Propose(ctx context.Context, data []byte) (any, uint64, error) {
	if n.raft.State() != raft.Leader {
		return nil, 0, &ProposeError{NotLeader: true, Leader: n.Leader(), Err: raft.ErrNotLeader}
	}
	timeout := shard.WriteTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := n.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		// ErrNotLeader from Apply means the entry never entered the log
		// (a follower's loop refuses queued applies).
		return nil, 0, &ProposeError{NotLeader: errors.Is(err, raft.ErrNotLeader), Leader: n.Leader(), Err: err}
	}
	return f.Response(), f.Index(), nil
}

// ServingLeader reports whether this replica leads its group and serves
// reads as its leader: its barrier in this term has applied everything
// committed before it.
func (n *Node) ServingLeader() bool {
	return n.Serving() && n.servingBy.Load() == byLeader
}

// Close stops raft and closes its stores. The replica leaves the group's
// quorum until it restarts.
func (n *Node) Close() error {
	select {
	case <-n.stop:
	default:
		close(n.stop)
	}
	err := n.raft.Shutdown().Error()
	n.wg.Wait()
	if cerr := n.closer(); err == nil {
		err = cerr
	}
	return err
}

// slogWriter turns raft's hclog lines (and the snapshot store's) into slog
// records at their level, dropping those below min.
type slogWriter struct {
	log *slog.Logger
	min slog.Level
}

func (w *slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	lvl := slog.LevelInfo
	switch {
	case strings.Contains(line, "nothing new to snapshot"):
		// raft's snapshot timer found nothing to do; not an error.
		lvl = slog.LevelDebug
	case strings.Contains(line, "starting election") && strings.Contains(line, "last-leader-addr= "):
		// A group's first election (no leader ever known): how every
		// group starts, not a warning.
		lvl = slog.LevelInfo
	case strings.Contains(line, "[ERROR]"):
		lvl = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		lvl = slog.LevelWarn
	case strings.Contains(line, "[DEBUG]"), strings.Contains(line, "[TRACE]"):
		lvl = slog.LevelDebug
	}
	if lvl < w.min {
		return len(p), nil
	}
	if i := strings.Index(line, "raft: "); i >= 0 {
		line = line[i+len("raft: "):]
	}
	w.log.Log(context.Background(), lvl, line)
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)

// hclogLevel is the hclog level that lets through what min does.
func hclogLevel(min slog.Level) hclog.Level {
	switch {
	case min <= slog.LevelDebug:
		return hclog.Debug
	case min <= slog.LevelInfo:
		return hclog.Info
	case min <= slog.LevelWarn:
		return hclog.Warn
	}
	return hclog.Error
}
