package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/index"
	"github.com/trawl-search/trawl/shard/store/sparse"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
	"github.com/trawl-search/trawl/vector/segment"
)

// Record is one stored document. Records grow by adding fields here, in
// shardpb.Vector (the wire and snapshot form) and in the FSM's apply.
type Record struct {
	ID     string
	Vector []float32
	// Payload is the document's JSON object, nil when it has none. A
	// stored payload is never written to in place, so views may share it.
	Payload []byte
	// Sparse are the document's named sparse vectors (valid, of names
	// the store indexes), nil when it has none.
	Sparse map[string]sparse.Vector
	// Named are the document's named dense vectors (of names the store
	// keeps, each of its size), nil when it has none.
	Named map[string][]float32
}

// Placement is the shard list a replica's data was written under.
type Placement struct {
	Fingerprint string
	Shard       string
}

// Memory is one replica's rows in a vector.Arena: fixed-size chunks, so
// the store grows by adding a chunk and never copies its rows or holds
// them twice. Deleting swaps the last row into the hole, so rows stay
// dense.
//
// While a snapshot streams (OpenView), a write that would overwrite a row
// the snapshot has yet to read first copies that row aside (copy on
// write), so the snapshot sees the state it was opened at without copying
// the rows: its extra memory is the ids and payload slice headers (40
// bytes a row) plus the rows overwritten while it streams.
//
// A store made WithSegments keeps its float32 rows on disk instead, in a
// segment.Set's memory-mapped files (the page cache holds what scans
// read, not the Go heap); codes, IVF lists, ids, payloads and the payload
// index stay in memory. Its writes never change a row in place, so a
// snapshot's view holds the segments it reads and copies nothing. Once
// an int8 scale is applied its segments also keep each row's codes in
// codes files (keepDiskCodes), which a snapshot links with the rows and
// a restore copies into memory instead of encoding.
type Memory struct {
	dim int

	mu   sync.RWMutex
	rows *vector.Arena[float32] // row i is ids[i]'s vector; nil with disk
	// disk holds the rows instead of rows (WithSegments).
	disk     *segment.Set
	ids      []string
	payloads [][]byte // parallel to ids
	index    map[string]int
	// recBytes is the length of every stored id and payload, kept as rows
	// change so Bytes need not walk them.
	recBytes int
	// placement is written under mu but read without it: a search asks
	// for it before its scan, and must not queue behind a write for it.
	placement atomic.Pointer[Placement]
	// runBackground runs lock-free CPU work (WithBackground); nil: in
	// place.
	runBackground func(func())
	// politeFor is politeWrite (tests lengthen it).
	politeFor time.Duration
	trained   map[string][]byte
	view      *View // the open snapshot view, if any

	quantization Quantization
	// codes mirror the rows row for row once an int8 scale is applied
	// (QuantInt8), nil before; written under mu with the rows.
	codes *quant.Codes
	// payloadIndex indexes the payloads by row number, written under mu
	// with the rows. It is rebuilt from the rows (a restore inserts them),
	// never stored: rebuilding it for 200 000 payloads of five keys takes
	// about a second beside the restore itself (docs/filters.md), and a
	// stored copy would be one more format for replicas to agree on.
	payloadIndex *index.Index

	// indexKind is --index; an IVF store's kernel and metric assign and
	// train, and ivf is its index state (ivf.go), written under mu with
	// the rows.
	indexKind IndexKind
	kernel    vector.Kernel
	metric    vector.Metric
	ivf       ivfState
	// sparse is an inverted index per named sparse vector (WithSparse),
	// by row, written under mu with the rows.
	sparse map[string]*sparse.Index
	// sparseGen counts changes of the sparse indexes (under mu), so
	// OpenView can encode them under the read lock and know whether a
	// write changed them before it took the write lock.
	sparseGen uint64
	// named is a row space per named dense vector (WithNamed), written
	// under mu with the rows.
	named map[string]*namedSpace
	// buildHook, when set, runs twice a chunk of a background index
	// build, with no lock held: after the chunk is copied and after it is
	// added (tests write, or hold the build, there).
	buildHook func()
	// holdHook, when set, gets how long each Upsert held the write lock
	// (benchmarks measure what scans wait for with it).
	holdHook func(time.Duration)
	// locks counts the times m.mu was taken for writing (lock,
	// lockWrite), so work prepared under the read lock can tell whether
	// the store changed before it took the write lock.
	locks uint64
	// noPrepare makes Upsert allocate and fault under the write lock, as
	// it did before prepareWrite (tests and benchmarks compare the two).
	noPrepare bool
	// preparedHook, when set, runs in Upsert between prepareWrite and
	// taking the write lock (tests change the store there).
	preparedHook func()
	// adopted counts the arena room prepared before the lock and installed
	// under it (tests check the prepared path is the one taken).
	adopted int
}

