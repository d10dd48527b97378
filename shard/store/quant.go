package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// Quantization is what a Memory keeps beside its float32 rows
// (--quantization).
type Quantization uint8

const (
	// QuantNone keeps the float32 rows alone; every scan is exact.
	QuantNone Quantization = iota
	// QuantInt8 keeps one int8 code per element (vector/quant) once the
	// group has committed a scale, and scans the codes for queries that do
	// not ask for "exact": true.
	QuantInt8
)

func (q Quantization) String() string {
	if q == QuantInt8 {
		return "int8"
	}
	return "none"
}

// LogValue logs the quantization by name ("int8"), not by number.
func (q Quantization) LogValue() slog.Value { return slog.StringValue(q.String()) }

// ParseQuantization parses --quantization: none or int8.
func ParseQuantization(s string) (Quantization, error) {
	switch s {
	case "", "none":
		return QuantNone, nil
	case "int8":
		return QuantInt8, nil
	}
	return QuantNone, fmt.Errorf("quantization %q: want none or int8", s)
}

// TrainedInt8Scale is the trained value (committed through the log) holding the
// shard's int8 scale, quant.Scale.MarshalBinary.
const TrainedInt8Scale = "int8-scale"

// DefaultInt8MinRows is how many rows a leader waits for before it trains
// the int8 scale. The per-shard scale is one clipped maximum over every
// element of the training rows; 1 000 rows of 1536-D are 1.5 million
// elements, enough for the clipped peak (quant.ClipFraction, one in a
// million) to set a spike aside instead of resting on one row, and a
// shard that small scans its float32 rows in well under a millisecond,
// so scanning exactly until then costs nothing. The scale is not
// retrained as the shard grows: rows beyond its range clamp to ±127,
// which only coarsens their candidate ranking (re-scoring stays exact).
const DefaultInt8MinRows = 1000

// maxTrainRows caps the rows a scale is trained from (the first rows of
// the store), so training a large shard that turns int8 on later holds
// the store's read lock for a bounded time (~0.3 s at 1536-D).
const maxTrainRows = 131072

// MemoryOption configures a Memory.
type MemoryOption func(*Memory)

// WithQuantization makes the store keep codes of kind q (QuantInt8) beside
// its rows once a scale is committed.
func WithQuantization(q Quantization) MemoryOption {
	return func(m *Memory) { m.quantization = q }
}

// Quantization is the store's --quantization.
func (m *Memory) Quantization() Quantization {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.quantization
}

// SetQuantization switches a flat store's int8 codes on or off online (a
// collection's settings changed through the log, so every replica
// switches at the same entry). Off drops the codes: every scan is exact.
// On encodes every row with the committed scale when one is held (a
// store switched off and on again), else codes come once the trainer
// commits one, as for a store created int8. The committed scale is kept
// either way: it is part of the store's state every replica agrees on.
// An IVF store's lists are int8 codes, so it cannot switch.
func (m *Memory) SetQuantization(q Quantization) error {
	m.lock()
	defer m.mu.Unlock()
	if m.quantization == q {
		return nil
	}
	if m.indexKind == IndexIVF {
		return fmt.Errorf("an IVF store keeps int8 codes: its quantization cannot change")
	}
	m.quantization = q
	if q != QuantInt8 {
		m.codes = nil
		m.keepDiskCodes(nil)
		return nil
	}
	return m.applyInt8Scale(m.trained[TrainedInt8Scale])
}

// Int8Ready reports whether the store holds int8 codes of every row (a
// scale has been applied): flat ones, or an IVF index's lists.
func (m *Memory) Int8Ready() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.codes != nil || m.ivf.x != nil
}

// ViewCodes is View with the store's int8 codes, nil when there are none
// (no quantization, or no scale applied yet). The codes mirror the rows.
func (m *Memory) ViewCodes(fn func(vector.Rows, *quant.Codes) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(m.rowsView(), m.codes)
}

// needsInt8Scale reports whether the leader should train a scale: the
// store is int8, no scale is committed, and it holds at least minRows.
func (m *Memory) needsInt8Scale(minRows int) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.quantization != QuantInt8 {
		return false
	}
	return m.trained[TrainedInt8Scale] == nil && len(m.ids) >= minRows
}

// trainInt8 trains a scale from the first rows (at most maxTrainRows) and
// returns it serialised, for the leader to commit.
func (m *Memory) trainInt8() ([]byte, error) {
	m.mu.RLock()
	n := min(len(m.ids), maxTrainRows)
	var (
		s   quant.Scale
		err error
	)
	if n > 0 {
		s, err = quant.TrainRows(m.rowsView(), n, quant.DefaultKind)
	}
	m.mu.RUnlock()
	if n == 0 {
		return nil, errors.New("no rows to train an int8 scale from")
	}
	if err != nil {
		return nil, err
	}
	return s.MarshalBinary()
}

// applyInt8Scale, with m.mu held for writing, decodes a committed scale
// and encodes every row with it. A value that does not decode (or fits
// another dimension) leaves the store without codes, on every replica
// alike: it scans exactly.
func (m *Memory) applyInt8Scale(b []byte) error {
	m.codes = nil
	s, ok, err := m.int8Scale(b)
	if ok {
		if m.disk != nil {
			m.disk.Populate()
		}
		m.codes, err = quant.Encode(s, m.rowsView())
	}
	m.keepDiskCodes(b)
	return err
}

