package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/apikey"
)

const backupKeyFile = `
admin
reader  trawl          read
tenant  copy           write
owner   trawl,copy-2   write
`

// The native backup routes over a dev cluster: a backup, its listing, a
// restore under another name that holds every document, the scoped keys
// (backing up needs read, restoring needs write on the target and read on
// the source), bad bodies refused naming the member, and a delete.
func TestBackupRoutes(t *testing.T) {
	keys, err := apikey.Parse(strings.NewReader(backupKeyFile))
	require.NoError(t, err)
	e := newEnv(t, envConfig{Keys: keys, BackupDir: t.TempDir()})
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

	res := e.do(http.MethodPost, "/v1/collections/trawl/backups", "", as("reader"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	var made struct {
		Backup struct {
			ID     string `json:"id"`
			Bytes  int64  `json:"bytes"`
			Shards []struct {
				Rows  int64  `json:"rows"`
				Index uint64 `json:"raft_index"`
			} `json:"shards"`
		} `json:"backup"`
	}
	require.NoError(t, json.Unmarshal(res.body, &made))
	require.NotEmpty(t, made.Backup.ID)
	require.Len(t, made.Backup.Shards, 3)
	var rows int64
	for _, s := range made.Backup.Shards {
		rows += s.Rows
		require.NotZero(t, s.Index)
	}
	require.EqualValues(t, 300, rows)
	require.Positive(t, made.Backup.Bytes)

	res = e.do(http.MethodGet, "/v1/collections/trawl/backups", "", as("reader"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), made.Backup.ID)

	body := `{"backup": "` + made.Backup.ID + `", "from": "trawl"}`
	for _, tc := range []struct {
		name, path, key, body string
		status                int
		says                  string
	}{
		{"read is not enough to restore", "/v1/collections/trawl/restore", "reader", body, http.StatusForbidden, "trawl"},
		{"write on the target, no read on the source", "/v1/collections/copy/restore", "tenant", body, http.StatusForbidden, "trawl"},
		{"no key", "/v1/collections/copy/restore", "", body, http.StatusUnauthorized, ""},
		{"unknown member", "/v1/collections/copy/restore", "admin", `{"backup": "x", "form": "trawl"}`, http.StatusBadRequest, "form"},
		{"no backup named", "/v1/collections/copy/restore", "admin", `{"from": "trawl"}`, http.StatusBadRequest, "backup"},
		{"bad source name", "/v1/collections/copy/restore", "admin", `{"backup": "x", "from": "a/b"}`, http.StatusBadRequest, "from"},
		{"no such backup", "/v1/collections/copy/restore", "admin", `{"backup": "nope", "from": "trawl"}`, http.StatusNotFound, "nope"},
		{"over an existing collection", "/v1/collections/trawl/restore", "admin", body, http.StatusConflict, "exists"},
		{"resume is a boolean", "/v1/collections/copy/restore", "admin", `{"backup": "x", "resume": "yes"}`, http.StatusBadRequest, "resume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h map[string]string
			if tc.key != "" {
				h = as(tc.key)
			}
			res := e.do(http.MethodPost, tc.path, tc.body, h)
			require.Equal(t, tc.status, res.status, "%s", res.body)
			require.Contains(t, res.String(), tc.says)
		})
	}
	res = e.do(http.MethodGet, "/v1/collections/copy", "", as("admin"))
	require.Equal(t, http.StatusNotFound, res.status, "refused restores created nothing: %s", res.body)

	res = e.do(http.MethodPost, "/v1/collections/copy-2/restore", body, as("owner"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), `"restored":300`)
	res = e.do(http.MethodPost, "/v1/collections/copy-2/search?deadline_ms=2000", `{"vector": [1,0,0,0,0,0,0,0], "k": 3}`, as("owner"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), `"degraded":false`)

	res = e.do(http.MethodDelete, "/v1/collections/trawl/backups/"+made.Backup.ID, "", as("reader"))
	require.Equal(t, http.StatusForbidden, res.status, "deleting a backup needs write: %s", res.body)
	res = e.do(http.MethodDelete, "/v1/collections/trawl/backups/"+made.Backup.ID, "", as("owner"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	res = e.do(http.MethodGet, "/v1/collections/trawl/backups", "", as("reader"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.NotContains(t, res.String(), made.Backup.ID)
}

// A router without --backup-dir says so, and never reaches a shard.
func TestBackupRoutesWithoutADirectory(t *testing.T) {
	e := newEnv(t, envConfig{})
	before := e.ShardRPCs()
	res := e.do(http.MethodPost, "/v1/collections/trawl/backups", "", nil)
	require.Equal(t, http.StatusBadRequest, res.status, "%s", res.body)
	require.Contains(t, res.String(), "--backup-dir")
	require.Equal(t, before, e.ShardRPCs())
}

const clusterKeyFile = `
admin
readall  *      read
tenant   trawl  write
`

// The cluster backup routes: a backup of every collection (a key scoped
// to every collection), its listing, one collection restored from it
// through the collection route, a restore of all refused while the
// collections exist and done once they are gone, bad bodies and ids
// refused, and a delete that needs write on every collection.
func TestClusterBackupRoutes(t *testing.T) {
	keys, err := apikey.Parse(strings.NewReader(clusterKeyFile))
	require.NoError(t, err)
	e := newEnv(t, envConfig{Keys: keys, BackupDir: t.TempDir()})
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	res := e.do(http.MethodPut, "/v1/collections/other", `{"dimension": 8, "metric": "dot"}`, as("admin"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	res = e.do(http.MethodPost, "/v1/collections/other/vectors", `{"vectors": [{"id": "o1", "vector": [1,2,3,4,5,6,7,8]}]}`, as("admin"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	res = e.do(http.MethodPost, "/v1/backups", "", as("tenant"))
	require.Equal(t, http.StatusForbidden, res.status, "a tenant cannot back up the cluster: %s", res.body)
	res = e.do(http.MethodPost, "/v1/backups", `{"x": 1}`, as("readall"))
	require.Equal(t, http.StatusBadRequest, res.status, "%s", res.body)
	require.Contains(t, res.String(), "x")
	res = e.do(http.MethodPost, "/v1/backups", "", as("readall"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	var made struct {
		Backup struct {
			ID   string `json:"id"`
			Cuts []struct {
				Shard string `json:"shard"`
				Index uint64 `json:"raft_index"`
			} `json:"cuts"`
			Collections []struct {
				Collection string `json:"collection"`
				Rows       int64  `json:"rows"`
			} `json:"collections"`
			Bytes int64 `json:"bytes"`
		} `json:"backup"`
	}
	require.NoError(t, json.Unmarshal(res.body, &made))
	require.Len(t, made.Backup.Cuts, 3)
	require.Len(t, made.Backup.Collections, 2)
	require.Equal(t, "other", made.Backup.Collections[0].Collection)
	require.EqualValues(t, 1, made.Backup.Collections[0].Rows)
	require.EqualValues(t, 300, made.Backup.Collections[1].Rows)
	require.Positive(t, made.Backup.Bytes)
	id := made.Backup.ID

	res = e.do(http.MethodGet, "/v1/backups", "", as("readall"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), id)

	// One collection from the cluster backup, under another name.
	res = e.do(http.MethodPost, "/v1/collections/other-copy/restore", `{"backup": "`+id+`", "from": "other"}`, as("admin"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), `"restored":1`)

	for _, tc := range []struct {
		name, path, key, body string
		status                int
		says                  string
	}{
		{"read is not enough", "/v1/backups/" + id + "/restore", "readall", "", http.StatusForbidden, ""},
		{"the collections exist", "/v1/backups/" + id + "/restore", "admin", "", http.StatusConflict, "exists"},
		{"unknown member", "/v1/backups/" + id + "/restore", "admin", `{"to": "x"}`, http.StatusBadRequest, "to"},
		{"no such backup", "/v1/backups/nope/restore", "admin", "", http.StatusNotFound, "nope"},
		{"bad id", "/v1/backups/a@b/restore", "admin", "", http.StatusBadRequest, "backup id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(http.MethodPost, tc.path, tc.body, as(tc.key))
			require.Equal(t, tc.status, res.status, "%s", res.body)
			require.Contains(t, res.String(), tc.says)
		})
	}

	for _, c := range []string{"trawl", "other"} {
		res = e.do(http.MethodDelete, "/v1/collections/"+c, "", as("admin"))
		require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	}
	res = e.do(http.MethodPost, "/v1/backups/"+id+"/restore", "", as("admin"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), `"restored":300`)
	res = e.do(http.MethodPost, "/v1/collections/trawl/search?deadline_ms=2000", `{"vector": [1,0,0,0,0,0,0,0], "k": 3}`, as("admin"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Contains(t, res.String(), `"degraded":false`)

	res = e.do(http.MethodDelete, "/v1/backups/"+id, "", as("readall"))
	require.Equal(t, http.StatusForbidden, res.status, "deleting needs write on every collection: %s", res.body)
	res = e.do(http.MethodDelete, "/v1/backups/"+id, "", as("admin"))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	res = e.do(http.MethodGet, "/v1/backups", "", as("admin"))
	require.NotContains(t, res.String(), id)
}
