package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// backupCutVersion is the BackupCutCommand version this code writes and
// applies for one collection's cut; clusterCutVersion for a cut of
// several collections at one entry (BackupCutCommand.collections).
const (
	backupCutVersion  = 1
	clusterCutVersion = 2
)

// defaultBackupChunk bounds the vector bytes of one Backup chunk: well
// under the router's 64 MiB receive limit, large enough to stream fast.
const defaultBackupChunk = 2 << 20

// cut is what a replica captured when it applied a backup cut entry: one
// part per collection the entry covers, in the entry's order.
type cut struct {
	index uint64
	parts []cutPart
}

// cutPart is one collection's view at a cut.
type cutPart struct {
	entry *shardpb.CollectionEntry
	view  *store.View
	err   error
}

// close releases every view of the cut.
func (c cut) close() {
	for _, p := range c.parts {
		if p.view != nil {
			p.view.Close()
		}
	}
}

// backupCuts hands the view a replica takes when it applies a backup cut
// entry to the Backup call on that replica waiting for it. Only a replica
// with a waiter for the cut's id takes a view: the others, and a replica
// replaying the entry after a restart, do nothing, so a cut changes no
// replicated state and holds no memory anywhere but where it is read.
type backupCuts struct {
	mu      sync.Mutex
	waiting map[string]chan cut
}

// expect registers a waiter for the cut named id; cancel removes it, and
// closes a view delivered after the waiter gave up.
func (b *backupCuts) expect(id string) (ch <-chan cut, cancel func()) {
	c := make(chan cut, 1)
	b.mu.Lock()
	if b.waiting == nil {
		b.waiting = map[string]chan cut{}
	}
	b.waiting[id] = c
	b.mu.Unlock()
	return c, func() {
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		select {
		case got := <-c:
			got.close()
		default:
		}
	}
}

// deliver is the state machine's side: called as the cut entry applies,
// it takes col's view at exactly that point in the log, if this replica
// waits for it.
func (b *backupCuts) deliver(id string, index uint64, take func() cut) {
	b.mu.Lock()
	c, ok := b.waiting[id]
	delete(b.waiting, id)
	b.mu.Unlock()
	if !ok {
		return
	}
	got := take()
	got.index = index
	c <- got // buffered, and delivered at most once
}

// fenceLease bounds how long a backup fence pauses a collection's writes
// when the router that raised it never lifts it (it died between the
// cuts and the lift): measured on the leader's clock, in the entries.
const fenceLease = 30 * time.Second

// cutTarget is a collection a cut entry covers, or why this replica
// does not hold it (dropped since the entry was proposed: every replica
// alike, since the catalog is in the log).
type cutTarget struct {
	col *collection
	err error
}

// applyBackupCut applies a cut entry over its collections (one, or a
// cluster cut's): the exporting replica's views of them, and the fence it
// raises or lifts on each. A lift answers found when every collection's
// fence was still in place.
func (f *stateMachine) applyBackupCut(targets []cutTarget, op *shardpb.BackupCutCommand, index uint64, proposedMs int64) applyResult {
	want := uint32(backupCutVersion)
	if len(op.GetCollections()) > 0 {
		want = clusterCutVersion
	}
	if op.GetVersion() != want {
		// A newer router's cut: every replica ignores it alike.
		return applyResult{err: status.Errorf(codes.FailedPrecondition, "backup cut version %d is not known to this replica", op.GetVersion())}
	}
	if name := op.GetLift(); name != "" {
		found := true
		for _, t := range targets {
			if t.col == nil {
				continue // dropped: no write to wait for
			}
			end, ok := t.col.fences[name]
			delete(t.col.fences, name)
			found = found && ok && end > proposedMs
		}
		return applyResult{found: found}
	}
	if name := op.GetFence(); name != "" {
		for _, t := range targets {
			if t.col == nil {
				continue
			}
			if t.col.fences == nil {
				t.col.fences = map[string]int64{}
			}
			t.col.fences[name] = op.GetFenceExpiresMs()
		}
	}
	f.cols.cuts.deliver(op.GetBackupId(), index, func() cut {
		parts := make([]cutPart, len(targets))
		for i, t := range targets {
			if t.err != nil {
				parts[i] = cutPart{err: t.err}
				continue
			}
			v, err := t.col.mem.OpenView()
			parts[i] = cutPart{entry: f.cols.entryOf(t.col), view: v, err: err}
		}
		return cut{parts: parts}
	})
	return applyResult{}
}

