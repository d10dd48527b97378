package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/client"
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

// admin drain moves every slot off a shard, the others left balanced, and
// admin rebalance spreads them back over every --shard: the documents
// follow their slots.
func TestAdminDrainAndRebalance(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 1, Dim: 4, Docs: 10, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	var args []string
	for _, s := range dc.Specs() {
		args = append(args, "--shard", s.Name+"="+strings.Join(s.Addrs, ","))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	co := coordinatorOver(t, dc)
	_, _, err = co.CreateCollectionSlots(ctx, "small", catalog.Settings{Dim: 4, Metric: vector.DotProduct}, 8)
	require.NoError(t, err)
	coll, err := co.Collection(ctx, "small")
	require.NoError(t, err)
	var recs []coordinator.Record
	for i := range 200 {
		recs = append(recs, coordinator.Record{ID: fmt.Sprint("s-", i), Vector: []float32{float32(i%7) + 1, 1, 0, 2}})
	}
	for _, r := range co.Upsert(ctx, coll, recs) {
		require.Nil(t, r.Err)
	}
	slotsOf := func() map[string]slotsShardCount {
		var out bytes.Buffer
		require.NoError(t, runAdmin(ctx, append([]string{"slots", "--json", "--collection", "small"}, args...), &out), "%s", out.String())
		var got []slotsStatus
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		m := map[string]slotsShardCount{}
		var docs int64
		for _, sc := range got[0].Shards {
			m[sc.Shard] = sc
			docs += sc.Docs
		}
		require.Equal(t, int64(200), docs, "every document once")
		return m
	}

	var out bytes.Buffer
	require.NoError(t, runAdmin(ctx, append([]string{"drain", "shard-2", "--collection", "small", "--grace", "0"}, args...), &out), "%s", out.String())
	require.Contains(t, out.String(), "(2/2,", "shard-2 holds 2 of the 8 slots, one goes to each of the others")
	got := slotsOf()
	require.Zero(t, got["shard-2"].Slots)
	require.Zero(t, got["shard-2"].Docs)
	require.Equal(t, 4, got["shard-0"].Slots)
	require.Equal(t, 4, got["shard-1"].Slots)

	// A mover that dies after a flip leaves the move unsettled (the old
	// owner still holds the slot's rows); the next move finishes it first.
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = co.MoveSlot(short, "small", 0, "shard-2", coordinator.MoveConfig{Grace: time.Minute})
	cancelShort()
	require.ErrorContains(t, err, "not settled")
	coll, err = co.Collection(ctx, "small")
	require.NoError(t, err)
	require.Len(t, coll.Slots.Moves, 1)

	out.Reset()
	require.NoError(t, runAdmin(ctx, append([]string{"rebalance", "--collection", "small", "--grace", "0"}, args...), &out), "%s", out.String())
	got = slotsOf()
	for _, n := range dc.Names {
		require.InDelta(t, 8.0/3, got[n].Slots, 1, n)
		require.Positive(t, got[n].Docs, n)
	}
	out.Reset()
	require.NoError(t, runAdmin(ctx, append([]string{"rebalance", "--collection", "small"}, args...), &out))
	require.Equal(t, "small: balanced, nothing to move\n", out.String())

	err = runAdmin(ctx, append([]string{"move-slot", "--collection", "small", "--slot", "0"}, args...), &out)
	require.ErrorContains(t, err, "--to SHARD are required")
	err = runAdmin(ctx, append([]string{"drain", "--collection", "small"}, args...), &out)
	require.ErrorContains(t, err, "name the shard to drain")
}

func coordinatorOver(t *testing.T, dc *devcluster.Cluster) *coordinator.Coordinator {
	t.Helper()
	var fs []fanout.Shard[*client.Conn]
	for _, spec := range dc.Specs() {
		s := fanout.Shard[*client.Conn]{Name: spec.Name}
		for _, a := range spec.Addrs {
			c, err := client.Dial(a, client.DialConfig{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			s.Replicas = append(s.Replicas, c)
		}
		fs = append(fs, s)
	}
	return coordinator.New(coordinator.Config{Cluster: fanout.New(fs, fanout.Options{})})
}
