package app_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
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
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
	"github.com/trawl-search/trawl/vector/segment"
)

// A cluster backup taken while one writer alternates new documents
// between two collections (an int8 one and a float32 one) is one cut per
// shard group for both: every write acknowledged before it began is in
// it, and what it holds of the writes acknowledged during it is closed
// under "acknowledged before" across the two collections — a write to one
// that is present means every write acknowledged before it, to either,
// is present. The int8 collection's part carries its codes, the codes the
// replicas hold. Restored into a cluster of another shard count, all at
// once and one collection alone, the collections hold exactly the
// backup's rows and every search is brute force over them.
func TestClusterBackupOneCutAcrossCollections(t *testing.T) {
	t.Parallel() // an exactness test: its own cluster, its own deadlines of seconds
	const dim = 4
	src, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 2, Dim: dim, Docs: 600, Kernel: vector.Generic(),
		Metric: vector.DotProduct, Collection: "q", Quantization: store.QuantInt8, Int8MinRows: 50})
	require.NoError(t, err)
	t.Cleanup(src.Close)
	a, ra, _ := routerOver(t, src)
	set := catalog.Settings{Dim: dim, Metric: vector.DotProduct}.Normalize()
	code, raw := a.create("f", set)
	require.Equal(t, http.StatusOK, code, "%s", raw)

	type ackd struct{ coll, id string }
	var (
		mu    sync.Mutex
		order []ackd // acknowledged, in order: one writer
		vecs  = map[string][]float32{}
	)
	put := func(rng *rand.Rand, coll, id string) bool {
		v := randomVector(rng, dim)
		code, _ := a.do(http.MethodPost, "/v1/collections/"+coll+"/vectors", map[string]any{"vectors": []map[string]any{{"id": id, "vector": v}}})
		if code != http.StatusOK {
			return false
		}
		mu.Lock()
		order = append(order, ackd{coll, id})
		vecs[coll+"/"+id] = v
		mu.Unlock()
		return true
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		require.True(t, put(rng, "f", fmt.Sprintf("f-pre-%d", i)))
	}
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		wrng := rand.New(rand.NewPCG(5, 6))
		for i := 0; !stop.Load(); i++ {
			coll := []string{"q", "f"}[i%2]
			put(wrng, coll, fmt.Sprintf("%s-w-%d", coll, i))
		}
	})
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	before := len(order)
	mu.Unlock()
	dir := backup.Dir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cm, err := ra.Coordinator.BackupAll(ctx, "cb1", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	require.Len(t, cm.Cuts, 3, "one cut per shard group")
	require.Len(t, cm.Collections, 2)
	listed, err := ra.Coordinator.ClusterBackups(ctx, dir)
	require.NoError(t, err)
	require.Len(t, listed, 1)

	got := map[string]map[string]backup.Row{}
	for _, p := range cm.Collections {
		r, err := backup.OpenPart(ctx, dir, cm, p.Collection)
		require.NoError(t, err)
		require.NoError(t, r.Verify(ctx))
		got[p.Collection] = map[string]backup.Row{}
		for i, s := range r.Manifest.Shards {
			require.Equal(t, cm.Cuts[i].Index, s.Index, "%s on %s: the group's one cut", p.Collection, s.Name)
			require.NoError(t, r.Rows(ctx, s, 64, func(rows []backup.Row) error {
				for _, row := range rows {
					got[p.Collection][row.ID] = row
				}
				return nil
			}))
		}
		if p.Collection == "q" {
			requireReplicaCodes(t, src, filepath.Join(string(dir), filepath.FromSlash(backup.PartPrefix("cb1", "q"))), r)
		} else {
			for _, s := range r.Manifest.Shards {
				require.Empty(t, s.Codes, "a float32 collection has no codes")
			}
		}
	}
	for _, rec := range src.Corpus {
		_, in := got["q"][rec.ID]
		require.True(t, in, "seeded row %q is in the backup", rec.ID)
	}
	mu.Lock()
	missing := -1
	for i, w := range order {
		row, in := got[w.coll][w.id]
		if i < before {
			require.True(t, in, "%s/%s was acknowledged before the backup began but is not in it", w.coll, w.id)
		}
		if in {
			require.Equal(t, vecs[w.coll+"/"+w.id], row.Vector)
			require.Equal(t, -1, missing, "%s/%s is in the backup but %s/%s, acknowledged before it, is not",
				w.coll, w.id, order[max(missing, 0)].coll, order[max(missing, 0)].id)
		} else if missing < 0 {
			missing = i
		}
	}
	mu.Unlock()
	t.Logf("cluster backup: %d + %d rows; %d writes acknowledged before it began, %d by the end, first missing at %d",
		len(got["q"]), len(got["f"]), before, len(order), missing)

	// Restore all into a 2-shard cluster, then one collection alone under
	// another name.
	dst, err := devcluster.Start(devcluster.Config{Shards: 2, Replicas: 1, Dim: dim, Docs: 10, Kernel: vector.Generic(), Collection: "seed"})
	require.NoError(t, err)
	t.Cleanup(dst.Close)
	b, rb, _ := routerOver(t, dst)
	res, err := rb.Coordinator.RestoreAll(ctx, "cb1", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)
	require.Len(t, res, 2)
	_, err = rb.Coordinator.RestoreAll(ctx, "cb1", coordinator.BackupConfig{Store: dir})
	require.Equal(t, coordinator.CodeConflict, coordinator.CodeOf(err), "the targets exist: %v", err)
	one, err := rb.Coordinator.Restore(ctx, "f", "cb1", "f-copy", coordinator.BackupConfig{Store: dir})
	require.NoError(t, err)
	require.EqualValues(t, len(got["f"]), one.Rows)
	qrng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct{ coll, from string }{{"q", "q"}, {"f", "f"}, {"f-copy", "f"}} {
		m := &model{settings: set, docs: map[string][]float32{}}
		for id, row := range got[tc.from] {
			m.docs[id] = row.Vector
		}
		for i := range 10 {
			q := randomVector(qrng, dim)
			ans := exactSearch(t, b, tc.coll, q, 10)
			require.False(t, ans.ScatterGather.Degraded)
			requireBruteForce(t, m, q, 10, ans.Items, fmt.Sprintf("%s query %d", tc.coll, i))
		}
	}

	// A damaged part is refused naming the file, and nothing is restored.
	bad := t.TempDir()
	require.NoError(t, os.CopyFS(bad, os.DirFS(string(dir))))
	rq, err := backup.OpenPart(ctx, dir, cm, "q")
	require.NoError(t, err)
	p := filepath.Join(bad, filepath.FromSlash(backup.PartPrefix("cb1", "q")), filepath.FromSlash(rq.Manifest.Shards[0].Codes))
	bs, err := os.ReadFile(p)
	require.NoError(t, err)
	bs[len(bs)-1] ^= 1
	require.NoError(t, os.WriteFile(p, bs, 0o644))
	_, err = rb.Coordinator.DropCollection(ctx, "q")
	require.NoError(t, err)
	_, err = rb.Coordinator.DropCollection(ctx, "f")
	require.NoError(t, err)
	_, err = rb.Coordinator.RestoreAll(ctx, "cb1", coordinator.BackupConfig{Store: backup.Dir(bad)})
	require.Equal(t, coordinator.CodeInvalid, coordinator.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, rq.Manifest.Shards[0].Codes)
	for _, c := range []string{"q", "f"} {
		_, err = rb.Coordinator.Collection(ctx, c)
		require.Equal(t, coordinator.CodeCollectionNotFound, coordinator.CodeOf(err), "nothing was restored: %v", err)
	}
}

