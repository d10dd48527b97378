package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CodesExt ends the name of a segment's codes file.
const CodesExt = ".codes" + Ext

// A set may keep, beside each segment's float32 rows, a codes file: per
// slot, the row's int8 codes (as vector/quant encodes them, one per
// element) and the float32 squared norm they were encoded with. It is a
// NumPy .npy file of a structured array,
//
//	dtype [('codes', '|i1', (dim,)), ('norm', '<f4')], shape (rows,)
//
// (numpy.load reads it as a record array), slot for slot beside the
// segment's rows: written when the row is, grown with the rows' file,
// never changed once written, so a snapshot links it as it links the rows
// and a restart reads codes instead of encoding every row again. The
// codes are whatever the caller gives with each row (AppendCoded); the
// set only keeps them where the row is, copies them when it compacts,
// and records the caller's tag (the scale they were encoded with) in the
// manifest.
type codesFile struct {
	path   string
	file   *os.File
	mem    []byte // the whole mapping
	header int
	// room is how many slots the file holds now; width is a slot's bytes
	// (dim codes and a float32 norm).
	room, width, dim int
	// refs counts the segment holding it and every Frozen holding it.
	refs int
}

// codesRecordBytes is the bytes of one slot's codes and norm.
func codesRecordBytes(dim int) int { return dim + 4 }

// codesHeader is the .npy header of a codes file of rows slots, padded to
// at least size bytes.
func codesHeader(rows, dim, size int) []byte {
	return npyHeaderDescr(fmt.Sprintf("[('codes', '|i1', (%d,)), ('norm', '%s')]", dim, float32Descr()), fmt.Sprintf("(%d,)", rows), size)
}

// createCodes makes a codes file with room for room slots, mapped for up
// to rows.
func createCodes(path string, rows, dim, room int) (c *codesFile, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, fmt.Errorf("create codes file: %w", err)
	}
	c = &codesFile{path: path, file: f, header: len(codesHeader(rows, dim, 0)), width: codesRecordBytes(dim), dim: dim, refs: 1}
	defer func() {
		if err != nil {
			_ = c.close()
			_ = os.Remove(path)
		}
	}()
	if err := c.grow(room); err != nil {
		return nil, err
	}
	if err := c.mapFile(rows); err != nil {
		return nil, err
	}
	return c, nil
}

// openCodes maps an existing codes file of up to rows slots, its room
// taken from its size, and reads its pages in (a restore copies every
// slot at once).
func openCodes(path string, rows, dim int) (c *codesFile, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open codes file: %w", err)
	}
	c = &codesFile{path: path, file: f, header: len(codesHeader(rows, dim, 0)), width: codesRecordBytes(dim), dim: dim, refs: 1}
	defer func() {
		if err != nil {
			_ = c.close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open codes file: %w", err)
	}
	body := st.Size() - int64(c.header)
	if body < 0 || body%int64(c.width) != 0 || body/int64(c.width) > int64(rows) {
		return nil, fmt.Errorf("codes file %s: %d bytes is not a %d-byte header and up to %d slots of %d-D codes", path, st.Size(), c.header, rows, dim)
	}
	// The header's shape may not be the file's: a crash between sizing
	// the file and rewriting its header, or a file sent while its set
	// grew it. The type must be; the shape is written again from the size.
	want := codesHeader(int(body/int64(c.width)), dim, c.header)
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil {
		return nil, fmt.Errorf("codes file %s: %w", path, err)
	}
	typ, _, _ := strings.Cut(string(want), "'shape'")
	if !strings.HasPrefix(string(got), typ) {
		return nil, fmt.Errorf("codes file %s: not a .npy file of %d-D codes and norms", path, dim)
	}
	if _, err := f.WriteAt(want, 0); err != nil {
		return nil, fmt.Errorf("write codes file header: %w", err)
	}
	c.room = int(body / int64(c.width))
	if err := c.mapFile(rows); err != nil {
		return nil, err
	}
	// Only a hint, as for the rows' files.
	_ = unix.Madvise(c.mem[:c.header+c.room*c.width], unix.MADV_POPULATE_READ)
	return c, nil
}

func (c *codesFile) mapFile(rows int) error {
	mem, err := unix.Mmap(int(c.file.Fd()), 0, c.header+rows*c.width, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map codes file: %w", err)
	}
	c.mem = mem
	return nil
}

// grow makes room for room slots (blocks allocated before they are
// written, as for the rows) and rewrites the header's shape.
func (c *codesFile) grow(room int) error {
	if room <= c.room {
		return nil
	}
	size := int64(c.header + room*c.width)
	fd := int(c.file.Fd())
	if err := unix.Fallocate(fd, 0, 0, size); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("allocate codes file: %w", err)
	}
	if err := c.file.Truncate(size); err != nil {
		return fmt.Errorf("size codes file: %w", err)
	}
	if _, err := c.file.WriteAt(codesHeader(room, c.dim, c.header), 0); err != nil {
		return fmt.Errorf("write codes file header: %w", err)
	}
	c.room = room
	return nil
}