// NewMemory returns an empty store of dim-dimensional vectors. dim 0 is
// a store without the unnamed vector (only named ones, WithNamed): its
// rows are then one float each, never written or read, so the ids keep
// one code path (4 bytes a point).
func NewMemory(dim int, opts ...MemoryOption) *Memory {
	m := &Memory{dim: dim, rows: vector.NewArena[float32](max(dim, 1), 0), index: map[string]int{}, trained: map[string][]byte{},
		payloadIndex: index.New(index.Config{}), politeFor: politeWrite}
	for _, o := range opts {
		o(m)
	}
	if m.disk != nil {
		m.rows = nil
	}
	if m.indexKind == IndexIVF {
		// The lists are int8 codes: an IVF store trains and keeps a scale.
		m.quantization = QuantInt8
	}
	return m
}

// WithSegments keeps the store's float32 rows in s (empty, and the
// store's alone) rather than in the Go heap.
func WithSegments(s *segment.Set) MemoryOption { return func(m *Memory) { m.disk = s } }

// OnDisk reports whether the float32 rows are in segment files.
func (m *Memory) OnDisk() bool { return m.disk != nil }

// Close releases the store's segment files (a store WithSegments); the
// store must not be used after. A store without segments has nothing to
// release.
//
// A scan that found the store before it was closed reads it empty.
func (m *Memory) Close() error {
	m.lock()
	defer m.mu.Unlock()
	if m.disk == nil {
		return nil
	}
	m.ids, m.payloads, m.index, m.codes, m.recBytes = nil, nil, map[string]int{}, nil, 0
	m.payloadIndex.Reset()
	m.resetSparseLocked()
	m.ivf = ivfState{gen: m.ivf.gen + 1}
	return m.disk.Close()
}

// Dim is the vector dimension.
func (m *Memory) Dim() int { return m.dim }

// rowsView is every row as a vector.Rows; m.mu must be held.
func (m *Memory) rowsView() vector.Rows {
	if m.disk != nil {
		return m.disk.Rows(m.ids)
	}
	return vector.ArenaRows(m.rows, m.ids)
}

// row is row i, for reading only; m.mu must be held.
func (m *Memory) row(i int) []float32 {
	if m.disk != nil {
		return m.disk.Row(i)
	}
	return m.rows.Row(i)
}

// diskFailed stops the replica when its segment files cannot be written
// (the disk full, the directory gone): the store is applying a committed
// entry, and going on without it would leave this replica silently unlike
// the others. A restart rebuilds the files from the snapshot and the log.
func diskFailed(err error) {
	if err != nil {
		panic(fmt.Sprintf("store: float32 segment files failed, the replica stops rather than diverge from its group: %v", err))
	}
}

