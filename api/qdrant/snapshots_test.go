package qdrant_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/apitest"
)

// Qdrant's snapshot routes over trawl's backups: create, list, download
// (a tar archive), recover from that archive by URL and from the backup's
// directory by file:// path into new collections that hold every point,
// refusals Qdrant-style (a damaged archive naming the file, a path
// outside --backup-dir, an unsupported option, an existing target), and
// delete.
func TestSnapshotRoutes(t *testing.T) {
	dir := t.TempDir()
	e := apitest.New(t, apitest.Config{BackupDir: dir})
	res := e.Do(http.MethodPost, "/collections/trawl/snapshots", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res)
	var made struct {
		Result struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"result"`
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &made))
	require.Equal(t, "ok", made.Status)
	name := made.Result.Name
	require.Regexp(t, `\.snapshot$`, name)

	res = e.Do(http.MethodGet, "/collections/trawl/snapshots", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res)
	require.Contains(t, res.String(), name)

	res = e.Do(http.MethodGet, "/collections/trawl/snapshots/"+name, "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res)
	archive := res.Body
	require.Greater(t, int64(len(archive)), made.Result.Size, "the archive holds every file")

	count := func(coll string) int {
		res := e.Do(http.MethodPost, "/collections/"+coll+"/points/count", `{}`, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res)
		var c struct {
			Result struct {
				Count int `json:"count"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(res.Body, &c))
		return c.Result.Count
	}
	recoverFrom := func(coll, location string) apitest.Response {
		b, err := json.Marshal(map[string]any{"location": location, "priority": "snapshot"})
		require.NoError(t, err)
		return e.Do(http.MethodPut, "/collections/"+coll+"/snapshots/recover", string(b), nil)
	}
	res = recoverFrom("by-url", e.Srv.URL+"/collections/trawl/snapshots/"+name)
	require.Equal(t, http.StatusOK, res.Status, "%s", res)
	require.Equal(t, 300, count("by-url"))
	id := name[:len(name)-len(".snapshot")]
	res = recoverFrom("by-path", "file://"+filepath.Join(dir, "trawl", id))
	require.Equal(t, http.StatusOK, res.Status, "%s", res)
	require.Equal(t, 300, count("by-path"))

	// The archive with one bit flipped in a vectors file's rows, kept
	// beside the backups. (A flip at a fixed offset could land in a tar
	// header instead, refused as a bad archive, not as the file.)
	bad := bytes.Clone(archive)
	npy := bytes.Index(bad, []byte("\x93NUMPY"))
	require.GreaterOrEqual(t, npy, 0, "the archive holds a .npy file")
	bad[npy+256] ^= 0x01 // past the 64- or 128-byte header, inside the rows
	mirror := filepath.Join(dir, "trawl", "damaged.snapshot")
	require.NoError(t, os.WriteFile(mirror, bad, 0o644))
	for _, tc := range []struct {
		name, coll, body string
		status           int
		says             string
	}{
		{"damaged archive", "damaged", `{"location": "file://` + mirror + `"}`, http.StatusBadRequest, "shards/"},
		{"outside the backup dir", "outside", `{"location": "file:///etc/passwd"}`, http.StatusBadRequest, "--backup-dir"},
		{"unsupported scheme", "ftp", `{"location": "ftp://x/y"}`, http.StatusBadRequest, "scheme"},
		{"checksum", "sum", `{"location": "file://` + mirror + `", "checksum": "ab"}`, http.StatusBadRequest, "checksum"},
		{"unknown member", "sum", `{"location": "file://` + mirror + `", "where": 1}`, http.StatusBadRequest, "where"},
		{"no location", "sum", `{}`, http.StatusBadRequest, "location"},
		{"existing target", "trawl", `{"location": "file://` + filepath.Join(dir, "trawl", id) + `"}`, http.StatusConflict, "exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.Do(http.MethodPut, "/collections/"+tc.coll+"/snapshots/recover", tc.body, nil)
			require.Equal(t, tc.status, res.Status, "%s", res)
			require.Contains(t, res.String(), tc.says)
			require.Contains(t, res.String(), `"status":{"error":`)
			if tc.coll != "trawl" {
				res = e.Do(http.MethodGet, "/collections/"+tc.coll+"/exists", "", nil)
				require.Contains(t, res.String(), `"exists":false`, "nothing was restored")
			}
		})
	}

	res = e.Do(http.MethodDelete, "/collections/trawl/snapshots/"+name, "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res)
	res = e.Do(http.MethodGet, "/collections/trawl/snapshots/"+name, "", nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res)
}
