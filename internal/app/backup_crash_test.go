package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/shardproc"
	"github.com/trawl-search/trawl/vector"
)

// backupCrashEnv gates TestCrashDuringBackup: it runs nine shard
// processes and SIGKILLs them (make test-crash).
const backupCrashEnv = "TRAWL_BACKUP_CRASH_TEST"

// A backup taken of real shard processes (3 groups × 3 replicas) while a
// bulk load runs and replicas are SIGKILLed and restarted, the replica
// streaming each group's part included, is restored into a fresh cluster
// of 2 shards: every write acknowledged before the backup began is there
// with its vector and payload, no row is torn or unknown, each group's
// part is a prefix of its log, and every search equals brute force over
// the restored rows.
func TestCrashDuringBackup(t *testing.T) {
	if os.Getenv(backupCrashEnv) == "" {
		t.Skip("set " + backupCrashEnv + "=1 (make test-crash): runs and kills shard processes")
	}
	const dim = 32
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sbin, err := shardBin.Path()
	require.NoError(t, err)
	ports, dir := &shardproc.Ports{}, t.TempDir()
	var specs []app.ShardSpec
	var groups [][]*shardproc.Shard
	for i := range 3 {
		name := fmt.Sprintf("shard-%d", i)
		g, err := shardproc.Group{Bin: sbin, Ports: ports, Dir: dir, Name: name, Replicas: 3}.Start()
		require.NoError(t, err)
		groups = append(groups, g)
		spec := app.ShardSpec{Name: name}
		for _, r := range g {
			spec.Addrs = append(spec.Addrs, r.GRPC)
		}
		specs = append(specs, spec)
	}
	t.Cleanup(func() {
		for _, g := range groups {
			for _, r := range g {
				r.Kill()
				if t.Failed() {
					t.Logf("--- %s log tail:\n%s", r.Name, r.Tail(15))
				}
			}
		}
	})
	for _, g := range groups {
		for _, r := range g {
			require.NoError(t, shardproc.WaitReady(ctx, &r.Proc, r.ReadyURL()))
		}
	}
	var logs lockedBuffer
	ra, err := app.New(app.Config{Shards: specs, Kernel: vector.Generic(), WarmupTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	t.Cleanup(ra.Close)
	require.NoError(t, ra.WaitReady(ctx))
	set := catalog.Settings{Dim: dim, Metric: vector.DotProduct}.Normalize()
	_, err = ra.Coordinator.CreateCollection(ctx, "load", set)
	require.NoError(t, err)
	coll, err := ra.Coordinator.Collection(ctx, "load")
	require.NoError(t, err)

	// The bulk load: one writer, batches of 64 new ids, each id written
	// once, so an acknowledged id has exactly one version.
	var (
		mu      sync.Mutex
		sent    = map[string]coordinator.Record{}
		acked   []string   // in acknowledgement order
		batches [][]string // the acknowledged ids of each batch, in order
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for b := 0; !stop.Load() && ctx.Err() == nil; b++ {
			recs := make([]coordinator.Record, 64)
			for j := range recs {
				id := fmt.Sprintf("b%d-%d", b, j)
				recs[j] = coordinator.Record{ID: id, Vector: randomVector(rng, dim), Payload: fmt.Appendf(nil, `{"batch":%d,"j":%d}`, b, j)}
			}
			mu.Lock()
			for _, r := range recs {
				sent[r.ID] = r
			}
			mu.Unlock()
			res := ra.Coordinator.Upsert(ctx, coll, recs)
			mu.Lock()
			var ok []string
			for i, r := range res {
				if r.Outcome == "ok" {
					ok = append(ok, recs[i].ID)
				}
			}
			acked = append(acked, ok...)
			batches = append(batches, ok)
			mu.Unlock()
		}
	})
	// The killer: one replica of a random group at a time, SIGKILLed and
	// restarted on its data directory a moment later.
	kills := atomic.Int64{}
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 4))
		for !stop.Load() && ctx.Err() == nil {
			r := groups[rng.IntN(3)][rng.IntN(3)]
			time.Sleep(time.Duration(200+rng.IntN(300)) * time.Millisecond)
			r.Kill()
			kills.Add(1)
			time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
			if err := r.Start(); err != nil {
				t.Errorf("restart %s: %v", r.Name, err)
				return
			}
			_ = shardproc.WaitReady(ctx, &r.Proc, r.ReadyURL())
		}
	})
	waitAcked := func(n int) {
		for {
			mu.Lock()
			got := len(acked)
			mu.Unlock()
			if got >= n || ctx.Err() != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitAcked(20000)

	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	// Replica 0 of each group is the first a backup asks: kill one of
	// them just after the backup starts, so its stream is cut (or never
	// begins) and another replica takes a fresh cut.
	go func() {
		time.Sleep(20 * time.Millisecond)
		groups[1][0].Kill()
		kills.Add(1)
		time.Sleep(time.Second)
		_ = groups[1][0].Start()
	}()
	store := backup.Dir(t.TempDir())
	m, err := ra.Coordinator.Backup(ctx, "load", "crash", coordinator.BackupConfig{Store: store})
	require.NoError(t, err)
	waitAcked(len(before) + 3000)
	stop.Store(true)
	wg.Wait()

	r, err := backup.Open(ctx, store, "load/crash")
	require.NoError(t, err)
	require.NoError(t, r.Verify(ctx))
	got := map[string]backup.Row{}
	for _, s := range r.Manifest.Shards {
		require.NoError(t, r.Rows(ctx, s, 1024, func(rows []backup.Row) error {
			for _, row := range rows {
				_, dup := got[row.ID]
				require.False(t, dup, "%q twice", row.ID)
				got[row.ID] = row
			}
			return nil
		}))
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("backup of %d rows (cuts %v) with %d acknowledged before it and %d by the end, %d kills, %d backup attempts cut short",
		len(got), cuts(m), len(before), len(acked), kills.Load(), strings.Count(logs.String(), "backup attempt failed"))
	for _, id := range before {
		row, ok := got[id]
		require.True(t, ok, "%q was acknowledged before the backup began and is missing", id)
		requireSameRecord(t, sent[id], row)
	}
	for id, row := range got {
		rec, ok := sent[id]
		require.True(t, ok, "%q was never written", id)
		requireSameRecord(t, rec, row) // not torn
	}
	// Across shards too: batches are acknowledged one after another
	// (one batch's ids together), and once an acknowledged id of one batch
	// is missing, no id of a later batch is there.
	missing := ""
	for _, batch := range batches {
		if missing != "" {
			for _, id := range batch {
				_, in := got[id]
				require.False(t, in, "%q is in the backup but %q, acknowledged before it was sent, is not", id, missing)
			}
			continue
		}
		for _, id := range batch {
			if _, in := got[id]; !in && missing == "" {
				missing = id
			}
		}
	}

	dst, err := devcluster.Start(devcluster.Config{Shards: 2, Replicas: 1, Dim: dim, Docs: 10, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dst.Close)
	b, rb, _ := routerOver(t, dst)
	res, err := rb.Coordinator.Restore(ctx, "load", "crash", "restored", coordinator.BackupConfig{Store: store})
	require.NoError(t, err)
	require.EqualValues(t, len(got), res.Rows)
	restored := &model{settings: set, docs: map[string][]float32{}}
	for id, row := range got {
		restored.docs[id] = row.Vector
	}
	qrng := rand.New(rand.NewPCG(5, 6))
	for i := range 10 {
		q := randomVector(qrng, dim)
		code, ans := b.search("restored", q, 10)
		require.Equal(t, http.StatusOK, code)
		require.False(t, ans.ScatterGather.Degraded)
		requireBruteForce(t, restored, q, 10, ans.Items, fmt.Sprintf("query %d", i))
	}
	// A sample of the restored documents, read back whole.
	n := 0
	for id, row := range got {
		if n++; n > 50 {
			break
		}
		code, raw := b.do(http.MethodGet, "/v1/collections/restored/vectors/"+id+"?deadline_ms=2000", nil)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var doc struct {
			Vector  []float32       `json:"vector"`
			Payload json.RawMessage `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc))
		require.Equal(t, row.Vector, doc.Vector)
		require.JSONEq(t, string(row.Payload), string(doc.Payload))
	}
}

func requireSameRecord(t *testing.T, want coordinator.Record, got backup.Row) {
	t.Helper()
	require.Equal(t, want.Vector, got.Vector, "%q's vector", want.ID)
	require.JSONEq(t, string(want.Payload), string(got.Payload), "%q's payload", want.ID)
}

func cuts(m backup.Manifest) []string {
	var out []string
	for _, s := range m.Shards {
		out = append(out, fmt.Sprintf("%s@%d", s.Name, s.Index))
	}
	return out
}

// lockedBuffer is a log destination several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
