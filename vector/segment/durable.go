package segment

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// File is one segment file as a Manifest names it. Its first Rows rows
// never change once written (rows are only appended, and a compaction
// writes a new file), so the file's prefix is what a snapshot holds even
// while the set goes on appending to it.
type File struct {
	// Number is the segment's number: slot s is in segment s>>shift.
	Number int
	// Name is the file's base name in the set's directory.
	Name string
	// Rows is how many rows were written to it when the set was frozen.
	Rows int
	// Bytes is the file's size then: header plus the rows it had room
	// for.
	Bytes int64
	// Path is where the frozen file is (not part of what is recorded).
	Path string
	// Codes is the segment's codes file (codes.go) when the set kept
	// codes, nil otherwise: its Number and Rows are the segment's.
	Codes *File
}

// Manifest is what reopens a Set's rows from its files: the files, the
// rows written in each, and the slot table.
type Manifest struct {
	Dim     int
	SegRows int
	// Seq names the next file the set creates; Active is the segment
	// being filled (-1: none).
	Seq    uint64
	Active int
	Files  []File
	Slots  []uint32
	// CodesTag is the tag of the codes the files keep beside the rows
	// (Set.EnableCodes), nil when they keep none.
	CodesTag []byte
}

// Manifest is the frozen rows as files and a slot table.
func (f *Frozen) Manifest() Manifest {
	m := Manifest{Dim: f.dim, SegRows: 1 << f.shift, Seq: f.seq, Active: f.active, Slots: f.slots, CodesTag: f.codesTag}
	for n, g := range f.segs {
		if g == nil {
			continue
		}
		file := File{Number: n, Name: filepath.Base(g.path), Rows: f.written[n], Bytes: f.size[n], Path: g.path}
		if f.codes != nil {
			c := f.codes[n]
			file.Codes = &File{Number: n, Name: filepath.Base(c.path), Rows: f.written[n],
				Bytes: int64(c.header + f.room(n)*c.width), Path: c.path}
		}
		m.Files = append(m.Files, file)
	}
	return m
}

