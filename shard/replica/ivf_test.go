package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
	"github.com/trawl-search/trawl/vector/quant"
)

func TestParseIndex(t *testing.T) {
	for s, want := range map[string]IndexKind{"": store.IndexFlat, "flat": store.IndexFlat, "ivf": store.IndexIVF} {
		k, err := ParseIndex(s)
		require.NoError(t, err)
		require.Equal(t, want, k)
		require.Equal(t, map[IndexKind]string{store.IndexFlat: "flat", store.IndexIVF: "ivf"}[want], k.String())
	}
	_, err := ParseIndex("hnsw")
	require.Error(t, err)
	require.Equal(t, store.QuantInt8, store.NewMemory(4, store.WithIVF(vector.Generic(), vector.Cosine)).Quantization(), "ivf implies int8")
}

// clusteredGen makes vectors around a few fixed centres, so IVF lists
// mean something.
type clusteredGen struct {
	rng     *rand.Rand
	centres [][]float32
}

func newClustered(seed uint64, dim, centres int) *clusteredGen {
	g := &clusteredGen{rng: rand.New(rand.NewPCG(seed, 99))}
	for range centres {
		c := make([]float32, dim)
		for j := range c {
			c[j] = float32(g.rng.NormFloat64())
		}
		g.centres = append(g.centres, c)
	}
	return g
}

func (g *clusteredGen) vec() []float32 {
	c := g.centres[g.rng.IntN(len(g.centres))]
	v := make([]float32, len(c))
	for j := range v {
		v[j] = c[j] + 0.5*float32(g.rng.NormFloat64())
	}
	return v
}

// listSets returns the store's index as sorted id sets, list by list
// (slot order inside a list follows the write history, which replicas and
// a fresh build need not share; answers do not depend on it).
func listSets(t *testing.T, m *store.Memory) [][]string {
	t.Helper()
	var out [][]string
	require.NoError(t, m.ViewIVF(func(r vector.Rows, x *ivf.Index) error {
		require.NotNil(t, x, "an index")
		require.Equal(t, r.Len(), x.Len())
		for l := range x.Lists() {
			ids := []string{}
			for _, row := range x.ListRows(l) {
				ids = append(ids, r.IDs[row])
			}
			sort.Strings(ids)
			out = append(out, ids)
		}
		return nil
	}))
	return out
}

// freshLists builds an index from the store's committed centroids and
// scale over a copy of its rows, as sorted id sets.
func freshLists(t *testing.T, m *store.Memory) [][]string {
	t.Helper()
	var c ivf.Centroids
	require.NoError(t, c.UnmarshalBinary(m.Trained(store.TrainedIVFCentroids)))
	var s quant.Scale
	require.NoError(t, s.UnmarshalBinary(m.Trained(store.TrainedInt8Scale)))
	var out [][]string
	require.NoError(t, m.View(func(r vector.Rows) error {
		x, err := ivf.Build(vector.Generic(), c, s, r)
		require.NoError(t, err)
		for l := range x.Lists() {
			ids := []string{}
			for _, row := range x.ListRows(l) {
				ids = append(ids, r.IDs[row])
			}
			sort.Strings(ids)
			out = append(out, ids)
		}
		return nil
	}))
	return out
}

func withBuildHook(fn func()) store.MemoryOption { return func(m *store.Memory) { m.buildHook = fn } }

