package backup

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
)

// WriteTar writes the backup at prefix to w as one tar archive (what
// Qdrant's snapshot download hands a client): manifest.json first, then
// every file in manifest order, each under its manifest name. The files
// are sent as stored; ReadTar and a restore check them.
func WriteTar(ctx context.Context, store Store, prefix string, w io.Writer) error {
	r, err := Open(ctx, store, prefix)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	b, err := json.MarshalIndent(r.Manifest, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := tw.WriteHeader(&tar.Header{Name: ManifestFile, Mode: 0o644, Size: int64(len(b)), ModTime: r.Manifest.Created}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	for _, f := range r.Manifest.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o644, Size: f.Bytes, ModTime: r.Manifest.Created}); err != nil {
			return err
		}
		rc, err := store.Open(ctx, path.Join(prefix, f.Name))
		if err != nil {
			return err
		}
		_, err = io.CopyN(tw, rc, f.Bytes)
		rc.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return tw.Close()
}

// ReadTar unpacks an archive WriteTar wrote into store at prefix. Only
// the manifest (first) and the files it names are accepted, each at most
// its manifest size; anything else is a *CorruptError, so an archive
// cannot write outside prefix. The files' digests are checked by
// Reader.Verify, as for any backup.
func ReadTar(ctx context.Context, r io.Reader, store Store, prefix string) error {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil {
		return &CorruptError{File: ManifestFile, Reason: fmt.Sprintf("not a backup archive: %v", err)}
	}
	if hdr.Name != ManifestFile || hdr.Size > 64<<20 {
		return &CorruptError{File: hdr.Name, Reason: "a backup archive begins with " + ManifestFile}
	}
	raw, err := io.ReadAll(tr)
	if err != nil {
		return &CorruptError{File: ManifestFile, Reason: err.Error()}
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return &CorruptError{File: ManifestFile, Reason: fmt.Sprintf("not a readable manifest: %v", err)}
	}
	if err := m.check(); err != nil {
		return &CorruptError{File: ManifestFile, Reason: err.Error()}
	}
	want := map[string]int64{}
	for _, f := range m.Files {
		want[f.Name] = f.Bytes
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &CorruptError{File: "archive", Reason: err.Error()}
		}
		size, ok := want[hdr.Name]
		if !ok || hdr.Typeflag != tar.TypeReg || hdr.Size != size {
			return &CorruptError{File: hdr.Name, Reason: "not a file the manifest names, or not of its size"}
		}
		delete(want, hdr.Name)
		w, err := store.Create(ctx, path.Join(prefix, hdr.Name))
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, tr); err != nil {
			_ = w.Close()
			return &CorruptError{File: hdr.Name, Reason: err.Error()}
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	for name := range want {
		return &CorruptError{File: name, Reason: "missing from the archive"}
	}
	w, err := store.Create(ctx, path.Join(prefix, ManifestFile))
	if err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}
