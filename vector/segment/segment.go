package segment

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/trawl-search/trawl/vector"
)

// SegmentBytes is the size a segment's rows aim at: the largest power of
// two rows that fits in it makes a segment (within MinSegmentRows and
// MaxSegmentRows). 64 MiB is 8 192 rows of 1536-D, so compacting a
// half-dead segment copies at most 32 MiB, and a million such rows are
// about 125 files.
const SegmentBytes = 64 << 20

// Segment row bounds; MinSegmentRows is a multiple of the scans' blocks.
const (
	MinSegmentRows = 512
	MaxSegmentRows = 1 << 20
)

// Ext is the extension of segment files.
const Ext = ".npy"

// SegmentRows is the number of rows a segment of dim-D float32 rows holds.
func SegmentRows(dim int) int {
	n := MinSegmentRows
	for n < MaxSegmentRows && 2*n*dim*4 <= SegmentBytes {
		n *= 2
	}
	return n
}

// segment is one mapped file. The mapping covers every row the segment
// may hold; the file grows (doubling) as rows are written, so a small
// collection's file stays small.
type segment struct {
	path string
	file *os.File
	mem  []byte    // the whole mapping
	rows []float32 // the rows, inside mem
	// header is the header's length; room is how many rows the file holds
	// now (rows past it are mapped but beyond the file's end: never
	// touched).
	header, room, dim int
	// refs counts the Set (while the segment is in it) and every Frozen
	// holding it; the mapping is released at zero.
	refs int
	// codes is the segment's codes file while the set keeps codes
	// (codes.go), nil otherwise.
	codes *codesFile
}

func (s *segment) release() error {
	s.refs--
	if s.refs > 0 {
		return nil
	}
	s.rows = nil
	err := unix.Munmap(s.mem)
	s.mem = nil
	err = errors.Join(err, s.file.Close(), os.Remove(s.path))
	if s.codes != nil {
		err = errors.Join(err, s.codes.release())
		s.codes = nil
	}
	return err
}

// Set is a growable array of dim-D float32 rows in segment files under
// one directory. Row i is slot slots[i]; slot s is row s&(segRows-1) of
// segment s>>shift. Like vector.Arena it is not safe for concurrent use:
// its owner guards it (writes exclusive, reads shared), and views of it
// (Rows) are valid until the next write.
type Set struct {
	dir   string
	dim   int
	shift uint8
	segs  []*segment // by segment number; nil: a free number
	data  [][]float32
	live  []int // live rows by segment number
	slots []uint32
	// active is the segment being filled (-1: none) and fill how many of
	// its slots are written.
	active, fill int
	// sealed is the segment last filled, -1: none; it is checked for
	// compaction once the operation that filled it is done.
	sealed int
	// seq names the next file.
	seq    uint64
	closed bool
	// codesTag is the caller's tag of the codes every segment keeps
	// beside its rows (EnableCodes), nil when they keep none.
	codesTag []byte
	// prep serializes Prepare, which runs under the owner's read lock
	// (beside readers and other Prepares, never beside a write) and alone
	// changes next, seq and the active file's room there: no reader reads
	// them.
	prep sync.Mutex
	// next is a segment Prepare made, for newSegment to take; nil: none.
	next *segment
}

// Open returns an empty set of dim-D rows in dir, created if missing. Any
// segment file already in dir (left by an earlier process) is removed.
func Open(dir string, dim int) (*Set, error) {
	return OpenRows(dir, dim, SegmentRows(dim))
}

// OpenRows is Open with segRows rows a segment, a power of two (tests use
// small segments to reach their edges).
func OpenRows(dir string, dim, segRows int) (*Set, error) {
	if dim <= 0 || segRows <= 0 || segRows&(segRows-1) != 0 {
		return nil, fmt.Errorf("segment: %d-D rows in segments of %d", dim, segRows)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("segment directory: %w", err)
	}
	old, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment directory: %w", err)
	}
	for _, e := range old {
		if !e.IsDir() && strings.HasSuffix(e.Name(), Ext) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("remove stale segment: %w", err)
			}
		}
	}
	return &Set{dir: dir, dim: dim, shift: uint8(bits.TrailingZeros(uint(segRows))), active: -1, sealed: -1}, nil
}

// Dir is the directory of the set's files.
func (s *Set) Dir() string { return s.dir }

// Len is the number of rows.
func (s *Set) Len() int { return len(s.slots) }