// Upsert stores recs, replacing any with the same id, atomically with
// recording the placement they were written under.
//
// What can be done before the write lock is (prepareWrite): the rows'
// int8 codes are encoded, room for the new rows allocated and the memory
// they will be written to faulted in. The lock is then taken only at a
// moment no scan holds it (lockWrite), so a search waits for a write's
// copies, not for its arithmetic, allocations or page faults, or behind
// it.
func (m *Memory) Upsert(ctx context.Context, p Placement, recs []Record) error {
	// All of the preparation runs in the background (WithBackground): it
	// holds at most the read lock, which a scan never waits for, so a
	// lower priority delays only this write.
	var w preparedWrite
	RunBackground(ctx, m.runBackground, func() { w = m.prepareWrite(recs) })
	if m.preparedHook != nil {
		m.preparedHook()
	}
	m.lockWrite()
	defer m.mu.Unlock()
	if m.holdHook != nil {
		defer m.timeHold(time.Now())
	}
	pre := w.adopt(m)
	m.setPlacement(p)
	defer m.payloadIndex.Flush()
	for n, r := range recs {
		var e *quant.Encoded
		if pre != nil {
			e = &pre[n]
		}
		if i, ok := m.index[r.ID]; ok {
			m.setVectorLocked(i, r.Vector, e)
			m.setPayloadLocked(i, r.Payload)
			m.setSparseLocked(i, r.Sparse)
			m.setNamedLocked(i, r.Named, true)
			continue
		}
		m.appendLocked(r, e)
	}
	return nil
}

// timeHold reports to holdHook the time since start, the write lock
// taken.
func (m *Memory) timeHold(start time.Time) { m.holdHook(time.Since(start)) }

// preparedWrite is what prepareWrite made ready for a write before its
// write lock, and the state of the store it was made for.
type preparedWrite struct {
	// locks is m.locks when prepared: the write is the next to take the
	// lock exactly when nothing changed the store in between.
	locks uint64
	// codes are the store's codes when prepared and pre the records'
	// encodings with their scale (nil without codes).
	codes *quant.Codes
	pre   []quant.Encoded
	// rows and codeRoom are room for the new rows in the float32 and
	// int8 arenas (nil: none to allocate).
	rows     *vector.Spare[float32]
	codeRoom *vector.Spare[int8]
}

// prepareWrite does, before Upsert takes the write lock, what it can of
// writing recs: under the read lock (scans go on) it makes room for the
// new rows in the arenas and faults in the memory (or segment file pages)
// they will be written to; then, holding no lock, it encodes recs' int8
// codes with the store's scale. Upsert uses all of it only if nothing
// took the write lock in between (adopt), else writes as before.
func (m *Memory) prepareWrite(recs []Record) preparedWrite {
	m.mu.RLock()
	w := preparedWrite{locks: m.locks, codes: m.codes}
	if !m.noPrepare {
		// An id sent twice in one write counts twice: the room may then
		// cover a few rows more than the write adds, never fewer.
		fresh := 0
		for _, r := range recs {
			if _, ok := m.index[r.ID]; !ok {
				fresh++
			}
		}
		if m.rows != nil {
			w.rows = m.rows.Prepare(fresh)
		}
		if m.codes != nil {
			w.codeRoom = m.codes.Prepare(fresh)
		}
		if m.disk != nil {
			// On disk an overwrite is written to a new slot too.
			m.disk.Prepare(len(recs))
		}
	}
	m.mu.RUnlock()
	w.pre = m.preEncode(w.codes, recs)
	return w
}

// adopt, with m.mu held for writing by the write w was prepared for,
// installs the room w made when nothing took the write lock since (the
// rows a grown chunk copied may have changed otherwise), and returns w's
// encodings when the store's codes are still those they were made with
// (nil: the write encodes under the lock). Room not installed is dropped:
// the write allocates as it goes, as without preparation.
func (w preparedWrite) adopt(m *Memory) []quant.Encoded {
	if m.codes != w.codes {
		// The scale changed: the encodings and the codes' room are for
		// codes the store no longer keeps.
		return nil
	}
	if m.locks == w.locks+1 {
		if w.rows != nil && m.rows.Adopt(w.rows) {
			m.adopted++
		}
		if w.codeRoom != nil && m.codes.Adopt(w.codeRoom) {
			m.adopted++
		}
	}
	return w.pre
}

