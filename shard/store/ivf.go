package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"unsafe"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
	"github.com/trawl-search/trawl/vector/quant"
)

// IndexKind is how a Memory serves approximate queries (--index).
type IndexKind uint8

const (
	// IndexFlat scans every row (their int8 codes under --quantization
	// int8, else the float32 rows).
	IndexFlat IndexKind = iota
	// IndexIVF partitions the rows into inverted lists of int8 codes around
	// centroids the leader trains and commits (vector/ivf), and probes a
	// query's nearest lists.
	IndexIVF
)

func (k IndexKind) String() string {
	if k == IndexIVF {
		return "ivf"
	}
	return "flat"
}

// LogValue logs the indexkind by name ("ivf"), not by number.
func (k IndexKind) LogValue() slog.Value { return slog.StringValue(k.String()) }

// ParseIndex parses --index: flat or ivf.
func ParseIndex(s string) (IndexKind, error) {
	switch s {
	case "", "flat":
		return IndexFlat, nil
	case "ivf":
		return IndexIVF, nil
	}
	return IndexFlat, fmt.Errorf("index %q: want flat or ivf", s)
}

// TrainedIVFCentroids is the trained value (committed through the log) holding the
// shard's IVF centroids, ivf.Centroids.MarshalBinary.
const TrainedIVFCentroids = "ivf-centroids"

// TrainedIVFNProbe is the trained value holding the default nprobe
// levels the leader measured on its built index of the committed
// centroids (ivf.CalibrateNProbe): 4 bytes of the centroids' CRC-32
// (IEEE, of their encoding), then each level's K and nprobe, all
// little-endian uint32. A value of one nprobe and no K (8 bytes, written
// before levels) applies to every k. A replica uses it only with an index
// of the centroids it names, so a value measured for centroids a retrain
// replaced is ignored until the leader measures again; without one,
// ivf.DefaultNProbe applies.
const TrainedIVFNProbe = "ivf-nprobe"

// encodeNProbe is TrainedIVFNProbe's value.
func encodeNProbe(crc uint32, levels []ivf.Level) []byte {
	b := binary.LittleEndian.AppendUint32(nil, crc)
	for _, l := range levels {
		b = binary.LittleEndian.AppendUint32(b, uint32(l.K))
		b = binary.LittleEndian.AppendUint32(b, uint32(l.NProbe))
	}
	return b
}

// decodeNProbe reads TrainedIVFNProbe's value; ok false when malformed
// (levels must be in ascending K, each nprobe positive).
func decodeNProbe(b []byte) (crc uint32, levels []ivf.Level, ok bool) {
	switch {
	case len(b) == 8:
		np := int(binary.LittleEndian.Uint32(b[4:]))
		return binary.LittleEndian.Uint32(b), []ivf.Level{{K: math.MaxInt32, NProbe: np}}, np > 0
	case len(b) < 12 || (len(b)-4)%8 != 0:
		return 0, nil, false
	}
	for i := 4; i < len(b); i += 8 {
		l := ivf.Level{K: int(binary.LittleEndian.Uint32(b[i:])), NProbe: int(binary.LittleEndian.Uint32(b[i+4:]))}
		if l.NProbe <= 0 || (len(levels) > 0 && l.K <= levels[len(levels)-1].K) {
			return 0, nil, false
		}
		levels = append(levels, l)
	}
	return binary.LittleEndian.Uint32(b), levels, true
}

// WithIVF makes the store an IVF store (--index ivf) for metric m: it keeps
// int8 codes (it implies QuantInt8: the lists are int8 codes, encoded with
// the committed scale) and, once centroids are committed, an ivf.Index
// built from them in the background (Memory.BuildIndex). k assigns rows to
// lists and trains centroids; which kernel it is changes speed only,
// never an assignment.
func WithIVF(k vector.Kernel, m vector.Metric) MemoryOption {
	return func(mem *Memory) {
		mem.indexKind, mem.kernel, mem.metric = IndexIVF, k, m
	}
}