// Segments is the number of segment files.
func (s *Set) Segments() int {
	n := 0
	for _, g := range s.segs {
		if g != nil {
			n++
		}
	}
	return n
}

// Row returns row i; it aliases the mapping and must not be written.
func (s *Set) Row(i int) []float32 {
	sl := int(s.slots[i])
	c, j := s.data[sl>>s.shift], sl&(1<<s.shift-1)
	return c[j*s.dim : (j+1)*s.dim : (j+1)*s.dim]
}

// Rows is the rows as a vector.Rows with ids (one a row).
func (s *Set) Rows(ids []string) vector.Rows {
	return vector.SlotRows(s.dim, ids, s.data, s.shift, s.slots[:len(ids)])
}

// Append adds v as the last row.
func (s *Set) Append(v []float32) error {
	sl, err := s.write(v)
	if err != nil {
		return err
	}
	s.slots = append(s.slots, sl)
	return s.settle()
}

// Set replaces row i with v.
func (s *Set) Set(i int, v []float32) error {
	sl, err := s.write(v)
	if err != nil {
		return err
	}
	old := s.slots[i]
	s.slots[i] = sl
	return errors.Join(s.kill(old), s.settle())
}

// Delete removes row i, moving the last row into its place (as the store
// deletes: rows stay dense).
func (s *Set) Delete(i int) error {
	last := len(s.slots) - 1
	old := s.slots[i]
	s.slots[i] = s.slots[last]
	s.slots = s.slots[:last]
	return errors.Join(s.kill(old), s.settle())
}

// Reset empties the set, removing its files (those a Frozen holds go when
// it is released).
func (s *Set) Reset() error {
	var err error
	for n, g := range s.segs {
		if g != nil {
			err = errors.Join(err, g.release())
			s.segs[n] = nil
		}
	}
	if s.next != nil {
		err = errors.Join(err, s.next.release())
		s.next = nil
	}
	s.segs, s.data, s.live, s.slots = nil, nil, nil, nil
	s.active, s.fill, s.sealed = -1, 0, -1
	s.codesTag = nil
	return err
}

// Close releases the set; its files are removed, and writes fail after.
func (s *Set) Close() error {
	s.closed = true
	return s.Reset()
}

// ErrClosed is the error of a write to a closed Set.
var ErrClosed = errors.New("segment: set closed")

// HeapBytes is the Go heap the set holds: its slot table.
func (s *Set) HeapBytes() int { return cap(s.slots) * 4 }

// write stores v in the next free slot and returns it.
func (s *Set) write(v []float32) (uint32, error) { return s.writeCoded(v, nil, 0) }

// writeCoded stores v, and its codes and norm when the set keeps codes,
// in the next free slot and returns it.
func (s *Set) writeCoded(v []float32, codes []int8, norm float32) (uint32, error) {
	if len(v) != s.dim {
		return 0, fmt.Errorf("segment: a %d-D row in a %d-D set", len(v), s.dim)
	}
	if s.closed {
		return 0, ErrClosed
	}
	if s.codesTag != nil && len(codes) != s.dim {
		return 0, fmt.Errorf("segment: a row with %d codes in a set that keeps %d a row", len(codes), s.dim)
	}
	if s.active < 0 || s.fill == 1<<s.shift {
		if s.active >= 0 {
			s.sealed = s.active
		}
		if err := s.newSegment(); err != nil {
			return 0, err
		}
	}
	if g := s.segs[s.active]; s.fill == g.room {
		if err := g.grow(1 << s.shift); err != nil {
			return 0, err
		}
	}
	copy(s.data[s.active][s.fill*s.dim:], v)
	if c := s.segs[s.active].codes; c != nil {
		c.put(s.fill, codes, norm)
	}
	sl := uint32(s.active<<s.shift | s.fill)
	s.fill++
	s.live[s.active]++
	return sl, nil
}

// maxSlot bounds slot numbers to what a uint32 holds.
const maxSlot = 1<<32 - 1