// preEncode encodes recs' vectors with c's scale, holding no lock (the
// scale of codes never changes; a store changing scale gets new codes).
// nil with no codes, or when a vector is not of the store's size (then
// encoded, and refused, under the lock as before).
func (m *Memory) preEncode(c *quant.Codes, recs []Record) []quant.Encoded {
	if c == nil {
		return nil
	}
	s, dim := c.Scale(), c.Dim()
	for _, r := range recs {
		if len(r.Vector) != dim {
			return nil
		}
	}
	buf := make([]int8, len(recs)*dim)
	out := make([]quant.Encoded, len(recs))
	for i, r := range recs {
		out[i] = quant.EncodeRow(s, buf[i*dim:(i+1)*dim:(i+1)*dim], r.Vector)
	}
	return out
}

// WithBackground runs the store's CPU work that holds no write lock — a
// write's preparation: encoding its int8 codes, making room for its rows
// and faulting that memory in — through run (a thread of lower CPU
// priority, cpuprio), instead of on the caller's goroutine. Work that
// holds the write lock stays on the caller's: at a lower priority it
// would keep searches waiting for the lock.
func WithBackground(run func(func())) MemoryOption {
	return func(m *Memory) { m.runBackground = run }
}

// foregroundKey marks a context of Foreground.
type foregroundKey struct{}

// Foreground returns ctx marked so that a write under it does all its
// work on the calling goroutine, none through WithBackground's runner.
// Work whose CPU is measured on the calling thread (a recovery throttle
// pacing a replica's catch-up) must not hand part of it to another.
func Foreground(ctx context.Context) context.Context {
	return context.WithValue(ctx, foregroundKey{}, true)
}

// RunBackground runs f through run (a WithBackground runner), or on the
// calling goroutine when run is nil or ctx is marked by Foreground.
func RunBackground(ctx context.Context, run func(func()), f func()) {
	if on, _ := ctx.Value(foregroundKey{}).(bool); on || run == nil {
		f()
		return
	}
	run(f)
}

// lockWrite takes m.mu for writing once no scan holds it, waiting up to
// politeWrite before queueing for it. sync.RWMutex makes every reader
// that arrives after a blocked Lock wait for that writer, and the writer
// for every scan in progress: on a loaded machine that convoy, not the
// write, is what searches during a bulk load wait for. Only the goroutine
// applying the log writes, so a write delayed here delays only writes.
func (m *Memory) lockWrite() {
	if m.mu.TryLock() {
		m.locks++
		return
	}
	deadline := time.Now().Add(m.politeFor)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
		if m.mu.TryLock() {
			m.locks++
			return
		}
	}
	m.lock()
}

// lock takes m.mu for writing and counts it (locks). Every write lock of
// the store is taken here or in lockWrite.
func (m *Memory) lock() {
	m.mu.Lock()
	m.locks++
}

// politeWrite bounds how long a write waits for a moment without scans
// before it queues for the lock (and so stops new scans): searches come
// first, but a stream of overlapping scans cannot stall the log.
const politeWrite = 20 * time.Millisecond

// selectRows returns the rows whose ids and payloads match f, from the
// payload index where it answers (has_id by looking its ids up). m.mu must
// be held.
func (m *Memory) selectRows(f *filter.Filter) *roaring.Bitmap {
	return m.payloadIndex.Select(f, len(m.ids), index.Source{
		Doc: func(row uint32) map[string]any { return decodePayload(m.payloads[row]) },
		ID:  func(row uint32) string { return m.ids[row] },
		Row: func(id string) (uint32, bool) {
			i, ok := m.index[id]
			return uint32(i), ok
		},
	})
}

