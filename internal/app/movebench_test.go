package app_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/vector"
)

// TestMeasureRebalance measures growing 3 shards to 4: the time and
// throughput of the moves, and query latency while they run against idle,
// in the same run. It only runs with TRAWL_MOVE_BENCH=N (the documents,
// 1536-D; TRAWL_MOVE_RATE caps rows/s, default coordinator.DefaultMoveRate;
// TRAWL_MOVE_SLOTS is the collection's slot count, default 256). The old
// owner keeps a moved slot's rows 300 ms (this one router re-reads the
// catalog at every step).
//
//	TRAWL_MOVE_BENCH=20000 go test -run TestMeasureRebalance -v -timeout 30m ./internal/app/
func TestMeasureRebalance(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TRAWL_MOVE_BENCH"))
	if n <= 0 {
		t.Skip("set TRAWL_MOVE_BENCH=N to measure")
	}
	rate, _ := strconv.Atoi(os.Getenv("TRAWL_MOVE_RATE"))
	slots, _ := strconv.Atoi(os.Getenv("TRAWL_MOVE_SLOTS"))
	const dim = 1536
	kernel, err := vector.FromEnv()
	require.NoError(t, err)
	dc, err := devcluster.Start(devcluster.Config{Shards: 4, Replicas: 1, Dim: dim, Docs: 10, Kernel: kernel})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	three, err := app.New(app.Config{Shards: dc.Specs()[:3], Kernel: kernel, WarmupTimeout: 10 * time.Second})
	require.NoError(t, err)
	ctx := context.Background()
	_, _, err = three.Coordinator.CreateCollectionSlots(ctx, "bench", catalog.Settings{Dim: dim, Metric: vector.Cosine}, slots)
	require.NoError(t, err)
	three.Close()
	a, r, _ := routerOver(t, dc)
	code, raw := a.do(http.MethodPut, "/v1/collections/bench", map[string]any{"dimension": dim})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	coll, err := r.Coordinator.Collection(ctx, "bench")
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i += 256 {
		var recs []coordinator.Record
		for j := i; j < min(i+256, n); j++ {
			recs = append(recs, coordinator.Record{ID: fmt.Sprint("d-", j), Vector: randomVector(rng, dim)})
		}
		for _, res := range r.Coordinator.Upsert(ctx, coll, recs) {
			require.Nil(t, res.Err)
		}
	}

	// Queries, one at a time, for a phase; latencies in ms.
	var degraded atomic.Int64
	query := func(stop *atomic.Bool) []time.Duration {
		var lat []time.Duration
		qrng := rand.New(rand.NewPCG(3, 4))
		for !stop.Load() {
			q := randomVector(qrng, dim)
			t0 := time.Now()
			code, ans := a.search("bench", q, 10)
			lat = append(lat, time.Since(t0))
			if code != http.StatusOK || ans.ScatterGather.Degraded {
				degraded.Add(1)
			}
		}
		return lat
	}
	var stop atomic.Bool
	var idle []time.Duration
	done := make(chan struct{})
	go func() { idle = query(&stop); close(done) }()
	time.Sleep(10 * time.Second)
	stop.Store(true)
	<-done

	stop.Store(false)
	var (
		busy []time.Duration
		wg   sync.WaitGroup
	)
	wg.Go(func() { busy = query(&stop) })
	steps := placement.Rebalance(coll.Slots, dc.Names)
	rows := 0
	var fenced []time.Duration
	t0 := time.Now()
	require.NoError(t, r.Coordinator.MoveSlots(ctx, "bench", steps, coordinator.MoveConfig{RowsPerSecond: rate, Grace: 300 * time.Millisecond},
		func(res coordinator.MoveResult) {
			rows += res.Rows
			fenced = append(fenced, res.Copy)
		}))
	took := time.Since(t0)
	stop.Store(true)
	wg.Wait()
	t.Logf("moved %d slots, %d of %d vectors (%d-D) in %s: %.0f vectors/s, %.1f MB/s of float32 rows",
		len(steps), rows, n, dim, took.Round(time.Millisecond), float64(rows)/took.Seconds(), float64(rows*dim*4)/1e6/took.Seconds())
	t.Logf("answers not complete (degraded or refused): %d", degraded.Load())
	t.Logf("a slot fenced: median %s, max %s", pct(fenced, 0.5), pct(fenced, 1))
	t.Logf("query latency idle: %d queries, p50 %s, p99 %s", len(idle), pct(idle, 0.5), pct(idle, 0.99))
	t.Logf("query latency while moving: %d queries, p50 %s, p99 %s (p99 ratio %.2f)", len(busy), pct(busy, 0.5), pct(busy, 0.99),
		float64(pct(busy, 0.99))/float64(pct(idle, 0.99)))
}