// applyClusterCut applies a cut entry of several collections (version 2).
func (f *stateMachine) applyClusterCut(op *shardpb.BackupCutCommand, index uint64, proposedMs int64) applyResult {
	targets := make([]cutTarget, len(op.GetCollections()))
	for i, ref := range op.GetCollections() {
		targets[i].col, targets[i].err = f.cols.forEntry(ref, true)
	}
	return f.applyBackupCut(targets, op, index, proposedMs)
}

// fenced refuses a write to col proposed at proposedMs (the leader's
// clock) while a backup fence is in place: SLOT_MOVED with retry, which
// routers answer by sending the write again after a short pause. Fences
// whose lease ended by then are dropped. Everything it reads is in the
// log, so every replica refuses the same writes.
func fenced(col *collection, proposedMs int64) error {
	if len(col.fences) == 0 || proposedMs == 0 {
		return nil
	}
	for name, end := range col.fences {
		if end <= proposedMs {
			delete(col.fences, name)
		}
	}
	if len(col.fences) == 0 {
		return nil
	}
	epoch := uint64(0)
	if m := col.slotMap(); m != nil {
		epoch = m.Epoch
	}
	return shard.SlotMovedStatus(fmt.Sprintf("collection %q: writes wait while a backup takes its cut on every shard; it was not applied, retry", col.name), epoch, true)
}

// ProposeBackupCut implements shardpb.ShardServer: the cut entry is
// committed like a write, on the leader; a follower forwards it.
func (s *Server) ProposeBackupCut(ctx context.Context, req *shardpb.BackupCutRequest) (*shardpb.BackupCutResponse, error) {
	return s.proposeCut(ctx, req)
}

