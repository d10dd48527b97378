package replica

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

func updateReq(name string, uid uint64, dim int, metric, quant string) *shardpb.ChangeCatalogRequest {
	return &shardpb.ChangeCatalogRequest{Authority: true, Op: &shardpb.ChangeCatalogRequest_UpdateSettings{UpdateSettings: &shardpb.UpdateSettings{
		Collection: name, Uid: uid, Settings: &shardpb.CollectionSettings{Dim: uint32(dim), Metric: metric, Quantization: quant}}}}
}

// searchUntilServed searches through c, again while the replica answers
// it is not serving: a loaded machine can starve a follower of its
// leader's heartbeats, and it then rightly refuses reads for a moment.
func searchUntilServed(t *testing.T, c shardpb.ShardClient, req *shardpb.SearchRequest) (*shardpb.SearchResponse, error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := c.Search(ctx(t), req)
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return res, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQuantizationSwitchesOnlineOnEveryReplica: a loaded flat collection
// switched from float32 only to int8 codes, off and on again, through the
// catalog: every replica switches at the entry (codes from the scale the
// leader trains and commits, the scale kept across off and on), answers
// exactly before and after (exact scans equal the brute force; int8 scans
// are the same on every replica and score in float32), and holds the
// same settings, codes and answers after every replica restarts. A change
// of a setting that cannot change is refused and changes nothing.
func TestQuantizationSwitchesOnlineOnEveryReplica(t *testing.T) {
	const dim, rows = 16, 500
	// The production raft timings: under -race on two shared cores the
	// test timings' short lease makes followers refuse reads now and then.
	ms := groupOf(t, 3, testDim, func(c *Config) {
		c.Int8MinRows = 200
		c.HeartbeatTimeout, c.ElectionTimeout, c.MaxLeaderSilence = 0, 0, 0
	})
	leader := waitLeader(t, ms)
	c := pbClient(t, leader.listen)
	resp, err := c.ChangeCatalog(ctx(t), createReq(true, "q", 0, dim, "l2", "none", ""))
	require.NoError(t, err)
	coll := &testCollection{name: "q", dim: dim, metric: vector.Euclidean, uid: resp.GetEntry().GetUid()}
	coll.fill(t, c, rows, 3)

	rng := rand.New(rand.NewPCG(4, 4))
	var queries [][]float32
	for range 8 {
		q := make([]float32, dim)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		queries = append(queries, q)
	}
	// exactScore is the float32 score of id for q, from the brute force
	// over every row.
	exactScores := make([]map[string]float32, len(queries))
	for i, q := range queries {
		exactScores[i] = map[string]float32{}
		for _, h := range coll.brute(t, q, rows) {
			exactScores[i][h.ID] = h.Score
		}
	}

	check := func(t *testing.T, int8On bool) {
		t.Helper()
		idx := leader.node.AppliedIndex()
		for _, m := range ms {
			require.Eventually(t, func() bool { return m.node.AppliedIndex() >= idx && m.node.Serving() }, 20*time.Second, 10*time.Millisecond)
			mem, ok := m.rep.Collections.Store("q")
			require.True(t, ok)
			want := store.QuantNone
			if int8On {
				want = store.QuantInt8
				require.Eventually(t, mem.Int8Ready, 20*time.Second, 10*time.Millisecond, "codes on %s", m.listen)
			}
			require.Equal(t, want, mem.Quantization(), m.listen)
			require.Equal(t, int8On, mem.Int8Ready(), m.listen)
		}
		var first [][]*shardpb.Hit
		for mi, m := range ms {
			mc := pbClient(t, m.listen)
			for qi, q := range queries {
				for _, exact := range []bool{true, false} {
					res, err := searchUntilServed(t, mc, &shardpb.SearchRequest{Collection: coll.ref(), MinIndex: idx,
						Queries: []*shardpb.Query{{Vector: shard.EncodeVector(q), K: 10, Exact: exact}}})
					require.NoError(t, err)
					hits := res.GetResults()[0].GetHits()
					require.Len(t, hits, 10)
					for _, h := range hits {
						require.InDelta(t, exactScores[qi][h.GetId()], h.GetScore(), 1e-4, "scores are float32 scores")
					}
					if exact || !int8On {
						require.True(t, res.GetExact())
						want := coll.brute(t, q, 10)
						for i, h := range want {
							require.Equal(t, h.ID, hits[i].GetId(), "query %d hit %d on %s", qi, i, m.listen)
						}
						continue
					}
					require.False(t, res.GetExact(), "int8 codes answer a query that does not ask for exact")
					if mi == 0 {
						first = append(first, hits)
					} else {
						require.True(t, proto.Equal(&shardpb.HitList{Hits: first[qi]}, &shardpb.HitList{Hits: hits}), "every replica answers alike")
					}
				}
			}
		}
	}
	update := func(quant string) uint64 {
		t.Helper()
		r, err := c.ChangeCatalog(ctx(t), updateReq("q", coll.uid, dim, "l2", quant))
		require.NoError(t, err)
		require.True(t, r.GetChanged())
		require.Equal(t, quant, r.GetEntry().GetSettings().GetQuantization())
		require.Equal(t, r.GetIndex(), r.GetEntry().GetSettingsVersion())
		return r.GetIndex()
	}

	t.Run("float32 only", func(t *testing.T) { check(t, false) })
	update(catalog.QuantInt8)
	t.Run("int8 on: the leader trains a scale", func(t *testing.T) { check(t, true) })
	memQ, _ := leader.rep.Collections.Store("q")
	scale := memQ.Trained(store.TrainedInt8Scale)
	require.NotNil(t, scale)
	update(catalog.QuantNone)
	t.Run("int8 off", func(t *testing.T) { check(t, false) })
	version := update(catalog.QuantInt8)
	t.Run("int8 on again: the committed scale is kept", func(t *testing.T) { check(t, true) })
	for _, m := range ms {
		mem, _ := m.rep.Collections.Store("q")
		require.Equal(t, scale, mem.Trained(store.TrainedInt8Scale))
	}

	// Searches and writes go on while the quantization switches (a race
	// between the catalog and requests is -race's to find).
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m := ms[i%len(ms)]
			_, _ = pbClient(t, m.listen).Search(ctx(t), &shardpb.SearchRequest{Collection: coll.ref(),
				Queries: []*shardpb.Query{{Vector: shard.EncodeVector(queries[i%len(queries)]), K: 3}}})
			_, _ = c.Upsert(ctx(t), &shardpb.UpsertRequest{Placement: pbPlace, Collection: coll.ref(),
				Vectors: []*shardpb.Vector{{Id: "doc-0", Vector: shard.EncodeVector(coll.rows["doc-0"])}}})
		}
	}()
	update(catalog.QuantNone)
	version = update(catalog.QuantInt8)
	close(stop)
	<-done
	t.Run("int8 on again under load", func(t *testing.T) { check(t, true) })

	t.Run("settings that cannot change are refused", func(t *testing.T) {
		before, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{})
		require.NoError(t, err)
		for _, req := range []*shardpb.ChangeCatalogRequest{
			updateReq("q", coll.uid, 8, "l2", "int8"),
			updateReq("q", coll.uid, dim, "dot", "int8"),
		} {
			_, err := c.ChangeCatalog(ctx(t), req)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.ErrorContains(t, err, "cannot change online")
		}
		_, err = c.ChangeCatalog(ctx(t), updateReq("q", coll.uid+1, dim, "l2", "none"))
		var nf *shard.CollectionNotFoundError
		require.ErrorAs(t, shard.FromStatus(err), &nf, "another incarnation's change")
		after, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{})
		require.NoError(t, err)
		require.True(t, proto.Equal(before, after))
	})

	// Every replica restarts: one from a snapshot taken after the last
	// switch, the others from their logs.
	require.NoError(t, ms[1].node.Snapshot())
	for _, m := range ms {
		m.stop()
	}
	for _, m := range ms {
		require.NoError(t, m.start())
	}
	leader = waitLeader(t, ms)
	c = pbClient(t, leader.listen)
	t.Run("after every replica restarts", func(t *testing.T) {
		check(t, true)
		for _, m := range ms {
			cat, err := pbClient(t, m.listen).Catalog(ctx(t), &shardpb.CatalogRequest{MinIndex: leader.node.AppliedIndex()})
			require.NoError(t, err)
			require.Len(t, cat.GetCollections(), 1)
			e := cat.GetCollections()[0]
			assert.Equal(t, catalog.QuantInt8, e.GetSettings().GetQuantization())
			assert.Equal(t, version, e.GetSettingsVersion())
			mem, _ := m.rep.Collections.Store("q")
			assert.Equal(t, scale, mem.Trained(store.TrainedInt8Scale))
		}
	})
}

