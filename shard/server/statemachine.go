package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// stateMachine is the shard's replicated state machine: committed log
// entries (shardpb.Command) applied to the store. Every check that decides
// what a command does (the placement check) happens here, on every replica
// alike, so replicas that apply the same log hold the same bytes.
type stateMachine struct {
	mem *store.Memory
	log *slog.Logger
	// onChange, when set, is told the document count after each apply
	// and restore (the documents gauge).
	onChange func(docs int)
}

// NewStateMachine returns the state machine that applies a shard's log to
// mem, for raftnode.Config. onChange, when set, is told the document count
// after each apply and restore.
func NewStateMachine(mem *store.Memory, log *slog.Logger, onChange func(docs int)) raftnode.StateMachine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &stateMachine{mem: mem, log: log, onChange: onChange}
}

// applyResult is what Apply returns to the leader that proposed the entry.
type applyResult struct {
	err   error // a gRPC status error: the command was committed but refused
	found bool  // delete: the id was there
	// deleted is how many documents a delete removed.
	deleted int
	docs    int
}

// Apply implements raftnode.StateMachine.
func (f *stateMachine) Apply(e raftnode.Entry) any {
	var cmd shardpb.Command
	if err := proto.Unmarshal(e.Data, &cmd); err != nil {
		// Only our own leader proposes entries, so this is a bug; every
		// replica skips the entry alike.
		f.log.Error("undecodable log entry skipped", "index", e.Index, "err", err)
		return applyResult{err: status.Errorf(codes.Internal, "undecodable log entry %d: %v", e.Index, err)}
	}
	res := f.apply(&cmd, e.Serving)
	res.docs = f.mem.Len()
	if f.onChange != nil {
		f.onChange(res.docs)
	}
	return res
}

// Ready implements raftnode.StateMachine: an IVF store serves once its
// index is built.
func (f *stateMachine) Ready() bool { return f.mem.IndexReady() }

