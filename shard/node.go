package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	"go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector/ivf"
)

// Defaults of NodeConfig.
const (
	// DefaultMaxLeaderSilence is how long a replica keeps serving reads
	// without hearing from a leader (DESIGN.md: 5 s, at least 3× the
	// election timeout so a leader change does not flap a healthy shard).
	DefaultMaxLeaderSilence = 5 * time.Second
	// DefaultSnapshotThreshold is how many log entries since the last
	// snapshot trigger a new one. An entry is one write RPC (up to 256
	// vectors, ~1.5 MiB at 1536-D), so with the trailing logs the log stays
	// under ~1.5 GiB in the worst case and a few MiB in the usual one.
	DefaultSnapshotThreshold = 512
	// DefaultTrailingLogs is how many entries a snapshot leaves in the log,
	// so a follower a little behind catches up from the log, not a snapshot.
	DefaultTrailingLogs = 512
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

// NodeConfig is one replica's membership of its shard's raft group.
type NodeConfig struct {
	// DataDir holds the raft log and stable store (raft.db, bbolt) and the
	// snapshots (snapshots/). Required; created if missing.
	DataDir string
	// Advertise is this replica's address as its peers reach it (its entry
	// in Peers, and its raft server id). Required.
	Advertise string
	// Peers lists every replica of the shard, this one included. Empty
	// means a group of one (Advertise alone). It must match the membership
	// stored in DataDir, if any: membership changes are not supported.
	Peers []string
	// MaxLeaderSilence: DefaultMaxLeaderSilence if zero; at least
	// 3× ElectionTimeout.
	MaxLeaderSilence time.Duration
	// HeartbeatTimeout and ElectionTimeout are raft's (1 s each if zero).
	// LeaderLeaseTimeout is half the heartbeat timeout.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// SnapshotThreshold and TrailingLogs: the defaults above if zero.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SnapshotInterval is how often raft checks the threshold (30 s if
	// zero).
	SnapshotInterval time.Duration
	// Creds are the client credentials raft traffic to peers uses (the
	// router's shard credentials); nil means plaintext.
	Creds credentials.TransportCredentials
	// Dialer, when set, replaces the TCP dialer to peers (tests).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// Store is the replica's memory store, the state machine raft applies
	// to. Required, and empty: the node loads it from DataDir.
	Store *Memory
	// OnDocuments, when set, is told the document count after each change.
	OnDocuments func(int)
	// Int8MinRows is how many rows a leader of a QuantInt8 store waits for
	// before it trains and commits the int8 scale (DefaultInt8MinRows if
	// zero).
	Int8MinRows int
	// IVFMinRows is how many rows a leader of an IVF store (WithIVF) waits
	// for, once its int8 scale is committed, before it trains and commits
	// centroids (ivf.MinRows if zero); tests lower it to exercise the
	// index on small shards.
	IVFMinRows int
	Logger     *slog.Logger
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
// fsyncs. Snapshots use raft's FileSnapshotStore.
type Node struct {
	cfg    NodeConfig
	log    *slog.Logger
	peers  []string
	raft   *raft.Raft
	fsm    *fsm
	trans  *transport
	bolt   *raftboltdb.BoltStore
	snaps  *raft.FileSnapshotStore
	silent time.Duration

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
	training  atomic.Bool   // a leader's int8 or IVF training is under way
	building  atomic.Bool   // an IVF index build is under way

	// ctx ends when the node closes: background training and builds stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	onServing func(bool)

	stop chan struct{}
	wg   sync.WaitGroup
}

// OpenNode opens (or creates) the replica's raft state in cfg.DataDir,
// restores its latest snapshot into cfg.Store (logging progress), and
// starts raft. Register its service on the shard's gRPC server before
// serving. A replica with no raft state bootstraps a group only when
// every peer answers that it is as new (see bootstrap); one with state
// refuses to start if cfg.Peers disagrees with the stored membership.
func OpenNode(cfg NodeConfig) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DataDir == "" || cfg.Advertise == "" || cfg.Store == nil {
		return nil, errors.New("raft node: data directory, advertise address and store are required")
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
		cfg.HeartbeatTimeout = time.Second
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = time.Second
	}
	if cfg.MaxLeaderSilence == 0 {
		cfg.MaxLeaderSilence = DefaultMaxLeaderSilence
	}
	if cfg.MaxLeaderSilence < 3*cfg.ElectionTimeout {
		return nil, fmt.Errorf("--max-leader-silence %s is under 3x the election timeout (%s): a leader change would flap the shard", cfg.MaxLeaderSilence, cfg.ElectionTimeout)
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
	if cfg.Int8MinRows <= 0 {
		cfg.Int8MinRows = DefaultInt8MinRows
	}
	if cfg.IVFMinRows <= 0 {
		cfg.IVFMinRows = ivf.MinRows
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	log := cfg.Logger.With("component", "raft")
	n := &Node{cfg: cfg, log: log, peers: peers, silent: cfg.MaxLeaderSilence, stop: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	defer func() {
		if n.raft == nil {
			n.cancel()
		}
	}()

	var err error
	n.bolt, err = raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(cfg.DataDir, "raft.db"),
		// A second process on the same directory fails instead of waiting.
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("open raft log %s: %w", filepath.Join(cfg.DataDir, "raft.db"), err)
	}
	// A snapshot cut short by a crash stays behind as a .tmp directory
	// that raft's store only warns about; the bolt file lock held from
	// here on means no other process is writing one.
	if tmps, _ := filepath.Glob(filepath.Join(cfg.DataDir, "snapshots", "*.tmp")); len(tmps) > 0 {
		for _, d := range tmps {
			_ = os.RemoveAll(d)
		}
		log.Info("removed snapshots left unfinished by a crash", "count", len(tmps))
	}
	lw := &slogWriter{log: log}
	n.snaps, err = raft.NewFileSnapshotStore(cfg.DataDir, 2, lw)
	if err != nil {
		n.bolt.Close()
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	hadState, err := raft.HasExistingState(n.bolt, n.bolt, n.snaps)
	if err != nil {
		n.bolt.Close()
		return nil, fmt.Errorf("read raft state: %w", err)
	}
	n.mayVote.Store(hadState)

	n.trans = newTransport(cfg.Advertise, cfg.Creds, cfg.Dialer)
	n.trans.mayVote = n.mayVote.Load
	n.trans.sawAppend = n.sawAppend
	n.trans.groupState = n.groupState

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.Advertise)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout / 2
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
	// One AppendEntries carries at most this many entries. An entry is one
	// write request (at most 64 MiB, the shard's gRPC limit; ~1.5 MiB for
	// 256 vectors of 1536-D without payloads), and an AppendEntries must
	// fit the same 64 MiB receive limit on the follower: raft's default of
	// 64 entries would not.
	rc.MaxAppendEntries = 3
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, Output: lw})
	f := &fsm{mem: cfg.Store, log: log, onChange: cfg.OnDocuments, serving: n.Serving}
	n.fsm = f

	if hadState {
		log.Info("loading replica from its data directory", "dir", cfg.DataDir)
	}
	// The cache keeps recent entries in memory for replication; writes
	// still go through to bolt (and its fsync) before raft counts them.
	logs, err := raft.NewLogCache(256, n.bolt)
	if err != nil {
		n.bolt.Close()
		return nil, err
	}
	t0 := time.Now()
	n.raft, err = raft.NewRaft(rc, f, logs, n.bolt, n.snaps, n.trans)
	if err != nil {
		n.trans.Close()
		n.bolt.Close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	if hadState {
		log.Info("snapshot loaded; the log after it is applied once a leader confirms the commit index",
			"took", time.Since(t0).Round(time.Millisecond), "rows", cfg.Store.Len(), "last_index", n.raft.LastIndex())
		if err := n.checkMembership(); err != nil {
			n.Close()
			return nil, err
		}
	}
	n.wg.Add(1)
	go n.monitor()
	if !hadState {
		n.wg.Add(1)
		go n.bootstrap()
	}
	return n, nil
}

// Register adds the Raft service to g, the shard's gRPC server.
func (n *Node) Register(g *grpc.Server) {
	shardpb.RegisterRaftServer(g, raftService{transport: n.trans})
}

// checkMembership refuses a --peers list that differs from the membership
// stored in the log or snapshot.
func (n *Node) checkMembership() error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read stored membership: %w", err)
	}
	var stored []string
	for _, s := range f.Configuration().Servers {
		stored = append(stored, string(s.Address))
	}
	slices.Sort(stored)
	if len(stored) > 0 && !slices.Equal(stored, n.peers) {
		return fmt.Errorf("--peers %s disagrees with the membership stored in %s (%s): membership changes are not supported; start with the stored peers",
			strings.Join(n.peers, ","), n.cfg.DataDir, strings.Join(stored, ","))
	}
	return nil
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
	t := time.NewTicker(500 * time.Millisecond)
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
		cc, err := n.trans.conn(raft.ServerAddress(p))
		if err != nil {
			return true, false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := shardpb.NewRaftClient(cc).GroupState(ctx, &shardpb.GroupStateRequest{})
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
			return fresh && caughtUp && n.mayVote.Load() && n.cfg.Store.IndexReady()
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
			serving, by = (commit <= servingLag || upTo(commit-servingLag)) && n.cfg.Store.IndexReady(), byLeader
			// Once it has led, the commit index it last heard as a
			// follower proves nothing: after stepping down (raft then
			// resets its last contact to now) it serves again only once a
			// new leader has proved one.
			caughtUp = false
			n.leaderCommit.Store(0)
			if serving {
				n.maybeTrain()
			}
		case raft.Follower, raft.Candidate:
			serving, by = contact(), byContact
			if applied, lc := n.AppliedIndex(), n.leaderCommit.Load(); lc > applied+1000 && time.Since(lastLog) > 2*time.Second {
				lastLog = time.Now()
				n.log.Info("catching up", "applied_index", applied, "leader_commit_index", lc)
			}
		}
		n.maybeBuild()
		applied := n.AppliedIndex()
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
		if err := n.bolt.GetLog(j, &l); err == nil && l.Type == raft.LogCommand {
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

// Role is leader, follower, candidate or shutdown.
func (n *Node) Role() string { return strings.ToLower(n.raft.State().String()) }

// Snapshot takes a snapshot now (tests; raft also takes them by itself
// past SnapshotThreshold).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// MayVote reports whether the replica takes part in elections (false for
// a replica that started empty, until it has caught up).
func (n *Node) MayVote() bool { return n.mayVote.Load() }

// errProposal is how propose reports why a write was not committed.
type proposeError struct {
	notLeader bool   // never accepted: another replica may take it
	leader    string // the known leader, for the NOT_LEADER hint
	err       error
}

func (e *proposeError) Error() string { return e.err.Error() }
func (e *proposeError) Unwrap() error { return e.err }

// propose commits cmd through the log and returns what applying it did and
// its log index. It returns a *proposeError when the command was not
// committed.
func (n *Node) propose(ctx context.Context, cmd *shardpb.Command) (applyResult, uint64, error) {
	if n.raft.State() != raft.Leader {
		return applyResult{}, 0, &proposeError{notLeader: true, leader: n.Leader(), err: raft.ErrNotLeader}
	}
	b, err := proto.Marshal(cmd)
	if err != nil {
		return applyResult{}, 0, err
	}
	timeout := WriteTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := n.raft.Apply(b, timeout)
	if err := f.Error(); err != nil {
		// ErrNotLeader from Apply means the entry never entered the log
		// (a follower's loop refuses queued applies).
		return applyResult{}, 0, &proposeError{notLeader: errors.Is(err, raft.ErrNotLeader), leader: n.Leader(), err: err}
	}
	res, _ := f.Response().(applyResult)
	return res, f.Index(), res.err
}

// Close stops raft and closes its stores. The replica leaves the group's
// quorum until it restarts.
func (n *Node) Close() error {
	select {
	case <-n.stop:
	default:
		close(n.stop)
	}
	n.cancel()
	err := n.raft.Shutdown().Error()
	n.wg.Wait()
	n.trans.Close()
	if cerr := n.bolt.Close(); err == nil {
		err = cerr
	}
	return err
}

// slogWriter turns raft's hclog lines (and the snapshot store's) into slog
// records at their level.
type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	lvl := slog.LevelInfo
	switch {
	case strings.Contains(line, "nothing new to snapshot"):
		// raft's snapshot timer found nothing to do; not an error.
		lvl = slog.LevelDebug
	case strings.Contains(line, "[ERROR]"):
		lvl = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		lvl = slog.LevelWarn
	case strings.Contains(line, "[DEBUG]"), strings.Contains(line, "[TRACE]"):
		lvl = slog.LevelDebug
	}
	if i := strings.Index(line, "raft: "); i >= 0 {
		line = line[i+len("raft: "):]
	}
	w.log.Log(context.Background(), lvl, line)
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)

// maybeTrain, on a serving leader (which has applied everything committed
// before its term, so it sees any scale already committed), trains the
// int8 scale from its rows once there are enough and commits it; every
// replica encodes its rows on applying it. One training at a time; a
// failed commit (leadership lost) is retried at a later tick by whoever
// leads then.
func (n *Node) maybeTrain() {
	if n.cfg.Store.needsIVFTrain(n.cfg.IVFMinRows) {
		n.trainIVF()
		return
	}
	if n.cfg.Store.needsIVFNProbe() {
		n.calibrateIVF()
		return
	}
	if n.cfg.Store.needsInt8Scale(n.cfg.Int8MinRows) {
		n.trainInBackground("int8 scale", TrainedInt8Scale, func(context.Context) ([]byte, []any, error) {
			b, err := n.cfg.Store.trainInt8()
			return b, []any{"rows", n.cfg.Store.Len()}, err
		})
	}
}

// trainIVF, on a serving leader, trains IVF centroids on a sample of its
// rows and commits them; every replica then builds its index from them
// (maybeBuild). Searches and writes go on meanwhile: the sample is copied
// under the read lock, training holds no lock.
func (n *Node) trainIVF() {
	n.trainInBackground("ivf centroids", TrainedIVFCentroids, func(ctx context.Context) ([]byte, []any, error) {
		rows := n.cfg.Store.Len()
		// Any seed would do (only the leader trains, and it commits the
		// result); the row count makes a run repeatable.
		b, lists, err := n.cfg.Store.trainIVF(ctx, uint64(rows))
		return b, []any{"rows", rows, "lists", lists, "bytes", len(b)}, err
	})
}

// calibrateIVF, on a serving leader whose index of the committed
// centroids is built, measures the default nprobe its rows need
// (ivf.CalibrateNProbe) and commits it, so every replica probes as many
// lists for a query that names none.
func (n *Node) calibrateIVF() {
	n.trainInBackground("ivf default nprobe", TrainedIVFNProbe, func(ctx context.Context) ([]byte, []any, error) {
		b, levels, err := n.cfg.Store.calibrateIVF(ctx)
		var figures []any
		for _, l := range levels {
			figures = append(figures, fmt.Sprintf("nprobe_k%d", l.K), l.NProbe, fmt.Sprintf("sample_recall_k%d", l.K), l.Recall)
		}
		return b, figures, err
	})
}

// trainInBackground runs train (one training at a time) and commits the
// value it returns as the trained value name, logging what with the
// figures train reports. A failure is left for a later tick to retry: an
// index replaced under a calibration (errBuildStale) or a node closing is
// not worth a log line, a lost leadership only a warning.
func (n *Node) trainInBackground(what, name string, train func(context.Context) ([]byte, []any, error)) {
	if !n.training.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.training.Store(false)
		t0 := time.Now()
		b, figures, err := train(n.ctx)
		if err != nil {
			if n.ctx.Err() == nil && !errors.Is(err, errBuildStale) {
				n.log.Error(what+" training failed", "err", err)
			}
			return
		}
		took := time.Since(t0)
		ctx, cancel := context.WithTimeout(n.ctx, WriteTimeout)
		defer cancel()
		idx, err := n.SetTrained(ctx, name, b)
		if err != nil {
			n.log.Warn(what+" not committed; retrying later", "err", err)
			return
		}
		n.log.Info(what+" trained and committed", append(figures, "index", idx, "took", took.Round(time.Millisecond))...)
	}()
}

