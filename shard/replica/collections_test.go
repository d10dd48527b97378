package replica

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/segment"
)

// pbClient is a plain shard client of addr: client.Conn names no
// collection yet.
func pbClient(t testing.TB, addr string) shardpb.ShardClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return shardpb.NewShardClient(cc)
}

var pbPlace = &shardpb.Placement{Fingerprint: place.Fingerprint, Shard: place.Shard}

func createReq(authority bool, name string, uid uint64, dim int, metric, quant, index string) *shardpb.ChangeCatalogRequest {
	return &shardpb.ChangeCatalogRequest{Authority: authority, Op: &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{
		Name: name, Uid: uid, Settings: &shardpb.CollectionSettings{Dim: uint32(dim), Metric: metric, Quantization: quant, Index: index}}}}
}

func dropReq(authority bool, name string, uid uint64) *shardpb.ChangeCatalogRequest {
	return &shardpb.ChangeCatalogRequest{Authority: authority, Op: &shardpb.ChangeCatalogRequest_Drop{Drop: &shardpb.CollectionRef{Name: name, Uid: uid}}}
}

func aliasReq(authority bool, alias, collection string, uid uint64) *shardpb.ChangeCatalogRequest {
	return &shardpb.ChangeCatalogRequest{Authority: authority, Op: &shardpb.ChangeCatalogRequest_Alias{Alias: &shardpb.AliasEntry{Alias: alias, Collection: collection, Uid: uid}}}
}

