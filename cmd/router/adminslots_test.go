package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/vector"
)

// admin slots shows the catalog's slot map of every collection: the slot
// count, the map's epoch, and each shard's slots and documents, which
// agree with where the slot map puts the corpus.
func TestAdminSlots(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 1, Dim: 4, Docs: 500, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	var args []string
	for _, s := range dc.Specs() {
		args = append(args, "--shard", s.Name+"="+strings.Join(s.Addrs, ","))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	require.NoError(t, runAdmin(ctx, append([]string{"slots", "--json"}, args...), &out), "%s", out.String())
	var got []slotsStatus
	require.NoError(t, json.Unmarshal(out.Bytes(), &got), "%s", out.String())
	even := placement.Even(dc.Names, placement.DefaultSlots)
	want := map[string]int64{}
	for _, r := range dc.Corpus {
		want[even.Home(r.ID)]++
	}
	require.Equal(t, []slotsStatus{{Collection: dc.Collection.Name, Slots: 256, Epoch: 1, Shards: []slotsShardCount{
		{Shard: "shard-0", Slots: 86, Docs: want["shard-0"], Listed: true},
		{Shard: "shard-1", Slots: 85, Docs: want["shard-1"], Listed: true},
		{Shard: "shard-2", Slots: 85, Docs: want["shard-2"], Listed: true},
	}}}, got)

	// Given part of the list, a shard the map names but the list does not
	// is shown as such, its documents unknown.
	out.Reset()
	require.NoError(t, runAdmin(ctx, append([]string{"slots", "--collection", dc.Collection.Name}, args[:4]...), &out))
	require.Contains(t, out.String(), dc.Collection.Name+"  256 slots  map epoch 1")
	require.Regexp(t, `shard-2 \(not in --shard\)\s+85\s+-`, out.String())

	out.Reset()
	err = runAdmin(ctx, append([]string{"slots", "--collection", "absent"}, args...), &out)
	require.ErrorContains(t, err, `no collection "absent"`)
}
