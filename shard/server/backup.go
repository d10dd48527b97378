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
// applies.
const backupCutVersion = 1

// defaultBackupChunk bounds the vector bytes of one Backup chunk: well
// under the router's 64 MiB receive limit, large enough to stream fast.
const defaultBackupChunk = 2 << 20

// cut is what a replica captured when it applied a backup cut entry.
type cut struct {
	index uint64
	entry *shardpb.CollectionEntry
	view  *store.View
	err   error
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
			if got.view != nil {
				got.view.Close()
			}
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

// applyBackupCut applies a cut entry: the exporting replica's view of col,
// and the fence it raises or lifts. A lift answers found when its fence
// was still in place.
func (f *stateMachine) applyBackupCut(col *collection, op *shardpb.BackupCutCommand, index uint64, proposedMs int64) applyResult {
	if op.GetVersion() != backupCutVersion {
		// A newer router's cut: every replica ignores it alike.
		return applyResult{err: status.Errorf(codes.FailedPrecondition, "backup cut version %d is not known to this replica", op.GetVersion())}
	}
	if name := op.GetLift(); name != "" {
		end, ok := col.fences[name]
		delete(col.fences, name)
		return applyResult{found: ok && end > proposedMs}
	}
	if name := op.GetFence(); name != "" {
		if col.fences == nil {
			col.fences = map[string]int64{}
		}
		col.fences[name] = op.GetFenceExpiresMs()
	}
	f.cols.cuts.deliver(op.GetBackupId(), index, func() cut {
		v, err := col.mem.OpenView()
		return cut{entry: f.cols.entryOf(col), view: v, err: err}
	})
	return applyResult{}
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
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		if !s.cfg.Node.IsLeader() {
			return fwd(s.notLeader())
		}
		return nil, err
	}
	op := &shardpb.BackupCutCommand{Version: backupCutVersion, BackupId: req.GetBackupId(), Lift: req.GetLift()}
	if req.GetLift() == "" && req.GetFence() != "" {
		op.Fence, op.FenceExpiresMs = req.GetFence(), time.Now().Add(fenceLease).UnixMilli()
	}
	res, idx, err := s.propose(ctx, col, &shardpb.Command{Op: &shardpb.Command_BackupCut{BackupCut: op}})
	if err != nil {
		return fwd(err)
	}
	return &shardpb.BackupCutResponse{Index: idx, Lifted: res.found}, nil
}

// Backup implements shardpb.ShardServer. The replica answering must be
// serving (it applies the cut as a follower or leader does any entry);
// it waits for its own apply of the cut, within the call's deadline.
// Every write acknowledged before the call began is before the cut in
// the log, so it is in the stream; rows are read from a copy-on-write
// view, so writes applied meanwhile wait at most one chunk's read.
func (s *Server) Backup(req *shardpb.BackupRequest, stream shardpb.Shard_BackupServer) error {
	ctx := stream.Context()
	if err := s.readable(ctx, 0); err != nil {
		return err
	}
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		return err
	}
	keep, err := s.cfg.Collections.slotReadFilter(col, req.GetSlots())
	if err != nil {
		return err
	}
	ch, cancel := s.cfg.Collections.cuts.expect(req.GetBackupId())
	defer cancel()
	if _, err := s.proposeCut(ctx, &shardpb.BackupCutRequest{BackupId: req.GetBackupId(), Fence: req.GetFence(), Collection: req.GetCollection()}); err != nil {
		return err
	}
	var got cut
	select {
	case got = <-ch:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	if got.err != nil {
		return status.Errorf(codes.Internal, "backup view of collection %q: %v", col.name, got.err)
	}
	defer got.view.Close()
	return streamView(stream, got, keep, int(req.GetMaxChunkBytes()))
}

// streamView sends a cut's header and rows: every row of the view that
// keep admits (nil: all), in row order.
func streamView(stream shardpb.Shard_BackupServer, got cut, keep func(string) bool, maxBytes int) error {
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
	hdr := &shardpb.BackupHeader{Index: got.index, Count: uint64(count), Entry: got.entry,
		Placement: &shardpb.Placement{Fingerprint: p.Fingerprint, Shard: p.Shard}}
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