// TestCatalogChangesFollowThePlan applies catalog changes one after the
// other to a group of one, as the authority and as another group, and
// checks each answer and the catalog they leave.
func TestCatalogChangesFollowThePlan(t *testing.T) {
	rep, _ := serve(t, memConfig(8, vector.Euclidean), nil, client.DialConfig{})
	c := pbClient(t, rep.Node.Self())
	const assigned = ^uint64(0) // want the change's own index as uid
	var uidA uint64
	for _, tc := range []struct {
		name    string
		req     *shardpb.ChangeCatalogRequest
		code    codes.Code
		changed bool
		uid     uint64 // of the entry answered; assigned: the change's index
		alias   string // of the alias answered
	}{
		{name: "authority creates an absent name", req: createReq(true, "a", 0, 8, "dot", "", ""), changed: true, uid: assigned},
		{name: "authority: an equal create is a no-op", req: createReq(true, "a", 0, 8, "dot", "none", "flat")},
		{name: "authority: a different create conflicts", req: createReq(true, "a", 0, 16, "dot", "", ""), code: codes.AlreadyExists},
		{name: "authority: dropping an absent name is a no-op", req: dropReq(true, "zz", 0)},
		{name: "push creates with the authority's uid", req: createReq(false, "b", 1000, 4, "l2", "", ""), changed: true, uid: 1000},
		{name: "push of the held uid is a no-op", req: createReq(false, "b", 1000, 4, "l2", "", ""), uid: 1000},
		{name: "push of an older uid than held is refused", req: createReq(false, "b", 999, 4, "l2", "", ""), code: codes.FailedPrecondition},
		{name: "push of a newer uid replaces the held one", req: createReq(false, "b", 1001, 4, "cosine", "", ""), changed: true, uid: 1001},
		{name: "push of the held uid with other settings conflicts", req: createReq(false, "b", 1001, 8, "l2", "", ""), code: codes.AlreadyExists},
		{name: "drop of uid 0 drops what is held", req: dropReq(false, "b", 0), changed: true, uid: 1001},
		{name: "drop again is a no-op", req: dropReq(false, "b", 0)},
		{name: "a late push of a dropped incarnation is refused", req: createReq(false, "b", 1001, 4, "cosine", "", ""), code: codes.FailedPrecondition},
		{name: "drop of an incarnation never held is recorded", req: dropReq(false, "c", 2000), changed: true},
		{name: "then its push is refused", req: createReq(false, "c", 2000, 4, "l2", "", ""), code: codes.FailedPrecondition},
		{name: "and an older one's too", req: createReq(false, "c", 1999, 4, "l2", "", ""), code: codes.FailedPrecondition},
		{name: "a newer incarnation is created", req: createReq(false, "c", 2001, 4, "l2", "", ""), changed: true, uid: 2001},
		{name: "drop of an older uid than held keeps it", req: dropReq(false, "c", 2000)},
		{name: "authority: alias to a held collection", req: aliasReq(true, "al", "c", 0), changed: true, alias: "c"},
		{name: "authority: the same alias again is a no-op", req: aliasReq(true, "al", "c", 0), alias: "c"},
		{name: "authority: alias to an absent collection is refused", req: aliasReq(true, "al2", "nope", 0), code: codes.FailedPrecondition},
		{name: "authority: drop with uid 0 drops the held incarnation", req: dropReq(true, "a", 0), changed: true}, // uid: a's
		{name: "a bad name is refused", req: createReq(true, "no/slash", 0, 8, "", "", ""), code: codes.InvalidArgument},
		{name: "a bad dimension is refused", req: createReq(true, "d", 0, 9000, "", "", ""), code: codes.InvalidArgument},
		{name: "a bad metric is refused", req: createReq(true, "d", 0, 8, "manhattan", "", ""), code: codes.InvalidArgument},
		{name: "a bad index is refused", req: createReq(true, "d", 0, 8, "", "", "hnsw"), code: codes.InvalidArgument},
		{name: "a change with no operation is refused", req: &shardpb.ChangeCatalogRequest{Authority: true}, code: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{})
			require.NoError(t, err)
			resp, err := c.ChangeCatalog(ctx(t), tc.req)
			if tc.code != codes.OK {
				require.Equal(t, tc.code, status.Code(err), "%v", err)
				after, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{})
				require.NoError(t, err)
				require.True(t, proto.Equal(before, after), "a refused change changes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.changed, resp.GetChanged())
			want := tc.uid
			switch {
			case want == assigned:
				want = resp.GetIndex()
				uidA = want
			case tc.req.GetDrop().GetName() == "a" || tc.req.GetCreate().GetName() == "a":
				want = uidA // the held entry, answered
			}
			require.Equal(t, want, resp.GetEntry().GetUid())
			require.Equal(t, tc.alias, resp.GetAlias().GetCollection())
			after, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{})
			require.NoError(t, err)
			if tc.changed {
				require.Equal(t, resp.GetIndex(), after.GetVersion(), "a change moves the version to its index")
			} else {
				require.True(t, proto.Equal(before, after), "a repeat changes nothing")
			}
		})
	}
	cat, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{})
	require.NoError(t, err)
	require.Len(t, cat.GetCollections(), 1)
	require.Equal(t, "c", cat.GetCollections()[0].GetName())
	require.EqualValues(t, 2001, cat.GetCollections()[0].GetUid())
	require.Equal(t, map[string]uint64{"a": uidA, "b": 1001, "c": 2000}, cat.GetDropped())
	require.Len(t, cat.GetAliases(), 1)
	require.Equal(t, "al", cat.GetAliases()[0].GetAlias())
}

// TestCatalogDropRemovesAliases: aliases of a dropped collection go with
// it, as in Qdrant.
func TestCatalogDropRemovesAliases(t *testing.T) {
	rep, _ := serve(t, memConfig(8, vector.Euclidean), nil, client.DialConfig{})
	c := pbClient(t, rep.Node.Self())
	for _, req := range []*shardpb.ChangeCatalogRequest{
		createReq(true, "x", 0, 4, "", "", ""), aliasReq(true, "y", "x", 0), dropReq(true, "x", 0),
	} {
		_, err := c.ChangeCatalog(ctx(t), req)
		require.NoError(t, err)
	}
	cat, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{})
	require.NoError(t, err)
	require.Empty(t, cat.GetAliases())
	require.Empty(t, cat.GetCollections())
}

// testCollection is one collection of a test and the rows written to it.
type testCollection struct {
	name   string
	dim    int
	metric vector.Metric
	uid    uint64
	rows   map[string][]float32 // as stored: normalised under cosine
}

func (tc *testCollection) ref() *shardpb.CollectionRef {
	if tc.name == "" {
		return nil
	}
	return &shardpb.CollectionRef{Name: tc.name, Uid: tc.uid}
}