// ivfState is an IVF store's index state, guarded by Memory.mu.
type ivfState struct {
	// x is the index queries probe: built from the centroids of
	// generation built (an older one while a retrain builds), nil before
	// the first build.
	x     *ivf.Index
	built uint64
	// gen counts changes of what an index is built from: committed
	// centroids, the int8 scale, and resets. An index or build of an older
	// generation is stale.
	gen uint64
	// pending is the build under way, nil when none.
	pending *ivfBuild
	// err says why the committed centroids (or scale) cannot build an
	// index: the store then serves as a flat one, on every replica alike.
	err error
	// trainedRows is the committed centroids' TrainedRows, 0 when none.
	trainedRows int
	// builtCRC is the CRC-32 of the encoded centroids x was built from:
	// the committed nprobe applies to x only when it names them.
	builtCRC uint32
	// restoring: a snapshot is being loaded (Reset until FinishRestore);
	// no build starts on the half-loaded rows.
	restoring bool
	// fallback: the committed centroids were applied while this replica
	// was serving, so until the index is built it keeps serving from its
	// flat int8 codes (every live replica does the same; a replica that
	// is restarting or restoring stays NOT_SERVING instead).
	fallback bool
}

// ivfBuild is one index build under way: its index grows from row 0 up
// and mirrors every write to rows it already holds (see Memory.BuildIndex).
type ivfBuild struct {
	x   *ivf.Index
	gen uint64
	crc uint32 // of the encoded centroids it is built from
}

// IndexKind is the store's --index.
func (m *Memory) IndexKind() IndexKind { return m.indexKind }

// IndexReady reports whether the store may serve: always for a flat store,
// and for an IVF store unless it holds committed centroids but neither an
// index built from them (or older ones, while a retrain builds) nor flat
// codes it may serve from meanwhile. A replica answers NOT_SERVING while
// this is false, so no reader sees a half-built index or pays a full
// float32 scan for it.
func (m *Memory) IndexReady() bool {
	if m.indexKind != IndexIVF {
		return true
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := &m.ivf
	switch {
	case m.trained[TrainedIVFCentroids] == nil, s.err != nil, s.x != nil:
		return true
	}
	return s.fallback && m.codes != nil
}

// IVFIndexed reports whether queries are served from an index built from
// the committed centroids (no build pending).
func (m *Memory) IVFIndexed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.ivf.x != nil && m.ivf.built == m.ivf.gen && m.ivf.pending == nil
}

// ViewIVF runs fn with the rows and the index queries probe (nil when
// there is none) under the read lock.
func (m *Memory) ViewIVF(fn func(vector.Rows, *ivf.Index) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(m.rowsView(), m.ivf.x)
}

// setIVFTrained, with m.mu held for writing, records that the centroids or
// the int8 scale changed: any index or build from the old ones is stale.
// serving says whether the replica was serving when it applied them.
func (m *Memory) setIVFTrained(serving bool) error {
	s := &m.ivf
	s.gen++
	s.pending = nil
	s.restoring = false
	s.fallback = serving
	s.err, s.trainedRows = nil, 0
	b := m.trained[TrainedIVFCentroids]
	if b == nil {
		return nil
	}
	c, _, err := m.ivfInputs()
	if err != nil {
		s.err = err
		s.x = nil
		return err
	}
	s.trainedRows = c.TrainedRows
	return nil
}

// ivfInputs decodes what an index is built from, with m.mu held.
func (m *Memory) ivfInputs() (ivf.Centroids, quant.Scale, error) {
	var (
		c ivf.Centroids
		s quant.Scale
	)
	if err := c.UnmarshalBinary(m.trained[TrainedIVFCentroids]); err != nil {
		return c, s, fmt.Errorf("ivf centroids: %w", err)
	}
	if c.Dim != m.dim || c.Metric != m.metric {
		return c, s, fmt.Errorf("ivf centroids are %d-D %v, the store %d-D %v", c.Dim, c.Metric, m.dim, m.metric)
	}
	sb := m.trained[TrainedInt8Scale]
	if sb == nil {
		return c, s, errors.New("ivf centroids committed before an int8 scale")
	}
	if err := s.UnmarshalBinary(sb); err != nil {
		return c, s, fmt.Errorf("int8 scale: %w", err)
	}
	if s.Dim() != m.dim {
		return c, s, fmt.Errorf("int8 scale is %d-D, the store %d-D", s.Dim(), m.dim)
	}
	return c, s, nil
}