func (f *stateMachine) apply(cmd *shardpb.Command, serving bool) applyResult {
	ctx := context.Background()
	switch op := cmd.GetOp().(type) {
	case *shardpb.Command_Upsert:
		p, err := placementCheck(f.mem.Placement(), op.Upsert.GetPlacement())
		if err != nil {
			return applyResult{err: err}
		}
		recs := make([]store.Record, len(op.Upsert.GetVectors()))
		for i, v := range op.Upsert.GetVectors() {
			vec, err := shard.DecodeVector(v.GetVector())
			if err != nil || len(vec) != f.mem.Dim() {
				return applyResult{err: status.Errorf(codes.Internal, "log entry vector %d does not fit the store", i)}
			}
			recs[i] = store.Record{ID: v.GetId(), Vector: vec, Payload: v.GetPayload()}
		}
		return applyResult{err: f.mem.Upsert(ctx, p, recs)}
	case *shardpb.Command_Delete:
		p, err := placementCheck(f.mem.Placement(), op.Delete.GetPlacement())
		if err != nil {
			return applyResult{err: err}
		}
		d := op.Delete
		if len(d.GetIds()) == 0 && len(d.GetFilter()) == 0 {
			found, err := f.mem.Delete(ctx, p, d.GetId())
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
		n, err := f.mem.DeleteMatching(ctx, p, ids, flt)
		return applyResult{err: err, found: n > 0, deleted: n}
	case *shardpb.Command_SetTrained:
		if err := f.mem.SetTrained(op.SetTrained.GetName(), op.SetTrained.GetValue(), serving); err != nil {
			f.log.Error("trained value not usable; scanning exactly", "name", op.SetTrained.GetName(), "err", err)
		}
		return applyResult{}
	}
	return applyResult{err: status.Error(codes.Internal, "log entry with no operation")}
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

// snapshotChunk is how many rows a snapshot reads under one hold of the
// store's read lock: large enough to stream fast, small enough that a
// write waits at most about a millisecond.
const snapshotChunk = 256

// Snapshot implements raftnode.StateMachine: a copy-on-write view of the
// store, streamed while writes go on.
func (f *stateMachine) Snapshot(applied uint64) (raftnode.Snapshot, error) {
	v, err := f.mem.OpenView()
	if err != nil {
		return nil, err
	}
	return &snapshot{v: v, applied: applied, log: f.log}, nil
}

// snapshot streams a View: a SnapshotHeader, then one length-delimited
// shardpb.Vector per row.
type snapshot struct {
	v       *store.View
	applied uint64
	log     *slog.Logger
}

// Persist implements raftnode.Snapshot.
func (s *snapshot) Persist(w io.Writer) error {
	t0 := time.Now()
	bw := bufio.NewWriterSize(w, 1<<20)
	n := s.v.Len()
	p := s.v.Placement()
	hdr := &shardpb.SnapshotHeader{
		Dim:          uint32(s.v.Dim()),
		Placement:    &shardpb.Placement{Fingerprint: p.Fingerprint, Shard: p.Shard},
		Count:        uint64(n),
		Trained:      s.v.Trained(),
		AppliedIndex: s.applied,
	}
	if _, err := protodelim.MarshalTo(bw, hdr); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	pv := &shardpb.Vector{}
	buf := make([]byte, 0, 4*s.v.Dim())
	for from := 0; from < n; from += snapshotChunk {
		err := s.v.Read(from, min(from+snapshotChunk, n), func(id string, vec []float32, payload []byte) error {
			buf = vector.AppendLE(buf[:0], vec)
			pv.Id, pv.Vector, pv.Payload = id, buf, payload
			_, err := protodelim.MarshalTo(bw, pv)
			return err
		})
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	s.log.Info("snapshot written", "rows", n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// Release implements raftnode.Snapshot.
func (s *snapshot) Release() { s.v.Close() }

// restoreBatch is how many rows a restore inserts per lock hold.
const restoreBatch = 1024

// maxPresizeRows bounds how many rows a snapshot's header may make Restore
// reserve room for up front (past it the store grows as rows arrive).
const maxPresizeRows = 1 << 24

// Restore implements raftnode.StateMachine: it replaces the store with a
// snapshot, on start-up (the latest local snapshot) and when a leader
// installs one.
func (f *stateMachine) Restore(rc io.Reader) (uint64, error) {
	t0 := time.Now()
	br := bufio.NewReaderSize(rc, 1<<20)
	var hdr shardpb.SnapshotHeader
	if err := protodelim.UnmarshalFrom(br, &hdr); err != nil {
		return 0, fmt.Errorf("snapshot header: %w", err)
	}
	if int(hdr.GetDim()) != f.mem.Dim() {
		return 0, fmt.Errorf("snapshot holds %d-dimensional vectors, this shard has --dim %d", hdr.GetDim(), f.mem.Dim())
	}
	p := store.Placement{Fingerprint: hdr.GetPlacement().GetFingerprint(), Shard: hdr.GetPlacement().GetShard()}
	total := hdr.GetCount()
	// The count is the snapshot's own claim: it sizes the store only up to
	// what a shard can hold, so a corrupt header cannot ask for terabytes.
	f.mem.Reset(p, hdr.GetTrained(), int(min(total, maxPresizeRows)))
	f.log.Info("restoring snapshot", "rows", total)
	dim := f.mem.Dim()
	// One buffer of vectors for a batch, reused: Upsert copies the rows
	// into the arena, so a row needs no allocation of its own.
	vecs := make([]float32, restoreBatch*dim)
	batch := make([]store.Record, 0, restoreBatch)
	last := time.Now()
	flush := func() error {
		err := f.mem.Upsert(context.Background(), p, batch)
		batch = batch[:0]
		return err
	}
	opts := protodelim.UnmarshalOptions{MaxSize: 128 << 20}
	var pv shardpb.Vector
	for i := uint64(0); i < total; i++ {
		pv.Reset()
		if err := opts.UnmarshalFrom(br, &pv); err != nil {
			return 0, fmt.Errorf("snapshot row %d of %d: %w", i, total, err)
		}
		raw := pv.GetVector()
		if len(raw) != 4*dim {
			return 0, fmt.Errorf("snapshot row %d: bad vector", i)
		}
		vec := vecs[len(batch)*dim : (len(batch)+1)*dim]
		for j := range vec {
			vec[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		batch = append(batch, store.Record{ID: pv.GetId(), Vector: vec, Payload: pv.GetPayload()})
		if len(batch) == restoreBatch {
			if err := flush(); err != nil {
				return 0, err
			}
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			f.log.Info("restoring snapshot", "rows", i+1, "of", total)
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("snapshot has data after its %d rows", total)
	}
	if err := f.mem.FinishRestore(); err != nil {
		f.log.Error("restored int8 scale not usable; scanning exactly", "err", err)
	}
	if f.onChange != nil {
		f.onChange(f.mem.Len())
	}
	f.log.Info("snapshot restored", "rows", total, "took", time.Since(t0).Round(time.Millisecond))
	return hdr.GetAppliedIndex(), nil
}
