package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/segment"
)

// Snapshot formats (SnapshotHeader.format).
const (
	// formatLegacy is a snapshot written before collections: one store's
	// rows, which are the legacy collection's.
	formatLegacy = 0
	// formatCollections is the catalog, then for each of its collections
	// in catalog (name) order a CollectionHeader and its rows.
	formatCollections = 2
	// formatSegments is formatCollections where a collection whose rows
	// are segment files has their manifest in its CollectionHeader and
	// its ids and payloads in place of its rows; the files are linked
	// into the snapshot (raftnode.SnapshotSink.Link), not copied.
	formatSegments = 3
	// formatCodes is formatSegments where segment files may keep int8
	// codes beside the rows (SegmentManifest.codes_tag): each segment's
	// codes file is linked after its rows' file. A replica that reads
	// format 3 only would place the files out of order, so it is told a
	// newer version wrote the snapshot instead.
	formatCodes = 4
	// formatSparse is formatCodes where a collection's header may carry
	// its sparse indexes' postings (CollectionHeader.sparse), installed
	// after its rows as they are. A replica that reads format 4 only
	// would restore the rows without the postings, so it is told a newer
	// version wrote the snapshot instead.
	formatSparse = 5
	// formatNamed is formatSparse where a row's Vector record may carry
	// its named dense vectors (Vector.named). A replica that reads format
	// 5 only would restore the points without them, so it is told a
	// newer version wrote the snapshot instead.
	formatNamed = 6
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
		s.sections = append(s.sections, snapshotSection{col: c, v: v, fences: maps.Clone(c.fences)})
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
	// fences are the collection's backup fences at the snapshot's index.
	fences map[string]int64
}