// fill upserts n random rows, ids doc-0.. (the same ids in every
// collection), in batches.
func (tc *testCollection) fill(t *testing.T, c shardpb.ShardClient, n int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(tc.dim)))
	tc.rows = map[string][]float32{}
	var batch []*shardpb.Vector
	for i := range n {
		v := make([]float32, tc.dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		id := fmt.Sprint("doc-", i)
		batch = append(batch, &shardpb.Vector{Id: id, Vector: shard.EncodeVector(v), Payload: []byte(fmt.Sprintf(`{"c":%q}`, tc.name))})
		if tc.metric == vector.Cosine {
			vector.Generic().Normalize(v)
		}
		tc.rows[id] = v
		if len(batch) == 128 || i == n-1 {
			_, err := c.Upsert(ctx(t), &shardpb.UpsertRequest{Placement: pbPlace, Vectors: batch, Collection: tc.ref()})
			require.NoError(t, err)
			batch = nil
		}
	}
}

// brute is the exact top-k of q over the rows the test wrote.
func (tc *testCollection) brute(t *testing.T, q []float32, k int) []vector.Hit {
	t.Helper()
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range tc.rows {
			if !yield(id) {
				return
			}
		}
	})
	var data []float32
	for _, id := range ids {
		data = append(data, tc.rows[id]...)
	}
	rows := vector.FlatRows(data, tc.dim, ids)
	q = slices.Clone(q)
	if tc.metric == vector.Cosine {
		vector.Generic().Normalize(q)
	}
	hs, err := vector.Generic().Scan(context.Background(), tc.metric, rows, []vector.Query{{Vector: q, K: k}})
	require.NoError(t, err)
	return hs[0]
}