func (s *Server) proposeCut(ctx context.Context, req *shardpb.BackupCutRequest) (*shardpb.BackupCutResponse, error) {
	fwd := func(err error) (*shardpb.BackupCutResponse, error) {
		var resp *shardpb.BackupCutResponse
		leader, err := s.forward(ctx, err, func(ctx context.Context, c shardpb.ShardClient) (err error) {
			resp, err = c.ProposeBackupCut(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		resp.ForwardedTo = leader
		return resp, nil
	}
	if req.GetBackupId() == "" && req.GetLift() == "" {
		return nil, status.Error(codes.InvalidArgument, "backup cut without an id")
	}
	op := &shardpb.BackupCutCommand{Version: backupCutVersion, BackupId: req.GetBackupId(), Lift: req.GetLift()}
	if req.GetLift() == "" && req.GetFence() != "" {
		op.Fence, op.FenceExpiresMs = req.GetFence(), time.Now().Add(fenceLease).UnixMilli()
	}
	var (
		res applyResult
		idx uint64
		err error
	)
	if refs := req.GetCollections(); len(refs) > 0 {
		// A cluster cut: one entry for every collection, proposed
		// without one of its own; the leader's apply resolves them.
		op.Version, op.Collections = clusterCutVersion, refs
		res, idx, err = s.proposeCommand(ctx, &shardpb.Command{Op: &shardpb.Command_BackupCut{BackupCut: op}})
	} else {
		col, rerr := s.cfg.Collections.resolve(req.GetCollection())
		if rerr != nil {
			if !s.cfg.Node.IsLeader() {
				return fwd(s.notLeader())
			}
			return nil, rerr
		}
		res, idx, err = s.propose(ctx, col, &shardpb.Command{Op: &shardpb.Command_BackupCut{BackupCut: op}})
	}
	if err != nil {
		return fwd(err)
	}
	return &shardpb.BackupCutResponse{Index: idx, Lifted: res.found}, nil
}

// Backup implements shardpb.ShardServer. The replica answering must be
// serving (it applies the cut as a follower or leader does any entry);
// it waits for its own apply of the cut, within the call's deadline.
// Every write acknowledged before the call began is before the cut in
// the log, so it is in the stream; rows are read from copy-on-write
// views, so writes applied meanwhile wait at most one chunk's read. A
// request with parts (a cluster backup) cuts every part's collection at
// one entry and streams them in turn.
func (s *Server) Backup(req *shardpb.BackupRequest, stream shardpb.Shard_BackupServer) error {
	ctx := stream.Context()
	if err := s.readable(ctx, 0); err != nil {
		return err
	}
	parts := req.GetParts()
	if len(parts) == 0 {
		parts = []*shardpb.BackupPart{{Collection: req.GetCollection(), Slots: req.GetSlots()}}
	} else if req.GetCollection() != nil {
		return status.Error(codes.InvalidArgument, "a backup names either a collection or parts, not both")
	}
	keep := make([]func(string) bool, len(parts))
	refs := make([]*shardpb.CollectionRef, len(parts))
	for i, p := range parts {
		col, err := s.cfg.Collections.resolve(p.GetCollection())
		if err != nil {
			return err
		}
		if keep[i], err = s.cfg.Collections.slotReadFilter(col, p.GetSlots()); err != nil {
			return err
		}
		refs[i] = col.ref()
	}
	ch, cancel := s.cfg.Collections.cuts.expect(req.GetBackupId())
	defer cancel()
	cr := &shardpb.BackupCutRequest{BackupId: req.GetBackupId(), Fence: req.GetFence()}
	if len(req.GetParts()) > 0 {
		cr.Collections = refs
	} else {
		cr.Collection = req.GetCollection()
	}
	if _, err := s.proposeCut(ctx, cr); err != nil {
		return err
	}
	var got cut
	select {
	case got = <-ch:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	defer got.close()
	for i, p := range got.parts {
		if p.err != nil {
			if _, ok := status.FromError(p.err); ok {
				return p.err // the collection is gone
			}
			return status.Errorf(codes.Internal, "backup view of collection %q: %v", refs[i].GetName(), p.err)
		}
		if err := streamView(stream, got.index, p, keep[i], int(req.GetMaxChunkBytes())); err != nil {
			return err
		}
	}
	return nil
}

// streamView sends one collection's header and rows at the cut of index:
// every row of the view that keep admits (nil: all), in row order.
func streamView(stream shardpb.Shard_BackupServer, index uint64, got cutPart, keep func(string) bool, maxBytes int) error {
	v := got.view
	if maxBytes <= 0 {
		maxBytes = defaultBackupChunk
	}
	// Rows the slot filter leaves out are counted first, so the header's
	// count is exact and a reader can size its files before the rows.
	count := v.Len()
	if keep != nil {
		count = 0
		if err := v.Read(0, v.Len(), func(id string, _ []float32, _ []byte) error {
			if keep(id) {
				count++
			}
			return nil
		}); err != nil {
			return err
		}
	}
	p := v.Placement()
	hdr := &shardpb.BackupHeader{Index: index, Count: uint64(count), Entry: got.entry,
		Placement: &shardpb.Placement{Fingerprint: p.Fingerprint, Shard: p.Shard},
		// The scale the view's int8 codes were encoded with: the backup
		// writes the codes from the rows with it, as every replica does.
		Int8Scale: v.Trained()[store.TrainedInt8Scale]}
	if err := stream.Send(&shardpb.BackupChunk{Header: hdr}); err != nil {
		return err
	}
	rowBytes := 4 * max(v.Dim(), 1)
	per := max(1, maxBytes/rowBytes)
	for from := 0; from < v.Len(); from += snapshotChunk {
		var out []*shardpb.Vector
		err := v.Read(from, min(from+snapshotChunk, v.Len()), func(id string, vec []float32, payload []byte) error {
			if keep != nil && !keep(id) {
				return nil
			}
			out = append(out, &shardpb.Vector{Id: id, Vector: vector.EncodeLE(vec), Payload: payload})
			return nil
		})
		if err != nil {
			return err
		}
		for len(out) > 0 {
			n := min(per, len(out))
			if err := stream.Send(&shardpb.BackupChunk{Vectors: out[:n]}); err != nil {
				return err
			}
			out = out[n:]
		}
	}
	return nil
}
