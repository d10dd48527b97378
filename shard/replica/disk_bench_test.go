package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
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

// BenchmarkDiskAtRest is what a bulk load leaves in a replica's data
// directory: a group of TRAWL_DISK_REPLICAS (default 3) replicas in this
// process, each on its own directory and loopback port with the
// production raft settings, takes TRAWL_DISK_ROWS (default 100 000)
// 1536-D rows of an int8 collection with its float32 rows on disk, in
// batches of 256 from TRAWL_DISK_WRITERS (default 4) concurrent writers,
// as `router load` sends them. Once every replica has applied the load the
// group is closed, and each directory's allocated bytes are reported by
// part (raft.db, snapshots, segments) over the float32 rows' bytes, with
// raft.db's high-water mark sampled during the load (bbolt never gives
// its pages back to the file system) and the load's vectors/s.
//
// It uses only what every version of the replica has, so the same file
// measures an older branch in the same run. One iteration takes minutes:
//
//	go test -run '^$' -bench BenchmarkDiskAtRest -benchtime 1x -timeout 30m ./shard/replica/
func BenchmarkDiskAtRest(b *testing.B) {
	rows := envInt("TRAWL_DISK_ROWS", 100000)
	replicas := envInt("TRAWL_DISK_REPLICAS", 3)
	writers := envInt("TRAWL_DISK_WRITERS", 4)
	const dim, batch = 1536, 256
	settings := catalog.Settings{Dim: dim, Metric: vector.DotProduct, Quantization: catalog.QuantInt8, Float32: catalog.Float32OnDisk}
	kernel, err := vector.FromEnv()
	require.NoError(b, err)
	// A pool of distinct rows, reused under new ids: generating 1536
	// normals a row would take the CPU the replicas need, and neither the
	// bytes on disk nor the int8 scale depend on the rows being distinct.
	rng := rand.New(rand.NewPCG(1, 2))
	pool := make([][]byte, 1024)
	for i := range pool {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		pool[i] = shard.EncodeVector(v)
	}
	rowBytes := float64(rows) * dim * 4
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		reps := diskGroup(b, replicas, settings, kernel)
		leader := diskLeader(reps, time.Minute)
		require.NotNil(b, leader, "no leader")

		// raft.db's allocated bytes on each replica, sampled through the
		// load: the file keeps its high-water mark.
		peaks := make([]int64, len(reps))
		sample := func() {
			for i, r := range reps {
				peaks[i] = max(peaks[i], allocated(filepath.Join(r.dir, "raft.db")))
			}
		}
		stopSampling := make(chan struct{})
		var sampling sync.WaitGroup
		sampling.Go(func() {
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopSampling:
					return
				case <-t.C:
					sample()
				}
			}
		})

		b.StartTimer()
		t0 := time.Now()
		var next atomic.Int64
		var load sync.WaitGroup
		errs := make(chan error, writers)
		for range writers {
			load.Go(func() {
				for {
					lo := int(next.Add(batch)) - batch
					if lo >= rows {
						return
					}
					vs := make([]*shardpb.Vector, 0, batch)
					for i := lo; i < min(lo+batch, rows); i++ {
						vs = append(vs, &shardpb.Vector{Id: fmt.Sprint("row-", i), Vector: pool[i%len(pool)]})
					}
					// A write is keyed, so a retry after an unknown outcome
					// (a leader change under the load) is safe.
					var err error
					for range 5 {
						wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						_, err = leader.conn.Upsert(wctx, place, vs)
						cancel()
						if err == nil {
							break
						}
						time.Sleep(time.Second)
					}
					if err != nil {
						errs <- fmt.Errorf("rows %d..: %w", lo, err)
						return
					}
				}
			})
		}
		load.Wait()
		took := time.Since(t0)
		b.StopTimer()
		close(errs)
		for err := range errs {
			require.NoError(b, err)
		}
		close(stopSampling)
		sampling.Wait()

		// At rest: every replica has applied the whole load and committed
		// its int8 scale.
		commit := leader.rep.Node.CommitIndex()
		require.Eventually(b, func() bool {
			for _, r := range reps {
				if r.rep.Node.AppliedIndex() < commit || r.rep.Store.Len() != rows || !r.rep.Store.Int8Ready() {
					return false
				}
			}
			return true
		}, 10*time.Minute, 100*time.Millisecond)
		sample()
		closeDiskGroup(b, reps)

		var ratios, logRatios, peakRatios []float64
		for i, r := range reps {
			disk, parts := diskBytes(b, r.dir)
			ratios = append(ratios, float64(disk)/rowBytes)
			logRatios = append(logRatios, float64(parts["raft.db"])/rowBytes)
			peakRatios = append(peakRatios, float64(peaks[i])/rowBytes)
			b.Logf("replica %d at rest: %d bytes, %.3fx the float32 rows (%d bytes); raft.db %.3fx (high-water %.3fx), snapshots %.3fx, segments %.3fx; %v",
				i, disk, float64(disk)/rowBytes, int64(rowBytes), float64(parts["raft.db"])/rowBytes, float64(peaks[i])/rowBytes,
				float64(parts["snapshots"])/rowBytes, float64(parts[SegmentDir])/rowBytes, parts)
		}
		vps := float64(rows) / took.Seconds()
		b.Logf("%d rows into %d replicas by %d writers in %.1fs: %.0f vectors/s", rows, replicas, writers, took.Seconds(), vps)
		b.ReportMetric(median(ratios), "disk/float32")
		b.ReportMetric(median(logRatios), "raftdb/float32")
		b.ReportMetric(median(peakRatios), "raftdb-peak/float32")
		b.ReportMetric(vps, "vectors/s")
		b.StartTimer()
	}
}

