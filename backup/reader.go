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
	"io"
	"io/fs"
	"math"
	"path"

	"github.com/trawl-search/trawl/internal/loader"
	"github.com/trawl-search/trawl/vector/quant"
	"github.com/trawl-search/trawl/vector/segment"
)

// CorruptError is a backup file that fails its manifest's size or
// digest, or its own format: nothing may be restored from the backup.
type CorruptError struct {
	File   string
	Reason string
}

func (e *CorruptError) Error() string { return fmt.Sprintf("backup file %s: %s", e.File, e.Reason) }

// Unwrap makes every CorruptError an errCorrupt, for IsCorrupt.
func (e *CorruptError) Unwrap() error { return errCorrupt }

// IsCorrupt reports whether err refuses a backup as corrupt.
func IsCorrupt(err error) bool { return errors.Is(err, errCorrupt) }

// Reader reads one backup.
type Reader struct {
	store    Store
	prefix   string
	Manifest Manifest
}

// Open reads the manifest of the backup at prefix; a prefix without one
// is not a (complete) backup and wraps fs.ErrNotExist.
func Open(ctx context.Context, store Store, prefix string) (*Reader, error) {
	f, err := store.Open(ctx, path.Join(prefix, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", prefix, err)
	}
	defer f.Close()
	var m Manifest
	dec := json.NewDecoder(f)
	if err := dec.Decode(&m); err != nil {
		return nil, &CorruptError{File: ManifestFile, Reason: fmt.Sprintf("not a readable manifest: %v", err)}
	}
	if err := m.check(); err != nil {
		return nil, &CorruptError{File: ManifestFile, Reason: err.Error()}
	}
	return &Reader{store: store, prefix: prefix, Manifest: m}, nil
}

// List returns the complete backups of collection, oldest first.
func List(ctx context.Context, store Store, collection string) ([]Manifest, error) {
	ids, err := store.List(ctx, collection)
	if err != nil {
		return nil, err
	}
	var out []Manifest
	for _, id := range ids {
		r, err := Open(ctx, store, path.Join(collection, id))
		if errors.Is(err, fs.ErrNotExist) {
			continue // unfinished, or being written
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.Manifest)
	}
	return out, nil
}

// Verify reads every file the manifest names and checks its size and
// SHA-256, and the shape of each shard's rows; the first mismatch is a
// *CorruptError naming the file. Nothing should be restored unless it
// returns nil.
func (r *Reader) Verify(ctx context.Context) error {
	for _, f := range r.Manifest.Files {
		if err := r.verifyFile(ctx, f); err != nil {
			return err
		}
	}
	dim := r.Manifest.Settings.Dimension
	for _, s := range r.Manifest.Shards {
		want := int64(len(segment.Float32NpyHeader(s.Rows, dim))) + s.Rows*int64(4*dim)
		if got := r.size(s.Vectors); got != want {
			return &CorruptError{File: s.Vectors, Reason: fmt.Sprintf("%d bytes, want %d for %d rows of dimension %d", got, want, s.Rows, dim)}
		}
		if s.Codes == "" {
			continue
		}
		want = int64(len(segment.Int8NpyHeader(s.Rows, dim))) + s.Rows*int64(dim)
		if got := r.size(s.Codes); got != want {
			return &CorruptError{File: s.Codes, Reason: fmt.Sprintf("%d bytes, want %d for %d rows of dimension %d", got, want, s.Rows, dim)}
		}
		if err := r.verifyCodes(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// verifyCodes checks a shard's codes against its rows: each row's codes
// must be what its steps encode the row as (quant.Scale.Encode), which is
// how every replica made them. The digests already matched, so this
// catches a backup whose files were written wrong, not damage.
func (r *Reader) verifyCodes(ctx context.Context, s Shard) error {
	dim := r.Manifest.Settings.Dimension
	steps, err := r.readSteps(ctx, s)
	if err != nil {
		return err
	}
	scale, err := quant.FromSteps(steps)
	if err != nil {
		return &CorruptError{File: s.Steps, Reason: err.Error()}
	}
	cf, err := r.store.Open(ctx, path.Join(r.prefix, s.Codes))
	if err != nil {
		return &CorruptError{File: s.Codes, Reason: fmt.Sprintf("cannot be read: %v", err)}
	}
	defer cf.Close()
	codes := bufio.NewReaderSize(cf, 1<<20)
	if _, err := codes.Discard(len(segment.Int8NpyHeader(s.Rows, dim))); err != nil {
		return &CorruptError{File: s.Codes, Reason: err.Error()}
	}
	got := make([]byte, dim)
	want := make([]int8, dim)
	i := int64(0)
	return r.Rows(ctx, s, 1024, func(rows []Row) error {
		for _, row := range rows {
			if _, err := io.ReadFull(codes, got); err != nil {
				return &CorruptError{File: s.Codes, Reason: fmt.Sprintf("row %d: %v", i, err)}
			}
			scale.Encode(want, row.Vector)
			for d, c := range want {
				if byte(c) != got[d] {
					return &CorruptError{File: s.Codes, Reason: fmt.Sprintf("row %d (%q): code %d of dimension %d, its row and steps give %d", i, row.ID, int8(got[d]), d, c)}
				}
			}
			i++
		}
		return nil
	})
}

// readSteps reads a shard's int8 steps file.
func (r *Reader) readSteps(ctx context.Context, s Shard) ([]float32, error) {
	dim := r.Manifest.Settings.Dimension
	hdr := segment.Float32VectorNpyHeader(dim)
	if got := r.size(s.Steps); got != int64(len(hdr)+4*dim) {
		return nil, &CorruptError{File: s.Steps, Reason: fmt.Sprintf("%d bytes, want %d for dimension %d", got, len(hdr)+4*dim, dim)}
	}
	f, err := r.store.Open(ctx, path.Join(r.prefix, s.Steps))
	if err != nil {
		return nil, &CorruptError{File: s.Steps, Reason: fmt.Sprintf("cannot be read: %v", err)}
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, &CorruptError{File: s.Steps, Reason: err.Error()}
	}
	if len(b) != len(hdr)+4*dim || string(b[:len(hdr)]) != string(hdr) {
		return nil, &CorruptError{File: s.Steps, Reason: "not a float32 .npy of the collection's dimension"}
	}
	steps := make([]float32, dim)
	for d := range steps {
		steps[d] = math.Float32frombits(binary.LittleEndian.Uint32(b[len(hdr)+4*d:]))
	}
	return steps, nil
}

func (r *Reader) size(name string) int64 {
	for _, f := range r.Manifest.Files {
		if f.Name == name {
			return f.Bytes
		}
	}
	return -1
}

func (r *Reader) verifyFile(ctx context.Context, f File) error {
	rc, err := r.store.Open(ctx, path.Join(r.prefix, f.Name))
	if err != nil {
		return &CorruptError{File: f.Name, Reason: fmt.Sprintf("cannot be read: %v", err)}
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return &CorruptError{File: f.Name, Reason: fmt.Sprintf("read after %d bytes: %v", n, err)}
	}
	if n != f.Bytes {
		return &CorruptError{File: f.Name, Reason: fmt.Sprintf("%d bytes, the manifest says %d (truncated or extended)", n, f.Bytes)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return &CorruptError{File: f.Name, Reason: fmt.Sprintf("SHA-256 %s, the manifest says %s", got, f.SHA256)}
	}
	return nil
}

// Row is one restored document.
type Row struct {
	ID      string
	Vector  []float32
	Payload []byte // a JSON object, nil for none
}

// Rows calls fn with shard s's rows in batches of at most batch, in row
// order.
func (r *Reader) Rows(ctx context.Context, s Shard, batch int, fn func([]Row) error) error {
	vf, err := r.store.Open(ctx, path.Join(r.prefix, s.Vectors))
	if err != nil {
		return fmt.Errorf("open %s: %w", s.Vectors, err)
	}
	defer vf.Close()
	pf, err := r.store.Open(ctx, path.Join(r.prefix, s.Points))
	if err != nil {
		return fmt.Errorf("open %s: %w", s.Points, err)
	}
	defer pf.Close()
	src, err := loader.NewNpy(vf)
	if err != nil {
		return &CorruptError{File: s.Vectors, Reason: err.Error()}
	}
	lines := bufio.NewScanner(pf)
	lines.Buffer(make([]byte, 0, 1<<20), 1<<20)
	dim := r.Manifest.Settings.Dimension
	out := make([]Row, 0, batch)
	for i := int64(0); i < s.Rows; i++ {
		rec, err := src.Next()
		if err != nil {
			return &CorruptError{File: s.Vectors, Reason: fmt.Sprintf("row %d: %v", i, err)}
		}
		if len(rec.Vector) != 4*dim {
			return &CorruptError{File: s.Vectors, Reason: fmt.Sprintf("row %d has %d bytes, want %d", i, len(rec.Vector), 4*dim)}
		}
		vec := make([]float32, dim)
		for j := range vec {
			vec[j] = math.Float32frombits(binary.LittleEndian.Uint32(rec.Vector[4*j:]))
		}
		if !lines.Scan() {
			return &CorruptError{File: s.Points, Reason: fmt.Sprintf("ends at line %d of %d", i+1, s.Rows)}
		}
		var p Point
		if err := json.Unmarshal(lines.Bytes(), &p); err != nil || p.ID == "" {
			return &CorruptError{File: s.Points, Reason: fmt.Sprintf("line %d is not a point: %v", i+1, err)}
		}
		var payload []byte
		if len(p.Payload) > 0 && string(p.Payload) != "null" {
			payload = p.Payload
		}
		out = append(out, Row{ID: p.ID, Vector: vec, Payload: payload})
		if len(out) == batch {
			if err := fn(out); err != nil {
				return err
			}
			out = make([]Row, 0, batch)
		}
	}
	if len(out) > 0 {
		return fn(out)
	}
	return nil
}
