package app_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/connectivity"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/vector"
)

// With Discover the router's replica sets follow the groups' members, not
// the --shard flags: seeded here with the fault proxies' addresses, it
// learns the groups' own addresses, swaps its replica sets while queries
// run (every answer complete), closes the connections it dropped once
// their grace is over, and every one it dialled when it is closed (goleak
// checks the goroutines in TestMain).
func TestDiscoveryFollowsTheGroups(t *testing.T) {
	longtest.Mark(t)
	h := startWith(t, devcluster.Config{Shards: 2, Replicas: 3, Dim: 8, Metric: vector.Euclidean, Kernel: vector.Generic(), Docs: 300, Seed: 3},
		app.Config{Discover: true, RetireAfter: 200 * time.Millisecond})
	var seeded []*client.Conn
	for _, s := range h.r.Cluster.Shards() {
		seeded = append(seeded, s.Replicas...)
	}
	want := make([][]string, len(h.dc.Replicas))
	for i, reps := range h.dc.Replicas {
		for _, r := range reps {
			want[i] = append(want[i], r.Addr)
		}
		slices.Sort(want[i])
	}
	addrs := func() [][]string {
		var out [][]string
		for _, s := range h.r.Cluster.Shards() {
			var as []string
			for _, c := range s.Replicas {
				as = append(as, c.Addr())
			}
			slices.Sort(as)
			out = append(out, as)
		}
		return out
	}
	q := map[string]any{"vector": []float32{1, 2, 3, 4, 5, 6, 7, 8}, "k": 5}
	deadline := time.Now().Add(30 * time.Second)
	for !slices.EqualFunc(addrs(), want, slices.Equal) {
		require.True(t, time.Now().Before(deadline), "the router never learnt the groups' members: %v, want %v", addrs(), want)
		a, _, _ := h.search(t, "?deadline_ms=1000", q)
		requireNoSwapFault(t, a)
		time.Sleep(20 * time.Millisecond)
	}
	for range 20 {
		a, _, _ := h.search(t, "?deadline_ms=1000", q)
		requireNoSwapFault(t, a)
	}
	// The dropped connections close after RetireAfter, router still up.
	for _, c := range seeded {
		require.Eventually(t, func() bool { return c.State() == connectivity.Shutdown }, 10*time.Second, 20*time.Millisecond,
			"dropped connection to %s never closed", c.Addr())
	}
	var current []*client.Conn
	for _, s := range h.r.Cluster.Shards() {
		current = append(current, s.Replicas...)
	}
	h.srv.Close()
	h.r.Close()
	for _, c := range append(seeded, current...) {
		require.Equal(t, connectivity.Shutdown, c.State(), "%s left open", c.Addr())
	}
}

// requireNoSwapFault fails an answer that lacks a shard for any reason but
// its deadline: a replica set swapped under a read must never cost it the
// shard, while a loaded machine under -race may make any read late.
func requireNoSwapFault(t *testing.T, a answer) {
	t.Helper()
	for shard, reason := range a.ScatterGather.ShardErrors {
		require.Equal(t, "deadline_exceeded", reason, "%s missing from an answer during discovery: %+v", shard, a.ScatterGather)
	}
	if !a.ScatterGather.Degraded {
		require.Len(t, a.Items, 5)
	}
}