// int8Scale decodes a committed scale for this store; ok is false when
// the store keeps no codes (not int8, no scale, or one it cannot use:
// err says why).
func (m *Memory) int8Scale(b []byte) (s quant.Scale, ok bool, err error) {
	if m.quantization != QuantInt8 || b == nil {
		return s, false, nil
	}
	if err := s.UnmarshalBinary(b); err != nil {
		return s, false, fmt.Errorf("int8 scale: %w", err)
	}
	if s.Dim() != m.dim {
		return s, false, fmt.Errorf("int8 scale is %d-D, the store %d-D", s.Dim(), m.dim)
	}
	return s, true, nil
}

// Pacer runs recovery work at a bounded share of the cores
// (recovery.Throttle); nil runs it at full speed.
type Pacer interface {
	// Do runs work on the calling goroutine and then waits until the
	// work's CPU time fits the budget.
	Do(ctx context.Context, work func()) error
}

// encodeChunk is how many rows FinishRestore encodes in one paced piece
// (about 2 ms of CPU at 1536-D, under recovery's 20 ms burst).
const encodeChunk = 256

// FinishRestore encodes every row once a snapshot restore has loaded them
// (Reset leaves the codes out so the rows are encoded in one pass, not row
// by row), or, when the restored segment files keep the codes of the
// committed scale, copies them from there: no row is read or encoded,
// and no pacing is needed (it is a copy of 1.5 KB a 1536-D row). lists
// is each restored row's IVF list as the snapshot recorded them
// (View.IVFLists; nil when it has none): an IVF store then builds its
// index from them at once, encoding the rows but assigning none, instead
// of in the background. Without a pacer the int8 pass runs on every core;
// with one it runs on the calling goroutine a chunk at a time under the
// pacer, so a replica rebuilding does not take the cores of the replicas
// beside it that serve. It is called from the goroutine that applies the
// log (the state machine's restore), so no write changes the rows while
// it runs.
func (m *Memory) FinishRestore(ctx context.Context, pace Pacer, lists []int32) error {
	m.lock()
	m.ivf.restoring = false
	if m.indexKind == IndexIVF && m.trained[TrainedIVFCentroids] != nil {
		// The index, built in the background, will hold the codes; until
		// then the replica is NOT_SERVING (IndexReady), so flat codes
		// would only cost the time and memory of encoding every row.
		m.codes = nil
		m.keepDiskCodes(nil)
		if err := m.setIVFTrained(false); err == nil {
			if lists != nil {
				if m.disk != nil {
					m.disk.Populate()
				}
				m.buildAssignedLocked(lists)
			}
			m.mu.Unlock()
			return nil
		}
		// Unusable centroids: serve as a flat int8 store, as every
		// replica does.
	}
	scale := m.trained[TrainedInt8Scale]
	if ok, err := m.restoreDiskCodes(scale); ok || err != nil {
		m.mu.Unlock()
		return err
	}
	if pace == nil {
		defer m.mu.Unlock()
		return m.applyInt8Scale(scale)
	}
	m.codes = nil
	s, ok, err := m.int8Scale(scale)
	n := len(m.ids)
	if !ok {
		m.keepDiskCodes(nil)
		m.mu.Unlock()
		return err
	}
	if m.disk != nil {
		m.disk.Populate()
	}
	m.mu.Unlock()
	c := quant.NewCodes(s)
	for lo := 0; lo < n; lo += encodeChunk {
		err := pace.Do(ctx, func() {
			m.mu.RLock()
			defer m.mu.RUnlock()
			for i := lo; i < min(lo+encodeChunk, n); i++ {
				c.Append(m.row(i))
			}
		})
		if err != nil {
			return fmt.Errorf("int8 codes of a restored store: %w", err)
		}
	}
	m.lock()
	defer m.mu.Unlock()
	if len(m.ids) != n {
		// Only the caller writes to the store, so this is a bug; encode
		// what is there rather than keep codes of other rows.
		return m.applyInt8Scale(scale)
	}
	m.codes = c
	m.keepDiskCodes(scale)
	return nil
}

// restoreDiskCodes, with m.mu held for writing, takes the codes of every
// row from the restored segment files when they keep codes of scale, the
// committed one, and reports whether it did. Files that keep none (a
// snapshot of an older version, or taken before the scale) or codes of
// another scale are dropped, and the caller encodes the rows.
func (m *Memory) restoreDiskCodes(scale []byte) (bool, error) {
	if !m.diskCodes() {
		return false, nil
	}
	s, ok, err := m.int8Scale(scale)
	if !ok || !bytes.Equal(m.disk.CodesTag(), scale) {
		m.codes = nil
		m.keepDiskCodes(nil)
		return false, err
	}
	c, err := quant.FromEncoded(s, len(m.ids), m.disk.Codes)
	if err != nil {
		m.keepDiskCodes(nil)
		return false, nil
	}
	m.codes = c
	return true, nil
}
