package fanout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SetReplicas swaps a shard's replica set while reads run: a replica kept
// keeps its health, a new one is asked, a removed one is returned (for
// the caller to close) and no longer asked; an empty set or an unknown
// shard is refused; reads never fail or see a torn set meanwhile.
func TestSetReplicasWhileReadsRun(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	a0, a1 := newFake("a0", nil), newFake("a1", nil)
	c := New([]Shard[*fake]{{Name: "a", Replicas: []*fake{a0, a1}}}, Options{Now: clk.Now, HedgeBudget: -1})
	// a1 is suspect: kept replicas keep that.
	r1 := c.shards[0].list()[1]
	r1.mu.Lock()
	for range SuspectAfter {
		r1.failure(clk.Now(), "scripted")
	}
	r1.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		reads  atomic.Int64
		failed atomic.Int64
		why    sync.Map
	)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				// A generous deadline: on a loaded machine under -race a
				// read may miss a short one for want of CPU, which says
				// nothing about the swap.
				_, sum := Gather(ctx, c, req(2*time.Second), call)
				reads.Add(1)
				if sum.Degraded() && ctx.Err() == nil {
					failed.Add(1)
					why.Store(fmt.Sprint(sum.ShardErrors), true)
				}
			}
		})
	}
	a2, a3 := newFake("a2", nil), newFake("a3", nil)
	// Swap at least 200 times, and on until the readers have read through
	// swaps: on a loaded machine the swaps alone can finish before any
	// reader is scheduled.
	for i := 0; i < 200 || reads.Load() < 50 || i%2 == 1; i++ { // ends after an odd swap: {a1, a3, a0}
		if i >= 200 {
			time.Sleep(time.Millisecond)
		}
		set := []*fake{a0, a1, a2}
		if i%2 == 1 {
			set = []*fake{a1, a3, a0}
		}
		removed, err := c.SetReplicas("a", set)
		require.NoError(t, err)
		if i > 0 {
			require.Len(t, removed, 1, "one replica dropped each swap")
		}
	}
	cancel()
	wg.Wait()
	require.Positive(t, reads.Load())
	var reasons []string
	why.Range(func(k, _ any) bool { reasons = append(reasons, k.(string)); return true })
	require.Zero(t, failed.Load(), "a read during a swap failed: %v", reasons)

	removed, err := c.SetReplicas("a", []*fake{a1, a2})
	require.NoError(t, err)
	require.ElementsMatch(t, []*fake{a0, a3}, removed)
	require.Equal(t, []*fake{a1, a2}, c.Shards()[0].Replicas)
	st := c.Status()[0].Replicas
	require.Equal(t, "a1", st[0].Addr)
	require.True(t, st[0].Suspect, "a kept replica keeps its health")
	require.False(t, st[1].Suspect)

	// An attempt of a read that ended before the removal (a loser is
	// never waited for) may still be starting on a loaded machine: count
	// only the calls of the reads made after it, known by their context.
	type afterRemoval struct{}
	var asked atomic.Int64
	a0.mu.Lock()
	a0.answer = func(ctx context.Context) (ans, error) {
		if ctx.Value(afterRemoval{}) != nil {
			asked.Add(1)
		}
		return ans{docs: 10}, nil
	}
	a0.mu.Unlock()
	marked := context.WithValue(context.Background(), afterRemoval{}, true)
	for range 10 {
		res, sum := Gather(marked, c, req(200*time.Millisecond), call)
		require.False(t, sum.Degraded())
		require.Equal(t, "a2", res[0].Replica, "the new replica serves; the suspect one is skipped")
	}
	require.Zero(t, asked.Load(), "a removed replica is not asked")

	_, err = c.SetReplicas("a", nil)
	require.ErrorContains(t, err, "cannot be empty")
	_, err = c.SetReplicas("zz", []*fake{a0})
	require.ErrorContains(t, err, `unknown shard "zz"`)
	require.Equal(t, []*fake{a1, a2}, c.Shards()[0].Replicas, "a refused change changes nothing")
}