// Sync makes the frozen rows durable: it writes each file's mapped rows
// back (msync) and flushes the file (fsync). It may run while the set
// goes on writing: what it syncs past the frozen rows is harmless.
func (f *Frozen) Sync() error {
	for n, g := range f.segs {
		if g == nil {
			continue
		}
		// The mapping starts page-aligned; msync covers the written rows.
		end := min(g.header+f.written[n]*g.dim*4, len(g.mem))
		if end > 0 {
			if err := unix.Msync(g.mem[:end], unix.MS_SYNC); err != nil {
				return fmt.Errorf("sync segment %s: %w", g.path, err)
			}
		}
		if err := g.file.Sync(); err != nil {
			return fmt.Errorf("sync segment %s: %w", g.path, err)
		}
		if f.codes != nil {
			if err := f.codes[n].sync(f.written[n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// room is how many rows segment n's file had room for when frozen.
func (f *Frozen) room(n int) int {
	g := f.segs[n]
	return int((f.size[n] - int64(g.header)) / int64(4*f.dim))
}

// Restore returns the set of m's rows in dir. place puts each of m's
// files at the path it is given in dir (a hard link to a snapshot's file,
// or a copy of one received); Restore then maps it, and the set goes on
// appending after the rows m records. Rows past a file's recorded rows
// (written after the manifest was taken) are overwritten.
//
// Files already in dir are left alone: they may be a previous set's,
// held by a Frozen view until it is released. The restored files get
// names no file in dir has.
func Restore(dir string, m Manifest, place func(f File, path string) error) (_ *Set, err error) {
	if m.Dim <= 0 || m.SegRows <= 0 || m.SegRows&(m.SegRows-1) != 0 || m.SegRows > MaxSegmentRows {
		return nil, fmt.Errorf("segment manifest: %d-D rows in segments of %d", m.Dim, m.SegRows)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("segment directory: %w", err)
	}
	old, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment directory: %w", err)
	}
	s := &Set{dir: dir, dim: m.Dim, shift: uint8(bits.TrailingZeros(uint(m.SegRows))), active: -1, sealed: -1, seq: m.Seq,
		codesTag: m.CodesTag}
	for _, e := range old {
		// Rows' files are NNNNNN.npy, codes files NNNNNN.codes.npy.
		var n uint64
		if _, err := fmt.Sscanf(e.Name(), "%d", &n); err == nil && strings.HasSuffix(e.Name(), Ext) {
			s.seq = max(s.seq, n+1)
		}
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	rows := make(map[int]int, len(m.Files))
	for _, f := range m.Files {
		if f.Name != filepath.Base(f.Name) || !strings.HasSuffix(f.Name, Ext) || f.Number < 0 || f.Number >= 1<<(32-bits.TrailingZeros(uint(m.SegRows))) {
			return nil, fmt.Errorf("segment manifest: file %q number %d", f.Name, f.Number)
		}
		if _, dup := rows[f.Number]; dup || f.Rows < 0 || f.Rows > m.SegRows {
			return nil, fmt.Errorf("segment manifest: file %q: segment %d with %d rows", f.Name, f.Number, f.Rows)
		}
		path := filepath.Join(dir, fmt.Sprintf("%06d%s", s.seq, Ext))
		s.seq++
		if err := place(f, path); err != nil {
			_ = os.Remove(path)
			return nil, fmt.Errorf("segment file %s: %w", f.Name, err)
		}
		g, err := openFile(path, m.SegRows, m.Dim)
		if err != nil {
			_ = os.Remove(path)
			return nil, err
		}
		if g.room < f.Rows {
			_ = g.close()
			return nil, fmt.Errorf("segment file %s holds %d rows, the manifest %d", f.Name, g.room, f.Rows)
		}
		for len(s.segs) <= f.Number {
			s.segs, s.data, s.live = append(s.segs, nil), append(s.data, nil), append(s.live, 0)
		}
		s.segs[f.Number], s.data[f.Number] = g, g.rows
		rows[f.Number] = f.Rows
		if (f.Codes != nil) != (m.CodesTag != nil) {
			return nil, fmt.Errorf("segment manifest: file %q with codes %v where the set keeps codes %v", f.Name, f.Codes != nil, m.CodesTag != nil)
		}
		if f.Codes != nil {
			if g.codes, err = restoreCodes(s, *f.Codes, g.room, place); err != nil {
				return nil, fmt.Errorf("segment file %s: %w", f.Name, err)
			}
		}
	}
	for i, sl := range m.Slots {
		n, j := int(sl>>s.shift), int(sl&(1<<s.shift-1))
		if r, ok := rows[n]; !ok || j >= r {
			return nil, fmt.Errorf("segment manifest: row %d in slot %d of segment %d, which holds %d rows", i, j, n, r)
		}
		s.live[n]++
	}
	s.slots = m.Slots
	s.active = -1
	if m.Active >= 0 {
		r, ok := rows[m.Active]
		if !ok {
			return nil, fmt.Errorf("segment manifest: active segment %d has no file", m.Active)
		}
		s.active, s.fill = m.Active, r
	}
	return s, nil
}

// openFile maps an existing segment file of up to rows dim-D rows for
// reading and writing, its room taken from its size.
func openFile(path string, rows, dim int) (_ *segment, err error) {
	header := len(npyHeader(rows, dim, 0))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	g := &segment{path: path, file: f, header: header, dim: dim, refs: 1}
	defer func() {
		if err != nil {
			_ = g.close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	body := st.Size() - int64(header)
	if body < 0 || body%int64(dim*4) != 0 || body/int64(dim*4) > int64(rows) {
		return nil, fmt.Errorf("segment file %s: %d bytes is not a %d-byte header and up to %d rows of %d-D", path, st.Size(), header, rows, dim)
	}
	var magic [10]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil {
		return nil, fmt.Errorf("segment file %s: %w", path, err)
	}
	if string(magic[:6]) != "\x93NUMPY" || int(magic[8])|int(magic[9])<<8 != header-10 {
		return nil, fmt.Errorf("segment file %s: not a .npy file of %d-D rows in segments of %d", path, dim, rows)
	}
	g.room = int(body / int64(dim*4))
	// The header's shape is the rows the file has room for; a file sent
	// while its set grew it may say more.
	if _, err := f.WriteAt(npyHeader(g.room, dim, header), 0); err != nil {
		return nil, fmt.Errorf("write segment header: %w", err)
	}
	g.mem, err = unix.Mmap(int(f.Fd()), 0, header+rows*dim*4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map segment: %w", err)
	}
	g.rows = unsafe.Slice((*float32)(unsafe.Pointer(&g.mem[header])), rows*dim)
	return g, nil
}

// restoreCodes places and maps a segment's codes file, which must hold
// the f.Rows slots the manifest names, and grows it to the room of its
// rows' file: the two grow together, rows first, so a crash between them
// leaves the codes file shorter.
func restoreCodes(s *Set, f File, room int, place func(f File, path string) error) (*codesFile, error) {
	if f.Name != filepath.Base(f.Name) || !strings.HasSuffix(f.Name, CodesExt) {
		return nil, fmt.Errorf("codes file %q", f.Name)
	}
	path := filepath.Join(s.dir, fmt.Sprintf("%06d%s", s.seq, CodesExt))
	s.seq++
	if err := place(f, path); err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("codes file %s: %w", f.Name, err)
	}
	c, err := openCodes(path, 1<<s.shift, s.dim)
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	if c.room < f.Rows {
		return nil, errors.Join(fmt.Errorf("codes file %s holds %d slots, the manifest %d", f.Name, c.room, f.Rows), c.release())
	}
	if err := c.grow(room); err != nil {
		return nil, errors.Join(err, c.release())
	}
	return c, nil
}

// Populate reads the rows' pages in, for a caller about to read every
// row (encoding int8 codes or IVF lists from them): one call per file
// rather than a fault per page. Only a hint: on a kernel without it, or
// short of memory, the rows fault in as they are read.
func (s *Set) Populate() {
	for _, g := range s.segs {
		if g != nil {
			_ = unix.Madvise(g.mem[:g.header+g.room*g.dim*4], unix.MADV_POPULATE_READ)
		}
	}
}

// close unmaps and closes a segment that no set holds yet, leaving its
// file.
func (g *segment) close() error {
	var err error
	if g.mem != nil {
		err = unix.Munmap(g.mem)
		g.mem, g.rows = nil, nil
	}
	return errors.Join(err, g.file.Close())
}