// slot is slot j's record: dim codes then the norm's bytes.
func (c *codesFile) slot(j int) []byte {
	off := c.header + j*c.width
	return c.mem[off : off+c.width : off+c.width]
}

// put writes slot j.
func (c *codesFile) put(j int, codes []int8, norm float32) {
	rec := c.slot(j)
	copy(rec, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(codes))), len(codes)))
	putNorm(rec[c.dim:], norm)
}

// get reads slot j; codes alias the mapping.
func (c *codesFile) get(j int) ([]int8, float32) {
	rec := c.slot(j)
	return unsafe.Slice((*int8)(unsafe.Pointer(&rec[0])), c.dim), getNorm(rec[c.dim:])
}

// sync writes the first rows slots back and flushes the file.
func (c *codesFile) sync(rows int) error {
	if end := min(c.header+rows*c.width, len(c.mem)); end > 0 {
		if err := unix.Msync(c.mem[:end], unix.MS_SYNC); err != nil {
			return fmt.Errorf("sync codes file %s: %w", c.path, err)
		}
	}
	if err := c.file.Sync(); err != nil {
		return fmt.Errorf("sync codes file %s: %w", c.path, err)
	}
	return nil
}

// release drops a reference; at zero the file is unmapped and removed.
func (c *codesFile) release() error {
	c.refs--
	if c.refs > 0 {
		return nil
	}
	return errors.Join(c.close(), os.Remove(c.path))
}

// close unmaps and closes the file, leaving it on disk.
func (c *codesFile) close() error {
	var err error
	if c.mem != nil {
		err = unix.Munmap(c.mem)
		c.mem = nil
	}
	return errors.Join(err, c.file.Close())
}

// CodesTag is the caller's tag of the set's codes (what they were encoded
// with), nil when the set keeps none.
func (s *Set) CodesTag() []byte { return s.codesTag }

// Codes returns row i's codes and norm; the codes alias the mapping and
// must not be written. The set must keep codes (CodesTag not nil).
func (s *Set) Codes(i int) ([]int8, float32) {
	sl := int(s.slots[i])
	return s.segs[sl>>s.shift].codes.get(sl & (1<<s.shift - 1))
}

// AppendCoded is Append that also keeps the row's codes and norm, when
// the set keeps codes (they are ignored otherwise).
func (s *Set) AppendCoded(v []float32, codes []int8, norm float32) error {
	sl, err := s.writeCoded(v, codes, norm)
	if err != nil {
		return err
	}
	s.slots = append(s.slots, sl)
	return s.settle()
}

// SetCoded is Set that also keeps the row's codes and norm, when the set
// keeps codes.
func (s *Set) SetCoded(i int, v []float32, codes []int8, norm float32) error {
	sl, err := s.writeCoded(v, codes, norm)
	if err != nil {
		return err
	}
	old := s.slots[i]
	s.slots[i] = sl
	return errors.Join(s.kill(old), s.settle())
}

// EnableCodes gives every segment a codes file, tagged tag (not nil),
// filling each row's slot with fill (its codes into dst, returning its
// norm); from then on every row written must come with its codes
// (AppendCoded, SetCoded). Codes files the set kept before are dropped
// (a Frozen holding them keeps them until released). On error the set
// keeps no codes.
func (s *Set) EnableCodes(tag []byte, fill func(i int, dst []int8) (norm float32)) error {
	if tag == nil {
		return errors.New("segment: codes without a tag")
	}
	if err := s.DisableCodes(); err != nil {
		return err
	}
	for _, g := range s.segs {
		if g == nil {
			continue
		}
		c, err := createCodes(filepath.Join(s.dir, fmt.Sprintf("%06d%s", s.seq, CodesExt)), 1<<s.shift, s.dim, g.room)
		s.seq++
		if err != nil {
			return errors.Join(err, s.DisableCodes())
		}
		g.codes = c
	}
	dst := make([]int8, s.dim)
	for i, sl := range s.slots {
		norm := fill(i, dst)
		s.segs[sl>>s.shift].codes.put(int(sl&(1<<s.shift-1)), dst, norm)
	}
	s.codesTag = tag
	return nil
}

// DisableCodes drops the codes files; rows are written without codes
// after. Those a Frozen holds go when it is released.
func (s *Set) DisableCodes() error {
	s.codesTag = nil
	var err error
	for _, g := range s.segs {
		if g != nil && g.codes != nil {
			err = errors.Join(err, g.codes.release())
			g.codes = nil
		}
	}
	return err
}

// putNorm and getNorm store a norm as the file's '<f4' (or '>f4' on a
// big-endian machine: the file is in the machine's order, as the rows).
func putNorm(b []byte, v float32) { binary.NativeEndian.PutUint32(b, math.Float32bits(v)) }

func getNorm(b []byte) float32 { return math.Float32frombits(binary.NativeEndian.Uint32(b)) }