// needsIVFBuild reports whether BuildIndex has work: committed, usable
// centroids with no index of their generation and no build under way.
func (m *Memory) needsIVFBuild() bool {
	if m.indexKind != IndexIVF {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.needsIVFBuildLocked()
}

// needsIVFTrain reports whether the leader should train centroids: an IVF
// store with its int8 scale committed and at least minRows rows, and
// either no centroids yet or, once the index of the committed ones is
// built, grown or shrunk by ivf.RetrainGrowth from the rows they were
// trained on (ivf.NeedsRetrain with minRows for ivf.MinRows).
func (m *Memory) needsIVFTrain(minRows int) bool {
	if m.indexKind != IndexIVF {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, s := len(m.ids), &m.ivf
	if m.trained[TrainedInt8Scale] == nil || n < minRows {
		return false
	}
	if m.trained[TrainedIVFCentroids] == nil {
		return true
	}
	if s.err != nil || s.pending != nil || s.x == nil || s.built != s.gen {
		return false
	}
	t := s.trainedRows
	return t <= 0 || n >= ivf.RetrainGrowth*t || t >= ivf.RetrainGrowth*n
}

// trainIVF trains centroids on a sample of the rows (copied under the
// read lock, about 30 ms for 20 000 1536-D rows) with no lock held, and
// returns them serialised for the leader to commit.
func (m *Memory) trainIVF(ctx context.Context, seed uint64) ([]byte, int, error) {
	m.mu.RLock()
	n := len(m.ids)
	rows := m.rowsView()
	sample := ivf.Sample(rows, ivf.SampleSize(ivf.DefaultLists(n), n), seed)
	m.mu.RUnlock()
	if n == 0 {
		return nil, 0, errors.New("no rows to train ivf centroids from")
	}
	c, err := ivf.Train(ctx, m.kernel, m.metric, sample, m.dim, ivf.Config{Rows: n, Seed: seed})
	if err != nil {
		return nil, 0, err
	}
	b, err := c.MarshalBinary()
	return b, c.Lists(), err
}

// Build chunking: a background build copies buildChunk rows under the read
// lock (6 MiB at 1536-D, about a millisecond), assigns them with no lock
// held, and adds them under the read lock (encoding only, ~1 µs a row);
// the last buildFinal rows or fewer are added under the write lock, and
// the index swapped in in the same hold (~12 µs a row to assign at 316
// lists: a few milliseconds).
const (
	buildChunk = 1024
	buildFinal = 256
)

// errBuildStale ends a build whose centroids, scale or rows were replaced
// (new centroids committed, a snapshot restored) while it ran.
var errBuildStale = errors.New("ivf build superseded")

// BuildIndex builds the index of the committed centroids over every row,
// if the store needs one (IVF, centroids committed, no index of them yet),
// and swaps it in; it reports whether it did. Searches and writes go on
// meanwhile: queries use the previous index (a retrain), or the flat
// codes, or wait out NOT_SERVING (see IndexReady), while writes are
// applied to the old index and, for the rows the new one already holds,
// to the new one too, so the index swapped in holds exactly the store's
// rows. Replicas calling it hold the same lists (the assignment is a pure
// function of the centroids and each row).
func (m *Memory) BuildIndex(ctx context.Context) (bool, error) {
	m.lock()
	if !m.needsIVFBuildLocked() {
		m.mu.Unlock()
		return false, nil
	}
	c, s, err := m.ivfInputs()
	if err != nil {
		m.mu.Unlock()
		return false, err
	}
	x, err := ivf.New(m.kernel, c, s)
	if err != nil {
		m.mu.Unlock()
		return false, err
	}
	b := &ivfBuild{x: x, gen: m.ivf.gen, crc: crc32.ChecksumIEEE(m.trained[TrainedIVFCentroids])}
	m.ivf.pending = b
	m.mu.Unlock()

	err = m.build(ctx, b)
	if err != nil {
		m.lock()
		if m.ivf.pending == b {
			m.ivf.pending = nil
			if !errors.Is(err, errBuildStale) && ctx.Err() == nil {
				// Not worth retrying every tick: serve as before.
				m.ivf.err = err
			}
		}
		m.mu.Unlock()
		if errors.Is(err, errBuildStale) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// needsIVFBuildLocked is needsIVFBuild with m.mu held.
func (m *Memory) needsIVFBuildLocked() bool {
	s := &m.ivf
	return m.indexKind == IndexIVF && m.trained[TrainedIVFCentroids] != nil && s.err == nil && s.pending == nil &&
		!s.restoring && (s.x == nil || s.built != s.gen)
}

// build fills b from the rows chunk by chunk (see BuildIndex), then swaps
// it in under the write lock.
func (m *Memory) build(ctx context.Context, b *ivfBuild) error {
	dim := m.dim
	buf := make([]float32, buildChunk*dim)
	noIDs := make([]string, buildChunk)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ivf build: %w", err)
		}
		m.mu.RLock()
		if m.ivf.pending != b {
			m.mu.RUnlock()
			return errBuildStale
		}
		lo := b.x.Len()
		hi := min(lo+buildChunk, len(m.ids))
		for r := lo; r < hi; r++ {
			copy(buf[(r-lo)*dim:], m.row(r))
		}
		m.mu.RUnlock()
		if hi-lo <= buildFinal {
			done, err := m.finishBuild(b)
			if err != nil || done {
				return err
			}
			continue
		}
		if m.buildHook != nil {
			m.buildHook()
		}
		assign := b.x.AssignRows(vector.FlatRows(buf[:(hi-lo)*dim], dim, noIDs[:hi-lo]))
		m.mu.RLock()
		switch {
		case m.ivf.pending != b:
			m.mu.RUnlock()
			return errBuildStale
		case b.x.Len() != lo:
			// Deletes shrank the store to the rows the build held and
			// went on (mirrored onto it): this chunk is gone.
			m.mu.RUnlock()
			continue
		}
		// Only this goroutine adds to b while the read lock is held;
		// writers, which mirror onto b, wait for it.
		for r := lo; r < min(hi, len(m.ids)); r++ {
			row := m.row(r)
			if sameBits(row, buf[(r-lo)*dim:(r-lo+1)*dim]) {
				b.x.AppendAssigned(int(assign[r-lo]), row)
			} else {
				b.x.Append(row) // rewritten since the copy
			}
		}
		m.mu.RUnlock()
		if m.buildHook != nil {
			m.buildHook()
		}
	}
}

// finishBuild adds the last rows under the write lock and swaps the index
// in; it reports false (and changes nothing) when more rows arrived than
// it will add while holding the write lock.
func (m *Memory) finishBuild(b *ivfBuild) (bool, error) {
	m.lock()
	defer m.mu.Unlock()
	if m.ivf.pending != b {
		return false, errBuildStale
	}
	if len(m.ids)-b.x.Len() > 4*buildFinal {
		return false, nil
	}
	for r := b.x.Len(); r < len(m.ids); r++ {
		b.x.Append(m.row(r))
	}
	s := &m.ivf
	s.x, s.built, s.pending, s.fallback, s.builtCRC = b.x, b.gen, nil, false, b.crc
	m.applyNProbeLocked()
	// The lists hold every row's codes: the flat ones are not needed.
	m.codes = nil
	m.keepDiskCodes(nil)
	return true, nil
}

// buildAssignedLocked, with m.mu held for writing, builds the index of
// the committed centroids from each row's recorded list. Lists that do
// not fit (another row count, a list out of range) are dropped: the
// background build assigns the rows instead.
func (m *Memory) buildAssignedLocked(lists []int32) {
	c, sc, err := m.ivfInputs()
	if err != nil || len(lists) != len(m.ids) {
		return
	}
	x, err := ivf.BuildAssigned(m.kernel, c, sc, m.rowsView(), lists)
	if err != nil {
		return
	}
	s := &m.ivf
	s.x, s.built, s.pending, s.fallback = x, s.gen, nil, false
	s.builtCRC = crc32.ChecksumIEEE(m.trained[TrainedIVFCentroids])
	m.applyNProbeLocked()
}

// applyNProbeLocked, with m.mu held for writing, sets the index's default
// nprobe from the committed value when it names the centroids the index
// was built from, else back to ivf.DefaultNProbe.
func (m *Memory) applyNProbeLocked() {
	s := &m.ivf
	if s.x == nil {
		return
	}
	levels, _ := m.builtNProbeLocked()
	s.x.SetDefaultNProbes(levels)
}

// needsIVFNProbe reports whether the leader should measure the default
// nprobe: its index of the committed centroids is built and serving, and
// no committed value names those centroids with a level for each of
// ivf.CalibrationKs (a value from before levels, or from a version
// measuring other k, is measured again).
func (m *Memory) needsIVFNProbe() bool {
	if m.indexKind != IndexIVF {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := &m.ivf
	if s.x == nil || s.built != s.gen || s.pending != nil || s.err != nil {
		return false
	}
	levels, ok := m.builtNProbeLocked()
	return !ok || len(levels) != len(ivf.CalibrationKs())
}

// builtNProbeLocked is the committed nprobe levels if they name the
// centroids the built index was built from (ok), else nil: a value
// measured for other centroids does not apply. m.mu must be held.
func (m *Memory) builtNProbeLocked() ([]ivf.Level, bool) {
	crc, levels, ok := decodeNProbe(m.trained[TrainedIVFNProbe])
	if !ok || crc != m.ivf.builtCRC {
		return nil, false
	}
	return levels, true
}

// calibrateIVF measures the default nprobe on the built index
// (ivf.CalibrateNProbe), one step per read-lock hold so writes go on, and
// returns TrainedIVFNProbe's value for it. It fails with errBuildStale
// when the index is replaced meanwhile.
func (m *Memory) calibrateIVF(ctx context.Context) ([]byte, []ivf.Level, error) {
	m.mu.RLock()
	crc := m.ivf.builtCRC
	m.mu.RUnlock()
	view := func(fn func(vector.Rows, *ivf.Index) error) error {
		m.mu.RLock()
		defer m.mu.RUnlock()
		if m.ivf.x == nil || m.ivf.builtCRC != crc {
			return errBuildStale
		}
		return fn(m.rowsView(), m.ivf.x)
	}
	levels, err := ivf.CalibrateNProbe(ctx, view, quant.FromEnv(), m.kernel)
	if err != nil {
		return nil, nil, err
	}
	return encodeNProbe(crc, levels), levels, nil
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	ua := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(a))), len(a))
	ub := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
	for i := range ua {
		if ua[i] != ub[i] {
			return false
		}
	}
	return true
}

