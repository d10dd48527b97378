package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

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
// Requests while one is queued are merged into it.
type snapshots struct {
	node *raftnode.Node
	log  *slog.Logger

	queued atomic.Bool
	wg     sync.WaitGroup
}

// request asks for a snapshot in the background. It is called from the
// state machine's apply, which a snapshot waits for, so it must not wait.
func (sn *snapshots) request() {
	if sn.node == nil || !sn.queued.CompareAndSwap(false, true) {
		return
	}
	sn.wg.Add(1)
	go func() {
		defer sn.wg.Done()
		// Cleared before the snapshot starts: a drop applied from now on
		// may not be in it, so it queues another.
		sn.queued.Store(false)
		if err := sn.node.Snapshot(); err != nil {
			sn.log.Debug("snapshot after a drop not taken", "err", err)
			return
		}
		sn.log.Info("snapshot taken after a drop, freeing the dropped rows' disk")
	}()
}

// wait waits for the snapshots asked for.
func (sn *snapshots) wait() { sn.wg.Wait() }