// diskReplica is one replica of BenchmarkDiskAtRest's group.
type diskReplica struct {
	dir  string
	rep  *Replica
	g    *grpc.Server
	conn *client.Conn
}

// diskGroup opens n replicas of one shard on data directories with the
// production raft settings, each served on its own loopback port.
func diskGroup(b *testing.B, n int, settings catalog.Settings, kernel vector.Kernel) []*diskReplica {
	var (
		lns   []net.Listener
		peers []string
		reps  []*diskReplica
	)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(b, err)
		lns = append(lns, ln)
		peers = append(peers, ln.Addr().String())
	}
	root := b.TempDir()
	for i, ln := range lns {
		dir := filepath.Join(root, fmt.Sprint("r", i))
		rep, err := Open(Config{Legacy: settings, Kernel: kernel, DataDir: dir, Advertise: peers[i], Peers: peers,
			Logger: testLogger(b).With("replica", i)})
		require.NoError(b, err)
		g := grpc.NewServer(shard.ServerOptions()...)
		rep.Register(g)
		go func() { _ = g.Serve(ln) }()
		conn, err := client.Dial(peers[i], client.DialConfig{})
		require.NoError(b, err)
		reps = append(reps, &diskReplica{dir: dir, rep: rep, g: g, conn: conn})
	}
	b.Cleanup(func() { closeDiskGroup(b, reps) })
	return reps
}

// closeDiskGroup closes every replica still open.
func closeDiskGroup(b *testing.B, reps []*diskReplica) {
	for _, r := range reps {
		if r.rep == nil {
			continue
		}
		r.conn.Close()
		r.g.Stop()
		require.NoError(b, r.rep.Close())
		r.rep = nil
	}
}

// diskLeader waits for a replica that leads and serves; nil if none does
// within the time given.
func diskLeader(reps []*diskReplica, within time.Duration) *diskReplica {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, r := range reps {
			if r.rep.Node.IsLeader() && r.rep.Server.Serving() && r.conn.Ready() {
				return r
			}
		}
	}
	return nil
}

// allocated is the bytes allocated to the file at path, 0 if it is
// missing.
func allocated(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}
