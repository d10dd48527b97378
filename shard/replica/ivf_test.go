package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/internal/shardtest"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
	"github.com/trawl-search/trawl/vector/quant"
)

// trainCentroids trains IVF centroids on a sample of mem's rows as the
// trainer does (ivf.Sample and ivf.Train, seeded), serialised for
// commitTrained, and returns their list count.
func trainCentroids(t testing.TB, mem *store.Memory, m vector.Metric, seed uint64) ([]byte, int) {
	t.Helper()
	var (
		sample []float32
		n      int
	)
	require.NoError(t, mem.View(func(r vector.Rows) error {
		n = r.Len()
		sample = ivf.Sample(r, ivf.SampleSize(ivf.DefaultLists(n), n), seed)
		return nil
	}))
	c, err := ivf.Train(context.Background(), vector.Generic(), m, sample, mem.Dim(), ivf.Config{Rows: n, Seed: seed})
	require.NoError(t, err)
	b, err := c.MarshalBinary()
	require.NoError(t, err)
	return b, c.Lists()
}

// gate makes vector kernels whose every score waits while the gate is
// shut. A replica given one holds its background IVF build at the build's
// first assignment of a chunk, with no store lock held while writes apply
// (where the store's own tests hold it with a build hook), and holds its
// trainer's nprobe measurement before it scores anything. Nothing else
// scores on such a replica here: an IVF store assigns a written row only
// once an index or a build holds rows, and a replica that does not serve
// refuses searches before scanning.
type gate struct {
	mu   sync.Mutex
	ch   atomic.Pointer[chan struct{}] // closed while the gate is open
	held chan struct{}                 // a score waited at the shut gate
}