// TestIVFBuildBesideWrites: a background build with appends, overwrites
// (of rows the build holds and rows it does not yet) and deletes (moving
// rows into and out of the part it holds, and shrinking the store below
// it) between its chunks swaps in an index whose lists hold exactly the
// rows a fresh build from the same centroids puts there; writes after the
// swap keep it so; the flat codes are dropped.
func TestIVFBuildBesideWrites(t *testing.T) {
	const dim = 16
	g := newClustered(3, dim, 12)
	var mem *store.Memory
	next := 0
	upsert := func(n int) {
		recs := make([]store.Record, n)
		for i := range recs {
			recs[i] = store.Record{ID: fmt.Sprintf("r%05d", next), Vector: g.vec()}
			next++
		}
		require.NoError(t, mem.Upsert(context.Background(), place, recs))
	}
	overwrite := func(row int) {
		var id string
		require.NoError(t, mem.View(func(r vector.Rows) error { id = r.IDs[row]; return nil }))
		require.NoError(t, mem.Upsert(context.Background(), place, []store.Record{{ID: id, Vector: g.vec()}}))
	}
	del := func(row int) {
		var id string
		require.NoError(t, mem.View(func(r vector.Rows) error { id = r.IDs[row]; return nil }))
		found, err := mem.Delete(context.Background(), place, id)
		require.NoError(t, err)
		require.True(t, found)
	}
	chunks := 0
	hook := func() {
		chunks++
		mem.mu.RLock()
		held := mem.ivf.pending.x.Len()
		mem.mu.RUnlock()
		if n := mem.Len(); held > 0 && n > held+1 {
			overwrite(g.rng.IntN(held))          // held by the build
			overwrite(held + g.rng.IntN(n-held)) // not yet
			del(g.rng.IntN(held))                // the last row moves into the build's part
			del(held + g.rng.IntN(mem.Len()-held))
		}
		if chunks == 3 || chunks == 6 {
			// Shrink the store below the build's rows: deletes then move
			// rows the build holds.
			for mem.Len() > held-50 {
				del(g.rng.IntN(mem.Len()))
			}
		}
		if chunks <= 6 {
			upsert(300)
		}
	}
	mem = store.NewMemory(dim, store.WithIVF(vector.Generic(), vector.Euclidean), withBuildHook(hook))
	upsert(5000)
	b, err := mem.trainInt8()
	require.NoError(t, err)
	require.NoError(t, mem.SetTrained(store.TrainedInt8Scale, b))
	require.True(t, mem.IndexReady())
	cb, lists, err := mem.trainIVF(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, ivf.DefaultLists(5000), lists)
	require.NoError(t, mem.SetTrained(store.TrainedIVFCentroids, cb))
	require.True(t, mem.IndexReady(), "applied while serving: the flat codes serve until the index is built")
	require.False(t, mem.IVFIndexed())

	built, err := mem.BuildIndex(context.Background())
	require.NoError(t, err)
	require.True(t, built)
	require.GreaterOrEqual(t, chunks, 3)
	require.True(t, mem.IVFIndexed())
	require.True(t, mem.Int8Ready())
	require.Nil(t, mem.codes, "the lists hold the codes")
	require.Equal(t, freshLists(t, mem), listSets(t, mem))
	built, err = mem.BuildIndex(context.Background())
	require.NoError(t, err)
	require.False(t, built, "nothing to build")

	for range 200 {
		switch g.rng.IntN(3) {
		case 0:
			upsert(1)
		case 1:
			overwrite(g.rng.IntN(mem.Len()))
		default:
			del(g.rng.IntN(mem.Len()))
		}
	}
	require.Equal(t, freshLists(t, mem), listSets(t, mem), "writes after the swap keep the lists")

	// A restore (reset) drops the index; a store restored with centroids
	// committed waits for its build before serving.
	trained := map[string][]byte{store.TrainedInt8Scale: b, store.TrainedIVFCentroids: cb}
	mem.reset(place, trained, 0)
	upsert(2000)
	require.False(t, mem.needsIVFBuild(), "no build while a snapshot is half loaded")
	built, err = mem.BuildIndex(context.Background())
	require.NoError(t, err)
	require.False(t, built)
	require.NoError(t, mem.encodeRestored())
	require.False(t, mem.IndexReady(), "restored: not ready until built")
	require.False(t, mem.Int8Ready())
	built, err = mem.BuildIndex(context.Background())
	require.NoError(t, err)
	require.True(t, built)
	require.True(t, mem.IndexReady())
	require.Equal(t, freshLists(t, mem), listSets(t, mem))

	// Centroids that do not decode leave a flat store, ready.
	require.Error(t, mem.SetTrained(store.TrainedIVFCentroids, []byte("junk")))
	require.True(t, mem.IndexReady())
	require.False(t, mem.needsIVFBuild())
}

