package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Store is where backups are kept: files by slash-separated name.
type Store interface {
	// Create returns a writer for name; the file exists under name only
	// once Close returned nil (a failed write leaves nothing readable).
	Create(ctx context.Context, name string) (io.WriteCloser, error)
	// Open reads name; a missing file is an error wrapping fs.ErrNotExist.
	Open(ctx context.Context, name string) (io.ReadCloser, error)
	// List returns the names directly under prefix that are directories.
	List(ctx context.Context, prefix string) ([]string, error)
	// RemoveAll removes name and everything under it.
	RemoveAll(ctx context.Context, name string) error
}

// Dir is a Store in a local directory (or a mounted volume).
type Dir string

func (d Dir) path(name string) (string, error) {
	clean := filepath.Clean("/" + name)
	if clean == "/" || strings.Contains(name, "..") {
		return "", fmt.Errorf("backup file name %q is not allowed", name)
	}
	return filepath.Join(string(d), filepath.FromSlash(clean)), nil
}

// Create implements Store: the file is written beside its name and
// renamed into place once synced.
func (d Dir) Create(_ context.Context, name string) (io.WriteCloser, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+filepath.Base(p)+"-*")
	if err != nil {
		return nil, err
	}
	return &dirFile{f: f, final: p}, nil
}

type dirFile struct {
	f     *os.File
	final string
}

func (w *dirFile) Write(b []byte) (int, error) { return w.f.Write(b) }

func (w *dirFile) Close() error {
	// CreateTemp makes the file 0600; a backup is read by other tools
	// (and other users' pods on a shared volume) like any data file.
	err := w.f.Chmod(0o644)
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.f.Name(), w.final)
	}
	if err != nil {
		_ = os.Remove(w.f.Name())
		return fmt.Errorf("write %s: %w", w.final, err)
	}
	return nil
}

// Open implements Store.
func (d Dir) Open(_ context.Context, name string) (io.ReadCloser, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// List implements Store.
func (d Dir) List(_ context.Context, prefix string) ([]string, error) {
	p := string(d)
	if prefix != "" {
		var err error
		if p, err = d.path(prefix); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// RemoveAll implements Store.
func (d Dir) RemoveAll(_ context.Context, name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	return os.RemoveAll(p)
}
