package replica

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/recovery"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector/segment"
)

// TestRaftWipedReplicaRebuildsUnderTheRecoveryThrottle: with every
// replica's recovery work throttled (to a twentieth of one core, timed by
// the working thread's CPU; or to half a core, charged the whole test
// process's CPU as `router shard` charges its own), a replica restarted on
// a wiped directory still rebuilds in full from its leader's snapshot and
// the log after it: it serves again, holds the same int8 codes as its
// leader (FinishRestore's paced encoding), its exact answers are brute
// force's over every acknowledged write and its int8 answers its
// leader's; and both ends charged the work to their throttles (the leader
// streaming the snapshot, the replica restoring it).
func TestRaftWipedReplicaRebuildsUnderTheRecoveryThrottle(t *testing.T) {
	longtest.Mark(t)
	for _, tc := range []struct {
		name  string
		share float64
		alone bool
	}{
		{"thread CPU", 0.05, false},
		{"process CPU", 0.5, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testWipedReplicaRebuilds(t, tc.share, tc.alone) })
	}
}

func testWipedReplicaRebuilds(t *testing.T, share float64, alone bool) {
	const (
		dim     = 64
		minRows = 300
	)
	var (
		mu        sync.Mutex
		throttles = map[string]*recovery.Throttle{} // by advertised address, kept across restarts
	)
	ms := groupOf(t, 3, dim, func(c *Config) {
		c.Legacy.Quantization, c.Int8MinRows = catalog.QuantInt8, minRows
		// A snapshot keeps 4 entries of log: the wiped replica cannot
		// catch up from the log and must install the snapshot.
		c.SnapshotThreshold, c.TrailingLogs = 1<<20, 4
		mu.Lock()
		defer mu.Unlock()
		if throttles[c.Advertise] == nil {
			th, err := recovery.New(share, 1)
			require.NoError(t, err)
			throttles[c.Advertise] = th
		}
		c.Recovery, c.RecoveryAlone = throttles[c.Advertise], alone
	})
	waitLeader(t, ms)
	rng := rand.New(rand.NewPCG(7, 25))
	stored := map[string][]float32{}
	write := func(from, to int) uint64 {
		var vs []*shardpb.Vector
		for i := from; i < to; i++ {
			v := make([]float32, dim)
			for j := range v {
				v[j] = float32(rng.NormFloat64())
			}
			id := fmt.Sprintf("d-%04d", i)
			stored[id] = v
			vs = append(vs, &shardpb.Vector{Id: id, Vector: shard.EncodeVector(v)})
		}
		return upsertOn(t, ms, vs)
	}
	for i := 0; i < 1000; i += 100 {
		write(i, i+100)
	}
	for _, m := range ms {
		require.Eventually(t, m.mem.Int8Ready, 20*time.Second, 10*time.Millisecond, "scale applied on every replica")
	}

	leader := waitLeader(t, ms)
	away := ms[0]
	if away == leader {
		away = ms[1]
	}
	away.stop()
	require.NoError(t, os.RemoveAll(away.dir))
	// Rewrites and new rows while it is away, then a snapshot that
	// compacts the log it would need.
	var last uint64
	for i := 900; i < 1500; i += 50 {
		last = write(i, i+50)
	}
	// The member that took the snapshot, checked below: on a loaded
	// machine another may lead by then, with no snapshot of its own.
	snapper := waitLeader(t, ms)
	require.NoError(t, snapper.node.Snapshot())
	last = write(1500, 1510)

	t0 := time.Now()
	require.NoError(t, away.start())
	require.Eventually(t, func() bool { return away.node.Serving() && away.node.AppliedIndex() >= last },
		60*time.Second, 10*time.Millisecond, "the wiped replica serves again")
	took := time.Since(t0)
	leader = waitLeader(t, ms)
	require.True(t, groupState(t, raftClient(t, away)).GetHasSnapshot(), "the wiped replica rebuilt from an installed snapshot")
	require.Equal(t, len(stored), away.mem.Len())
	require.True(t, away.mem.Int8Ready(), "codes rebuilt on the restored replica")
	// The snapshot it installed carried the codes files beside the rows
	// (the stream is self-contained), and it keeps codes files of its own.
	links, err := filepath.Glob(filepath.Join(snapper.dir, "snapshots", "*", "files", "*"+segment.CodesExt))
	require.NoError(t, err)
	require.NotEmpty(t, links, "the leader's snapshot links its codes files")
	own, err := filepath.Glob(filepath.Join(away.dir, SegmentDir, "*", "*"+segment.CodesExt))
	require.NoError(t, err)
	require.NotEmpty(t, own, "the rebuilt replica's codes files")

	// The same codes as the leader's, row for row.
	codesByID := func(m *member) map[string][]int8 {
		ids, rows, _ := codesOf(m)
		require.Len(t, rows, len(ids))
		out := make(map[string][]int8, len(ids))
		for i, id := range ids {
			out[id] = rows[i]
		}
		return out
	}
	require.Equal(t, codesByID(leader), codesByID(away))

	for q := range 5 {
		query := make([]float32, dim)
		for j := range query {
			query[j] = float32(rng.NormFloat64())
		}
		// Brute force over every acknowledged write (the members' metric
		// is squared L2: nearest first).
		ids := make([]string, 0, len(stored))
		for id := range stored {
			ids = append(ids, id)
		}
		dist := func(id string) float64 {
			var s float64
			for j, x := range stored[id] {
				d := float64(x) - float64(query[j])
				s += d * d
			}
			return s
		}
		slices.SortFunc(ids, func(a, b string) int {
			if da, db := dist(a), dist(b); da != db {
				if da < db {
					return -1
				}
				return 1
			}
			return 0
		})
		exact := searchServing(t, away, []client.Query{{Vector: query, K: 10, Exact: true}}, last)
		got := make([]string, len(exact.Hits[0]))
		for i, h := range exact.Hits[0] {
			got[i] = h.ID
		}
		require.Equal(t, ids[:10], got, "query %d: the rebuilt replica's exact answer is brute force's", q)

		approx := searchServing(t, away, []client.Query{{Vector: query, K: 10}}, last)
		require.False(t, approx.Exact, "the rebuilt replica scans its int8 codes")
		want := searchServing(t, leader, []client.Query{{Vector: query, K: 10}}, last)
		require.Equal(t, hitPairs(want.Hits[0]), hitPairs(approx.Hits[0]), "query %d: the same int8 answer as the leader's", q)
	}

	mu.Lock()
	defer mu.Unlock()
	sent, restored := throttles[leader.addr()].Stats(), throttles[away.addr()].Stats()
	t.Logf("MEASURED: wiped replica rebuilt %d rows in %s at %v cores of recovery (charged the process's CPU: %v); restore %v CPU, %v waited; leader %v CPU, %v waited",
		len(stored), took.Round(time.Millisecond), share, alone, restored.CPU, restored.Waited, sent.CPU, sent.Waited)
	require.Positive(t, restored.CPU, "the restore ran under the wiped replica's throttle")
	require.Positive(t, sent.CPU, "the snapshot was streamed under the leader's throttle")
}

// searchServing searches m, again while it refuses as not serving: a
// loaded machine can starve a group's heartbeats past the test timings'
// leader silence, and a replica then rightly refuses reads until it hears
// from a leader again.
func searchServing(t *testing.T, m *member, qs []client.Query, minIndex uint64) client.SearchResult {
	t.Helper()
	// The condition runs on another goroutine, where require's FailNow
	// would not stop the test: the error is checked after.
	var (
		res       client.SearchResult
		searchErr error
	)
	require.Eventually(t, func() bool {
		var err error
		res, err = m.conn.Search(ctx(t), qs, minIndex)
		if status.Code(err) == codes.Unavailable && !strings.Contains(err.Error(), "has applied index") {
			return false
		}
		searchErr = err
		return true
	}, 30*time.Second, 10*time.Millisecond, "%s serves the search", m.addr())
	require.NoError(t, searchErr)
	return res
}