// setVectorLocked replaces row i's vector. m.mu must be held for writing.
func (m *Memory) setVectorLocked(i int, v []float32, e *quant.Encoded) {
	// Codes first: segment files that keep codes take them with the row.
	switch {
	case m.codes != nil && e != nil:
		m.codes.SetEncoded(i, *e)
	case m.codes != nil:
		m.codes.Set(i, v)
	}
	m.writeRow(i, v)
	m.ivfSet(i, v)
}

// setPayloadLocked replaces row i's payload. m.mu must be held for
// writing; the caller flushes the payload index.
func (m *Memory) setPayloadLocked(i int, payload []byte) {
	m.payloadIndex.Remove(uint32(i), decodePayload(m.payloads[i]))
	m.recBytes += len(payload) - len(m.payloads[i])
	m.payloads[i] = payload
	m.payloadIndex.Add(uint32(i), decodePayload(payload))
}

// appendLocked adds r, whose id the store does not hold, as a new row.
// m.mu must be held for writing; the caller flushes the payload index.
func (m *Memory) appendLocked(r Record, e *quant.Encoded) {
	i := len(m.ids)
	switch {
	case m.codes != nil && e != nil:
		m.codes.AppendEncoded(*e)
	case m.codes != nil:
		m.codes.Append(r.Vector)
	}
	switch {
	case m.diskCodes():
		diskFailed(m.disk.AppendCoded(r.Vector, m.codes.Row(i), m.codes.Norm(i)))
	case m.disk != nil:
		diskFailed(m.disk.Append(r.Vector))
	default:
		m.rows.Append()
	}
	m.index[r.ID] = i
	m.ids = append(m.ids, r.ID)
	m.payloads = append(m.payloads, r.Payload)
	m.recBytes += len(r.ID) + len(r.Payload)
	m.payloadIndex.Add(uint32(i), decodePayload(r.Payload))
	if m.disk == nil {
		m.writeRow(i, r.Vector)
	}
	m.ivfAppend(r.Vector)
	m.setSparseLocked(i, r.Sparse)
	m.appendNamedLocked(i, r.Named)
}

// decodePayload decodes a stored payload for the index and for filters. A
// payload that does not decode (none should: the server checks every
// payload it accepts) counts as none, for the index and filters alike.
func decodePayload(b []byte) map[string]any {
	d, err := filter.DecodePayload(b)
	if err != nil {
		return nil
	}
	return d
}

// writeRow copies v into row i, first saving the row for an open view
// that has not read it yet. m.mu must be held for writing and row i must
// be below m.rows.Len(); segment files that keep codes take row i's
// codes with it, so m.codes must hold v's already.
func (m *Memory) writeRow(i int, v []float32) {
	if m.diskCodes() {
		diskFailed(m.disk.SetCoded(i, v, m.codes.Row(i), m.codes.Norm(i)))
		return
	}
	if m.disk != nil {
		diskFailed(m.disk.Set(i, v))
		return
	}
	m.view.preserve(m.rows, i)
	copy(m.rows.Row(i), v)
}

// Delete removes id and reports whether it was there.
func (m *Memory) Delete(_ context.Context, p Placement, id string) (bool, error) {
	m.lockWrite()
	defer m.mu.Unlock()
	m.setPlacement(p)
	defer m.payloadIndex.Flush()
	return m.deleteLocked(id), nil
}

// DeleteMatching removes every listed id and every document f matches
// (f nil: none by filter), atomically, and reports how many it removed.
// The filter is evaluated under the write lock, so on a replica applying
// a log entry it sees exactly the state every other replica sees there.
func (m *Memory) DeleteMatching(_ context.Context, p Placement, ids []string, f *filter.Filter) (int, error) {
	m.lockWrite()
	defer m.mu.Unlock()
	m.setPlacement(p)
	defer m.payloadIndex.Flush()
	doomed := ids
	if !f.Empty() {
		// Ids first: deleting swaps rows, so row numbers would go stale.
		rows := m.selectRows(f)
		doomed = slices.Clone(ids)
		for _, r := range rows.ToArray() {
			doomed = append(doomed, m.ids[r])
		}
	}
	n := 0
	for _, id := range doomed {
		if m.deleteLocked(id) {
			n++
		}
	}
	return n, nil
}