// The write mirrors: with m.mu held for writing, after the arena's own
// write, the same change to the index queries use and to the rows a build
// under way already holds.

// ivfAppend mirrors appending v as the last row. A build does not hold it
// yet (it holds rows below its length, which is at most the store's).
func (m *Memory) ivfAppend(v []float32) {
	if m.ivf.x != nil {
		m.ivf.x.Append(v)
	}
}

// ivfSet mirrors overwriting row i with v.
func (m *Memory) ivfSet(i int, v []float32) {
	if m.ivf.x != nil {
		m.ivf.x.Set(i, v)
	}
	if p := m.ivf.pending; p != nil && i < p.x.Len() {
		p.x.Set(i, v)
	}
}

// ivfDelete mirrors deleting row i of last+1 rows, the arena having moved
// row last into row i.
func (m *Memory) ivfDelete(i, last int) {
	if m.ivf.x != nil {
		m.ivf.x.Delete(i)
	}
	p := m.ivf.pending
	if p == nil {
		return
	}
	switch n := p.x.Len(); {
	case last < n:
		p.x.Delete(i) // the build holds both rows: the same move
	case i < n:
		// The build holds row i but not the row moved into it: row i's
		// vector changed.
		p.x.Set(i, m.row(i))
	}
}

// Index states, as IndexStats reports them (/cluster/status).
const (
	IndexStateReady     = "ready"
	IndexStateUntrained = "untrained"
	IndexStateBuilding  = "building"
	IndexStateFailed    = "failed"
)