func newGate() *gate {
	g := &gate{held: make(chan struct{}, 1)}
	open := make(chan struct{})
	close(open)
	g.ch.Store(&open)
	return g
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch := *g.ch.Load(); isClosed(ch) {
		next := make(chan struct{})
		g.ch.Store(&next)
	}
	select {
	case <-g.held: // forget a hold from before
	default:
	}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch := *g.ch.Load(); !isClosed(ch) {
		close(ch)
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (g *gate) wait() {
	ch := *g.ch.Load()
	if isClosed(ch) {
		return
	}
	select {
	case g.held <- struct{}{}:
	default:
	}
	<-ch
}

// waitHeld waits until a score waits at the shut gate.
func (g *gate) waitHeld(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing reached the gate", what)
	}
}

// kernel is k with every score passing the gate first.
func (g *gate) kernel(k vector.Kernel) vector.Kernel {
	return vector.Kernel{
		Name:      k.Name,
		Dot:       func(a, b []float32) float32 { g.wait(); return k.Dot(a, b) },
		L2Squared: func(a, b []float32) float32 { g.wait(); return k.L2Squared(a, b) },
	}
}

// TestIVFServerScans: an IVF replica answers from its index (kind ivf,
// not exact), "exact": true from the float32 rows, a selective filter
// exactly (so it loses nothing), a broad one by probing with the filter,
// and nprobe = every list as the flat int8 scan would.
func TestIVFServerScans(t *testing.T) {
	const dim = 16
	g := shardtest.NewClustered(4, dim, 10)
	obs := &kindCounter{kinds: map[string]int{}}
	rep, c := serve(t, Config{Legacy: catalog.Settings{Dim: dim, Metric: vector.Euclidean, Index: catalog.IndexIVF}, Kernel: vector.Generic(),
		Int8MinRows: neverTrain, IVFMinRows: neverTrain, Observer: obs}, nil, client.DialConfig{})
	mem := rep.Store
	var vs []*shardpb.Vector
	for i := range 4000 {
		vs = append(vs, &shardpb.Vector{Id: fmt.Sprintf("v%04d", i), Vector: shard.EncodeVector(g.Vec()),
			Payload: fmt.Appendf(nil, `{"g":%d}`, i%100)})
	}
	for i := 0; i < len(vs); i += 256 {
		_, err := c.Upsert(ctx(t), place, vs[i:min(i+256, len(vs))])
		require.NoError(t, err)
	}
	b := trainScale(t, mem)
	commitTrained(t, rep, store.TrainedInt8Scale, b)
	cb, lists := trainCentroids(t, mem, vector.Euclidean, 7)
	commitTrained(t, rep, store.TrainedIVFCentroids, cb)
	require.Eventually(t, mem.IVFIndexed, 30*time.Second, 5*time.Millisecond, "the replica builds its index")
	// The leader measures the default nprobe on its index and commits it:
	// every query below without one probes by the measurement.
	require.Eventually(t, func() bool { return mem.IndexStats().NProbeCalibrated }, 60*time.Second, 10*time.Millisecond,
		"the default nprobe measured and committed")

	var rows vector.Rows
	require.NoError(t, mem.View(func(r vector.Rows) error {
		rows = r.Clone()
		return nil
	}))
	found, total := 0, 0
	for range 20 {
		v := g.Vec()
		brute, err := vector.Generic().Scan(context.Background(), vector.Euclidean, rows, []vector.Query{{Vector: v, K: 10}})
		require.NoError(t, err)
		want := hitsOfVector(brute[0])
		r, err := c.Search(ctx(t), []client.Query{{Vector: v, K: 10}}, 0)
		require.NoError(t, err)
		require.False(t, r.Exact)
		truth := map[string]bool{}
		for _, h := range brute[0] {
			truth[h.ID] = true
		}
		for _, h := range r.Hits[0] {
			if truth[h.ID] {
				found++
			}
		}
		total += 10
		r, err = c.Search(ctx(t), []client.Query{{Vector: v, K: 10, Exact: true}}, 0)
		require.NoError(t, err)
		require.True(t, r.Exact)
		require.Equal(t, want, hitPairs(r.Hits[0]), "exact is the float32 scan")
		all, err := c.Search(ctx(t), []client.Query{{Vector: v, K: 10, NProbe: lists}}, 0)
		require.NoError(t, err)
		require.False(t, all.Exact)
		flat, err := quant.Generic().Scan(context.Background(), vector.Generic(), vector.Euclidean, rows, mustEncode(t, b, rows), []vector.Query{{Vector: v, K: 10}}, 0)
		require.NoError(t, err)
		require.Equal(t, hitsOfVector(flat[0]), hitPairs(all.Hits[0]), "probing every list is the flat int8 scan")

		// Selective (1 %): scanned exactly, the exact filtered answer.
		sel, err := c.Search(ctx(t), []client.Query{{Vector: v, K: 10, Filter: []byte(`{"must":[{"key":"g","match":{"value":7}}]}`)}}, 0)
		require.NoError(t, err)
		require.True(t, sel.Exact, "a 1 %% filter scans its rows exactly")
		var keep []uint32
		for i := range rows.Len() {
			if i%100 == 7 {
				keep = append(keep, uint32(i))
			}
		}
		bf, err := vector.Generic().ScanSelected(context.Background(), vector.Euclidean, rows, []vector.Query{{Vector: v, K: 10}}, keep)
		require.NoError(t, err)
		require.Equal(t, hitsOfVector(bf[0]), hitPairs(sel.Hits[0]))
		// Broad (80 %): probed with the filter; every hit matches it.
		broad, err := c.Search(ctx(t), []client.Query{{Vector: v, K: 10, Filter: []byte(`{"must":[{"key":"g","range":{"lt":80}}]}`)}}, 0)
		require.NoError(t, err)
		require.False(t, broad.Exact)
		require.Len(t, broad.Hits[0], 10)
		for _, h := range broad.Hits[0] {
			var i int
			_, err := fmt.Sscanf(h.ID, "v%d", &i)
			require.NoError(t, err)
			require.Less(t, i%100, 80, "hit %s matches the filter", h.ID)
		}
	}
	recall := float64(found) / float64(total)
	t.Logf("ivf recall@10 over 20 queries, 4000 rows of %d-D, %d lists, default nprobe %d (the rule's %d): %.3f",
		dim, lists, mem.IndexStats().DefaultNProbe, ivf.DefaultNProbe(lists), recall)
	require.GreaterOrEqual(t, recall, 0.95)
	require.Equal(t, 20*3, obs.get(server.ScanIVF), "default, nprobe=all and the broad filter")
	require.Equal(t, 20*2, obs.get(server.ScanExact), "exact:true and the selective filter")
	require.Zero(t, obs.get(server.ScanInt8))
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
	longtest.Mark(t)
	const (
		dim     = 16
		minRows = 600
	)
	ms := groupOf(t, 3, dim, func(c *Config) {
		c.Legacy.Index, c.Int8MinRows, c.IVFMinRows = catalog.IndexIVF, 200, minRows
	})
	waitLeader(t, ms)
	g := shardtest.NewClustered(5, dim, 8)
	next := 0
	batch := func(n int) []*shardpb.Vector {
		var vs []*shardpb.Vector
		for range n {
			vs = append(vs, &shardpb.Vector{Id: fmt.Sprintf("d-%05d", next), Vector: shard.EncodeVector(g.Vec())})
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
		last = upsertOn(t, ms, []*shardpb.Vector{{Id: fmt.Sprintf("d-%05d", i*13), Vector: shard.EncodeVector(g.Vec())}})
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

	queries := make([]client.Query, 20)
	for i := range queries {
		queries[i] = client.Query{Vector: g.Vec(), K: 10, NProbe: i % 3}
	}
	same := func(what string) {
		t.Helper()
		// The leader measures the default nprobe once its index of the
		// committed centroids is built, and commits it: replicas agree
		// once each has applied it (before, some would probe by the rule
		// and some by the measurement).
		require.Eventually(t, func() bool {
			v := ms[0].mem.Trained(store.TrainedIVFNProbe)
			for _, m := range ms {
				// Indexed from the committed centroids, and the committed
				// nprobe names them (calibrated).
				if !bytes.Equal(m.mem.Trained(store.TrainedIVFNProbe), v) || !m.mem.IVFIndexed() || !m.mem.IndexStats().NProbeCalibrated {
					return false
				}
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "%s: the leader's measured nprobe reaches every replica", what)
		want := shardtest.FreshLists(t, ms[0].mem, store.TrainedIVFCentroids, store.TrainedInt8Scale)
		var first *client.SearchResult
		for i, m := range ms {
			require.Equal(t, want, shardtest.ListSets(t, m.mem), "%s: replica %d's lists hold the rows a fresh build does", what, i)
			var got client.SearchResult
			require.Eventually(t, func() bool {
				// A loaded machine can make a follower miss its leader for a moment.
				var err error
				got, err = m.conn.Search(ctx(t), queries, last)
				return err == nil
			}, 20*time.Second, 20*time.Millisecond, "%s: replica %d answers", what, i)
			require.False(t, got.Exact)
			if first == nil {
				first = &got
				continue
			}
			for qi := range queries {
				require.Equal(t, hitPairs(first.Hits[qi]), hitPairs(got.Hits[qi]),
					"%s: query %d: replica %d answers as replica 0", what, qi, i)
			}
		}
	}
	same("after writes")

	// Restarted from its own snapshot, or rebuilt from the leader's, a
	// follower builds its index from the lists the snapshot recorded: no
	// row is assigned again, so it serves with its kernel's gate shut (a
	// build that assigned rows would wait at the gate, NOT_SERVING).
	rejoinFromLists := func(m *member, what string) {
		t.Helper()
		g := newGate()
		g.shut()
		defer g.open() // a failed assertion must not leave a build held: Close waits for it
		base := m.cfg
		m.cfg = func(c *Config) {
			base(c)
			c.Kernel = g.kernel(c.Kernel)
		}
		require.NoError(t, m.start())
		m.cfg = base
		require.Eventually(t, func() bool { return m.node.Serving() && m.node.AppliedIndex() >= last && m.mem.IVFIndexed() },
			2*time.Minute, 10*time.Millisecond, "%s: serving from the recorded lists, no row assigned", what)
		g.open()
	}
	var follower *member
	for _, m := range ms {
		if !m.node.IsLeader() {
			follower = m
		}
	}
	require.NoError(t, follower.node.Snapshot())
	follower.stop()
	rejoinFromLists(follower, "restarted")
	same("after a restart")

	// Wiped, it installs the leader's snapshot and rebuilds. The others
	// take snapshots past more entries than the trailing logs a snapshot
	// leaves, so the log the wiped replica lacks is compacted away.
	follower.stop()
	require.NoError(t, os.RemoveAll(follower.dir))
	for range 3 {
		last = upsertOn(t, ms, batch(50))
	}
	for i := 0; last <= raftnode.DefaultTrailingLogs+10; i++ {
		// Overwrites: the shard keeps its size for the retrain below.
		last = upsertOn(t, ms, []*shardpb.Vector{{Id: fmt.Sprintf("d-%05d", i%next), Vector: shard.EncodeVector(g.Vec())}})
	}
	for _, m := range ms {
		if m != follower {
			// Both, so whichever leads has compacted the log it lacks.
			require.NoError(t, m.node.Snapshot())
		}
	}
	rejoinFromLists(follower, "rebuilt from a snapshot")
	require.True(t, groupState(t, raftClient(t, follower)).GetHasSnapshot(), "the wiped replica installed a snapshot")
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
// rows its centroids were trained on, its default nprobe and memory; and
// which committed default nprobe applies (the store's own tests check
// the values in detail).
func TestIndexStats(t *testing.T) {
	longtest.Mark(t)
	const dim, rows = 16, 4000
	// load serves a replica of cfg that trains nothing itself and writes
	// rows rows to it.
	load := func(t *testing.T, cfg Config) (*Replica, *client.Conn) {
		t.Helper()
		cfg.Legacy.Dim, cfg.Legacy.Metric, cfg.Int8MinRows, cfg.IVFMinRows = dim, vector.Euclidean, neverTrain, neverTrain
		rep, c := serve(t, cfg, nil, client.DialConfig{})
		g := shardtest.NewClustered(5, dim, 10)
		var vs []*shardpb.Vector
		for i := range rows {
			vs = append(vs, &shardpb.Vector{Id: fmt.Sprintf("v%04d", i), Vector: shard.EncodeVector(g.Vec())})
		}
		for i := 0; i < len(vs); i += 256 {
			_, err := c.Upsert(ctx(t), place, vs[i:min(i+256, len(vs))])
			require.NoError(t, err)
		}
		return rep, c
	}
	stats := func(t *testing.T, c *client.Conn) (string, *shardpb.IndexStats) {
		t.Helper()
		st, err := c.Stats(ctx(t))
		require.NoError(t, err)
		return st.GetQuantization(), st.GetIndex()
	}

	t.Run("flat", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			q         string
			quant     string
			withCodes bool
		}{
			{"float32", catalog.QuantNone, "none", false},
			{"int8", catalog.QuantInt8, "int8", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rep, c := load(t, Config{Legacy: catalog.Settings{Quantization: tc.q}})
				if tc.withCodes {
					commitTrained(t, rep, store.TrainedInt8Scale, trainScale(t, rep.Store))
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
		// The gate holds the replica's index build, then its trainer's
		// nprobe measurement, where the test looks at them.
		g := newGate()
		rep, c := load(t, Config{Legacy: catalog.Settings{Index: catalog.IndexIVF}, Kernel: g.kernel(vector.Generic())})
		t.Cleanup(g.open) // before the replica closes: Close waits for what the gate holds
		q, ix := stats(t, c)
		require.Equal(t, "int8", q, "ivf implies int8")
		require.Equal(t, "ivf", ix.GetKind())
		require.Equal(t, store.IndexStateUntrained, ix.GetState())
		require.Zero(t, ix.GetLists())

		commitTrained(t, rep, store.TrainedInt8Scale, trainScale(t, rep.Store))
		cb, lists := trainCentroids(t, rep.Store, vector.Euclidean, 7)
		g.shut()
		commitTrained(t, rep, store.TrainedIVFCentroids, cb)
		g.waitHeld(t, "the index build")
		_, ix = stats(t, c)
		require.Equal(t, store.IndexStateBuilding, ix.GetState(), "centroids committed, no index built")
		require.Zero(t, ix.GetLists(), "no index to probe yet")
		flatBytes := ix.GetBytes()
		require.Positive(t, flatBytes, "the flat int8 codes serve meanwhile")

		g.open()
		require.Eventually(t, rep.Store.IVFIndexed, 30*time.Second, time.Millisecond, "the index built")
		// The leader measures the built index's nprobe at once. It scans
		// under the store's read lock, so the gate must not hold it while
		// the test commits (the apply would wait for the lock, and the test
		// for the apply): let the measurement finish first.
		require.Eventually(t, func() bool {
			_, ix = stats(t, c)
			return ix.GetNprobeCalibrated()
		}, 60*time.Second, 10*time.Millisecond, "the leader measures the default nprobe")
		require.Equal(t, store.IndexStateReady, ix.GetState())
		require.Equal(t, uint32(lists), ix.GetLists())
		require.Positive(t, ix.GetLists())
		require.Equal(t, uint64(rows), ix.GetTrainedRows())
		require.GreaterOrEqual(t, ix.GetDefaultNprobe(), uint32(ivf.DefaultNProbe(lists)))
		require.Equal(t, uint64(rows), ix.GetRows())
		// The lists hold every row's codes (the flat ones are dropped) plus
		// the row maps and centroids.
		require.Greater(t, ix.GetBytes(), uint64(rows*(dim+8)))
		require.Empty(t, ix.GetError())

		// A committed nprobe for these centroids is what queries without
		// one probe; one naming other centroids (a retrain's leftover) is
		// ignored; the leader's measurement names the built index's.
		crc := crc32.ChecksumIEEE(cb)
		want := ivf.DefaultNProbe(lists) + 3
		levels := encodeLevels(crc, []ivf.Level{{K: 10, NProbe: want}, {K: 100, NProbe: want + 2}})
		commitTrained(t, rep, store.TrainedIVFNProbe, levels)
		_, ix = stats(t, c)
		require.Equal(t, uint32(want), ix.GetDefaultNprobe())
		require.True(t, ix.GetNprobeCalibrated())
		legacy := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, crc), uint32(want))
		commitTrained(t, rep, store.TrainedIVFNProbe, legacy)
		_, ix = stats(t, c)
		require.Equal(t, uint32(want), ix.GetDefaultNprobe(), "a value from before levels still applies")
		commitTrained(t, rep, store.TrainedIVFNProbe, levels)
		other := encodeLevels(crc+1, []ivf.Level{{K: 10, NProbe: want}, {K: 100, NProbe: want + 2}})
		// Nothing is measuring now (the committed value names the built
		// index); the measurement other starts waits at the gate, after its
		// apply, so the stats below see other's effect.
		g.shut()
		commitTrained(t, rep, store.TrainedIVFNProbe, other)
		_, ix = stats(t, c)
		require.Equal(t, uint32(ivf.DefaultNProbe(lists)), ix.GetDefaultNprobe(), "other centroids' value")
		require.False(t, ix.GetNprobeCalibrated(), "other centroids' value")

		// Measured again: the leader commits a measurement of the built
		// index, at least the rule's nprobe.
		g.open()
		require.Eventually(t, func() bool {
			_, ix = stats(t, c)
			return ix.GetNprobeCalibrated()
		}, 60*time.Second, 10*time.Millisecond, "the leader measures the default nprobe")
		require.NotEqual(t, other, rep.Store.Trained(store.TrainedIVFNProbe))
		require.GreaterOrEqual(t, ix.GetDefaultNprobe(), uint32(ivf.DefaultNProbe(lists)))
	})

	t.Run("ivf centroids that do not decode", func(t *testing.T) {
		rep, c := load(t, Config{Legacy: catalog.Settings{Index: catalog.IndexIVF}})
		commitTrained(t, rep, store.TrainedInt8Scale, trainScale(t, rep.Store))
		commitTrained(t, rep, store.TrainedIVFCentroids, []byte("not centroids"))
		_, ix := stats(t, c)
		require.Equal(t, store.IndexStateFailed, ix.GetState(), "the replica serves as a flat int8 one")
		require.Contains(t, ix.GetError(), "ivf centroids")
		require.Zero(t, ix.GetLists())
		require.Positive(t, ix.GetBytes(), "its flat int8 codes")
	})
}

// encodeLevels is store.TrainedIVFNProbe's value: the centroids' CRC-32,
// then each level's K and nprobe, little-endian uint32s.
func encodeLevels(crc uint32, levels []ivf.Level) []byte {
	b := binary.LittleEndian.AppendUint32(nil, crc)
	for _, l := range levels {
		b = binary.LittleEndian.AppendUint32(b, uint32(l.K))
		b = binary.LittleEndian.AppendUint32(b, uint32(l.NProbe))
	}
	return b
}