// deleteLocked removes id, swapping the last row into its place, and
// reports whether it was there. m.mu must be held for writing; the caller
// flushes the payload index.
func (m *Memory) deleteLocked(id string) bool {
	i, ok := m.index[id]
	if !ok {
		return false
	}
	last := len(m.ids) - 1
	m.recBytes -= len(id) + len(m.payloads[i])
	m.payloadIndex.Remove(uint32(i), decodePayload(m.payloads[i]))
	if i != last {
		moved := decodePayload(m.payloads[last])
		m.payloadIndex.Remove(uint32(last), moved)
		m.payloadIndex.Add(uint32(i), moved)
		if m.disk == nil {
			m.writeRow(i, m.rows.Row(last))
		}
		m.ids[i] = m.ids[last]
		m.payloads[i] = m.payloads[last]
		m.index[m.ids[i]] = i
	}
	m.ids = m.ids[:last]
	m.payloads[last] = nil
	m.payloads = m.payloads[:last]
	if m.disk != nil {
		diskFailed(m.disk.Delete(i))
	} else {
		m.rows.Truncate(last)
	}
	if m.codes != nil {
		m.codes.Delete(i)
	}
	m.ivfDelete(i, last)
	m.deleteSparseLocked(i, last)
	m.deleteNamedLocked(i, last)
	delete(m.index, id)
	return true
}

// Get returns a copy of id's vector.
func (m *Memory) Get(id string) ([]float32, bool) {
	r, ok := m.Record(id)
	return r.Vector, ok
}

// Record returns a copy of id's vector with its payload.
func (m *Memory) Record(id string) (Record, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i, ok := m.index[id]
	if !ok {
		return Record{}, false
	}
	out := make([]float32, m.dim)
	copy(out, m.row(i))
	return Record{ID: id, Vector: out, Payload: m.payloads[i], Sparse: m.sparseOf(i), Named: m.namedOf(i)}, true
}

// View runs fn with a consistent read-only view of every row; writes
// wait until fn returns, so fn must not retain the rows.
func (m *Memory) View(fn func(vector.Rows) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(m.rowsView())
}

// Len is the number of stored vectors.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.ids)
}

// Bytes estimates the memory the store holds: its rows' chunks (as allocated;
// on disk, only their slot table), ids and payloads (their bytes, not the
// runtime's headers), int8 codes and index (IndexStats' Bytes).
func (m *Memory) Bytes() int {
	idx := m.IndexStats().Bytes
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.disk != nil {
		return m.disk.HeapBytes() + m.recBytes + idx + m.sparseBytes() + m.namedBytes()
	}
	return m.rows.Bytes() + m.recBytes + idx + m.sparseBytes() + m.namedBytes()
}

// Placement is the placement of the last write, zero before any.
func (m *Memory) Placement() Placement {
	if p := m.placement.Load(); p != nil {
		return *p
	}
	return Placement{}
}

// setPlacement records p, the placement the write being applied was made
// under. m.mu must be held for writing.
func (m *Memory) setPlacement(p Placement) {
	if cur := m.placement.Load(); cur == nil || *cur != p {
		m.placement.Store(&p)
	}
}

