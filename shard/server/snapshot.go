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

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// Snapshot formats (SnapshotHeader.format).
const (
	// formatLegacy is a snapshot written before collections: one store's
	// rows, which are the legacy collection's.
	formatLegacy = 0
	// formatCollections is the catalog, then for each of its collections
	// in catalog (name) order a CollectionHeader and its rows.
	formatCollections = 2
)

// writeHeader writes a snapshot header with its maps (dropped, trained)
// in key order, so replicas that hold the same state write the same bytes.
func writeHeader(w io.Writer, hdr proto.Message) error {
	_, err := protodelim.MarshalOptions{MarshalOptions: proto.MarshalOptions{Deterministic: true}}.MarshalTo(w, hdr)
	return err
}

// snapshotChunk is how many rows a snapshot reads under one hold of the
// store's read lock: large enough to stream fast, small enough that a
// write waits at most about a millisecond.
const snapshotChunk = 256

// Snapshot implements raftnode.StateMachine: the catalog and a
// copy-on-write view of every collection's store, streamed while writes
// go on. Raft calls it between applies, so the views and the catalog are
// the state at applied.
func (f *stateMachine) Snapshot(applied uint64) (raftnode.Snapshot, error) {
	cols, cat := f.cols.held()
	s := &snapshot{applied: applied, catalog: cat, log: f.log}
	for _, c := range cols {
		v, err := c.mem.OpenView()
		if err != nil {
			s.Release()
			return nil, fmt.Errorf("snapshot of collection %q: %w", c.name, err)
		}
		s.sections = append(s.sections, snapshotSection{col: c, v: v})
	}
	return s, nil
}

// snapshot streams a format-2 snapshot: a SnapshotHeader with the
// catalog, then per collection a CollectionHeader and one
// length-delimited shardpb.Vector per row.
type snapshot struct {
	applied  uint64
	catalog  *shardpb.CatalogResponse
	sections []snapshotSection
	log      *slog.Logger
}

type snapshotSection struct {
	col *collection
	v   *store.View
}