// newSegment makes a segment (the one Prepare made, if it keeps codes
// as the set now does, else a new file) the active one, under the lowest
// free segment number.
func (s *Set) newSegment() error {
	n := slices.Index(s.segs, nil)
	if n < 0 {
		n = len(s.segs)
	}
	if uint64(n+1)<<s.shift-1 > maxSlot {
		return fmt.Errorf("segment: %d segments of %d rows: out of slots", n+1, 1<<s.shift)
	}
	g := s.next
	s.next = nil
	if g != nil && (g.codes != nil) != (s.codesTag != nil) {
		if err := g.release(); err != nil {
			return err
		}
		g = nil
	}
	if g == nil {
		var err error
		if g, err = s.createSegment(); err != nil {
			return err
		}
	}
	if n == len(s.segs) {
		s.segs = append(s.segs, nil)
		s.data = append(s.data, nil)
		s.live = append(s.live, 0)
	}
	s.segs[n], s.data[n], s.live[n] = g, g.rows, 0
	s.active, s.fill = n, 0
	return nil
}

// createSegment creates, sizes and maps the next file, with a codes file
// when the set keeps codes.
func (s *Set) createSegment() (*segment, error) {
	rows := 1 << s.shift
	path := filepath.Join(s.dir, fmt.Sprintf("%06d%s", s.seq, Ext))
	s.seq++
	g, err := create(path, rows, s.dim)
	if err != nil {
		return nil, err
	}
	if s.codesTag != nil {
		g.codes, err = createCodes(filepath.Join(s.dir, fmt.Sprintf("%06d%s", s.seq, CodesExt)), rows, s.dim, g.room)
		s.seq++
		if err != nil {
			return nil, errors.Join(err, g.release())
		}
	}
	return g, nil
}

// firstRoom is how many rows a new segment file has room for; it doubles
// from there up to the segment's rows.
const firstRoom = 256

// create makes a segment file with room for a few zero rows and maps it
// for reading and writing, for up to rows rows.
func create(path string, rows, dim int) (g *segment, err error) {
	header := len(npyHeader(rows, dim, 0))
	size := header + rows*dim*4
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	g = &segment{path: path, file: f, header: header, dim: dim, refs: 1}
	defer func() {
		if err != nil {
			if g.mem != nil {
				_ = unix.Munmap(g.mem)
			}
			_ = f.Close()
			_ = os.Remove(path)
		}
	}()
	if err := g.grow(min(firstRoom, rows)); err != nil {
		return nil, err
	}
	// Mapping past the file's end is allowed; those pages are never
	// touched until grow has extended the file over them.
	g.mem, err = unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map segment: %w", err)
	}
	g.rows = unsafe.Slice((*float32)(unsafe.Pointer(&g.mem[header])), rows*dim)
	return g, nil
}

// grow extends the file to twice its rows (room for want at first, at
// most max rows), its blocks allocated, and rewrites the header's shape.
// Blocks are reserved before any row is written to them: a write into a
// mapped hole of a full disk is a SIGBUS, a failed fallocate an error the
// caller sees (filesystems without fallocate get a sparse file).
func (g *segment) grow(max int) error {
	room := min(max, 2*g.room)
	if g.room == 0 {
		room = max
	}
	size := int64(g.header + room*g.dim*4)
	fd := int(g.file.Fd())
	if err := unix.Fallocate(fd, 0, 0, size); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("allocate segment: %w", err)
	}
	if err := g.file.Truncate(size); err != nil {
		return fmt.Errorf("size segment: %w", err)
	}
	if _, err := g.file.WriteAt(npyHeader(room, g.dim, g.header), 0); err != nil {
		return fmt.Errorf("write segment header: %w", err)
	}
	if g.codes != nil {
		if err := g.codes.grow(room); err != nil {
			return err
		}
	}
	g.room = room
	return nil
}

// settle compacts the segment last filled if rows died in it while it
// was being filled.
func (s *Set) settle() error {
	n := s.sealed
	s.sealed = -1
	if n < 0 || s.segs[n] == nil || n == s.active || s.live[n] >= 1<<s.shift/2 {
		return nil
	}
	return s.compact(n)
}

// kill marks slot sl dead, and compacts its segment once it is less than
// half alive and no longer filled.
func (s *Set) kill(sl uint32) error {
	n := int(sl >> s.shift)
	s.live[n]--
	if n == s.active || s.live[n] >= 1<<s.shift/2 {
		return nil
	}
	return s.compact(n)
}

