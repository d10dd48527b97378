package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/metrics"
)

// Backups is where the router keeps backups (--backup-dir) and the series
// it records them in; the native and the Qdrant routes share it.
type Backups struct {
	// Store is nil when the router was started without a backup
	// location: every backup route then answers 400 saying so.
	Store backup.Store
	// Dir is Store's directory (--backup-dir): file:// locations a
	// recover names must lie under it.
	Dir     string
	Metrics *metrics.Backups
	// Now is the clock of the last-success series (time.Now if nil).
	Now func() time.Time
}

// errNoStore is the answer of a backup route on a router without a
// backup location.
var errNoStore = &wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalid,
	Msg: "backups are not configured on this router: start it with --backup-dir DIR"}

func (b *Backups) store() (backup.Store, error) {
	if b == nil || b.Store == nil {
		return nil, errNoStore
	}
	return b.Store, nil
}

func (b *Backups) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Create backs collection name up under a new id, and records it.
func (b *Backups) Create(ctx context.Context, c *coordinator.Coordinator, name string) (backup.Manifest, error) {
	st, err := b.store()
	if err != nil {
		return backup.Manifest{}, err
	}
	start := b.now()
	m, err := c.Backup(ctx, name, coordinator.NewBackupID(start), coordinator.BackupConfig{Store: st})
	b.Metrics.Observe(metrics.BackupOp, name, b.now().Sub(start), Size(m), err, b.now())
	return m, err
}

// Restore restores backup id of collection source as target (resume:
// continuing a restore into target left unfinished), and records it.
func (b *Backups) Restore(ctx context.Context, c *coordinator.Coordinator, source, id, target string, resume bool) (coordinator.RestoreResult, error) {
	st, err := b.store()
	if err != nil {
		return coordinator.RestoreResult{}, err
	}
	start := b.now()
	res, err := c.Restore(ctx, source, id, target, coordinator.BackupConfig{Store: st, Resume: resume})
	b.Metrics.Observe(metrics.RestoreOp, target, b.now().Sub(start), Size(res.Manifest), err, b.now())
	return res, err
}

// CreateAll takes a cluster backup (every collection at one cut per
// shard group) under a new id, and records it as collection "@cluster".
func (b *Backups) CreateAll(ctx context.Context, c *coordinator.Coordinator) (backup.ClusterManifest, error) {
	st, err := b.store()
	if err != nil {
		return backup.ClusterManifest{}, err
	}
	start := b.now()
	m, err := c.BackupAll(ctx, coordinator.NewBackupID(start), coordinator.BackupConfig{Store: st})
	b.Metrics.Observe(metrics.BackupOp, backup.ClusterDir, b.now().Sub(start), ClusterSize(m), err, b.now())
	return m, err
}

// ListAll lists the cluster backups.
func (b *Backups) ListAll(ctx context.Context, c *coordinator.Coordinator) ([]backup.ClusterManifest, error) {
	st, err := b.store()
	if err != nil {
		return nil, err
	}
	return c.ClusterBackups(ctx, st)
}

// OpenAll reads cluster backup id's manifest (CodeNotFound when there is
// none), so a route can check the caller's access to its collections.
func (b *Backups) OpenAll(ctx context.Context, id string) (backup.ClusterManifest, error) {
	st, err := b.store()
	if err != nil {
		return backup.ClusterManifest{}, err
	}
	m, err := backup.OpenCluster(ctx, st, id)
	if errors.Is(err, fs.ErrNotExist) {
		return m, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: fmt.Sprintf("there is no cluster backup `%s`", id)}
	}
	return m, err
}

// DeleteAll removes cluster backup id.
func (b *Backups) DeleteAll(ctx context.Context, c *coordinator.Coordinator, id string) error {
	st, err := b.store()
	if err != nil {
		return err
	}
	return c.DeleteClusterBackup(ctx, id, st)
}

// RestoreAll restores every collection of cluster backup id under its own
// name, and records it.
func (b *Backups) RestoreAll(ctx context.Context, c *coordinator.Coordinator, id string) ([]coordinator.RestoreResult, error) {
	st, err := b.store()
	if err != nil {
		return nil, err
	}
	start := b.now()
	res, err := c.RestoreAll(ctx, id, coordinator.BackupConfig{Store: st})
	var n int64
	for _, r := range res {
		n += Size(r.Manifest)
	}
	b.Metrics.Observe(metrics.RestoreOp, backup.ClusterDir, b.now().Sub(start), n, err, b.now())
	return res, err
}

// ClusterSize is the bytes of a cluster backup's parts' files.
func ClusterSize(m backup.ClusterManifest) int64 {
	var n int64
	for _, p := range m.Collections {
		n += p.Bytes
	}
	return n
}