// SetTrained records a trained value the replicas agree on (committed
// through the log): an int8 scale, IVF centroids. value must not be
// modified afterwards. Setting TrainedInt8Scale on a QuantInt8 store
// encodes every row with it (under the write lock); the error says why a
// scale could not be used (the store then keeps no codes and scans
// exactly, on every replica alike). serving says whether the replica was
// serving reads when it applied the value: an IVF store that was keeps
// serving from its flat codes until the index of new centroids is built,
// one that was not (restarting, catching up) waits for the index
// (IndexReady).
func (m *Memory) SetTrained(name string, value []byte, serving bool) error {
	m.lock()
	defer m.mu.Unlock()
	m.trained[name] = value
	var err error
	if name == TrainedInt8Scale {
		err = m.applyInt8Scale(value)
	}
	if m.indexKind == IndexIVF && (name == TrainedInt8Scale || name == TrainedIVFCentroids) {
		if ierr := m.setIVFTrained(serving); err == nil {
			err = ierr
		}
	}
	if m.indexKind == IndexIVF && name == TrainedIVFNProbe {
		m.applyNProbeLocked()
	}
	return err
}

// Trained returns a trained value, nil if never set.
func (m *Memory) Trained(name string) []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.trained[name]
}

// Reset empties the store (a snapshot of rows rows is about to replace it)
// and sets what a snapshot carries besides rows. The row chunks, ids and
// index are sized for rows at once, so a large snapshot streaming in
// grows nothing.
func (m *Memory) Reset(p Placement, trained map[string][]byte, rows int) {
	m.lock()
	defer m.mu.Unlock()
	if m.disk != nil {
		diskFailed(m.disk.Reset())
	} else {
		m.rows = vector.NewArena[float32](max(m.dim, 1), 0)
		m.rows.Reserve(rows)
	}
	m.ids = make([]string, 0, rows)
	m.payloads = make([][]byte, 0, rows)
	m.index = make(map[string]int, rows)
	m.recBytes = 0
	m.setPlacement(p)
	m.trained = maps.Clone(trained)
	if m.trained == nil {
		m.trained = map[string][]byte{}
	}
	m.codes = nil // FinishRestore encodes the restored rows
	m.payloadIndex.Reset()
	m.resetSparseLocked()
	m.resetNamedLocked(rows)
	// No index until the restored rows are built into one, no build until
	// they are all in (FinishRestore), and any build under way is stale.
	m.ivf = ivfState{gen: m.ivf.gen + 1, restoring: true}
}

// errViewOpen is returned by OpenView while another view is open; raft
// takes one snapshot at a time, so it means a bug.
var errViewOpen = errors.New("a snapshot view is already open")

// OpenView freezes a consistent view of the store for a snapshot without
// copying the rows (see Memory). Close it when done; until then writes to
// rows it has not read cost a row copy each.
func (m *Memory) OpenView() (*View, error) {
	// The sparse postings are encoded first under the read lock (about
	// 20 ms a million postings), so scans go on meanwhile; raft opens
	// views between applies, so no write lands before the write lock
	// below, and if one did the postings are encoded again there.
	m.mu.RLock()
	postings, gen := m.encodeSparseLocked(), m.sparseGen
	m.mu.RUnlock()
	m.lock()
	defer m.mu.Unlock()
	if m.view != nil {
		return nil, errViewOpen
	}
	if gen != m.sparseGen {
		postings = m.encodeSparseLocked()
	}
	v := &View{
		m:         m,
		dim:       m.dim,
		ids:       slices.Clone(m.ids),
		payloads:  slices.Clone(m.payloads),
		placement: m.Placement(),
		trained:   maps.Clone(m.trained),
		saved:     map[int][]float32{},
		// The postings as the view opened (8 bytes a posting for the
		// snapshot's life): the lists change in place, so a lazy read
		// would see later writes.
		sparse: postings,
		named:  m.openNamedViews(),
	}
	if m.disk != nil {
		v.frozen = m.disk.Freeze()
	} else {
		v.rows = m.rows.Clone()
	}
	// The index's lists, when it is the index of the committed centroids
	// (4 bytes a row): a restore builds it again without assigning rows.
	if s := &m.ivf; s.x != nil && s.built == s.gen && s.pending == nil && s.x.Len() == len(m.ids) {
		v.ivfLists = s.x.Assignment()
	}
	m.view = v
	return v, nil
}

