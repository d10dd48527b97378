package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/catalog"
)

// Qdrant's collection snapshots are trawl's backups (docs/backup.md): a
// snapshot's name is its backup id and ".snapshot"; downloaded, it is
// one tar archive of the backup's files (backup.WriteTar), which
// PUT .../snapshots/recover accepts back from a URL or a path.

const snapshotSuffix = ".snapshot"

// snapshotJSON is Qdrant's SnapshotDescription. checksum is left out:
// the archive is assembled as it is downloaded, and every file in it is
// checked against the manifest's SHA-256 on recover instead.
type snapshotJSON struct {
	Name         string `json:"name"`
	CreationTime string `json:"creation_time"`
	Size         int64  `json:"size"`
}

func snapshotOf(m backup.Manifest) snapshotJSON {
	return snapshotJSON{Name: m.ID + snapshotSuffix, CreationTime: m.Created.UTC().Format("2006-01-02T15:04:05"), Size: httpx.Size(m)}
}

// snapshotID is the backup id a snapshot name names.
func snapshotID(name string) (string, error) {
	id, ok := strings.CutSuffix(name, snapshotSuffix)
	if !ok || catalog.ValidName(id) != nil {
		return "", &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: fmt.Sprintf("Snapshot %s not found", name)}
	}
	return id, nil
}

// createSnapshot is POST /collections/{c}/snapshots: a backup, answered
// once complete whatever wait says.
func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request) {
	if _, err := h.routeParams(r); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	m, err := h.http.Backups.Create(r.Context(), h.cfg.Coordinator, chi.URLParam(r, "collection"))
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, snapshotOf(m), nil)
}

// listSnapshots is GET /collections/{c}/snapshots.
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request) {
	ms, err := h.http.Backups.List(r.Context(), h.cfg.Coordinator, chi.URLParam(r, "collection"))
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	out := make([]snapshotJSON, len(ms))
	for i, m := range ms {
		out[i] = snapshotOf(m)
	}
	answer(w, r, out, nil)
}

// downloadSnapshot is GET /collections/{c}/snapshots/{name}: the backup
// as a tar archive.
func (h *Handler) downloadSnapshot(w http.ResponseWriter, r *http.Request) {
	name, snap := chi.URLParam(r, "collection"), chi.URLParam(r, "snapshot")
	id, err := snapshotID(snap)
	if err == nil {
		var ok bool
		if ok, err = h.http.Backups.Exists(r.Context(), name, id); err == nil && !ok {
			err = &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: fmt.Sprintf("Snapshot %s not found", snap)}
		}
	}
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+snap+`"`)
	w.WriteHeader(http.StatusOK)
	if err := h.http.Backups.Download(r.Context(), name, id, w); err != nil {
		// The status is sent: the client sees a cut-short archive, which
		// a recover refuses.
		if h.http.Logger != nil {
			h.http.Logger.Error("snapshot download cut short", "collection", name, "snapshot", snap, "err", err)
		}
	}
}

// deleteSnapshot is DELETE /collections/{c}/snapshots/{name}.
func (h *Handler) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	id, err := snapshotID(chi.URLParam(r, "snapshot"))
	if err == nil {
		err = h.http.Backups.Delete(r.Context(), h.cfg.Coordinator, chi.URLParam(r, "collection"), id)
	}
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, true, nil)
}

// recoverJSON is Qdrant's SnapshotRecover.
type recoverJSON struct {
	Location string          `json:"location"`
	Priority json.RawMessage `json:"priority"`
	Checksum json.RawMessage `json:"checksum"`
	APIKey   json.RawMessage `json:"api_key"`
}

// recoverSnapshot is PUT /collections/{c}/snapshots/recover: creates the
// collection from the snapshot at location (file:// under the router's
// --backup-dir, or http(s)://). Unlike Qdrant it does not overwrite a
// collection that exists: delete it first (409 otherwise), so a failed
// recover never leaves a collection half replaced.
func (h *Handler) recoverSnapshot(w http.ResponseWriter, r *http.Request) {
	target := chi.URLParam(r, "collection")
	req, _, ok := decodeRequest(h, w, r, func(b []byte) (recoverJSON, error) {
		var req recoverJSON
		if err := wire.DecodeStrict(b, &req); err != nil {
			return req, err
		}
		if req.Location == "" {
			return req, wire.Invalid("location: required (file:// under the router's --backup-dir, or an http(s) URL)")
		}
		if p := bytes.TrimSpace(req.Priority); len(p) > 0 && string(p) != "null" {
			var s string
			if json.Unmarshal(p, &s) != nil || (s != "replica" && s != "snapshot" && s != "no_sync") {
				return req, wire.Invalid("priority: want replica, snapshot or no_sync")
			}
		}
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"checksum", req.Checksum}, {"api_key", req.APIKey}} {
			if p := bytes.TrimSpace(f.raw); len(p) > 0 && string(p) != "null" {
				return req, wire.Invalid(f.name + " is not supported: every file of a snapshot is checked against its manifest's SHA-256")
			}
		}
		return req, nil
	})
	if !ok {
		return
	}
	mayRead := func(source string) error { return h.http.Permit(r, source, apikey.Read) }
	if _, err := h.http.Backups.Recover(r.Context(), h.cfg.Coordinator, req.Location, target, mayRead); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, true, nil)
}
