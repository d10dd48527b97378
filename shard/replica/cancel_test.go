package replica

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// scanOutcomes is a ScanObserver that keeps each scan's outcome.
type scanOutcomes struct {
	mu    sync.Mutex
	scans map[string]int
}

func (o *scanOutcomes) Scan(outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.scans[outcome]++
}
func (o *scanOutcomes) Documents(string, int)   {}
func (o *scanOutcomes) ForgetCollection(string) {}
func (o *scanOutcomes) Queries(string, int)     {}

func (o *scanOutcomes) all() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.scans)
}

func (o *scanOutcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.scans[outcome]
}

// A search its caller cancels mid-scan (a losing hedge) stops at the
// shard at its next block instead of scanning on to its deadline, and is
// counted as cancelled, not as a failure.
func TestCancelledScanStopsAtTheShard(t *testing.T) {
	const (
		dim  = 8
		rows = 40 * vector.BlockRows
	)
	gate := make(chan struct{})
	var scored, held atomic.Int64
	generic := vector.Generic()
	// The kernel's first row waits until the test has cancelled the call;
	// the rest score at once.
	k := vector.Kernel{Name: "gated",
		Dot: func(a, b []float32) float32 {
			if held.Add(1) == 1 {
				<-gate
			}
			scored.Add(1)
			return generic.Dot(a, b)
		},
		L2Squared: generic.L2Squared,
	}
	obs := &scanOutcomes{scans: map[string]int{}}
	// The client's cancel reaches the shard as a stream reset, a moment
	// after the client itself returns Canceled; the gate opens only once
	// the shard's own context is done, or the scan could finish first.
	searchCancelled := make(chan struct{})
	var once sync.Once
	watch := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if _, ok := req.(*shardpb.SearchRequest); ok {
			go func() {
				<-ctx.Done()
				once.Do(func() { close(searchCancelled) })
			}()
		}
		return h(ctx, req)
	})
	_, c := serve(t, Config{Legacy: catalog.Settings{Dim: dim, Metric: vector.DotProduct}, Kernel: k, Observer: obs}, []grpc.ServerOption{watch}, client.DialConfig{})
	var vs []*shardpb.Vector
	for i := range rows {
		v := make([]float32, dim)
		v[i%dim] = 1
		vs = append(vs, &shardpb.Vector{Id: fmt.Sprint("v", i), Vector: shard.EncodeVector(v)})
	}
	for lo := 0; lo < rows; lo += 256 {
		_, err := c.Upsert(ctx(t), place, vs[lo:min(lo+256, rows)])
		require.NoError(t, err)
	}
	held.Store(0)
	scored.Store(0)

	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := c.Search(sctx, []client.Query{{Vector: make([]float32, dim), K: 5}}, 0)
		done <- err
	}()
	require.Eventually(t, func() bool { return held.Load() > 0 }, 5*time.Second, time.Millisecond, "the scan started")
	cancel()
	require.Equal(t, codes.Canceled, status.Code(<-done))
	select {
	case <-searchCancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the shard never saw the search cancelled")
	}
	close(gate)
	require.Eventually(t, func() bool { return obs.get(server.ScanCancelled) == 1 }, 5*time.Second, time.Millisecond, "scans by outcome: %v", obs.all())
	require.Zero(t, obs.get(server.ScanError))
	require.Less(t, scored.Load(), int64(rows/4), "the scan stopped within a block or so per worker, not at the end")
}
