package api

import (
	"bytes"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/catalog"
)

// backupJSON is one backup in an answer: its manifest and total size.
type backupJSON struct {
	backup.Manifest
	Bytes int64 `json:"bytes"`
}

func backupOf(m backup.Manifest) backupJSON { return backupJSON{Manifest: m, Bytes: httpx.Size(m)} }

// createBackup is POST /v1/collections/{collection}/backups: a backup of
// the collection at a cut of every shard group, answered once it is
// complete (docs/api.md). It needs read access to the collection.
func (s *Server) createBackup(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "collection")
	if err := catalog.ValidName(name); err != nil {
		s.http.Fail(w, r, wire.Invalid(err.Error()), nil)
		return
	}
	body, err := s.http.ReadBody(w, r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	if len(bytes.TrimSpace(body)) > 0 {
		var none struct{}
		if err := wire.DecodeStrict(body, &none); err != nil {
			s.http.Fail(w, r, err, nil)
			return
		}
	}
	m, err := s.http.Backups.Create(r.Context(), s.cfg.Coordinator, name)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"backup": backupOf(m)})
}

// listBackups is GET /v1/collections/{collection}/backups: the complete
// backups of the name, oldest first (the collection need not exist).
func (s *Server) listBackups(w http.ResponseWriter, r *http.Request) {
	ms, err := s.http.Backups.List(r.Context(), s.cfg.Coordinator, chi.URLParam(r, "collection"))
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	out := make([]backupJSON, len(ms))
	for i, m := range ms {
		out[i] = backupOf(m)
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"backups": out})
}

// deleteBackup is DELETE /v1/collections/{collection}/backups/{id}.
func (s *Server) deleteBackup(w http.ResponseWriter, r *http.Request) {
	name, id := chi.URLParam(r, "collection"), chi.URLParam(r, "id")
	if err := s.http.Backups.Delete(r.Context(), s.cfg.Coordinator, name, id); err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// restoreJSON is the body of POST /v1/collections/{collection}/restore.
type restoreJSON struct {
	// Backup is the backup's id (required).
	Backup string `json:"backup"`
	// From is the collection the backup was taken of: the target's own
	// name when absent.
	From string `json:"from"`
	// Resume continues a restore into the collection that a restore
	// whose router died left restoring (coordinator.BackupConfig.Resume).
	Resume bool `json:"resume"`
}

// restore is POST /v1/collections/{collection}/restore: creates the
// collection from a backup. It needs write access to the collection
// restored into and read access to the one backed up.
func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	var req restoreJSON
	target, ok := s.collectionBody(w, r, &req)
	if !ok {
		return
	}
	if req.Backup == "" {
		s.http.Fail(w, r, wire.Invalid("backup: required (the id of the backup to restore)"), nil)
		return
	}
	if req.From == "" {
		req.From = target
	}
	if err := catalog.ValidName(req.From); err != nil {
		s.http.Fail(w, r, wire.Invalid("from: "+err.Error()), nil)
		return
	}
	if err := s.http.Permit(r, req.From, apikey.Read); err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	res, err := s.http.Backups.Restore(r.Context(), s.cfg.Coordinator, req.From, req.Backup, target, req.Resume)
	if err != nil {
		s.failCatalog(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"collection": res.Collection, "restored": res.Rows, "backup": backupOf(res.Manifest)})
}

// clusterBackupJSON is one cluster backup in an answer: its manifest and
// the bytes of every part's files.
type clusterBackupJSON struct {
	backup.ClusterManifest
	Bytes int64 `json:"bytes"`
}

func clusterBackupOf(m backup.ClusterManifest) clusterBackupJSON {
	return clusterBackupJSON{ClusterManifest: m, Bytes: httpx.ClusterSize(m)}
}

// emptyBody refuses a body other than nothing or {}.
func (s *Server) emptyBody(w http.ResponseWriter, r *http.Request) bool {
	body, err := s.http.ReadBody(w, r)
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		var none struct{}
		err = wire.DecodeStrict(body, &none)
	}
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return false
	}
	return true
}

// createClusterBackup is POST /v1/backups: every collection at one cut
// per shard group, as one backup (docs/api.md). It needs a key scoped to
// every collection.
func (s *Server) createClusterBackup(w http.ResponseWriter, r *http.Request) {
	if !s.emptyBody(w, r) {
		return
	}
	m, err := s.http.Backups.CreateAll(r.Context(), s.cfg.Coordinator)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"backup": clusterBackupOf(m)})
}

// listClusterBackups is GET /v1/backups: the complete cluster backups,
// oldest first.
func (s *Server) listClusterBackups(w http.ResponseWriter, r *http.Request) {
	ms, err := s.http.Backups.ListAll(r.Context(), s.cfg.Coordinator)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	out := make([]clusterBackupJSON, len(ms))
	for i, m := range ms {
		out[i] = clusterBackupOf(m)
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"backups": out})
}

// permitParts checks the key may write every collection of cluster
// backup id (deleting or restoring it changes each).
func (s *Server) permitParts(r *http.Request, id string) error {
	if err := catalog.ValidName(id); err != nil {
		return wire.Invalid("backup id: " + err.Error())
	}
	m, err := s.http.Backups.OpenAll(r.Context(), id)
	if err != nil {
		return err
	}
	for _, p := range m.Collections {
		if err := s.http.Permit(r, p.Collection, apikey.Write); err != nil {
			return err
		}
	}
	return nil
}

// deleteClusterBackup is DELETE /v1/backups/{id}.
func (s *Server) deleteClusterBackup(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := s.permitParts(r, id); err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	if err := s.http.Backups.DeleteAll(r.Context(), s.cfg.Coordinator, id); err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// restoreCluster is POST /v1/backups/{id}/restore: every collection of
// the cluster backup under its own name; none may exist. One collection
// alone restores through POST /v1/collections/{c}/restore with the
// cluster backup's id.
func (s *Server) restoreCluster(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !s.emptyBody(w, r) {
		return
	}
	if err := s.permitParts(r, id); err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	res, err := s.http.Backups.RestoreAll(r.Context(), s.cfg.Coordinator, id)
	if err != nil {
		s.failCatalog(w, r, err)
		return
	}
	out := make([]map[string]any, len(res))
	for i, rr := range res {
		out[i] = map[string]any{"collection": rr.Collection, "restored": rr.Rows}
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"backup": id, "collections": out})
}
