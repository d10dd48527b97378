package loader

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Record is one vector to upsert.
type Record struct {
	ID string
	// Vector is little-endian float32, the bytes that "vector_b64" carries:
	// .npy and .fvecs rows are already in that form and go out unconverted.
	Vector []byte
	// Payload is a JSON object sent verbatim, or nil for none.
	Payload json.RawMessage
}

// A Source yields the records of one input in file order. Record numbers
// (offsets) count from 0 at the start of the input, skipped records
// included, so --resume-from means the same thing on every run.
type Source interface {
	// Next returns the next record, or io.EOF after the last.
	Next() (Record, error)
	// Skip passes over the next n records without sending them; it is an
	// error for the input to end first.
	Skip(n int64) error
	// Total is the number of records in the input, or -1 when it is only
	// known at the end (JSON Lines).
	Total() int64
}

// File is a Source read from a file, which Close closes.
type File struct {
	Source
	f *os.File
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Open opens path as a Source, choosing the format by its extension:
// .npy, .fvecs, or .jsonl / .ndjson.
func Open(path string) (*File, error) {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".npy", ".fvecs", ".jsonl", ".ndjson":
	default:
		return nil, fmt.Errorf("%s: unknown format %q, want .npy, .fvecs, .jsonl or .ndjson", path, ext)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	var src Source
	switch ext {
	case ".npy":
		src, err = NewNpy(f)
	case ".fvecs":
		var st os.FileInfo
		if st, err = f.Stat(); err == nil {
			src, err = NewFvecs(f, st.Size())
		}
	default:
		src = NewJSONL(f)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{Source: src, f: f}, nil
}

// rows reads fixed-size records after a header of known length. When the
// underlying reader can seek (a file), Skip seeks instead of reading.
type rows struct {
	raw    io.Reader
	r      *bufio.Reader
	header int64 // bytes before record 0
	prefix int   // bytes before each record's vector (fvecs' dimension)
	dim    int
	n      int64 // records in the input
	row    int64 // the next record's offset
	kind   string
}

func (s *rows) Total() int64 { return s.n }

func (s *rows) recordBytes() int64 { return int64(s.prefix + 4*s.dim) }

func (s *rows) Skip(n int64) error {
	if n < 0 || n > s.n-s.row {
		return fmt.Errorf("cannot skip %d records: the %s input has %d, %d of them left", n, s.kind, s.n, s.n-s.row)
	}
	if sk, ok := s.raw.(io.Seeker); ok {
		if _, err := sk.Seek(s.header+(s.row+n)*s.recordBytes(), io.SeekStart); err != nil {
			return fmt.Errorf("seek: %w", err)
		}
		s.r.Reset(s.raw)
	} else if _, err := s.r.Discard(int(n * s.recordBytes())); err != nil {
		return fmt.Errorf("truncated %s: %w", s.kind, err)
	}
	s.row += n
	return nil
}

func (s *rows) Next() (Record, error) {
	if s.row == s.n {
		return Record{}, io.EOF
	}
	buf := make([]byte, s.prefix+4*s.dim)
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return Record{}, fmt.Errorf("truncated %s at record %d: %w", s.kind, s.row, err)
	}
	if s.prefix > 0 {
		if d := int(binary.LittleEndian.Uint32(buf)); d != s.dim {
			return Record{}, fmt.Errorf(".fvecs record %d has dimension %d, the first had %d", s.row, d, s.dim)
		}
	}
	rec := Record{ID: strconv.FormatInt(s.row, 10), Vector: buf[s.prefix:]}
	s.row++
	return rec, nil
}

var npyShape = regexp.MustCompile(`'shape':\s*\((\d+),\s*(\d+),?\s*\)`)

// NewNpy reads a NumPy .npy file of little-endian float32 [N, dim] in C
// order; a record's id is its row number.
func NewNpy(r io.Reader) (Source, error) {
	br := bufio.NewReader(r)
	magic := make([]byte, 8)
	if _, err := io.ReadFull(br, magic); err != nil || string(magic[:6]) != "\x93NUMPY" {
		return nil, errors.New("not a .npy file")
	}
	var hlen, pre int
	switch magic[6] {
	case 1:
		var n uint16
		if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
			return nil, fmt.Errorf("truncated .npy header: %w", err)
		}
		hlen, pre = int(n), 10
	case 2, 3:
		var n uint32
		if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
			return nil, fmt.Errorf("truncated .npy header: %w", err)
		}
		hlen, pre = int(n), 12
	default:
		return nil, fmt.Errorf(".npy format version %d.%d is not supported", magic[6], magic[7])
	}
	if hlen > 1<<20 {
		return nil, errors.New(".npy header too large")
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(br, header); err != nil {
		return nil, fmt.Errorf("truncated .npy header: %w", err)
	}
	h := string(header)
	if !strings.Contains(h, "'descr': '<f4'") {
		return nil, fmt.Errorf(".npy dtype must be little-endian float32 ('<f4'): %s", strings.TrimSpace(h))
	}
	if strings.Contains(h, "'fortran_order': True") {
		return nil, errors.New(".npy must be C order")
	}
	m := npyShape.FindStringSubmatch(h)
	if m == nil {
		return nil, fmt.Errorf(".npy shape must be 2-D: %s", strings.TrimSpace(h))
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf(".npy shape: %w", err)
	}
	dim, err := strconv.Atoi(m[2])
	if err != nil || dim < 1 || dim > maxDim {
		return nil, fmt.Errorf(".npy dimension %s out of range 1..%d", m[2], maxDim)
	}
	return &rows{raw: r, r: br, header: int64(pre + hlen), dim: dim, n: n, kind: ".npy"}, nil
}

// maxDim bounds a file's dimension so a corrupt header cannot ask for a
// huge buffer; far above any embedding model's.
const maxDim = 1 << 16

// NewFvecs reads the .fvecs format of size bytes: each record an int32
// dimension then that many float32. A record's id is its number.
func NewFvecs(r io.Reader, size int64) (Source, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(4)
	if err != nil {
		return nil, errors.New("empty .fvecs file")
	}
	dim := int(binary.LittleEndian.Uint32(head))
	if dim < 1 || dim > maxDim {
		return nil, fmt.Errorf(".fvecs dimension %d out of range 1..%d", dim, maxDim)
	}
	rec := int64(4 + 4*dim)
	if size%rec != 0 {
		return nil, fmt.Errorf(".fvecs file is %d bytes, not a whole number of %d-byte records of dimension %d", size, rec, dim)
	}
	return &rows{raw: r, r: br, prefix: 4, dim: dim, n: size / rec, kind: ".fvecs"}, nil
}