// Persist implements raftnode.Snapshot. A collection whose rows are in
// segment files is written as their manifest, its ids and payloads, and
// the files linked into the snapshot once synced, when w links files;
// every other collection streams its rows.
func (s *snapshot) Persist(w raftnode.SnapshotSink) error {
	t0 := time.Now()
	bw := bufio.NewWriterSize(w, 1<<20)
	format := uint32(formatCollections)
	if w.Links() {
		for _, sec := range s.sections {
			if man, ok := sec.v.Segments(); ok {
				format = max(format, formatSegments)
				if man.CodesTag != nil {
					format = formatCodes
				}
			}
		}
	}
	// Whether segment files are linked is decided above; postings only
	// raise the format number.
	linked := format >= formatSegments
	for _, sec := range s.sections {
		if len(sec.v.Sparse()) > 0 {
			format = max(format, formatSparse)
		}
		if len(sec.col.settings.Named) > 0 {
			format = formatNamed
		}
	}
	hdr := &shardpb.SnapshotHeader{Format: format, Catalog: s.catalog, AppliedIndex: s.applied}
	if err := writeHeader(bw, hdr); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	rows, files := 0, 0
	for _, sec := range s.sections {
		var err error
		if man, ok := sec.v.Segments(); ok && linked {
			err = sec.persistSegments(bw, w, man)
			files += len(man.Files)
			if man.CodesTag != nil {
				files += len(man.Files)
			}
		} else {
			err = sec.persist(bw)
		}
		if err != nil {
			return fmt.Errorf("snapshot of collection %q: %w", sec.col.name, err)
		}
		rows += sec.v.Len()
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	s.log.Info("snapshot written", "collections", len(s.sections), "rows", rows, "files_linked", files,
		"took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// encodeLists is CollectionHeader.ivf_lists of each row's IVF list.
func encodeLists(lists []int32) []byte {
	if lists == nil {
		return nil
	}
	b := make([]byte, 0, 4*len(lists))
	for _, l := range lists {
		b = binary.LittleEndian.AppendUint32(b, uint32(l))
	}
	return b
}

// decodeLists reads CollectionHeader.ivf_lists for rows rows; nil when
// absent or of another length (the index is then built from the rows).
func decodeLists(b []byte, rows int) []int32 {
	if len(b) == 0 || len(b) != 4*rows {
		return nil
	}
	out := make([]int32, rows)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// snapshotFileName is a segment file's name in a snapshot.
func snapshotFileName(col *collection, file string) string {
	return fmt.Sprintf("%s.%d-%s", col.name, col.uid, file)
}

// persistSegments writes a collection whose rows are in segment files:
// its header with their manifest, each row's id and payload, and links
// the files, synced first so the rows the manifest names are on disk
// before raft counts the snapshot as taken.
func (sec snapshotSection) persistSegments(bw *bufio.Writer, w raftnode.SnapshotSink, man segment.Manifest) error {
	v := sec.v
	p := v.Placement()
	pm := &shardpb.SegmentManifest{Dim: uint32(man.Dim), SegRows: uint32(man.SegRows), Seq: man.Seq, Active: int32(man.Active),
		Slots: make([]byte, 0, 4*len(man.Slots)), CodesTag: man.CodesTag}
	for _, sl := range man.Slots {
		pm.Slots = binary.LittleEndian.AppendUint32(pm.Slots, sl)
	}
	for _, f := range man.Files {
		pf := &shardpb.SegmentFile{Number: uint32(f.Number), Name: f.Name, Rows: uint32(f.Rows), Bytes: uint64(f.Bytes)}
		if f.Codes != nil {
			pf.CodesName, pf.CodesBytes = f.Codes.Name, uint64(f.Codes.Bytes)
		}
		pm.Files = append(pm.Files, pf)
	}
	hdr := &shardpb.CollectionHeader{
		Name:      sec.col.name,
		Uid:       sec.col.uid,
		Placement: &shardpb.Placement{Fingerprint: p.Fingerprint, Shard: p.Shard},
		Count:     uint64(v.Len()),
		Trained:   v.Trained(),
		Segments:  pm,
		IvfLists:  encodeLists(v.IVFLists()),
		Fences:    sec.fences,
		Sparse:    postingsPB(v.Sparse()),
	}
	if err := writeHeader(bw, hdr); err != nil {
		return err
	}
	pv := &shardpb.Vector{}
	err := v.Records(func(id string, payload []byte) error {
		pv.Id, pv.Payload = id, payload
		_, err := protodelim.MarshalTo(bw, pv)
		return err
	})
	if err != nil {
		return err
	}
	if err := v.SyncSegments(); err != nil {
		return err
	}
	// In the order Restore places them (segment.Restore): each rows'
	// file, then its codes file.
	for _, f := range man.Files {
		if err := w.Link(f.Path, snapshotFileName(sec.col, f.Name), f.Bytes); err != nil {
			return err
		}
		if f.Codes != nil {
			if err := w.Link(f.Codes.Path, snapshotFileName(sec.col, f.Codes.Name), f.Codes.Bytes); err != nil {
				return err
			}
		}
	}
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
		IvfLists:  encodeLists(v.IVFLists()),
		Fences:    sec.fences,
		Sparse:    postingsPB(v.Sparse()),
	}
	if err := writeHeader(bw, hdr); err != nil {
		return err
	}
	pv := &shardpb.Vector{}
	buf := make([]byte, 0, 4*v.Dim())
	for from := 0; from < n; from += snapshotChunk {
		err := v.ReadRecords(from, min(from+snapshotChunk, n), func(r store.Record) error {
			buf = vector.AppendLE(buf[:0], r.Vector)
			pv.Id, pv.Vector, pv.Payload, pv.Named = r.ID, buf, r.Payload, namedToPB(r.Named)
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
func (f *stateMachine) Restore(rc io.Reader, files raftnode.SnapshotFiles) (uint64, error) {
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
	case formatCollections, formatSegments, formatCodes, formatSparse, formatNamed:
		rows, err = f.restoreCollections(br, hdr.GetCatalog(), files)
	default:
		return 0, fmt.Errorf("snapshot format %d is not one this replica reads (0, %d, %d, %d, %d or %d): a newer version wrote it",
			hdr.GetFormat(), formatCollections, formatSegments, formatCodes, formatSparse, formatNamed)
	}
	if err != nil {
		return 0, err
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
		return 0, endOfSnapshot(br)
	}
	sec := &shardpb.CollectionHeader{
		Name: shard.LegacyCollection, Placement: hdr.GetPlacement(), Count: hdr.GetCount(), Trained: hdr.GetTrained(),
	}
	n, err := f.restoreRows(br, cols[0], sec)
	if err != nil {
		return 0, err
	}
	return n, endOfSnapshot(br)
}

// endOfSnapshot checks that the state stream ends after its last
// collection.
func endOfSnapshot(br *bufio.Reader) error {
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return errors.New("snapshot has data after its last collection")
	}
	return nil
}

// restoreCollections restores a format-2 or format-3 snapshot: cat, then
// each of its collections' rows. The collections whose rows are segment
// files are restored once the whole state is read: their files follow
// it in a stream received from a peer.
func (f *stateMachine) restoreCollections(br *bufio.Reader, cat *shardpb.CatalogResponse, files raftnode.SnapshotFiles) (int, error) {
	cols, err := f.cols.beginRestore(cat)
	if err != nil {
		return 0, err
	}
	defer f.cols.finishRestore()
	type pending struct {
		col  *collection
		sec  *shardpb.CollectionHeader
		recs []store.Record
		took time.Duration // reading recs
	}
	var later []pending
	rows := 0
	hopts := protodelim.UnmarshalOptions{MaxSize: 512 << 20}
	for _, col := range cols {
		sec := &shardpb.CollectionHeader{}
		if err := hopts.UnmarshalFrom(br, sec); err != nil {
			return 0, fmt.Errorf("snapshot section of collection %q: %w", col.name, err)
		}
		if sec.GetName() != col.name || sec.GetUid() != col.uid {
			return 0, fmt.Errorf("snapshot section of collection %q uid %d where the catalog lists %q uid %d",
				sec.GetName(), sec.GetUid(), col.name, col.uid)
		}
		col.fences = maps.Clone(sec.GetFences())
		if sec.GetSegments() == nil {
			n, err := f.restoreRows(br, col, sec)
			if err != nil {
				return 0, err
			}
			rows += n
			continue
		}
		t0 := time.Now()
		recs, err := readRecords(br, col, sec.GetCount())
		if err != nil {
			return 0, err
		}
		later = append(later, pending{col: col, sec: sec, recs: recs, took: time.Since(t0)})
	}
	if err := endOfSnapshot(br); err != nil {
		return 0, err
	}
	for _, p := range later {
		if files == nil {
			return 0, fmt.Errorf("snapshot of collection %q names segment files but carries none", p.col.name)
		}
		if err := f.restoreSegments(p.col, p.sec, p.recs, p.took, files); err != nil {
			return 0, fmt.Errorf("snapshot of collection %q: %w", p.col.name, err)
		}
		rows += len(p.recs)
	}
	return rows, nil
}

// readRecords reads the ids and payloads of a collection whose rows are
// segment files.
func readRecords(br *bufio.Reader, col *collection, count uint64) ([]store.Record, error) {
	opts := protodelim.UnmarshalOptions{MaxSize: 128 << 20}
	recs := make([]store.Record, 0, min(count, maxPresizeRows))
	var pv shardpb.Vector
	for i := uint64(0); i < count; i++ {
		pv.Reset()
		if err := opts.UnmarshalFrom(br, &pv); err != nil {
			return nil, fmt.Errorf("snapshot of collection %q, row %d of %d: %w", col.name, i, count, err)
		}
		if len(pv.GetVector()) != 0 {
			return nil, fmt.Errorf("snapshot of collection %q, row %d: a vector where its segment files hold the rows", col.name, i)
		}
		recs = append(recs, store.Record{ID: pv.GetId(), Payload: pv.GetPayload()})
	}
	return recs, nil
}

// restoreSegments restores a collection whose rows are segment files: the
// files are placed in its segment directory (linked from this replica's
// own snapshot, or copied from the stream) and mapped; no row is read.
// A store that keeps its rows in memory reads them from the files.
// recsTook is how long reading recs from the stream took, for the log.
func (f *stateMachine) restoreSegments(col *collection, sec *shardpb.CollectionHeader, recs []store.Record, recsTook time.Duration,
	files raftnode.SnapshotFiles) error {
	t0 := time.Now()
	pm := sec.GetSegments()
	if len(pm.GetSlots()) != 4*len(recs) {
		return fmt.Errorf("segment manifest of %d bytes of slots for %d rows", len(pm.GetSlots()), len(recs))
	}
	man := segment.Manifest{Dim: int(pm.GetDim()), SegRows: int(pm.GetSegRows()), Seq: pm.GetSeq(), Active: int(pm.GetActive()),
		Slots: make([]uint32, len(recs))}
	if len(pm.GetCodesTag()) > 0 {
		man.CodesTag = pm.GetCodesTag()
	}
	for i := range man.Slots {
		man.Slots[i] = binary.LittleEndian.Uint32(pm.GetSlots()[4*i:])
	}
	for _, sf := range pm.GetFiles() {
		file := segment.File{Number: int(sf.GetNumber()), Name: sf.GetName(), Rows: int(sf.GetRows()), Bytes: int64(sf.GetBytes())}
		if sf.GetCodesName() != "" {
			file.Codes = &segment.File{Number: file.Number, Name: sf.GetCodesName(), Rows: file.Rows, Bytes: int64(sf.GetCodesBytes())}
		}
		man.Files = append(man.Files, file)
	}
	place := func(sf segment.File, path string) error { return files.Place(snapshotFileName(col, sf.Name), path) }
	p := store.Placement{Fingerprint: sec.GetPlacement().GetFingerprint(), Shard: sec.GetPlacement().GetShard()}
	mem := col.mem
	var err error
	if mem.OnDisk() {
		err = mem.RestoreSegments(p, sec.GetTrained(), recs, man, place)
	} else {
		err = restoreSegmentsInMemory(mem, p, sec.GetTrained(), recs, man, place)
	}
	if err != nil {
		return err
	}
	if err := mem.RestoreSparse(postingsOf(sec)); err != nil {
		return err
	}
	t1 := time.Now()
	lists := decodeLists(sec.GetIvfLists(), len(recs))
	if err := mem.FinishRestore(context.Background(), f.pace, lists); err != nil {
		f.log.Error("restored int8 scale not usable; scanning exactly", "collection", col.name, "err", err)
	}
	f.log.Info("segments restored", "collection", col.name, "rows", len(recs), "files", len(man.Files),
		"codes_files", man.CodesTag != nil,
		"ivf_lists_restored", lists != nil && mem.IVFIndexed(), "took", time.Since(t0).Round(time.Millisecond),
		"ids_took", recsTook.Round(time.Millisecond), "files_took", t1.Sub(t0).Round(time.Millisecond),
		"codes_took", time.Since(t1).Round(time.Millisecond))
	return nil
}

// restoreSegmentsInMemory loads segment files' rows into a store that
// keeps its rows in memory (its segment directory was unusable): the
// files are placed in a temporary directory, read, and removed.
func restoreSegmentsInMemory(mem *store.Memory, p store.Placement, trained map[string][]byte, recs []store.Record,
	man segment.Manifest, place func(segment.File, string) error) error {
	tmp, err := os.MkdirTemp("", "trawl-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	set, err := segment.Restore(tmp, man, place)
	if err != nil {
		return err
	}
	defer set.Close()
	if set.Len() != len(recs) {
		return fmt.Errorf("segment files hold %d rows for %d ids", set.Len(), len(recs))
	}
	mem.Reset(p, trained, len(recs))
	for lo := 0; lo < len(recs); lo += restoreBatch {
		batch := slices.Clone(recs[lo:min(lo+restoreBatch, len(recs))])
		for i := range batch {
			batch[i].Vector = set.Row(lo + i)
		}
		if err := mem.Upsert(context.Background(), p, batch); err != nil {
			return err
		}
	}
	return nil
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
			named, ok := namedOfPB(col.settings, pv.GetNamed())
			if !ok {
				return i, fmt.Errorf("snapshot of collection %q, row %d: a named vector does not fit the collection", col.name, i)
			}
			batch = append(batch, store.Record{ID: pv.GetId(), Vector: vec, Payload: pv.GetPayload(), Named: named})
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
	if err := mem.RestoreSparse(postingsOf(sec)); err != nil {
		return 0, fmt.Errorf("snapshot of collection %q: %w", col.name, err)
	}
	if err := mem.FinishRestore(context.Background(), f.pace, decodeLists(sec.GetIvfLists(), int(total))); err != nil {
		f.log.Error("restored int8 scale not usable; scanning exactly", "collection", col.name, "err", err)
	}
	return int(total), nil
}

// postingsPB is a view's sparse indexes as a snapshot header carries them.
func postingsPB(ps []store.NamedPostings) []*shardpb.SparsePostings {
	out := make([]*shardpb.SparsePostings, len(ps))
	for i, p := range ps {
		out[i] = &shardpb.SparsePostings{Name: p.Name, Postings: p.Postings}
	}
	return out
}

// postingsOf is a snapshot section's sparse indexes for the store, which
// installs them as they are (store.Memory.RestoreSparse).
func postingsOf(sec *shardpb.CollectionHeader) []store.NamedPostings {
	out := make([]store.NamedPostings, len(sec.GetSparse()))
	for i, p := range sec.GetSparse() {
		out[i] = store.NamedPostings{Name: p.GetName(), Postings: p.GetPostings()}
	}
	return out
}
