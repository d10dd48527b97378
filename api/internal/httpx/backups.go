package httpx

import (
	"context"
	"net/http"
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
	Store   backup.Store
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

// Restore restores backup id of collection source as target, and records
// it.
func (b *Backups) Restore(ctx context.Context, c *coordinator.Coordinator, source, id, target string) (coordinator.RestoreResult, error) {
	st, err := b.store()
	if err != nil {
		return coordinator.RestoreResult{}, err
	}
	start := b.now()
	res, err := c.Restore(ctx, source, id, target, coordinator.BackupConfig{Store: st})
	b.Metrics.Observe(metrics.RestoreOp, target, b.now().Sub(start), Size(res.Manifest), err, b.now())
	return res, err
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