// IndexStats describes what a store's approximate queries scan, for the
// Stats RPC (shardpb.IndexStats says what each field means).
type IndexStats struct {
	Kind  IndexKind
	State string
	// Lists, TrainedRows and DefaultNProbe are the index queries probe
	// now, 0 when there is none.
	Lists, TrainedRows, DefaultNProbe int
	// NProbeCalibrated: DefaultNProbe is the committed measurement for
	// that index's centroids, not ivf.DefaultNProbe's rule.
	NProbeCalibrated bool
	Rows             int
	Bytes            int
	Err              error
}

// IndexStats reports the store's index. A build under way is not read: its
// goroutine appends to it under the read lock, so only its existence is.
func (m *Memory) IndexStats() IndexStats {
	m.mu.RLock()
	defer m.mu.RUnlock()
	st := IndexStats{Kind: m.indexKind, State: IndexStateReady, Rows: len(m.ids)}
	if m.codes != nil {
		st.Bytes += m.codes.Bytes()
	}
	if m.indexKind != IndexIVF {
		return st
	}
	s := &m.ivf
	st.Rows = 0
	if x := s.x; x != nil {
		st.Lists, st.TrainedRows, st.Rows = x.Lists(), x.Centroids().TrainedRows, x.Len()
		st.DefaultNProbe = x.DefaultNProbe()
		_, st.NProbeCalibrated = m.builtNProbeLocked()
		st.Bytes += x.Bytes()
	}
	switch {
	case s.err != nil:
		st.State, st.Err = IndexStateFailed, s.err
	case m.trained[TrainedIVFCentroids] == nil:
		st.State = IndexStateUntrained
	case s.x == nil || s.built != s.gen || s.pending != nil:
		st.State = IndexStateBuilding
	}
	return st
}