// List lists collection name's backups.
func (b *Backups) List(ctx context.Context, c *coordinator.Coordinator, name string) ([]backup.Manifest, error) {
	st, err := b.store()
	if err != nil {
		return nil, err
	}
	return c.Backups(ctx, name, st)
}

// Delete removes backup id of collection name.
func (b *Backups) Delete(ctx context.Context, c *coordinator.Coordinator, name, id string) error {
	st, err := b.store()
	if err != nil {
		return err
	}
	return c.DeleteBackup(ctx, name, id, st)
}

// Size is the bytes of a backup's files.
func Size(m backup.Manifest) int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Bytes
	}
	return n
}

// Download writes backup id of collection name as one tar archive
// (backup.WriteTar).
func (b *Backups) Download(ctx context.Context, name, id string, w io.Writer) error {
	st, err := b.store()
	if err != nil {
		return err
	}
	return backup.WriteTar(ctx, st, path.Join(name, id), w)
}

// Exists reports whether collection name has a complete backup id.
func (b *Backups) Exists(ctx context.Context, name, id string) (bool, error) {
	st, err := b.store()
	if err != nil {
		return false, err
	}
	_, err = backup.Open(ctx, st, path.Join(name, id))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Recover restores target from location: a file:// path under Dir (a
// backup's directory, or an archive Download wrote) or an http(s) URL of
// such an archive. mayRead checks the caller may read a backup of the
// collection a file:// location lies under (the first directory below
// Dir), so a scoped key cannot restore another tenant's backup by path.
// An archive is unpacked under Dir's ".recover/" first and removed after.
func (b *Backups) Recover(ctx context.Context, c *coordinator.Coordinator, location, target string, mayRead func(string) error) (coordinator.RestoreResult, error) {
	st, err := b.store()
	if err != nil {
		return coordinator.RestoreResult{}, err
	}
	u, err := url.Parse(location)
	if err != nil {
		return coordinator.RestoreResult{}, wire.Invalid(fmt.Sprintf("location: %v", err))
	}
	var archive io.ReadCloser
	prefix := ""
	switch u.Scheme {
	case "file":
		rel, err := filepath.Rel(b.Dir, filepath.Clean(u.Path))
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") || !filepath.IsAbs(u.Path) {
			return coordinator.RestoreResult{}, wire.Invalid(fmt.Sprintf("location: %s is not under the router's --backup-dir %s", u.Path, b.Dir))
		}
		rel = filepath.ToSlash(rel)
		first, _, _ := strings.Cut(rel, "/")
		if err := mayRead(first); err != nil {
			return coordinator.RestoreResult{}, err
		}
		fi, err := os.Stat(u.Path)
		if err != nil {
			return coordinator.RestoreResult{}, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: fmt.Sprintf("location: %v", err)}
		}
		if fi.IsDir() {
			prefix = rel
		} else if archive, err = os.Open(u.Path); err != nil {
			return coordinator.RestoreResult{}, err
		}
	case "http", "https":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
		if err != nil {
			return coordinator.RestoreResult{}, wire.Invalid(fmt.Sprintf("location: %v", err))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return coordinator.RestoreResult{}, &wire.Error{Status: http.StatusBadGateway, Code: wire.CodeUnavailable, Msg: fmt.Sprintf("location: %v", err)}
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return coordinator.RestoreResult{}, &wire.Error{Status: http.StatusBadGateway, Code: wire.CodeUnavailable,
				Msg: fmt.Sprintf("location: %s answered %s", location, resp.Status)}
		}
		archive = resp.Body
	default:
		return coordinator.RestoreResult{}, wire.Invalid(fmt.Sprintf("location: scheme %q is not supported (file:// under --backup-dir, http://, https://)", u.Scheme))
	}
	if archive != nil {
		defer archive.Close()
		prefix = ".recover/" + coordinator.NewBackupID(b.now())
		defer func() { _ = st.RemoveAll(context.WithoutCancel(ctx), prefix) }()
		if err := backup.ReadTar(ctx, archive, st, prefix); err != nil {
			if backup.IsCorrupt(err) {
				return coordinator.RestoreResult{}, wire.Invalid(fmt.Sprintf("the snapshot is refused: %v; nothing was restored", err))
			}
			return coordinator.RestoreResult{}, err
		}
	}
	start := b.now()
	res, err := c.RestoreFrom(ctx, prefix, target, coordinator.BackupConfig{Store: st})
	b.Metrics.Observe(metrics.RestoreOp, target, b.now().Sub(start), Size(res.Manifest), err, b.now())
	return res, err
}