// requireReplicaCodes checks an int8 part's codes against the replicas':
// each shard's steps are its group's committed scale, and its first rows'
// codes (the seeded ones, which nothing rewrote) are the replica's codes
// of those rows.
func requireReplicaCodes(t *testing.T, dc *devcluster.Cluster, root string, r *backup.Reader) {
	t.Helper()
	dim := r.Manifest.Settings.Dimension
	for i, s := range r.Manifest.Shards {
		require.NotEmpty(t, s.Codes, "shard %s of an int8 collection has codes", s.Name)
		stepsRaw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(s.Steps)))
		require.NoError(t, err)
		stepsRaw = stepsRaw[len(segment.Float32VectorNpyHeader(dim)):]
		codes, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(s.Codes)))
		require.NoError(t, err)
		codes = codes[len(segment.Int8NpyHeader(s.Rows, dim)):]
		require.Len(t, codes, int(s.Rows)*dim)
		rep := dc.Replicas[i][0]
		require.NoError(t, rep.Store.ViewCodes(func(_ vector.Rows, c *quant.Codes) error {
			require.NotNil(t, c, "the replica holds codes")
			for d := range dim {
				require.Equal(t, c.Scale().Step(d), math.Float32frombits(binary.LittleEndian.Uint32(stepsRaw[4*d:])), "step %d", d)
			}
			for row := range min(int(s.Rows), 100) {
				for d, want := range c.Row(row) {
					require.Equal(t, want, int8(codes[row*dim+d]), "shard %s row %d code %d", s.Name, row, d)
				}
			}
			return nil
		}))
	}
}

// exactSearch is a search with "exact": true (an int8 collection's codes
// would make the candidates approximate).
func exactSearch(t *testing.T, a httpAPI, coll string, q []float32, k int) answer {
	t.Helper()
	code, raw := a.do(http.MethodPost, "/v1/collections/"+coll+"/search?deadline_ms=2000", map[string]any{"vector": q, "k": k, "exact": true})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var ans answer
	require.NoError(t, json.Unmarshal(raw, &ans), "%s", raw)
	return ans
}
