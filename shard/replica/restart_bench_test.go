package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// BenchmarkRestart is a replica's restart-to-serving with its whole
// corpus in its latest snapshot (nothing to replay): a group of one on a
// data directory is loaded with TRAWL_RESTART_ROWS (default 20 000)
// 1536-D rows of an int8 collection (TRAWL_RESTART_INDEX=ivf for IVF,
// built before the snapshot), float32 TRAWL_RESTART_FLOAT32 (default
// on_disk), snapshotted, closed, and each iteration reopens it and waits
// until it serves. It uses only what every version of the replica has,
// so the same file times an older branch in the same run.
func BenchmarkRestart(b *testing.B) {
	rows := envInt("TRAWL_RESTART_ROWS", 20000)
	place32 := os.Getenv("TRAWL_RESTART_FLOAT32")
	if place32 == "" {
		place32 = catalog.Float32OnDisk
	}
	const dim, batch = 1536, 256
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	addr := ln.Addr().String()
	ln.Close()
	settings := catalog.Settings{Dim: dim, Metric: vector.DotProduct, Quantization: catalog.QuantInt8, Float32: place32}
	if os.Getenv("TRAWL_RESTART_INDEX") == "ivf" {
		settings.Index = catalog.IndexIVF
	}
	kernel, err := vector.FromEnv()
	require.NoError(b, err)
	open := func() (*Replica, *grpc.Server) {
		rep, err := Open(Config{Legacy: settings, Kernel: kernel, DataDir: dir, Advertise: addr,
			SnapshotThreshold: 1 << 30, Logger: testLogger(b)})
		require.NoError(b, err)
		l, err := listenRetry(addr)
		require.NoError(b, err)
		g := grpc.NewServer(shard.ServerOptions()...)
		rep.Register(g)
		go func() { _ = g.Serve(l) }()
		return rep, g
	}
	rep, g := open()
	require.Eventually(b, rep.Server.Serving, 60*time.Second, 10*time.Millisecond)
	c, err := client.Dial(addr, client.DialConfig{})
	require.NoError(b, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for lo := 0; lo < rows; lo += batch {
		vs := make([]*shardpb.Vector, 0, batch)
		for i := lo; i < min(lo+batch, rows); i++ {
			v := make([]float32, dim)
			for j := range v {
				v[j] = float32(rng.NormFloat64())
			}
			vs = append(vs, &shardpb.Vector{Id: fmt.Sprint("row-", i), Vector: shard.EncodeVector(v)})
		}
		wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := c.Upsert(wctx, place, vs)
		cancel()
		require.NoError(b, err)
	}
	c.Close()
	// The trainer commits the int8 scale (and the IVF centroids, whose
	// index is then built) before the snapshot.
	require.Eventually(b, func() bool {
		return rep.Store.Int8Ready() && (settings.Index != catalog.IndexIVF || rep.Store.IVFIndexed())
	}, 10*time.Minute, 50*time.Millisecond)
	require.NoError(b, rep.Node.Snapshot())
	g.Stop()
	require.NoError(b, rep.Close())
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		rep, g := open()
		require.Eventually(b, rep.Server.Serving, 10*time.Minute, 5*time.Millisecond)
		took := time.Since(t0)
		require.Equal(b, rows, rep.Store.Len())
		b.ReportMetric(took.Seconds(), "s-to-serving")
		b.Logf("%d rows %s: serving %.2fs after Open", rows, place32, took.Seconds())
		b.StopTimer()
		g.Stop()
		require.NoError(b, rep.Close())
		b.StartTimer()
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