// TestIVFServerScans: an unreplicated IVF store answers from its index
// (kind ivf, not exact), "exact": true from the float32 rows, a
// selective filter exactly (so it loses nothing), a broad one by probing
// with the filter, and nprobe = every list as the flat int8 scan would.
func TestIVFServerScans(t *testing.T) {
	const dim = 16
	g := newClustered(4, dim, 10)
	obs := &kindCounter{kinds: map[string]int{}}
	mem := store.NewMemory(dim, store.WithIVF(vector.Generic(), vector.Euclidean))
	_, c := serve(t, Config{Dim: dim, Metric: vector.Euclidean, Kernel: vector.Generic(), Store: mem, Observer: obs}, nil, client.DialConfig{})
	var vs []*shardpb.Vector
	for i := range 4000 {
		vs = append(vs, &shardpb.Vector{Id: fmt.Sprintf("v%04d", i), Vector: shard.EncodeVector(g.vec()),
			Payload: fmt.Appendf(nil, `{"g":%d}`, i%100)})
	}
	for i := 0; i < len(vs); i += 256 {
		_, err := c.Upsert(ctx(t), place, vs[i:min(i+256, len(vs))])
		require.NoError(t, err)
	}
	b, err := mem.trainInt8()
	require.NoError(t, err)
	require.NoError(t, mem.SetTrained(store.TrainedInt8Scale, b))
	cb, lists, err := mem.trainIVF(context.Background(), 7)
	require.NoError(t, err)
	require.NoError(t, mem.SetTrained(store.TrainedIVFCentroids, cb))
	_, err = mem.BuildIndex(context.Background())
	require.NoError(t, err)

	var rows vector.Rows
	require.NoError(t, mem.View(func(r vector.Rows) error {
		rows = vector.Rows{Data: slices.Clone(r.Data), Dim: r.Dim, IDs: slices.Clone(r.IDs)}
		return nil
	}))
	found, total := 0, 0
	for range 20 {
		v := g.vec()
		brute, err := vector.Generic().Scan(context.Background(), vector.Euclidean, rows, []vector.Query{{Vector: v, K: 10}})
		require.NoError(t, err)
		want := hitPairs(toPB(brute[0]))
		r, err := c.Search(ctx(t), &shardpb.Query{Vector: shard.EncodeVector(v), K: 10}, 0)
		require.NoError(t, err)
		require.False(t, r.GetExact())
		truth := map[string]bool{}
		for _, h := range brute[0] {
			truth[h.ID] = true
		}
		for _, h := range r.GetHits() {
			if truth[h.GetId()] {
				found++
			}
		}
		total += 10
		r, err = c.Search(ctx(t), &shardpb.Query{Vector: shard.EncodeVector(v), K: 10, Exact: true}, 0)
		require.NoError(t, err)
		require.True(t, r.GetExact())
		require.Equal(t, want, hitPairs(r.GetHits()), "exact is the float32 scan")
		all, err := c.Search(ctx(t), &shardpb.Query{Vector: shard.EncodeVector(v), K: 10, Nprobe: uint32(lists)}, 0)
		require.NoError(t, err)
		require.False(t, all.GetExact())
		flat, err := quant.Generic().Scan(context.Background(), vector.Generic(), vector.Euclidean, rows, mustEncode(t, b, rows), []vector.Query{{Vector: v, K: 10}}, 0)
		require.NoError(t, err)
		require.Equal(t, hitPairs(toPB(flat[0])), hitPairs(all.GetHits()), "probing every list is the flat int8 scan")

		// Selective (1 %): scanned exactly, the exact filtered answer.
		sel, err := c.Search(ctx(t), &shardpb.Query{Vector: shard.EncodeVector(v), K: 10, Filter: []byte(`{"must":[{"key":"g","match":{"value":7}}]}`)}, 0)
		require.NoError(t, err)
		require.True(t, sel.GetExact(), "a 1 %% filter scans its rows exactly")
		var keep []uint32
		for i := range rows.Len() {
			if i%100 == 7 {
				keep = append(keep, uint32(i))
			}
		}
		bf, err := vector.Generic().ScanSelected(context.Background(), vector.Euclidean, rows, []vector.Query{{Vector: v, K: 10}}, keep)
		require.NoError(t, err)
		require.Equal(t, hitPairs(toPB(bf[0])), hitPairs(sel.GetHits()))
		// Broad (80 %): probed with the filter; every hit matches it.
		broad, err := c.Search(ctx(t), &shardpb.Query{Vector: shard.EncodeVector(v), K: 10, Filter: []byte(`{"must":[{"key":"g","range":{"lt":80}}]}`)}, 0)
		require.NoError(t, err)
		require.False(t, broad.GetExact())
		require.Len(t, broad.GetHits(), 10)
		for _, h := range broad.GetHits() {
			var i int
			_, err := fmt.Sscanf(h.GetId(), "v%d", &i)
			require.NoError(t, err)
			require.Less(t, i%100, 80, "hit %s matches the filter", h.GetId())
		}
	}
	recall := float64(found) / float64(total)
	t.Logf("ivf recall@10 over 20 queries, 4000 rows of %d-D, %d lists, default nprobe %d: %.3f", dim, lists, ivf.DefaultNProbe(lists), recall)
	require.GreaterOrEqual(t, recall, 0.95)
	require.Equal(t, 20*3, obs.get(server.ScanIVF), "default, nprobe=all and the broad filter")
	require.Equal(t, 20*2, obs.get(server.ScanExact), "exact:true and the selective filter")
	require.Zero(t, obs.get(server.ScanInt8))
}