// compact copies segment n's live rows to the end and drops it. Live rows
// are found from the slot table: the set keeps no reverse map.
func (s *Set) compact(n int) error {
	// segs[n] stays set while rows are copied, so a segment made on the
	// way does not take number n.
	g := s.segs[n]
	for i, sl := range s.slots {
		if int(sl>>s.shift) != n {
			continue
		}
		j := int(sl & (1<<s.shift - 1))
		var (
			codes []int8
			norm  float32
		)
		if g.codes != nil {
			codes, norm = g.codes.get(j)
		}
		ns, err := s.writeCoded(g.rows[j*s.dim:(j+1)*s.dim], codes, norm)
		if err != nil {
			return err
		}
		s.slots[i] = ns
		s.live[n]--
	}
	s.segs[n], s.data[n], s.live[n] = nil, nil, 0
	return g.release()
}

// Frozen is the rows of a Set as they were when Freeze was called: it
// holds the segments they are in, so writes, compactions and a Reset of
// the set do not change what it reads.
type Frozen struct {
	dim   int
	shift uint8
	segs  []*segment
	data  [][]float32
	slots []uint32
	// written and size are, by segment number, the rows written and the
	// file's bytes when the set was frozen; active and seq are the set's.
	written []int
	size    []int64
	active  int
	seq     uint64
	// codes are the segments' codes files when the set kept codes (by
	// segment number), codesTag their tag.
	codes    []*codesFile
	codesTag []byte
}

// Freeze returns the rows as they are now; Release it under the same
// guard as the Set's writes.
func (s *Set) Freeze() *Frozen {
	segs := slices.Clone(s.segs)
	f := &Frozen{dim: s.dim, shift: s.shift, segs: segs, data: slices.Clone(s.data), slots: slices.Clone(s.slots),
		written: make([]int, len(segs)), size: make([]int64, len(segs)), active: s.active, seq: s.seq}
	if s.codesTag != nil {
		f.codes, f.codesTag = make([]*codesFile, len(segs)), s.codesTag
	}
	for n, g := range segs {
		if g == nil {
			continue
		}
		g.refs++
		if f.codes != nil {
			g.codes.refs++
			f.codes[n] = g.codes
		}
		// A segment other than the active one was sealed full.
		f.written[n] = 1 << s.shift
		if n == s.active {
			f.written[n] = s.fill
		}
		f.size[n] = int64(g.header + g.room*g.dim*4)
	}
	return f
}

// Len is the number of rows.
func (f *Frozen) Len() int { return len(f.slots) }

// Row returns row i; it aliases the mapping.
func (f *Frozen) Row(i int) []float32 {
	sl := int(f.slots[i])
	c, j := f.data[sl>>f.shift], sl&(1<<f.shift-1)
	return c[j*f.dim : (j+1)*f.dim : (j+1)*f.dim]
}

// Release lets go of the segments; the Frozen must not be read after.
func (f *Frozen) Release() error {
	var err error
	for _, g := range f.segs {
		if g != nil {
			err = errors.Join(err, g.release())
		}
	}
	for _, c := range f.codes {
		if c != nil {
			err = errors.Join(err, c.release())
		}
	}
	f.segs, f.data, f.slots, f.codes = nil, nil, nil, nil
	return err
}

// Prepare readies the files the next n rows written (appended or set)
// will go to, so the writes that follow neither grow nor create files nor
// stop in the kernel to fault their pages: it grows the active segment's
// file to hold them, makes the next segment when they spill past it
// (newSegment takes it), and faults in the pages they and their codes
// will occupy. It changes no row and nothing the set's readers read, so
// the owner's read lock is enough: a writer calls it before taking its
// write lock. Errors are left for the writes to meet and report.
func (s *Set) Prepare(n int) {
	s.prep.Lock()
	defer s.prep.Unlock()
	if s.closed || n <= 0 {
		return
	}
	segRows := 1 << s.shift
	if s.active >= 0 && s.fill < segRows {
		hi := min(s.fill+n, segRows)
		s.ready(s.segs[s.active], s.fill, hi)
		n -= hi - s.fill
	}
	if n <= 0 {
		return
	}
	if s.next == nil {
		g, err := s.createSegment()
		if err != nil {
			return
		}
		s.next = g
	}
	s.ready(s.next, 0, min(n, segRows))
}

// ready grows g's file to hold slots [lo, hi) and faults in their pages,
// rows and codes.
func (s *Set) ready(g *segment, lo, hi int) {
	for g.room < hi {
		if err := g.grow(1 << s.shift); err != nil {
			return
		}
	}
	vector.PopulateWrite(g.rows[lo*s.dim : hi*s.dim])
	if c := g.codes; c != nil {
		vector.PopulateWrite(c.mem[c.header+lo*c.width : c.header+hi*c.width])
	}
}
