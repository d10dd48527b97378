package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// upsertOn writes vs through whichever member leads, retrying on
// NOT_LEADER, and returns the write's index.
func upsertOn(t *testing.T, ms []*member, vs []*shardpb.Vector) uint64 {
	t.Helper()
	var idx uint64
	require.Eventually(t, func() bool {
		for _, m := range ms {
			if m.g != nil && m.node.IsLeader() {
				i, err := m.conn.Upsert(ctx(t), place, vs)
				if err == nil {
					idx = i
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond)
	return idx
}

// codesOf returns a member's ids and codes (nil when it has none), copied
// under the store's lock.
func codesOf(m *member) ([]string, [][]int8, []float32) {
	var (
		ids   []string
		rows  [][]int8
		norms []float32
	)
	_ = m.mem.ViewCodes(func(r vector.Rows, c *quant.Codes) error {
		ids = slices.Clone(r.IDs)
		if c == nil {
			return nil
		}
		for i := range c.Len() {
			rows = append(rows, slices.Clone(c.Row(i)))
			norms = append(norms, c.Norm(i))
		}
		return nil
	})
	return ids, rows, norms
}

// TestInt8ScaleTrainedCommittedAndAppliedOnEveryReplica: with
// --quantization int8 the leader trains the scale once the shard holds
// Int8MinRows rows and commits it; every replica (and one restored from a
// snapshot) then holds codes identical to a fresh encoding of its rows,
// kept current through appends, overwrites and deletes; every replica
// gives the same int8 answer, whose scores are exact float32 scores, and
// "exact": true gives the float32 scan's answer.
func TestInt8ScaleTrainedCommittedAndAppliedOnEveryReplica(t *testing.T) {
	const (
		dim     = 32
		minRows = 300
	)
	ms := groupOf(t, 3, dim, func(c *Config) {
		c.Legacy.Quantization, c.Int8MinRows = catalog.QuantInt8, minRows
	})
	waitLeader(t, ms)
	rng := rand.New(rand.NewPCG(5, 8))
	vec := func() []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	batch := func(from, to int) []*shardpb.Vector {
		var vs []*shardpb.Vector
		for i := from; i < to; i++ {
			vs = append(vs, &shardpb.Vector{Id: fmt.Sprintf("d-%04d", i), Vector: shard.EncodeVector(vec())})
		}
		return vs
	}
	// Below the threshold there is no scale and every answer is exact.
	upsertOn(t, ms, batch(0, 200))
	time.Sleep(300 * time.Millisecond) // a few monitor ticks
	for _, m := range ms {
		require.Nil(t, m.mem.Trained(store.TrainedInt8Scale), "no scale below %d rows", minRows)
		require.False(t, m.mem.Int8Ready())
	}
	resp, err := ms[0].conn.Search(ctx(t), []client.Query{{Vector: vec(), K: 10}}, 0)
	require.NoError(t, err)
	require.True(t, resp.Exact, "no codes: the scan is exact")

	upsertOn(t, ms, batch(200, 350))
	for _, m := range ms {
		require.Eventually(t, m.mem.Int8Ready, 20*time.Second, 10*time.Millisecond, "scale applied on every replica")
	}
	scale := ms[0].mem.Trained(store.TrainedInt8Scale)
	for _, m := range ms {
		require.Equal(t, scale, m.mem.Trained(store.TrainedInt8Scale))
	}
	// After the scale: appends, overwrites (ids below 350) and deletes keep
	// the codes current.
	upsertOn(t, ms, batch(350, 450))
	var last uint64
	for i := range 20 {
		last = upsertOn(t, ms, []*shardpb.Vector{{Id: fmt.Sprintf("d-%04d", i*7), Vector: shard.EncodeVector(vec())}})
	}
	for i := range 10 {
		require.Eventually(t, func() bool {
			for _, m := range ms {
				if m.g != nil && m.node.IsLeader() {
					_, idx, err := m.conn.Delete(ctx(t), place, fmt.Sprintf("d-%04d", 3+i*11))
					if err == nil {
						last = idx
						return true
					}
				}
			}
			return false
		}, 30*time.Second, 20*time.Millisecond)
	}
	for _, m := range ms {
		require.Eventually(t, func() bool { return m.node.AppliedIndex() >= last }, 20*time.Second, 10*time.Millisecond)
	}

	// A follower restarted from its own snapshot re-encodes its rows.
	var follower *member
	for _, m := range ms {
		if !m.node.IsLeader() {
			follower = m
		}
	}
	require.NoError(t, follower.node.Snapshot())
	follower.stop()
	require.NoError(t, follower.start())
	require.Eventually(t, func() bool { return follower.node.AppliedIndex() >= last && follower.node.Serving() },
		30*time.Second, 10*time.Millisecond)
	require.True(t, follower.mem.Int8Ready(), "codes rebuilt on restore")

	var s quant.Scale
	require.NoError(t, s.UnmarshalBinary(scale))
	ids0, codes0, norms0 := codesOf(ms[0])
	require.Len(t, ids0, 450-10)
	for _, m := range ms {
		ids, cs, norms := codesOf(m)
		require.Equal(t, ids0, ids, "same rows in the same order")
		require.Equal(t, codes0, cs, "same codes on every replica")
		require.Equal(t, norms0, norms)
		// Kept current row by row, they equal a fresh encoding.
		require.NoError(t, m.mem.ViewCodes(func(r vector.Rows, c *quant.Codes) error {
			fresh, err := quant.Encode(s, r)
			require.NoError(t, err)
			for i := range fresh.Len() {
				require.Equal(t, fresh.Row(i), c.Row(i), "row %d (%s)", i, r.IDs[i])
			}
			return nil
		}))
	}

	// Queries: every replica answers the same; int8 scores are exact;
	// exact:true is the float32 scan.
	var rows vector.Rows
	require.NoError(t, ms[0].mem.View(func(r vector.Rows) error {
		rows = r.Clone()
		return nil
	}))
	var pqs, exactQs []client.Query
	var vqs, allQs []vector.Query
	for range 20 {
		v := vec()
		pqs = append(pqs, client.Query{Vector: v, K: 10})
		exactQs = append(exactQs, client.Query{Vector: v, K: 10, Exact: true})
		vqs = append(vqs, vector.Query{Vector: v, K: 10})
		allQs = append(allQs, vector.Query{Vector: v, K: rows.Len()})
	}
	brute, err := vector.Generic().Scan(context.Background(), vector.Euclidean, rows, vqs)
	require.NoError(t, err)
	all, err := vector.Generic().Scan(context.Background(), vector.Euclidean, rows, allQs)
	require.NoError(t, err)
	var first *client.SearchResult
	found, total := 0, 0
	for _, m := range ms {
		got := searchServing(t, m, pqs, last)
		require.False(t, got.Exact, "codes present, no query asked exact")
		if first == nil {
			first = &got
		} else {
			for qi := range pqs {
				require.Equal(t, hitPairs(first.Hits[qi]), hitPairs(got.Hits[qi]),
					"query %d: every replica gives the same int8 answer", qi)
			}
		}
		ex := searchServing(t, m, exactQs, last)
		require.True(t, ex.Exact)
		for qi := range exactQs {
			want := make([]string, len(brute[qi]))
			for i, h := range brute[qi] {
				want[i] = fmt.Sprintf("%s %v", h.ID, h.Score)
			}
			require.Equal(t, want, hitPairs(ex.Hits[qi]), "query %d: exact is the float32 scan", qi)
		}
	}
	for qi := range pqs {
		score := map[string]float32{}
		for _, h := range all[qi] {
			score[h.ID] = h.Score
		}
		truth := map[string]bool{}
		for _, h := range brute[qi] {
			truth[h.ID] = true
		}
		for _, h := range first.Hits[qi] {
			require.Equal(t, score[h.ID], h.Score, "query %d: %s's int8-path score is its exact float32 score", qi, h.ID)
			if truth[h.ID] {
				found++
			}
		}
		total += len(brute[qi])
	}
	t.Logf("int8 recall@10 over %d queries, %d rows of %d-D, default oversample: %.3f", len(pqs), rows.Len(), dim, float64(found)/float64(total))

	// A mixed batch (one query asks exact) scans exactly; oversample out
	// of range is refused.
	mixed, err := ms[0].conn.Search(ctx(t), append(slices.Clone(pqs[:3]), exactQs[3]), last)
	require.NoError(t, err)
	require.True(t, mixed.Exact)
	over := client.Query{Vector: vec(), K: 10, Oversample: 1}
	r1, err := ms[0].conn.Search(ctx(t), []client.Query{over}, last)
	require.NoError(t, err)
	require.False(t, r1.Exact)
	over.Oversample = 33
	_, err = ms[0].conn.Search(ctx(t), []client.Query{over}, last)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}

func hitPairs(hs []client.Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = fmt.Sprintf("%s %v", h.ID, h.Score)
	}
	return out
}

type kindCounter struct {
	mu    sync.Mutex
	kinds map[string]int
}

func (k *kindCounter) Scan(string, time.Duration) {}
func (k *kindCounter) Documents(string, int)      {}
func (k *kindCounter) ForgetCollection(string)    {}
func (k *kindCounter) Queries(kind string, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kinds[kind] += n
}

func (k *kindCounter) get(kind string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kinds[kind]
}

// TestServerCountsScansByKind: an int8 replica scans exactly until a
// scale is committed, then with the codes; the observer counts queries of
// both kinds.
func TestServerCountsScansByKind(t *testing.T) {
	const dim = 16
	obs := &kindCounter{kinds: map[string]int{}}
	rep, c := serve(t, Config{Legacy: catalog.Settings{Dim: dim, Metric: vector.DotProduct, Quantization: catalog.QuantInt8}, Kernel: vector.Generic(),
		Int8MinRows: neverTrain, Observer: obs}, nil, client.DialConfig{})
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		vs   []*shardpb.Vector
		vecs [][]float32
	)
	for i := range 100 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		vs = append(vs, &shardpb.Vector{Id: fmt.Sprint("v", i), Vector: shard.EncodeVector(v)})
		vecs = append(vecs, v)
	}
	_, err := c.Upsert(ctx(t), place, vs)
	require.NoError(t, err)
	qs := []client.Query{{Vector: vecs[0], K: 5}, {Vector: vecs[1], K: 5, Oversample: 2}}
	r, err := c.Search(ctx(t), qs, 0)
	require.NoError(t, err)
	require.True(t, r.Exact)
	require.Equal(t, 2, obs.get(server.ScanExact))

	commitTrained(t, rep, store.TrainedInt8Scale, trainScale(t, rep.Store))
	r, err = c.Search(ctx(t), qs, 0)
	require.NoError(t, err)
	require.False(t, r.Exact)
	require.Equal(t, "v0", r.Hits[0][0].ID)
	require.Equal(t, "v1", r.Hits[1][0].ID)
	require.Equal(t, 2, obs.get(server.ScanInt8))
	qs[0].Exact = true
	r, err = c.Search(ctx(t), qs, 0)
	require.NoError(t, err)
	require.True(t, r.Exact, "one query asking exact makes the batch exact")
	require.Equal(t, 4, obs.get(server.ScanExact))

	// A scale that does not decode is committed like any value, and leaves
	// the store without codes: it scans exactly again.
	commitTrained(t, rep, store.TrainedInt8Scale, []byte("junk"))
	require.False(t, rep.Store.Int8Ready())
	qs[0].Exact = false
	r, err = c.Search(ctx(t), qs, 0)
	require.NoError(t, err)
	require.True(t, r.Exact, "no codes: the scan is exact")
	require.Equal(t, 6, obs.get(server.ScanExact))
}