// TestSettingsPushesAreOrderedByVersion: another group receives a changed
// entry as a create of the same uid; a higher settings version replaces
// the settings held (and switches the store), a lower one is stale and
// changes nothing, and a push that changes a setting that cannot change
// is refused.
func TestSettingsPushesAreOrderedByVersion(t *testing.T) {
	rep, _ := serve(t, memConfig(8, vector.Euclidean), nil, client.DialConfig{})
	c := pbClient(t, rep.Node.Self())
	push := func(version uint64, dim int, quant string) *shardpb.ChangeCatalogRequest {
		req := createReq(false, "p", 500, dim, "l2", quant, "")
		req.GetCreate().SettingsVersion = version
		req.GetCreate().GetSettings().Float32Placement = catalog.Float32InMemory
		return req
	}
	for _, tc := range []struct {
		name    string
		req     *shardpb.ChangeCatalogRequest
		code    codes.Code
		changed bool
		quant   string // held after
	}{
		{name: "created", req: push(0, 8, "none"), changed: true, quant: "none"},
		{name: "a newer version switches int8 on", req: push(600, 8, "int8"), changed: true, quant: "int8"},
		{name: "the same push again is a no-op", req: push(600, 8, "int8"), quant: "int8"},
		{name: "an older version is stale", req: push(550, 8, "none"), quant: "int8"},
		{name: "a newer version switches it off", req: push(700, 8, "none"), changed: true, quant: "none"},
		{name: "a newer version may not change the dimension", req: push(800, 4, "none"), code: codes.AlreadyExists, quant: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.ChangeCatalog(ctx(t), tc.req)
			if tc.code != codes.OK {
				require.Equal(t, tc.code, status.Code(err), "%v", err)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.changed, resp.GetChanged())
			}
			mem, ok := rep.Collections.Store("p")
			require.True(t, ok)
			want := store.QuantNone
			if tc.quant == "int8" {
				want = store.QuantInt8
			}
			require.Equal(t, want, mem.Quantization(), fmt.Sprint(tc.name))
		})
	}
}
