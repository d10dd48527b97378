package store

import (
	"errors"
	"fmt"

	"github.com/trawl-search/trawl/vector/segment"
)

// Segments is the view's float32 rows as segment files, for a store on
// disk (ok false for one in memory): the snapshot links the files and
// records the manifest instead of copying the rows.
func (v *View) Segments() (segment.Manifest, bool) {
	if v.frozen == nil {
		return segment.Manifest{}, false
	}
	return v.frozen.Manifest(), true
}

// SyncSegments makes the view's rows in segment files durable (nothing
// for a store in memory). It holds no lock: the files' frozen rows are
// never written again.
func (v *View) SyncSegments() error {
	if v.frozen == nil {
		return nil
	}
	return v.frozen.Sync()
}

// Records calls fn with each row's id and payload, in row order, as they
// were when the view opened. It holds no lock: the view has its own copy
// of the ids, and a stored payload is never written in place.
func (v *View) Records(fn func(id string, payload []byte) error) error {
	for i, id := range v.ids {
		if err := fn(id, v.payloads[i]); err != nil {
			return err
		}
	}
	return nil
}

// RestoreSegments replaces the store's contents with a snapshot's whose
// float32 rows are segment files: recs are its rows' ids and payloads in
// row order (no vectors), man names the files, and place puts each file
// in the store's segment directory (segment.Restore). No row is copied or
// read. Call FinishRestore after, as after rows streamed in.
func (m *Memory) RestoreSegments(p Placement, trained map[string][]byte, recs []Record, man segment.Manifest,
	place func(f segment.File, path string) error) error {
	m.Reset(p, trained, len(recs))
	m.lock()
	defer m.mu.Unlock()
	switch {
	case m.disk == nil:
		return errors.New("snapshot rows are segment files, and this store keeps its rows in memory")
	case man.Dim != m.dim:
		return fmt.Errorf("snapshot segments hold %d-D rows, the store %d-D", man.Dim, m.dim)
	case len(man.Slots) != len(recs):
		return fmt.Errorf("snapshot segments hold %d rows for %d ids", len(man.Slots), len(recs))
	}
	for i, r := range recs {
		if _, dup := m.index[r.ID]; dup {
			clear(m.index)
			return fmt.Errorf("snapshot lists id %q twice", r.ID)
		}
		m.index[r.ID] = i
	}
	set, err := segment.Restore(m.disk.Dir(), man, place)
	if err != nil {
		clear(m.index)
		return err
	}
	// The emptied set's files, if a snapshot view still holds them, go
	// when it lets go.
	_ = m.disk.Close()
	m.disk = set
	defer m.payloadIndex.Flush()
	for i, r := range recs {
		m.ids = append(m.ids, r.ID)
		m.payloads = append(m.payloads, r.Payload)
		m.recBytes += len(r.ID) + len(r.Payload)
		m.payloadIndex.Add(uint32(i), decodePayload(r.Payload))
	}
	return nil
}

// diskCodes reports whether the segment files keep the int8 codes beside
// the rows (they then mirror m.codes, slot for slot). m.mu must be held.
func (m *Memory) diskCodes() bool { return m.disk != nil && m.disk.CodesTag() != nil }

// keepDiskCodes, with m.mu held for writing, makes the segment files keep
// the codes m.codes holds, encoded with the scale tag (its committed
// bytes), or none when m.codes is nil: a snapshot then links them and a
// restart copies them rather than encode every row. Codes files cost
// 1 540 bytes a 1536-D row on disk beside the rows' 6 144. A store in
// memory keeps no files.
func (m *Memory) keepDiskCodes(tag []byte) {
	if m.disk == nil {
		return
	}
	if m.codes == nil || tag == nil {
		diskFailed(m.disk.DisableCodes())
		return
	}
	diskFailed(m.disk.EnableCodes(tag, func(i int, dst []int8) float32 {
		copy(dst, m.codes.Row(i))
		return m.codes.Norm(i)
	}))
}
