package replica

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// TestRaftSnapshotsByBytesKeepEveryWrite: with a byte budget of a few
// entries, every replica of a group snapshots again and again while it
// takes writes and rewrites (sealing and compacting small segments on
// disk, or streaming its rows in memory), and after the whole group
// restarts every replica holds every acknowledged write.
func TestRaftSnapshotsByBytesKeepEveryWrite(t *testing.T) {
	longtest.Mark(t)
	const (
		dim     = 64
		batch   = 50
		batches = 30
	)
	for _, placement := range []string{catalog.Float32OnDisk, catalog.Float32InMemory} {
		t.Run(placement, func(t *testing.T) {
			ms := groupOf(t, 3, dim, func(c *Config) {
				c.Legacy.Quantization, c.Legacy.Float32, c.Int8MinRows, c.SegmentRows = catalog.QuantInt8, placement, 200, crashSegRows
				// A 50-row batch is a ~14 KiB entry: a snapshot every
				// three of them, never one by raft's count.
				c.SnapshotThreshold, c.SnapshotLogBytes, c.TrailingLogBytes = 1<<20, 32<<10, 16<<10
			})
			waitLeader(t, ms)
			rng := rand.New(rand.NewPCG(3, 4))
			stored := map[string][]float32{}
			var last uint64
			for b := range batches {
				vs := make([]*shardpb.Vector, batch)
				for i := range vs {
					// A third of each batch rewrites earlier rows.
					n := b*batch + i
					if i%3 == 0 && b > 0 {
						n = rng.IntN(b * batch)
					}
					v := make([]float32, dim)
					for j := range v {
						v[j] = float32(rng.NormFloat64())
					}
					id := fmt.Sprintf("d-%04d", n)
					stored[id] = v
					vs[i] = &shardpb.Vector{Id: id, Vector: shard.EncodeVector(v)}
				}
				last = upsertOn(t, ms, vs)
			}
			for _, m := range ms {
				require.Eventually(t, func() bool { return m.node.AppliedIndex() >= last }, 30*time.Second, 10*time.Millisecond)
				require.Eventually(t, func() bool { return groupState(t, raftClient(t, m)).GetHasSnapshot() },
					30*time.Second, 10*time.Millisecond, "%s snapshotted by bytes", m.listen)
			}

			for _, m := range ms {
				m.stop()
			}
			for _, m := range ms {
				require.NoError(t, m.start())
			}
			waitLeader(t, ms)
			for _, m := range ms {
				require.Eventually(t, func() bool { return m.srv.Serving() && m.node.AppliedIndex() >= last },
					60*time.Second, 10*time.Millisecond, "%s serves again", m.listen)
				require.Equal(t, len(stored), m.mem.Len(), "%s holds every row once", m.listen)
				for id, v := range stored {
					// A loaded machine can starve the group's heartbeats
					// past the test timings' leader silence: the replica
					// then refuses reads, rightly, until it hears again.
					// The condition runs on another goroutine, where
					// require's FailNow would not stop the test: the
					// error is checked after.
					var (
						got    *shardpb.Vector
						getErr error
					)
					require.Eventually(t, func() bool {
						var err error
						got, err = m.conn.Get(ctx(t), id, last)
						if status.Code(err) == codes.Unavailable && !strings.Contains(err.Error(), "has applied index") {
							return false
						}
						getErr = err
						return true
					}, 30*time.Second, 10*time.Millisecond, "%s serves %s", m.listen, id)
					require.NoError(t, getErr, id)
					require.Equal(t, shard.EncodeVector(v), got.GetVector(), "%s: %s is its last write", m.listen, id)
				}
			}
		})
	}
}