func toPB(hs []vector.Hit) []*shardpb.Hit {
	out := make([]*shardpb.Hit, len(hs))
	for i, h := range hs {
		out[i] = &shardpb.Hit{Id: h.ID, Score: h.Score}
	}
	return out
}

func mustEncode(t *testing.T, scale []byte, rows vector.Rows) *quant.Codes {
	t.Helper()
	var s quant.Scale
	require.NoError(t, s.UnmarshalBinary(scale))
	c, err := quant.Encode(s, rows)
	require.NoError(t, err)
	return c
}

// TestIVFReplicas: in a group of three the leader trains centroids once
// the int8 scale is committed and the shard holds IVFMinRows rows, and
// commits them; every replica builds lists holding the same rows as a
// fresh build, kept so through writes, and answers every non-exact query
// identically (ids and scores). A follower restarted from its snapshot,
// and one rebuilt on a wiped directory from the leader's snapshot,
// answer NOT_SERVING until their index is built, then the same as the
// others. Growing the shard by ivf.RetrainGrowth retrains and swaps.
func TestIVFReplicas(t *testing.T) {
	const (
		dim     = 16
		minRows = 600
	)
	ms := groupOf(t, 3, dim, func(c *raftnode.Config) {
		c.Int8MinRows, c.IVFMinRows = 200, minRows
		c.TrailingLogs, c.SnapshotThreshold = 10, 100
	}, store.WithIVF(vector.Generic(), vector.Euclidean))
	waitLeader(t, ms)
	g := newClustered(5, dim, 8)
	next := 0
	batch := func(n int) []*shardpb.Vector {
		var vs []*shardpb.Vector
		for range n {
			vs = append(vs, &shardpb.Vector{Id: fmt.Sprintf("d-%05d", next), Vector: shard.EncodeVector(g.vec())})
			next++
		}
		return vs
	}
	upsertOn(t, ms, batch(250))
	for _, m := range ms {
		require.Eventually(t, m.mem.Int8Ready, 20*time.Second, 10*time.Millisecond, "int8 scale first")
	}
	time.Sleep(300 * time.Millisecond)
	for _, m := range ms {
		require.Nil(t, m.mem.Trained(store.TrainedIVFCentroids), "no centroids below %d rows", minRows)
	}
	var last uint64
	for range 4 {
		last = upsertOn(t, ms, batch(200))
	}
	for _, m := range ms {
		require.Eventually(t, m.mem.IVFIndexed, 30*time.Second, 10*time.Millisecond, "every replica builds its index")
	}
	cent := ms[0].mem.Trained(store.TrainedIVFCentroids)
	for _, m := range ms {
		require.Equal(t, cent, m.mem.Trained(store.TrainedIVFCentroids))
	}
	// Writes after the build: appends, overwrites, deletes.
	for i := range 30 {
		last = upsertOn(t, ms, []*shardpb.Vector{{Id: fmt.Sprintf("d-%05d", i*13), Vector: shard.EncodeVector(g.vec())}})
	}
	deleteOn := func(id string) {
		require.Eventually(t, func() bool {
			for _, m := range ms {
				if m.g != nil && m.node.IsLeader() {
					_, idx, err := m.conn.Delete(ctx(t), place, id)
					if err == nil {
						last = idx
						return true
					}
				}
			}
			return false
		}, 30*time.Second, 20*time.Millisecond)
	}
	for i := range 20 {
		deleteOn(fmt.Sprintf("d-%05d", 5+i*17))
	}
	last = upsertOn(t, ms, batch(100))
	for _, m := range ms {
		require.Eventually(t, func() bool { return m.node.AppliedIndex() >= last }, 20*time.Second, 10*time.Millisecond)
	}

	queries := make([]*shardpb.Query, 20)
	for i := range queries {
		queries[i] = &shardpb.Query{Vector: shard.EncodeVector(g.vec()), K: 10, Nprobe: uint32(i % 3)}
	}
	same := func(what string) {
		t.Helper()
		// The leader measures the default nprobe once its index of the
		// committed centroids is built, and commits it: replicas agree
		// once each has applied it (before, some would probe by the rule
		// and some by the measurement).
		require.Eventually(t, func() bool {
			v := ms[0].mem.Trained(store.TrainedIVFNProbe)
			crc, _, ok := decodeNProbe(v)
			if !ok || crc != crc32.ChecksumIEEE(ms[0].mem.Trained(store.TrainedIVFCentroids)) {
				return false
			}
			for _, m := range ms {
				if !bytes.Equal(m.mem.Trained(store.TrainedIVFNProbe), v) || !m.mem.IVFIndexed() {
					return false
				}
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "%s: the leader's measured nprobe reaches every replica", what)
		want := freshLists(t, ms[0].mem)
		var first *shardpb.SearchBatchResponse
		for i, m := range ms {
			require.Equal(t, want, listSets(t, m.mem), "%s: replica %d's lists hold the rows a fresh build does", what, i)
			var got *shardpb.SearchBatchResponse
			require.Eventually(t, func() bool {
				// A loaded machine can make a follower miss its leader for a moment.
				var err error
				got, err = m.conn.SearchBatch(ctx(t), queries, last)
				return err == nil
			}, 20*time.Second, 20*time.Millisecond, "%s: replica %d answers", what, i)
			require.False(t, got.GetExact())
			if first == nil {
				first = got
				continue
			}
			for qi := range queries {
				require.Equal(t, hitPairs(first.GetResults()[qi].GetHits()), hitPairs(got.GetResults()[qi].GetHits()),
					"%s: query %d: replica %d answers as replica 0", what, qi, i)
			}
		}
	}
	same("after writes")

	// Restarted from its own snapshot, a follower is NOT_SERVING until its
	// index is built; its build is held at its first chunk meanwhile.
	rejoinHeld := func(m *member, what string) {
		t.Helper()
		gate := make(chan struct{})
		release := sync.OnceFunc(func() { close(gate) })
		defer release() // a failed assertion must not leave the build held: Close waits for it
		held := make(chan struct{}, 1)
		opts := m.memOpts
		m.memOpts = append(slices.Clone(opts), withBuildHook(func() {
			select {
			case held <- struct{}{}:
			default:
			}
			<-gate
		}))
		require.NoError(t, m.start())
		m.memOpts = opts
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no index build started", what)
		}
		// Caught up with the log by now or soon; still not serving.
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			require.False(t, m.node.Serving(), "%s: serving before its index is built", what)
			_, err := m.conn.Search(ctx(t), queries[0], 0)
			require.Equal(t, codes.Unavailable, status.Code(err), "%s: %v", what, err)
			time.Sleep(50 * time.Millisecond)
		}
		require.False(t, m.mem.IndexReady())
		release()
		require.Eventually(t, func() bool { return m.node.Serving() && m.node.AppliedIndex() >= last },
			30*time.Second, 10*time.Millisecond, "%s: serving once built", what)
		require.True(t, m.mem.IVFIndexed())
	}
	var follower *member
	for _, m := range ms {
		if !m.node.IsLeader() {
			follower = m
		}
	}
	require.NoError(t, follower.node.Snapshot())
	follower.stop()
	rejoinHeld(follower, "restarted")
	same("after a restart")

	// Wiped, it installs the leader's snapshot and rebuilds.
	follower.stop()
	require.NoError(t, os.RemoveAll(follower.dir))
	for range 3 {
		last = upsertOn(t, ms, batch(50))
	}
	for _, m := range ms {
		if m != follower {
			// Both, so whichever leads has compacted the log it lacks.
			require.NoError(t, m.node.Snapshot())
		}
	}
	rejoinHeld(follower, "rebuilt from a snapshot")
	snaps, err := follower.node.snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, snaps, "the wiped replica installed a snapshot")
	same("after a snapshot install")

	// Growing by ivf.RetrainGrowth retrains; every replica swaps.
	var c0 ivf.Centroids
	require.NoError(t, c0.UnmarshalBinary(cent))
	for ms[0].mem.Len() < ivf.RetrainGrowth*c0.TrainedRows {
		last = upsertOn(t, ms, batch(256))
	}
	for _, m := range ms {
		require.Eventually(t, func() bool {
			var c ivf.Centroids
			return c.UnmarshalBinary(m.mem.Trained(store.TrainedIVFCentroids)) == nil && c.TrainedRows > c0.TrainedRows &&
				m.mem.IVFIndexed() && m.node.AppliedIndex() >= last
		}, 60*time.Second, 10*time.Millisecond, "retrained and rebuilt")
	}
	var c1 ivf.Centroids
	require.NoError(t, c1.UnmarshalBinary(ms[0].mem.Trained(store.TrainedIVFCentroids)))
	t.Logf("retrained: %d lists on %d rows, then %d lists on %d rows", c0.Lists(), c0.TrainedRows, c1.Lists(), c1.TrainedRows)
	require.Greater(t, c1.Lists(), c0.Lists())
	same("after a retrain")
}

