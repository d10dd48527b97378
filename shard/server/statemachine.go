package server

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
)

// stateMachine is the shard's replicated state machine: committed log
// entries (shardpb.Command) applied to the replica's collections. Every
// check that decides what a command does (the catalog's rules, the
// collection an entry names, the placement check) happens here, on every
// replica alike, so replicas that apply the same log hold the same bytes.
type stateMachine struct {
	cols *Collections
	log  *slog.Logger
	// pace runs recovery work at a bounded share of the cores: a
	// snapshot's restore, and the entries applied while the replica does
	// not serve (it is catching up). Nil: full speed.
	pace store.Pacer
}

// NewStateMachine returns the state machine that applies a shard's log to
// cols, for raftnode.Config. pace, when not nil, throttles its recovery
// work (restoring a snapshot, applying the log while not serving); the
// entries a serving replica applies are never throttled, so writes are
// acknowledged at full speed.
func NewStateMachine(cols *Collections, log *slog.Logger, pace store.Pacer) raftnode.StateMachine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &stateMachine{cols: cols, log: log, pace: pace}
}

// applyResult is what Apply returns to the leader that proposed the entry.
type applyResult struct {
	err   error // a gRPC status error: the command was committed but refused
	found bool  // delete: the id was there
	// deleted is how many documents a delete removed.
	deleted int
	docs    int // the collection's documents after the entry
	// catalog is what a catalog change did.
	catalog catalogAnswer
}

// Apply implements raftnode.StateMachine. An entry applied while the
// replica does not serve is catch-up (a restart replaying its log, a
// wiped replica rebuilt from its leader's): nobody reads this replica
// meanwhile and the group commits without it, so it runs under the
// recovery budget; a serving replica's entries never wait.
func (f *stateMachine) Apply(e raftnode.Entry) any {
	if e.Serving || f.pace == nil {
		return f.applyEntry(context.Background(), e)
	}
	var res any
	// The context never ends: a committed entry must be applied, and a
	// wait ended early would only skip the pause after it. The pacer
	// measures this thread's CPU, so none of the work goes to the
	// background thread.
	ctx := store.Foreground(context.Background())
	_ = f.pace.Do(ctx, func() { res = f.applyEntry(ctx, e) })
	return res
}

func (f *stateMachine) applyEntry(ctx context.Context, e raftnode.Entry) any {
	var cmd shardpb.Command
	var err error
	// Decoding copies every vector of the entry: background work
	// (CollectionsConfig.Background), like the store's preparation.
	store.RunBackground(ctx, f.cols.cfg.Background, func() { err = proto.Unmarshal(e.Data, &cmd) })
	if err != nil {
		// Only our own leader proposes entries, so this is a bug; every
		// replica skips the entry alike.
		f.log.Error("undecodable log entry skipped", "index", e.Index, "err", err)
		return applyResult{err: status.Errorf(codes.Internal, "undecodable log entry %d: %v", e.Index, err)}
	}
	if op, ok := cmd.GetOp().(*shardpb.Command_Catalog); ok {
		ch, err := f.cols.changeCatalog(op.Catalog, e.Index)
		return applyResult{err: err, catalog: ch}
	}
	_, trained := cmd.GetOp().(*shardpb.Command_SetTrained)
	bc, isCut := cmd.GetOp().(*shardpb.Command_BackupCut)
	if isCut && len(bc.BackupCut.GetCollections()) > 0 {
		// A cluster backup's cut: no collection of its own.
		return f.applyClusterCut(bc.BackupCut, e.Index, cmd.GetProposedMs())
	}
	col, err := f.cols.forEntry(cmd.GetCollection(), trained || isCut)
	if err != nil {
		return applyResult{err: err}
	}
	if isCut {
		return f.applyBackupCut([]cutTarget{{col: col}}, bc.BackupCut, e.Index, cmd.GetProposedMs())
	}
	switch cmd.GetOp().(type) {
	case *shardpb.Command_Upsert, *shardpb.Command_Delete, *shardpb.Command_Edit:
		if err := fenced(col, cmd.GetProposedMs()); err != nil {
			return applyResult{err: err}
		}
	}
	res := f.apply(ctx, col, &cmd, e.Serving)
	res.docs = col.mem.Len()
	f.cols.observe(col)
	return res
}

// Ready implements raftnode.StateMachine: a replica serves once every IVF
// collection's index is built.
func (f *stateMachine) Ready() bool { return f.cols.ready() }