// maybeBuild starts building the IVF index of the committed centroids in
// the background when the store needs one (first centroids, a retrain, a
// restart or a snapshot install), on every replica: the index is a pure
// function of the centroids and the rows, so each replica builds its own
// rather than receiving it.
func (n *Node) maybeBuild() {
	if !n.cfg.Store.needsIVFBuild() || !n.building.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.building.Store(false)
		t0 := time.Now()
		built, err := n.cfg.Store.BuildIndex(n.ctx)
		switch {
		case err != nil && n.ctx.Err() == nil:
			n.log.Error("ivf index build failed; serving without it", "err", err)
		case built:
			n.log.Info("ivf index built", "rows", n.cfg.Store.Len(), "took", time.Since(t0).Round(time.Millisecond))
		}
	}()
}

// SetTrained commits a trained value every replica must encode rows with
// identically (an int8 scale, IVF centroids) through the log, on the
// leader, and returns its index; every replica, restart and snapshot
// install then holds the same value (Memory.Trained). A follower refuses
// with a *proposeError whose notLeader is set, as writes do.
func (n *Node) SetTrained(ctx context.Context, name string, value []byte) (uint64, error) {
	_, idx, err := n.propose(ctx, &shardpb.Command{Op: &shardpb.Command_SetTrained{SetTrained: &shardpb.SetTrainedCommand{Name: name, Value: value}}})
	return idx, err
}