// TestCollectionsOfDifferentSettingsShareAReplica: collections of other
// dimensions and metrics in one replica (and the legacy one) each answer
// the exact top-k of their own rows, the same ids in another collection
// never leak in, and a wrong uid or an unknown name is refused
// COLLECTION_NOT_FOUND naming the uid held.
func TestCollectionsOfDifferentSettingsShareAReplica(t *testing.T) {
	rep, _ := serve(t, memConfig(8, vector.Euclidean), nil, client.DialConfig{})
	c := pbClient(t, rep.Node.Self())
	cols := []*testCollection{
		{name: "", dim: 8, metric: vector.Euclidean},
		{name: "small", dim: 4, metric: vector.Euclidean},
		{name: "big", dim: 24, metric: vector.Cosine},
		{name: "dots", dim: 24, metric: vector.DotProduct},
	}
	for i, tc := range cols {
		if tc.name != "" {
			resp, err := c.ChangeCatalog(ctx(t), createReq(true, tc.name, 0, tc.dim, tc.metric.String(), "", ""))
			require.NoError(t, err)
			tc.uid = resp.GetEntry().GetUid()
		}
		tc.fill(t, c, 300, uint64(i))
	}

	rng := rand.New(rand.NewPCG(9, 9))
	for _, tc := range cols {
		t.Run("collection "+tc.name, func(t *testing.T) {
			for range 5 {
				q := make([]float32, tc.dim)
				for j := range q {
					q[j] = float32(rng.NormFloat64())
				}
				resp, err := c.Search(ctx(t), &shardpb.SearchRequest{Collection: tc.ref(),
					Queries: []*shardpb.Query{{Vector: shard.EncodeVector(q), K: 10, Exact: true}}})
				require.NoError(t, err)
				require.EqualValues(t, 300, resp.GetDocCount(), "the collection's own count")
				want := tc.brute(t, q, 10)
				got := resp.GetResults()[0].GetHits()
				require.Len(t, got, len(want))
				for i, h := range want {
					require.Equal(t, h.ID, got[i].GetId())
					require.InDelta(t, h.Score, got[i].GetScore(), 1e-4)
				}
			}
			g, err := c.Get(ctx(t), &shardpb.GetRequest{Id: "doc-7", Collection: tc.ref()})
			require.NoError(t, err)
			v, err := shard.DecodeVector(g.GetVector().GetVector())
			require.NoError(t, err)
			require.InDeltaSlice(t, tc.rows["doc-7"], v, 1e-6, "its own row of that id")
			require.JSONEq(t, fmt.Sprintf(`{"c":%q}`, tc.name), string(g.GetVector().GetPayload()))

			page, err := c.Scroll(ctx(t), &shardpb.ScrollRequest{Collection: tc.ref(), Limit: 1000})
			require.NoError(t, err)
			require.EqualValues(t, 300, page.GetCount())
			require.Len(t, page.GetPoints(), 300)
		})
	}

	t.Run("validation is the collection's", func(t *testing.T) {
		small, big := cols[1], cols[2]
		_, err := c.Search(ctx(t), &shardpb.SearchRequest{Collection: big.ref(),
			Queries: []*shardpb.Query{{Vector: shard.EncodeVector(make([]float32, 4)), K: 1}}})
		require.Equal(t, codes.InvalidArgument, status.Code(err))
		require.ErrorContains(t, err, "want 24")
		_, err = c.Upsert(ctx(t), &shardpb.UpsertRequest{Placement: pbPlace, Collection: big.ref(),
			Vectors: []*shardpb.Vector{{Id: "z", Vector: shard.EncodeVector(make([]float32, 24))}}})
		require.ErrorContains(t, err, "zero vector", "cosine refuses a zero vector")
		_, err = c.Upsert(ctx(t), &shardpb.UpsertRequest{Placement: pbPlace, Collection: cols[3].ref(),
			Vectors: []*shardpb.Vector{{Id: "z", Vector: shard.EncodeVector(make([]float32, 24))}}})
		require.NoError(t, err, "dot takes one")
		_, err = c.Upsert(ctx(t), &shardpb.UpsertRequest{Placement: pbPlace, Collection: small.ref(),
			Vectors: []*shardpb.Vector{{Id: "z", Vector: shard.EncodeVector(make([]float32, 8))}}})
		require.ErrorContains(t, err, "want 4")
		d, err := c.Delete(ctx(t), &shardpb.DeleteRequest{Placement: pbPlace, Collection: small.ref(), Id: "doc-0"})
		require.NoError(t, err)
		require.True(t, d.GetFound())
		_, err = c.Get(ctx(t), &shardpb.GetRequest{Id: "doc-0", Collection: big.ref()})
		require.NoError(t, err, "a delete in one collection leaves the others")
	})

	t.Run("refusals", func(t *testing.T) {
		small := cols[1]
		q := []*shardpb.Query{{Vector: shard.EncodeVector(make([]float32, 4)), K: 1}}
		for _, ref := range []struct {
			ref  *shardpb.CollectionRef
			held uint64
		}{
			{&shardpb.CollectionRef{Name: "small", Uid: small.uid + 100}, small.uid},
			{&shardpb.CollectionRef{Name: "nope"}, 0},
			{&shardpb.CollectionRef{Name: "nope", Uid: 3}, 0},
		} {
			checks := map[string]error{}
			_, checks["search"] = c.Search(ctx(t), &shardpb.SearchRequest{Collection: ref.ref, Queries: q})
			_, checks["get"] = c.Get(ctx(t), &shardpb.GetRequest{Collection: ref.ref, Id: "doc-1"})
			_, checks["scroll"] = c.Scroll(ctx(t), &shardpb.ScrollRequest{Collection: ref.ref})
			_, checks["stats"] = c.Stats(ctx(t), &shardpb.StatsRequest{Collection: ref.ref})
			_, checks["upsert"] = c.Upsert(ctx(t), &shardpb.UpsertRequest{Placement: pbPlace, Collection: ref.ref,
				Vectors: []*shardpb.Vector{{Id: "z", Vector: shard.EncodeVector(make([]float32, 4))}}})
			_, checks["delete"] = c.Delete(ctx(t), &shardpb.DeleteRequest{Placement: pbPlace, Collection: ref.ref, Id: "doc-1"})
			for what, err := range checks {
				var nf *shard.CollectionNotFoundError
				require.ErrorAs(t, shard.FromStatus(err), &nf, "%s %v", what, ref.ref)
				require.Equal(t, ref.ref.GetName(), nf.Name)
				require.Equal(t, ref.held, nf.HeldUID, what)
			}
		}
	})

	t.Run("stats", func(t *testing.T) {
		st, err := c.Stats(ctx(t), &shardpb.StatsRequest{})
		require.NoError(t, err)
		require.Len(t, st.GetCollections(), 4)
		var sum uint64
		names := []string{}
		for _, cs := range st.GetCollections() {
			sum += cs.GetDocCount()
			names = append(names, cs.GetEntry().GetName())
			require.Positive(t, cs.GetBytes())
			require.Equal(t, "flat", cs.GetIndex().GetKind())
		}
		require.Equal(t, []string{"big", "dots", "small", shard.LegacyCollection}, names, "in name order")
		require.Equal(t, sum, st.GetDocCount())
		require.EqualValues(t, 8, st.GetDim(), "the legacy collection's, for routers that name none")
		require.Equal(t, "l2", st.GetMetric())

		one, err := c.Stats(ctx(t), &shardpb.StatsRequest{Collection: cols[2].ref()})
		require.NoError(t, err)
		require.Len(t, one.GetCollections(), 1)
		require.EqualValues(t, 300, one.GetDocCount())
		require.EqualValues(t, 24, one.GetDim())
		require.Equal(t, "cosine", one.GetMetric())
	})
}