func (f *stateMachine) apply(ctx context.Context, col *collection, cmd *shardpb.Command, serving bool) applyResult {
	mem := col.mem
	switch op := cmd.GetOp().(type) {
	case *shardpb.Command_Upsert:
		p, err := f.cols.placementCheck(col, op.Upsert.GetPlacement(), upsertIDs(op.Upsert))
		if err != nil {
			return applyResult{err: err}
		}
		if v := op.Upsert.GetVersion(); v > upsertVersionNamed {
			return applyResult{err: status.Errorf(codes.Internal, "log entry upsert version %d, this replica applies up to version %d", v, upsertVersionNamed)}
		}
		var recs []store.Record
		store.RunBackground(ctx, f.cols.cfg.Background, func() { recs, err = upsertRecords(col, op.Upsert) })
		if err != nil {
			return applyResult{err: err}
		}
		return applyResult{err: mem.Upsert(ctx, p, recs)}
	case *shardpb.Command_Delete:
		p, err := f.cols.placementCheck(col, op.Delete.GetPlacement(), deleteIDs(op.Delete))
		if err != nil {
			return applyResult{err: err}
		}
		d := op.Delete
		if len(d.GetIds()) == 0 && len(d.GetFilter()) == 0 {
			found, err := mem.Delete(ctx, p, d.GetId())
			n := 0
			if found {
				n = 1
			}
			return applyResult{err: err, found: found, deleted: n}
		}
		var flt *filter.Filter
		if len(d.GetFilter()) > 0 {
			// The leader parsed it before proposing; a replica that
			// cannot is running other code, and every one skips alike.
			if flt, err = filter.Parse(d.GetFilter()); err != nil {
				return applyResult{err: status.Errorf(codes.Internal, "log entry filter: %v", err)}
			}
		}
		ids := d.GetIds()
		if d.GetId() != "" {
			ids = append([]string{d.GetId()}, ids...)
		}
		n, err := mem.DeleteMatching(ctx, p, ids, flt)
		return applyResult{err: err, found: n > 0, deleted: n}
	case *shardpb.Command_Edit:
		return f.applyEdit(ctx, col, op.Edit)
	case *shardpb.Command_SetTrained:
		if err := mem.SetTrained(op.SetTrained.GetName(), op.SetTrained.GetValue(), serving); err != nil {
			f.log.Error("trained value not usable; scanning exactly", "collection", col.name, "name", op.SetTrained.GetName(), "err", err)
		}
		return applyResult{}
	}
	return applyResult{err: status.Error(codes.Internal, "log entry with no operation")}
}

// upsertRecords decodes an upsert entry's vectors into the records col's
// store takes.
func upsertRecords(col *collection, u *shardpb.UpsertCommand) ([]store.Record, error) {
	recs := make([]store.Record, len(u.GetVectors()))
	for i, v := range u.GetVectors() {
		vec, err := shard.DecodeVector(v.GetVector())
		if err != nil || len(vec) != col.mem.Dim() {
			return nil, status.Errorf(codes.Internal, "log entry vector %d does not fit collection %q", i, col.name)
		}
		named, ok := namedOfPB(col.settings, v.GetNamed())
		if !ok {
			return nil, status.Errorf(codes.Internal, "log entry vector %d: a named vector does not fit collection %q", i, col.name)
		}
		recs[i] = store.Record{ID: v.GetId(), Vector: vec, Payload: v.GetPayload(), Sparse: sparseOfPB(v.GetSparse()), Named: named}
	}
	return recs, nil
}

// placementCheck is the placement check of a write to col: against the
// placement its own data was written under, or, for a collection not
// written yet, the replica's (its other collections').
//
// A collection with a slot map checks the slot of each of ids instead
// (slotWriteCheck); a delete by filter names no ids, and removes what it
// matches among the rows the group holds.
func (c *Collections) placementCheck(col *collection, p *shardpb.Placement, ids []string) (store.Placement, error) {
	if m := col.slotMap(); m != nil {
		return c.slotWriteCheck(col, m, p, ids)
	}
	have := col.mem.Placement()
	if have == (store.Placement{}) {
		have = c.Placement()
	}
	return placementCheck(have, p)
}

// placementCheck refuses a write routed under another shard list: the
// router's shard list changed (a reshard) or the write reached the wrong
// shard. A replica that has never been written adopts the first placement.
func placementCheck(have store.Placement, p *shardpb.Placement) (store.Placement, error) {
	got := store.Placement{Fingerprint: p.GetFingerprint(), Shard: p.GetShard()}
	if got.Fingerprint == "" || got.Shard == "" {
		return got, status.Error(codes.InvalidArgument, "write without placement")
	}
	if have != (store.Placement{}) && have != got {
		return got, status.Errorf(codes.FailedPrecondition,
			"shard holds data written as %q under shard list %s, this write is for %q under %s: changing the shard list is a reshard",
			have.Shard, have.Fingerprint, got.Shard, got.Fingerprint)
	}
	return got, nil
}

// upsertIDs are the ids an upsert writes.
func upsertIDs(u *shardpb.UpsertCommand) []string {
	out := make([]string, len(u.GetVectors()))
	for i, v := range u.GetVectors() {
		out[i] = v.GetId()
	}
	return out
}

// deleteIDs are the ids a delete names (not those its filter matches).
func deleteIDs(d *shardpb.DeleteCommand) []string {
	if d.GetId() == "" {
		return d.GetIds()
	}
	return append([]string{d.GetId()}, d.GetIds()...)
}
