package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/vector"
)

// written is one document as a writer sent it.
type written struct {
	vec     []float32
	payload string
}

// A backup taken while a writer keeps upserting (new ids, and rewrites of
// earlier ones with a new vector and payload) holds every write
// acknowledged before the backup began, holds nothing torn (each row is
// exactly one of the versions written for its id, vector and payload
// together), and restores into a cluster of another shard count under a
// new name with exactly the backup's rows, where every search is brute
// force over them. The same backup with one byte flipped, or one file
// cut short, is refused naming the file, and nothing is restored.
func TestBackupDuringWritesRestoresElsewhere(t *testing.T) {
	longtest.Mark(t)
	const dim = 4
	src, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 2, Dim: dim, Docs: 10, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(src.Close)
	a, ra, _ := routerOver(t, src)
	set := catalog.Settings{Dim: dim, Metric: vector.DotProduct}.Normalize()
	code, raw := a.create("b", set)
	require.Equal(t, http.StatusOK, code, "%s", raw)

	var (
		mu       sync.Mutex
		versions = map[string][]written{} // every version sent, in order
		acked    = map[string]written{}   // the last acknowledged version
	)
	put := func(rng *rand.Rand, ids []string) bool {
		var vs []map[string]any
		batch := map[string]written{}
		for _, id := range ids {
			w := written{vec: randomVector(rng, dim), payload: fmt.Sprintf(`{"v":%d}`, rng.IntN(1<<30))}
			batch[id] = w
			vs = append(vs, map[string]any{"id": id, "vector": w.vec, "payload": json.RawMessage(w.payload)})
		}
		mu.Lock()
		for id, w := range batch {
			versions[id] = append(versions[id], w)
		}
		mu.Unlock()
		code, _ := a.do(http.MethodPost, "/v1/collections/b/vectors", map[string]any{"vectors": vs})
		if code != http.StatusOK {
			return false
		}
		mu.Lock()
		for id, w := range batch {
			acked[id] = w
		}
		mu.Unlock()
		return true
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 600; i += 100 {
		ids := make([]string, 100)
		for j := range ids {
			ids[j] = fmt.Sprintf("d-%d", i+j)
		}
		require.True(t, put(rng, ids))
	}

	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		// order is the new ids the writer had acknowledged, in order: one
		// writer, so each was acknowledged before the next was sent.
		order []string
	)
	wg.Go(func() {
		wrng := rand.New(rand.NewPCG(5, 6))
		for i := 0; !stop.Load(); i++ {
			// A new id, and a rewrite of one of the first ones.
			ids := []string{fmt.Sprintf("w-%d", i), fmt.Sprintf("d-%d", wrng.IntN(600))}
			if put(wrng, ids) {
				mu.Lock()
				order = append(order, ids[0])
				mu.Unlock()
			}
		}
	})
	time.Sleep(100 * time.Millisecond) // let the writer get going
	mu.Lock()
	before := make(map[string]written, len(acked))
	for id, w := range acked {
		before[id] = w
	}
	mu.Unlock()
	dir := backup.Dir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := ra.Coordinator.Backup(ctx, "b", "first", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	// What the backup holds, read back through the format's reader.
	r, err := backup.Open(ctx, dir, "b/first")
	require.NoError(t, err)
	require.NoError(t, r.Verify(ctx))
	require.Len(t, r.Manifest.Shards, 3)
	got := map[string]backup.Row{}
	for _, s := range r.Manifest.Shards {
		require.NotZero(t, s.Index, "shard %s: the cut's raft index", s.Name)
		require.NoError(t, r.Rows(ctx, s, 64, func(rows []backup.Row) error {
			for _, row := range rows {
				_, dup := got[row.ID]
				require.False(t, dup, "id %q is in two shards' files", row.ID)
				got[row.ID] = row
			}
			return nil
		}))
	}
	require.Equal(t, m.Settings.Dimension, dim)
	mu.Lock()
	defer mu.Unlock()
	for id, w := range before {
		row, ok := got[id]
		require.True(t, ok, "%q was acknowledged before the backup began but is not in it", id)
		// Not torn: the row is one version written for the id, and a
		// version no older than the one acknowledged before the cut.
		at := versionOf(versions[id], row)
		require.GreaterOrEqual(t, at, 0, "%q: the backup's row is no version ever written (torn)", id)
		require.GreaterOrEqual(t, at, versionOf(versions[id], backup.Row{Vector: w.vec, Payload: []byte(w.payload)}),
			"%q: the backup holds a version older than one acknowledged before it began", id)
	}
	// Across shards too: of writes acknowledged one after another, once
	// one is missing every later one is missing (the cuts are taken under
	// one write fence).
	missing := ""
	for _, id := range order {
		_, in := got[id]
		if missing != "" {
			require.False(t, in, "%q is in the backup but %q, acknowledged before it was sent, is not", id, missing)
		} else if !in {
			missing = id
		}
	}
	t.Logf("backup: %d rows; %d ids acknowledged before it began, %d by the end", len(got), len(before), len(acked))
	for id, row := range got {
		require.GreaterOrEqual(t, versionOf(versions[id], row), 0, "%q: the backup's row is no version ever written", id)
	}

	// Restore into a 2-shard cluster under another name.
	dst, err := devcluster.Start(devcluster.Config{Shards: 2, Replicas: 1, Dim: dim, Docs: 10, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dst.Close)
	b, rb, _ := routerOver(t, dst)
	res, err := rb.Coordinator.Restore(ctx, "b", "first", "copy", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)
	require.EqualValues(t, len(got), res.Rows)
	_, err = rb.Coordinator.Restore(ctx, "b", "first", "copy", coordinator.BackupConfig{Store: dir})
	require.Equal(t, coordinator.CodeConflict, coordinator.CodeOf(err), "a restore over an existing collection: %v", err)

	restored := &model{settings: set, docs: map[string][]float32{}}
	for id, row := range got {
		restored.docs[id] = row.Vector
		code, raw := b.do(http.MethodGet, "/v1/collections/copy/vectors/"+id+"?deadline_ms=2000", nil)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var doc struct {
			Vector  []float32       `json:"vector"`
			Payload json.RawMessage `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc))
		require.Equal(t, row.Vector, doc.Vector, "%q's vector", id)
		require.JSONEq(t, string(row.Payload), string(doc.Payload), "%q's payload", id)
	}
	qrng := rand.New(rand.NewPCG(11, 12))
	for i := range 20 {
		q := randomVector(qrng, dim)
		code, ans := b.search("copy", q, 10)
		require.Equal(t, http.StatusOK, code)
		require.False(t, ans.ScatterGather.Degraded)
		requireBruteForce(t, restored, q, 10, ans.Items, fmt.Sprintf("query %d", i))
	}

	// Corruption: a bit flipped in one shard's rows, then a points file cut
	// short. Each is refused naming the file, and no collection appears.
	for _, tc := range []struct {
		name   string
		file   string
		damage func(t *testing.T, path string)
	}{
		{"bit flipped", r.Manifest.Shards[1].Vectors, func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			b[len(b)-3] ^= 0x10
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}},
		{"truncated", r.Manifest.Shards[2].Points, func(t *testing.T, p string) {
			st, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, st.Size()/2))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := t.TempDir()
			require.NoError(t, os.CopyFS(filepath.Join(bad, "b"), os.DirFS(string(dir)+"/b")))
			tc.damage(t, filepath.Join(bad, "b", "first", filepath.FromSlash(tc.file)))
			_, err := rb.Coordinator.Restore(ctx, "b", "first", "broken", coordinator.BackupConfig{Store: backup.Dir(bad)})
			require.Error(t, err)
			require.Equal(t, coordinator.CodeInvalid, coordinator.CodeOf(err), "%v", err)
			require.Contains(t, err.Error(), tc.file, "the error names the file")
			_, err = rb.Coordinator.Collection(ctx, "broken")
			require.Equal(t, coordinator.CodeCollectionNotFound, coordinator.CodeOf(err), "nothing was restored: %v", err)
		})
	}
}

// versionOf is the position among vs of the version row holds (vector
// and payload both), or -1.
func versionOf(vs []written, row backup.Row) int {
	at := -1
	for i, w := range vs {
		if !vectorsEqual(w.vec, row.Vector) {
			continue
		}
		var a, b any
		if json.Unmarshal([]byte(w.payload), &a) != nil || json.Unmarshal(row.Payload, &b) != nil {
			continue
		}
		if fmt.Sprint(a) == fmt.Sprint(b) {
			at = i
		}
	}
	return at
}

func vectorsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