// TestInt8CollectionsTrainTheirOwnScale: each int8 collection's trainer
// commits its own scale (the entry names the collection), and dropping the
// collection stops it.
func TestInt8CollectionsTrainTheirOwnScale(t *testing.T) {
	rep, _ := serve(t, Config{Legacy: catalog.Settings{Dim: 8, Metric: vector.Euclidean}, Int8MinRows: 100}, nil, client.DialConfig{})
	c := pbClient(t, rep.Node.Self())
	q := &testCollection{name: "q", dim: 16, metric: vector.DotProduct}
	resp, err := c.ChangeCatalog(ctx(t), createReq(true, "q", 0, 16, "dot", "int8", ""))
	require.NoError(t, err)
	q.uid = resp.GetEntry().GetUid()
	legacy := &testCollection{dim: 8, metric: vector.Euclidean}
	legacy.fill(t, c, 150, 1)
	q.fill(t, c, 150, 2)
	mem, ok := rep.Collections.Store("q")
	require.True(t, ok)
	require.Eventually(t, mem.Int8Ready, 20*time.Second, 10*time.Millisecond, "the int8 collection trains its scale")
	require.Nil(t, rep.Store.Trained(store.TrainedInt8Scale), "a float32 collection trains nothing")

	// A drop stops the trainer and lets go of the store: its memory is
	// collected.
	freed := weak.Make(mem)
	mem = nil
	_, err = c.ChangeCatalog(ctx(t), dropReq(true, "q", 0))
	require.NoError(t, err)
	_, ok = rep.Collections.Store("q")
	require.False(t, ok)
	require.Eventually(t, func() bool {
		runtime.GC()
		return freed.Value() == nil
	}, 10*time.Second, 50*time.Millisecond, "nothing refers to a dropped collection's store")
}

// TestCatalogReplicates: a 3-replica group takes catalog changes and writes
// through a follower (forwarded to the leader), every replica holds the
// same catalog and rows, and a drop frees the collection everywhere.
func TestCatalogReplicates(t *testing.T) {
	ms := groupOf(t, 3, testDim, nil)
	leader := waitLeader(t, ms)
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
			break
		}
	}
	c := pbClient(t, follower.listen)
	var (
		resp *shardpb.ChangeCatalogResponse
		err  error
	)
	require.Eventually(t, func() bool {
		resp, err = c.ChangeCatalog(ctx(t), createReq(true, "docs", 0, 6, "l2", "", ""))
		var nl *shard.NotLeaderError
		return !errors.As(shard.FromStatus(err), &nl)
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, err)
	docs := &testCollection{name: "docs", dim: 6, metric: vector.Euclidean, uid: resp.GetEntry().GetUid()}
	docs.fill(t, c, 200, 3)

	want, err := pbClient(t, leader.listen).Catalog(ctx(t), &shardpb.CatalogRequest{})
	require.NoError(t, err)
	for _, m := range ms {
		mc := pbClient(t, m.listen)
		require.Eventually(t, func() bool {
			got, err := mc.Catalog(ctx(t), &shardpb.CatalogRequest{MinIndex: want.GetVersion()})
			return err == nil && proto.Equal(want, got)
		}, 10*time.Second, 20*time.Millisecond, "replica %s holds the catalog", m.listen)
		require.Eventually(t, func() bool {
			mem, ok := m.rep.Collections.Store("docs")
			return ok && mem.Len() == 200
		}, 10*time.Second, 20*time.Millisecond)
	}

	_, err = c.ChangeCatalog(ctx(t), dropReq(true, "docs", 0))
	require.NoError(t, err)
	for _, m := range ms {
		require.Eventually(t, func() bool {
			_, ok := m.rep.Collections.Store("docs")
			return !ok
		}, 10*time.Second, 20*time.Millisecond, "replica %s dropped the collection", m.listen)
	}
	_, err = c.Search(ctx(t), &shardpb.SearchRequest{Collection: docs.ref(),
		Queries: []*shardpb.Query{{Vector: shard.EncodeVector(make([]float32, 6)), K: 1}}})
	var nf *shard.CollectionNotFoundError
	require.ErrorAs(t, shard.FromStatus(err), &nf)
}

