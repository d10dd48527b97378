package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

// admin backup --all takes a cluster backup, admin backups --all lists
// it, and admin restore --all brings every collection back once they
// are gone (and refuses while they exist, or with --to).
func TestAdminClusterBackup(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Config{Shards: 2, Replicas: 1, Dim: 4, Docs: 50, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	args := []string{"--backup-dir", t.TempDir()}
	for _, s := range dc.Specs() {
		args = append(args, "--shard", s.Name+"="+strings.Join(s.Addrs, ","))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, runAdmin(ctx, append([]string{"backup", "--all"}, args...), &out), "%s", out.String())
	require.Contains(t, out.String(), "1 collections, 50 rows, at one cut in each of 2 shards")
	id := strings.TrimSuffix(strings.Fields(out.String())[2], ":")

	out.Reset()
	require.NoError(t, runAdmin(ctx, append([]string{"backups", "--all"}, args...), &out), "%s", out.String())
	require.Contains(t, out.String(), id)
	require.Regexp(t, `shard-0@\d+,shard-1@\d+`, out.String())

	out.Reset()
	err = runAdmin(ctx, append([]string{"restore", "--all", "--backup", id}, args...), &out)
	require.ErrorContains(t, err, "exists")
	err = runAdmin(ctx, append([]string{"restore", "--all", "--backup", id, "--to", "x"}, args...), &out)
	require.ErrorContains(t, err, "--to")

	co := coordinatorOver(t, dc)
	_, err = co.DropCollection(ctx, dc.Collection.Name)
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, runAdmin(ctx, append([]string{"restore", "--all", "--backup", id}, args...), &out), "%s", out.String())
	require.Contains(t, out.String(), "restored "+dc.Collection.Name+": 50 rows")
}