// View is a frozen state of a Memory, read in chunks by a snapshot while
// writes go on.
type View struct {
	m    *Memory
	dim  int
	rows *vector.Arena[float32] // the chunks as the view opened; rows not in saved are unchanged
	// frozen holds the rows instead of rows for a store on disk: its
	// segments are never written where the view reads.
	frozen    *segment.Frozen
	ids       []string
	payloads  [][]byte
	placement Placement
	trained   map[string][]byte
	saved     map[int][]float32 // rows overwritten since the view opened
	read      int               // rows below this were read and need no saving
	// ivfLists is each row's IVF list when the view opened, nil when the
	// store had no current index.
	ivfLists []int32
	// sparse is the sparse indexes' postings when the view opened.
	sparse []NamedPostings
	// named are the named vector spaces as the view opened, nil when the
	// store has none.
	named map[string]*namedView
}

// IVFLists is each row's list in the store's IVF index when the view
// opened (nil when it had no index of its committed centroids).
func (v *View) IVFLists() []int32 { return v.ivfLists }

// Len is the number of rows in the view.
func (v *View) Len() int { return len(v.ids) }

// Dim is the dimension of the view's rows.
func (v *View) Dim() int { return v.dim }

// Placement is the placement the view's rows were written under.
func (v *View) Placement() Placement { return v.placement }

// Trained is the trained values the view's rows were encoded with; the
// caller must not modify it.
func (v *View) Trained() map[string][]byte { return v.trained }

// preserve saves row i for the view before the store's rows overwrite
// it, unless the view no longer needs it (read, or past its rows) or does
// not share its chunk (the first chunk grew and was replaced since the
// view opened, or a chunk was freed and another allocated: the view
// still holds the old one). m.mu is held for writing. A nil view does
// nothing.
func (v *View) preserve(rows *vector.Arena[float32], i int) {
	if v == nil || v.frozen != nil || i < v.read || i >= len(v.ids) || !rows.SameChunk(v.rows, i) {
		return
	}
	if _, ok := v.saved[i]; ok {
		return
	}
	v.saved[i] = slices.Clone(v.rows.Row(i))
}

// Read calls fn for rows [from, to) as they were when the view opened,
// holding the store's read lock only for this chunk. Chunks must be read
// in order. fn must not retain vec.
func (v *View) Read(from, to int, fn func(id string, vec []float32, payload []byte) error) error {
	return v.ReadRecords(from, to, func(r Record) error { return fn(r.ID, r.Vector, r.Payload) })
}

// ReadRecords is Read of whole records: a row's id, vector, payload and
// named dense vectors (not its sparse vectors: the view's postings carry
// those). fn must not retain the record's vectors.
func (v *View) ReadRecords(from, to int, fn func(Record) error) error {
	v.m.mu.RLock()
	defer v.m.mu.RUnlock()
	for i := from; i < to; i++ {
		row, ok := v.saved[i]
		switch {
		case v.frozen != nil:
			row = v.frozen.Row(i)
		case !ok:
			row = v.rows.Row(i)
		}
		if err := fn(Record{ID: v.ids[i], Vector: row[:v.dim], Payload: v.payloads[i], Named: v.namedRow(i)}); err != nil {
			return err
		}
	}
	// Rows read need no saving any more; dropping the saved copies under
	// the read lock is safe because only writers (excluded) touch saved.
	for i := from; i < to; i++ {
		delete(v.saved, i)
		for _, nv := range v.named {
			delete(nv.saved, i)
		}
	}
	v.read = to
	return nil
}

// Close releases the view; the store stops saving rows for it.
func (v *View) Close() {
	v.m.lock()
	defer v.m.mu.Unlock()
	if v.m.view == v {
		v.m.view = nil
	}
	v.saved = nil
	v.named = nil
	if v.frozen != nil {
		// Releasing only unmaps and removes files the store no longer
		// uses; an error here loses nothing the store holds.
		_ = v.frozen.Release()
		v.frozen = nil
	}
}