// heldState is what a replica holds, for comparing it across a restart:
// each collection's rows (id → vector and payload) and trained values.
type heldState struct {
	rows    map[string]map[string]string
	trained map[string]map[string][]byte
}

func holds(t *testing.T, rep *Replica, names ...string) heldState {
	t.Helper()
	st := heldState{rows: map[string]map[string]string{}, trained: map[string]map[string][]byte{}}
	for _, name := range names {
		mem, ok := rep.Collections.Store(name)
		require.True(t, ok, "collection %q held", name)
		rows := map[string]string{}
		require.NoError(t, mem.View(func(r vector.Rows) error {
			for i, id := range r.IDs {
				rec, _ := mem.Record(id)
				rows[id] = fmt.Sprint(r.Row(i), string(rec.Payload))
			}
			return nil
		}))
		st.rows[name] = rows
		st.trained[name] = map[string][]byte{}
		for _, k := range []string{store.TrainedInt8Scale, store.TrainedIVFCentroids, store.TrainedIVFNProbe} {
			if v := mem.Trained(k); v != nil {
				st.trained[name][k] = v
			}
		}
	}
	return st
}

// TestCollectionsSurviveARestart: a replica on disk with collections of
// every kind (float32, int8 and IVF with committed values, the legacy
// one) restarts from its snapshot and log into the same catalog, rows and
// trained values; a dropped collection was snapshotted away and does not
// come back, and a late push of it is refused.
func TestCollectionsSurviveARestart(t *testing.T) {
	longtest.Mark(t)
	ms := groupOf(t, 1, testDim, func(c *Config) { c.Int8MinRows, c.IVFMinRows = neverTrain, neverTrain })
	m := waitLeader(t, ms)
	c := pbClient(t, m.listen)
	cols := map[string]*testCollection{
		"f":    {name: "f", dim: 8, metric: vector.Euclidean},
		"q":    {name: "q", dim: 16, metric: vector.DotProduct},
		"v":    {name: "v", dim: 16, metric: vector.Euclidean},
		"gone": {name: "gone", dim: 4, metric: vector.Cosine},
	}
	kinds := map[string][2]string{"q": {"int8", ""}, "v": {"", "ivf"}}
	for i, name := range []string{"f", "q", "v", "gone"} {
		tc := cols[name]
		resp, err := c.ChangeCatalog(ctx(t), createReq(true, name, 0, tc.dim, tc.metric.String(), kinds[name][0], kinds[name][1]))
		require.NoError(t, err)
		tc.uid = resp.GetEntry().GetUid()
		tc.fill(t, c, 600, uint64(i))
	}
	legacy := &testCollection{dim: testDim, metric: vector.Euclidean}
	legacy.fill(t, c, 100, 9)

	memQ, _ := m.rep.Collections.Store("q")
	_, err := m.srv.SetTrained(ctx(t), cols["q"].ref(), store.TrainedInt8Scale, trainScale(t, memQ))
	require.NoError(t, err)
	memV, _ := m.rep.Collections.Store("v")
	_, err = m.srv.SetTrained(ctx(t), cols["v"].ref(), store.TrainedInt8Scale, trainScale(t, memV))
	require.NoError(t, err)
	cb, _ := trainCentroids(t, memV, vector.Euclidean, 7)
	_, err = m.srv.SetTrained(ctx(t), cols["v"].ref(), store.TrainedIVFCentroids, cb)
	require.NoError(t, err)
	require.Eventually(t, memV.IVFIndexed, 30*time.Second, 10*time.Millisecond)
	require.True(t, memQ.Int8Ready())

	_, err = c.ChangeCatalog(ctx(t), dropReq(true, "gone", 0))
	require.NoError(t, err)
	snaps := func() []string {
		got, _ := filepath.Glob(filepath.Join(m.dir, "snapshots", "*", "state.bin"))
		// Those still being written are in a ".tmp" directory.
		return slices.DeleteFunc(got, func(p string) bool { return strings.HasSuffix(filepath.Dir(p), ".tmp") })
	}
	require.Eventually(t, func() bool { return len(snaps()) > 0 }, 20*time.Second, 20*time.Millisecond,
		"a drop asks for a snapshot, so the dropped rows leave the disk")
	f, err := os.Open(snaps()[0])
	require.NoError(t, err)
	var hdr shardpb.SnapshotHeader
	require.NoError(t, protodelim.UnmarshalFrom(bufio.NewReader(f), &hdr))
	f.Close()
	// Format 4: the int8 and IVF collections' rows are segment files
	// (on_disk, their default), linked into the snapshot, and the flat
	// int8 collection's codes files beside them.
	require.EqualValues(t, 4, hdr.GetFormat())
	links, err := filepath.Glob(filepath.Join(filepath.Dir(snaps()[0]), "files", "*.npy"))
	require.NoError(t, err)
	require.NotEmpty(t, links, "the on_disk collections' segment files are linked into the snapshot")
	codesLinks, err := filepath.Glob(filepath.Join(filepath.Dir(snaps()[0]), "files", "*"+segment.CodesExt))
	require.NoError(t, err)
	require.NotEmpty(t, codesLinks, "the int8 collection's codes files are linked into the snapshot")
	for _, e := range hdr.GetCatalog().GetCollections() {
		require.NotEqual(t, "gone", e.GetName(), "the snapshot after the drop lacks it")
	}
	// Written after the snapshot: the restart replays it from the log.
	cols["f"].fill(t, c, 650, 11)

	held := []string{"f", "q", "v", shard.LegacyCollection}
	wantCat, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{})
	require.NoError(t, err)
	want := holds(t, m.rep, held...)

	m.stop()
	require.NoError(t, m.start())
	m = waitLeader(t, ms)
	c = pbClient(t, m.listen)
	gotCat, err := c.Catalog(ctx(t), &shardpb.CatalogRequest{MinIndex: m.node.AppliedIndex()})
	require.NoError(t, err)
	require.True(t, proto.Equal(wantCat, gotCat), "catalog: want %v, got %v", wantCat, gotCat)
	require.Equal(t, want, holds(t, m.rep, held...))
	_, ok := m.rep.Collections.Store("gone")
	require.False(t, ok, "a dropped collection does not come back")
	_, err = c.ChangeCatalog(ctx(t), createReq(false, "gone", cols["gone"].uid, 4, "cosine", "", ""))
	require.Equal(t, codes.FailedPrecondition, status.Code(err))

	memQ, _ = m.rep.Collections.Store("q")
	require.True(t, memQ.Int8Ready(), "int8 codes rebuilt from the restored scale")
	memV, _ = m.rep.Collections.Store("v")
	require.Eventually(t, memV.IVFIndexed, 30*time.Second, 10*time.Millisecond, "the index rebuilt from the restored centroids")
	require.Eventually(t, m.srv.Serving, 30*time.Second, 10*time.Millisecond)
	for _, name := range []string{"f", "q", "v"} {
		tc := cols[name]
		q := make([]float32, tc.dim)
		q[0] = 1
		resp, err := c.Search(ctx(t), &shardpb.SearchRequest{Collection: tc.ref(),
			Queries: []*shardpb.Query{{Vector: shard.EncodeVector(q), K: 10, Exact: true}}})
		require.NoError(t, err)
		require.Equal(t, hitsOfVector(tc.brute(t, q, 10)), hitPairsPB(resp.GetResults()[0].GetHits()), name)
	}
}

func hitPairsPB(hs []*shardpb.Hit) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, fmt.Sprintf("%s %v", h.GetId(), h.GetScore()))
	}
	return out
}
