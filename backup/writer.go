package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"path"
	"sync"
	"unsafe"

	"github.com/trawl-search/trawl/vector/quant"
	"github.com/trawl-search/trawl/vector/segment"
)

// Writer writes one backup under a prefix of a Store.
type Writer struct {
	store  Store
	prefix string

	mu    sync.Mutex
	files []File
	bytes int64
}

// NewWriter starts a backup at prefix (e.g. "collection/backup-id").
func NewWriter(store Store, prefix string) *Writer {
	return &Writer{store: store, prefix: prefix}
}

// Bytes is how many bytes the finished files hold so far.
func (w *Writer) Bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}

// ShardWriter writes one source shard's rows.
type ShardWriter struct {
	w        *Writer
	shard    Shard
	dim      int
	vec, pts *hashed
	n        int64
	row      []byte
	// codes, when set (WithCodes), gets each row's int8 codes under scale.
	codes *hashed
	scale quant.Scale
	code  []int8
}

// Shard starts shard name's files for rows rows of dimension dim; rows
// must be exactly what Add is then called with.
func (w *Writer) Shard(ctx context.Context, name string, dim int, rows int64) (*ShardWriter, error) {
	s := Shard{Name: name, Rows: rows, Vectors: "shards/" + name + "/vectors.npy", Points: "shards/" + name + "/points.jsonl"}
	vec, err := w.create(ctx, s.Vectors)
	if err != nil {
		return nil, err
	}
	pts, err := w.create(ctx, s.Points)
	if err != nil {
		vec.abort()
		return nil, err
	}
	if _, err := vec.Write(segment.Float32NpyHeader(rows, dim)); err != nil {
		vec.abort()
		pts.abort()
		return nil, err
	}
	return &ShardWriter{w: w, shard: s, dim: dim, vec: vec, pts: pts, row: make([]byte, 4*dim)}, nil
}

// WithCodes has the shard's files include its rows' int8 codes under
// scale (the scale its group committed, so the codes are the ones every
// replica holds): a codes .npy written as rows are added, and a steps
// .npy written by Close. Call it before the first Add.
func (s *ShardWriter) WithCodes(ctx context.Context, scale quant.Scale) error {
	if scale.Dim() != s.dim {
		return fmt.Errorf("shard %s: a %d-D int8 scale for rows of dimension %d", s.shard.Name, scale.Dim(), s.dim)
	}
	if s.n > 0 || s.codes != nil {
		return fmt.Errorf("shard %s: codes begin with the first row", s.shard.Name)
	}
	dir := path.Dir(s.shard.Vectors)
	codes, err := s.w.create(ctx, dir+"/codes.npy")
	if err != nil {
		return err
	}
	if _, err := codes.Write(segment.Int8NpyHeader(s.shard.Rows, s.dim)); err != nil {
		codes.abort()
		return err
	}
	s.codes, s.scale, s.code = codes, scale, make([]int8, s.dim)
	s.shard.Codes, s.shard.Steps = codes.name, dir+"/steps.npy"
	return nil
}

// Add writes one row: its id, vector (dim float32) and payload (a JSON
// object, nil for none).
func (s *ShardWriter) Add(id string, vec []float32, payload []byte) error {
	if len(vec) != s.dim {
		return fmt.Errorf("shard %s row %d: vector of %d, want %d", s.shard.Name, s.n, len(vec), s.dim)
	}
	if s.n >= s.shard.Rows {
		return fmt.Errorf("shard %s: more than the %d rows announced", s.shard.Name, s.shard.Rows)
	}
	for i, x := range vec {
		binary.LittleEndian.PutUint32(s.row[4*i:], math.Float32bits(x))
	}
	if _, err := s.vec.Write(s.row); err != nil {
		return err
	}
	if s.codes != nil {
		s.scale.Encode(s.code, vec)
		if _, err := s.codes.Write(int8Bytes(s.code)); err != nil {
			return err
		}
	}
	line, err := json.Marshal(Point{ID: id, Payload: payload})
	if err != nil {
		return fmt.Errorf("shard %s row %d: %w", s.shard.Name, s.n, err)
	}
	if _, err := s.pts.Write(append(line, '\n')); err != nil {
		return err
	}
	s.n++
	return nil
}

// Close finishes the shard's files; index is its group's cut.
func (s *ShardWriter) Close(index uint64) error {
	if s.n != s.shard.Rows {
		s.Abort()
		return fmt.Errorf("shard %s: %d rows written, %d announced", s.shard.Name, s.n, s.shard.Rows)
	}
	s.shard.Index = index
	files := []*hashed{s.vec, s.pts}
	if s.codes != nil {
		steps, err := s.w.create(context.Background(), s.shard.Steps)
		if err != nil {
			s.Abort()
			return err
		}
		b := segment.Float32VectorNpyHeader(s.dim)
		for d := range s.dim {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(s.scale.Step(d)))
		}
		if _, err := steps.Write(b); err != nil {
			steps.abort()
			s.Abort()
			return err
		}
		files = append(files, s.codes, steps)
	}
	for _, h := range files {
		if err := s.w.finish(h); err != nil {
			s.Abort()
			return err
		}
	}
	return nil
}

// Abort drops the shard's unfinished files.
func (s *ShardWriter) Abort() {
	s.vec.abort()
	s.pts.abort()
	if s.codes != nil {
		s.codes.abort()
	}
}

// int8Bytes is codes as the bytes of an int8 .npy (the same bits).
func int8Bytes(codes []int8) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(codes))), len(codes))
}

// Info is the shard's manifest entry (after Close).
func (s *ShardWriter) Info() Shard { return s.shard }

// Finish writes the manifest (its Files are filled in here), which makes
// the backup complete, and returns it.
func (w *Writer) Finish(ctx context.Context, m Manifest) (Manifest, error) {
	w.mu.Lock()
	m.Files = append([]File(nil), w.files...)
	w.mu.Unlock()
	m.Format, m.Version = Format, Version
	if err := m.check(); err != nil {
		return m, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	f, err := w.store.Create(ctx, path.Join(w.prefix, ManifestFile))
	if err != nil {
		return m, err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return m, err
	}
	return m, f.Close()
}

// hashed is a file being written, with its digest and size.
type hashed struct {
	name string
	wc   io.WriteCloser
	bw   *bufio.Writer
	h    hash.Hash
	n    int64
	done bool
}

func (w *Writer) create(ctx context.Context, name string) (*hashed, error) {
	wc, err := w.store.Create(ctx, path.Join(w.prefix, name))
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	h := &hashed{name: name, wc: wc, h: sha256.New()}
	h.bw = bufio.NewWriterSize(io.MultiWriter(wc, h.h), 1<<20)
	return h, nil
}

func (h *hashed) Write(b []byte) (int, error) {
	n, err := h.bw.Write(b)
	h.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", h.name, err)
	}
	return n, nil
}

func (h *hashed) abort() {
	if !h.done {
		h.done = true
		_ = h.wc.Close()
	}
}

func (w *Writer) finish(h *hashed) error {
	err := h.bw.Flush()
	h.done = true
	if cerr := h.wc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", h.name, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.files = append(w.files, File{Name: h.name, Bytes: h.n, SHA256: hex.EncodeToString(h.h.Sum(nil))})
	w.bytes += h.n
	return nil
}

// errCorrupt marks a backup refused by its checksums or shapes.
var errCorrupt = errors.New("backup is corrupt")
