package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
)

// trainedProposer is one collection's store.Proposer: its trainer commits
// trained values through the group's log for exactly that incarnation, so
// a value trained before a drop never reaches a collection created again
// under the name.
type trainedProposer struct {
	s   *Server
	ref *shardpb.CollectionRef
}

// ServingLeader implements store.Proposer.
func (p trainedProposer) ServingLeader() bool { return p.s.ServingLeader() }

// SetTrained implements store.Proposer.
func (p trainedProposer) SetTrained(ctx context.Context, name string, value []byte) (uint64, error) {
	_, idx, err := p.s.proposeCommand(ctx, &shardpb.Command{
		Op:         &shardpb.Command_SetTrained{SetTrained: &shardpb.SetTrainedCommand{Name: name, Value: value}},
		Collection: p.ref,
	})
	return idx, err
}

// startTrainer starts col's trainer (Collections.startTrainers).
func (s *Server) startTrainer(col *collection) *store.Trainer {
	cfg := s.cfg.Trainer
	cfg.Logger = cfg.Logger.With("collection", col.name)
	return store.StartTrainer(col.mem, trainedProposer{s: s, ref: col.ref()}, cfg)
}

// snapshots asks the node for a snapshot after a collection is dropped:
// the dropped store's memory is free at once, but its rows stay on disk
// in the latest snapshot (and in the log) until a newer snapshot replaces
// it, which raft alone would take only after its threshold of entries.
//
// A snapshot rewrites every other collection too, and while one is
// written the log's fsyncs wait behind it: taken after each drop, a
// burst of 99 drops measured 1.4 s a drop. So the snapshot waits for the
// drops to settle — dropSnapshotQuiet after the last one, and never more
// than dropSnapshotMaxWait after the first.
type snapshots struct {
	node *raftnode.Node
	log  *slog.Logger

	mu     sync.Mutex
	timer  *time.Timer // armed: a snapshot is due
	first  time.Time   // when the armed timer was first set
	closed bool
	wg     sync.WaitGroup
}

// The settling of drops before their snapshot.
const (
	dropSnapshotQuiet   = 5 * time.Second
	dropSnapshotMaxWait = time.Minute
)

// request asks for a snapshot in the background. It is called from the
// state machine's apply, which a snapshot waits for, so it must not wait.
func (sn *snapshots) request() {
	if sn.node == nil {
		return
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.closed {
		return
	}
	if sn.timer != nil && sn.timer.Stop() {
		// Still due: push it back, within the longest wait.
		sn.timer.Reset(min(dropSnapshotQuiet, max(0, dropSnapshotMaxWait-time.Since(sn.first))))
		return
	}
	sn.wg.Add(1)
	sn.first = time.Now()
	sn.timer = time.AfterFunc(dropSnapshotQuiet, func() {
		defer sn.wg.Done()
		if err := sn.node.Snapshot(); err != nil {
			sn.log.Debug("snapshot after a drop not taken", "err", err)
			return
		}
		sn.log.Info("snapshot taken after a drop, freeing the dropped rows' disk")
	})
}

// wait cancels a snapshot not yet started and waits for one under way.
func (sn *snapshots) wait() {
	sn.mu.Lock()
	sn.closed = true
	if sn.timer != nil && sn.timer.Stop() {
		sn.wg.Done()
	}
	sn.mu.Unlock()
	sn.wg.Wait()
}