// Persist implements raftnode.Snapshot.
func (s *snapshot) Persist(w io.Writer) error {
	t0 := time.Now()
	bw := bufio.NewWriterSize(w, 1<<20)
	hdr := &shardpb.SnapshotHeader{Format: formatCollections, Catalog: s.catalog, AppliedIndex: s.applied}
	if err := writeHeader(bw, hdr); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	rows := 0
	for _, sec := range s.sections {
		if err := sec.persist(bw); err != nil {
			return fmt.Errorf("snapshot of collection %q: %w", sec.col.name, err)
		}
		rows += sec.v.Len()
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	s.log.Info("snapshot written", "collections", len(s.sections), "rows", rows, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

func (sec snapshotSection) persist(bw *bufio.Writer) error {
	v := sec.v
	n := v.Len()
	p := v.Placement()
	hdr := &shardpb.CollectionHeader{
		Name:      sec.col.name,
		Uid:       sec.col.uid,
		Placement: &shardpb.Placement{Fingerprint: p.Fingerprint, Shard: p.Shard},
		Count:     uint64(n),
		Trained:   v.Trained(),
	}
	if err := writeHeader(bw, hdr); err != nil {
		return err
	}
	pv := &shardpb.Vector{}
	buf := make([]byte, 0, 4*v.Dim())
	for from := 0; from < n; from += snapshotChunk {
		err := v.Read(from, min(from+snapshotChunk, n), func(id string, vec []float32, payload []byte) error {
			buf = vector.AppendLE(buf[:0], vec)
			pv.Id, pv.Vector, pv.Payload = id, buf, payload
			_, err := protodelim.MarshalTo(bw, pv)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Release implements raftnode.Snapshot.
func (s *snapshot) Release() {
	for _, sec := range s.sections {
		sec.v.Close()
	}
}

// restoreBatch is how many rows a restore inserts per lock hold.
const restoreBatch = 1024

// maxPresizeRows bounds how many rows a snapshot's header may make Restore
// reserve room for up front (past it the store grows as rows arrive).
const maxPresizeRows = 1 << 24

// Restore implements raftnode.StateMachine: it replaces the catalog and
// every store with a snapshot's, on start-up (the latest local snapshot)
// and when a leader installs one. Collections the snapshot lacks are
// dropped, and every store is emptied before any row is read, so a
// restore holds the snapshot's rows and not the ones they replace as
// well. A format-0 snapshot (written before collections) is the legacy
// collection's.
func (f *stateMachine) Restore(rc io.Reader) (uint64, error) {
	t0 := time.Now()
	br := bufio.NewReaderSize(rc, 1<<20)
	var hdr shardpb.SnapshotHeader
	if err := protodelim.UnmarshalFrom(br, &hdr); err != nil {
		return 0, fmt.Errorf("snapshot header: %w", err)
	}
	var (
		rows int
		err  error
	)
	switch hdr.GetFormat() {
	case formatLegacy:
		rows, err = f.restoreLegacy(br, &hdr)
	case formatCollections:
		rows, err = f.restoreCollections(br, hdr.GetCatalog())
	default:
		return 0, fmt.Errorf("snapshot format %d is not one this replica reads (0 or %d): a newer version wrote it", hdr.GetFormat(), formatCollections)
	}
	if err != nil {
		return 0, err
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return 0, errors.New("snapshot has data after its last collection")
	}
	f.log.Info("snapshot restored", "rows", rows, "took", time.Since(t0).Round(time.Millisecond))
	return hdr.GetAppliedIndex(), nil
}

// restoreLegacy restores a format-0 snapshot into the legacy collection,
// created with the Legacy settings. A snapshot of a replica that was never
// written (no rows, placement or trained value) holds no collection, as
// replaying its log would not create one either.
func (f *stateMachine) restoreLegacy(br *bufio.Reader, hdr *shardpb.SnapshotHeader) (int, error) {
	legacy := f.cols.LegacySettings()
	if int(hdr.GetDim()) != legacy.Dim {
		return 0, fmt.Errorf("snapshot written before collections holds %d-dimensional vectors; the legacy collection %q has --dim %d",
			hdr.GetDim(), shard.LegacyCollection, legacy.Dim)
	}
	cat := &shardpb.CatalogResponse{}
	written := hdr.GetCount() > 0 || hdr.GetPlacement().GetFingerprint() != "" || len(hdr.GetTrained()) > 0
	if written {
		cat.Collections = []*shardpb.CollectionEntry{{Name: shard.LegacyCollection, Settings: settingsToPB(legacy)}}
	}
	cols, err := f.cols.beginRestore(cat)
	if err != nil {
		return 0, err
	}
	defer f.cols.finishRestore()
	if !written {
		return 0, nil
	}
	sec := &shardpb.CollectionHeader{
		Name: shard.LegacyCollection, Placement: hdr.GetPlacement(), Count: hdr.GetCount(), Trained: hdr.GetTrained(),
	}
	return f.restoreRows(br, cols[0], sec)
}

// restoreCollections restores a format-2 snapshot: cat, then each of its
// collections' rows.
func (f *stateMachine) restoreCollections(br *bufio.Reader, cat *shardpb.CatalogResponse) (int, error) {
	cols, err := f.cols.beginRestore(cat)
	if err != nil {
		return 0, err
	}
	defer f.cols.finishRestore()
	rows := 0
	for _, col := range cols {
		var sec shardpb.CollectionHeader
		if err := protodelim.UnmarshalFrom(br, &sec); err != nil {
			return 0, fmt.Errorf("snapshot section of collection %q: %w", col.name, err)
		}
		if sec.GetName() != col.name || sec.GetUid() != col.uid {
			return 0, fmt.Errorf("snapshot section of collection %q uid %d where the catalog lists %q uid %d",
				sec.GetName(), sec.GetUid(), col.name, col.uid)
		}
		n, err := f.restoreRows(br, col, &sec)
		if err != nil {
			return 0, err
		}
		rows += n
	}
	return rows, nil
}

// restoreRows loads one collection's rows into its (emptied) store.
func (f *stateMachine) restoreRows(br *bufio.Reader, col *collection, sec *shardpb.CollectionHeader) (int, error) {
	mem := col.mem
	p := store.Placement{Fingerprint: sec.GetPlacement().GetFingerprint(), Shard: sec.GetPlacement().GetShard()}
	total := sec.GetCount()
	// The count is the snapshot's own claim: it sizes the store only up to
	// what a shard can hold, so a corrupt header cannot ask for terabytes.
	mem.Reset(p, sec.GetTrained(), int(min(total, maxPresizeRows)))
	f.log.Info("restoring snapshot", "collection", col.name, "rows", total)
	dim := mem.Dim()
	// One buffer of vectors for a batch, reused: Upsert copies the rows
	// into the arena, so a row needs no allocation of its own.
	vecs := make([]float32, restoreBatch*dim)
	batch := make([]store.Record, 0, restoreBatch)
	last := time.Now()
	opts := protodelim.UnmarshalOptions{MaxSize: 128 << 20}
	var pv shardpb.Vector
	// readBatch decodes up to restoreBatch rows from row i on and inserts
	// them: one piece of paced work (decoding and inserting 1024 rows of
	// 1536-D takes a few ms of one core).
	readBatch := func(i uint64) (uint64, error) {
		batch = batch[:0]
		for ; i < total && len(batch) < restoreBatch; i++ {
			pv.Reset()
			if err := opts.UnmarshalFrom(br, &pv); err != nil {
				return i, fmt.Errorf("snapshot of collection %q, row %d of %d: %w", col.name, i, total, err)
			}
			raw := pv.GetVector()
			if len(raw) != 4*dim {
				return i, fmt.Errorf("snapshot of collection %q, row %d: bad vector", col.name, i)
			}
			vec := vecs[len(batch)*dim : (len(batch)+1)*dim]
			for j := range vec {
				vec[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
			}
			batch = append(batch, store.Record{ID: pv.GetId(), Vector: vec, Payload: pv.GetPayload()})
		}
		return i, mem.Upsert(context.Background(), p, batch)
	}
	for i := uint64(0); i < total; {
		var err error
		if f.pace == nil {
			i, err = readBatch(i)
		} else {
			// The context never ends: raft waits for the restore.
			_ = f.pace.Do(context.Background(), func() { i, err = readBatch(i) })
		}
		if err != nil {
			return 0, err
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			f.log.Info("restoring snapshot", "collection", col.name, "rows", i, "of", total)
		}
	}
	if err := mem.FinishRestore(context.Background(), f.pace); err != nil {
		f.log.Error("restored int8 scale not usable; scanning exactly", "collection", col.name, "err", err)
	}
	return int(total), nil
}