// TestIndexStats: the Stats RPC says which index a replica's approximate
// queries scan and how far an IVF store has got: untrained, building once
// centroids are committed, then ready with the built index's lists, the
// rows its centroids were trained on, its default nprobe and memory.
func TestIndexStats(t *testing.T) {
	const dim, rows = 16, 4000
	load := func(t *testing.T, mem *store.Memory) *client.Conn {
		t.Helper()
		_, c := serve(t, Config{Dim: dim, Metric: vector.Euclidean, Kernel: vector.Generic(), Store: mem}, nil, client.DialConfig{})
		g := newClustered(5, dim, 10)
		var vs []*shardpb.Vector
		for i := range rows {
			vs = append(vs, &shardpb.Vector{Id: fmt.Sprintf("v%04d", i), Vector: shard.EncodeVector(g.vec())})
		}
		for i := 0; i < len(vs); i += 256 {
			_, err := c.Upsert(ctx(t), place, vs[i:min(i+256, len(vs))])
			require.NoError(t, err)
		}
		return c
	}
	stats := func(t *testing.T, c *client.Conn) (string, *shardpb.IndexStats) {
		t.Helper()
		st, err := c.Stats(ctx(t))
		require.NoError(t, err)
		return st.GetQuantization(), st.GetIndex()
	}
	trainScale := func(t *testing.T, mem *store.Memory) {
		t.Helper()
		b, err := mem.trainInt8()
		require.NoError(t, err)
		require.NoError(t, mem.SetTrained(store.TrainedInt8Scale, b))
	}

	t.Run("flat", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			opts      []store.MemoryOption
			quant     string
			withCodes bool
		}{
			{"float32", nil, "none", false},
			{"int8", []store.MemoryOption{store.WithQuantization(store.QuantInt8)}, "int8", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				mem := store.NewMemory(dim, tc.opts...)
				c := load(t, mem)
				if tc.withCodes {
					trainScale(t, mem)
				}
				q, ix := stats(t, c)
				require.Equal(t, tc.quant, q)
				require.Equal(t, "flat", ix.GetKind())
				require.Equal(t, store.IndexStateReady, ix.GetState())
				require.Equal(t, uint64(rows), ix.GetRows())
				require.Zero(t, ix.GetLists())
				require.Zero(t, ix.GetDefaultNprobe())
				if tc.withCodes {
					// A code a dimension, plus a norm and a sum.
					require.GreaterOrEqual(t, ix.GetBytes(), uint64(rows*(dim+8)))
				} else {
					require.Zero(t, ix.GetBytes(), "nothing beside the float32 rows")
				}
			})
		}
	})

	t.Run("ivf", func(t *testing.T) {
		mem := store.NewMemory(dim, store.WithIVF(vector.Generic(), vector.Euclidean))
		c := load(t, mem)
		q, ix := stats(t, c)
		require.Equal(t, "int8", q, "ivf implies int8")
		require.Equal(t, "ivf", ix.GetKind())
		require.Equal(t, store.IndexStateUntrained, ix.GetState())
		require.Zero(t, ix.GetLists())

		trainScale(t, mem)
		cb, lists, err := mem.trainIVF(context.Background(), 7)
		require.NoError(t, err)
		require.NoError(t, mem.SetTrained(store.TrainedIVFCentroids, cb))
		_, ix = stats(t, c)
		require.Equal(t, IndexStateBuilding, ix.GetState(), "centroids committed, no index built")
		require.Zero(t, ix.GetLists(), "no index to probe yet")
		flatBytes := ix.GetBytes()
		require.Positive(t, flatBytes, "the flat int8 codes serve meanwhile")

		_, err = mem.BuildIndex(context.Background())
		require.NoError(t, err)
		_, ix = stats(t, c)
		require.Equal(t, store.IndexStateReady, ix.GetState())
		require.Equal(t, uint32(lists), ix.GetLists())
		require.Positive(t, ix.GetLists())
		require.Equal(t, uint64(rows), ix.GetTrainedRows())
		require.Equal(t, uint32(ivf.DefaultNProbe(lists)), ix.GetDefaultNprobe())
		require.False(t, ix.GetNprobeCalibrated(), "the rule's value, nothing measured")
		require.Equal(t, uint64(rows), ix.GetRows())
		// The lists hold every row's codes (the flat ones are dropped) plus
		// the row maps and centroids.
		require.Greater(t, ix.GetBytes(), uint64(rows*(dim+8)))
		require.Empty(t, ix.GetError())

		// A committed nprobe for these centroids is what queries without
		// one probe; one naming other centroids (a retrain's leftover) is
		// ignored; the leader's measurement names the built index's.
		require.True(t, mem.needsIVFNProbe())
		crc := crc32.ChecksumIEEE(cb)
		want := ivf.DefaultNProbe(lists) + 3
		levels := []ivf.Level{{K: 10, NProbe: want}, {K: 100, NProbe: want + 2}}
		require.NoError(t, mem.SetTrained(store.TrainedIVFNProbe, encodeNProbe(crc, levels)))
		_, ix = stats(t, c)
		require.Equal(t, uint32(want), ix.GetDefaultNprobe())
		require.True(t, ix.GetNprobeCalibrated())
		require.False(t, mem.needsIVFNProbe())
		legacy := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, crc), uint32(want))
		require.NoError(t, mem.SetTrained(store.TrainedIVFNProbe, legacy))
		_, ix = stats(t, c)
		require.Equal(t, uint32(want), ix.GetDefaultNprobe(), "a value from before levels still applies")
		require.True(t, mem.needsIVFNProbe(), "and is measured again")
		require.NoError(t, mem.SetTrained(store.TrainedIVFNProbe, encodeNProbe(crc, levels)))
		require.NoError(t, mem.SetTrained(store.TrainedIVFNProbe, encodeNProbe(crc+1, levels)))
		_, ix = stats(t, c)
		require.Equal(t, uint32(ivf.DefaultNProbe(lists)), ix.GetDefaultNprobe(), "other centroids' value")
		require.False(t, ix.GetNprobeCalibrated(), "other centroids' value")
		require.True(t, mem.needsIVFNProbe())
		b, measured, err := mem.calibrateIVF(context.Background())
		require.NoError(t, err)
		gotCRC, got, ok := decodeNProbe(b)
		require.True(t, ok)
		require.Equal(t, crc, gotCRC)
		require.Len(t, got, len(ivf.CalibrationKs()))
		for i, l := range got {
			require.Equal(t, measured[i].K, l.K)
			require.Equal(t, measured[i].NProbe, l.NProbe)
		}
		require.GreaterOrEqual(t, got[0].NProbe, ivf.DefaultNProbe(lists))
	})

	t.Run("ivf centroids that do not decode", func(t *testing.T) {
		mem := store.NewMemory(dim, store.WithIVF(vector.Generic(), vector.Euclidean))
		c := load(t, mem)
		trainScale(t, mem)
		require.Error(t, mem.SetTrained(store.TrainedIVFCentroids, []byte("not centroids")))
		_, ix := stats(t, c)
		require.Equal(t, IndexStateFailed, ix.GetState(), "the store serves as a flat int8 one")
		require.Contains(t, ix.GetError(), "ivf centroids")
		require.Zero(t, ix.GetLists())
		require.Positive(t, ix.GetBytes(), "its flat int8 codes")
	})
}

// The committed nprobe value round-trips its levels; a value of one
// nprobe (written before levels) applies to every k; anything else is
// refused, so a replica falls back to the rule rather than misread it.
func TestDecodeNProbe(t *testing.T) {
	levels := []ivf.Level{{K: 10, NProbe: 24}, {K: 100, NProbe: 96}}
	for _, tc := range []struct {
		name string
		b    []byte
		want []ivf.Level
	}{
		{"levels", encodeNProbe(7, levels), levels},
		{"one nprobe", binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 7), 30), []ivf.Level{{K: math.MaxInt32, NProbe: 30}}},
		{"short", []byte{7, 0, 0, 0, 1, 0}, nil},
		{"half a level", append(encodeNProbe(7, levels), 1, 0, 0, 0), nil},
		{"descending k", encodeNProbe(7, []ivf.Level{{K: 100, NProbe: 9}, {K: 10, NProbe: 8}}), nil},
		{"zero nprobe", encodeNProbe(7, []ivf.Level{{K: 10, NProbe: 0}}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crc, got, ok := decodeNProbe(tc.b)
			if tc.want == nil {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.Equal(t, uint32(7), crc)
			require.Equal(t, tc.want, got)
		})
	}
}
