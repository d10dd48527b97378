package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/replica"
	"github.com/trawl-search/trawl/vector"
)

func readyz(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// freshShard starts a brand-new group of one, without waiting for it to
// elect itself and serve, and returns its address.
func freshShard(t *testing.T, dim int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rep, err := replica.Open(replica.Config{
		Legacy: catalog.Settings{Dim: dim, Metric: vector.Cosine}, Kernel: vector.Generic(), DataDir: t.TempDir(), Advertise: ln.Addr().String(),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, MaxLeaderSilence: time.Second,
	})
	require.NoError(t, err)
	g := grpc.NewServer(shard.ServerOptions()...)
	rep.Register(g)
	go g.Serve(ln)
	t.Cleanup(func() {
		g.Stop()
		require.NoError(t, rep.Close())
	})
	return ln.Addr().String()
}

// Readiness means answering: a router started together with brand-new
// shards turns ready only once every shard serves, so the first query
// after /readyz is complete, on every one of ten fresh starts.
func TestFirstQueryAfterReadyIsComplete(t *testing.T) {
	const dim = 8
	for trial := range 10 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			var specs []app.ShardSpec
			for i := range 3 {
				specs = append(specs, app.ShardSpec{Name: fmt.Sprint("shard-", i), Addrs: []string{freshShard(t, dim)}})
			}
			r, err := app.New(app.Config{Shards: specs, Kernel: vector.Generic(), WarmupTimeout: 30 * time.Second,
				EnsureCollections: []catalog.Spec{{Name: "trawl", Settings: catalog.Settings{Dim: dim, Metric: vector.Cosine}.Normalize()}}})
			require.NoError(t, err)
			srv := httptest.NewServer(r.API)
			t.Cleanup(func() {
				srv.Close()
				r.Close()
			})
			require.Eventually(t, func() bool { return readyz(t, srv.URL) == http.StatusOK }, 30*time.Second, 5*time.Millisecond)
			b, err := json.Marshal(map[string]any{"vector": []float32{1, 2, 3, 4, 5, 6, 7, 8}, "k": 3})
			require.NoError(t, err)
			resp, err := http.Post(srv.URL+"/v1/search?deadline_ms=1000", "application/json", bytes.NewReader(b))
			require.NoError(t, err)
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
			var a answer
			require.NoError(t, json.Unmarshal(raw, &a))
			require.False(t, a.ScatterGather.Degraded, "%s", raw)
			require.Equal(t, 3, a.ScatterGather.ShardsQueried)
		})
	}
}

// /readyz stays 503 while some shard has no replica that serves, and
// turns 200 as soon as one does.
func TestReadyWaitsForEveryShardToServe(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Config{Replicas: 1, Dim: 8, Docs: 30, Seed: 1, Kernel: vector.Generic()})
	require.NoError(t, err)
	defer dc.Close()
	cut, ok := dc.Replica("shard-1", 0)
	require.True(t, ok)
	cut.Proxy.Stop()
	r, err := app.New(app.Config{Shards: dc.Specs(), Kernel: vector.Generic(), WarmupTimeout: time.Minute})
	require.NoError(t, err)
	srv := httptest.NewServer(r.API)
	defer func() {
		srv.Close()
		r.Close()
	}()
	for range 10 {
		require.Equal(t, http.StatusServiceUnavailable, readyz(t, srv.URL), "shard-1 has no serving replica")
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, cut.Proxy.Restore())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, r.WaitReady(ctx))
	require.Equal(t, http.StatusOK, readyz(t, srv.URL))
}
