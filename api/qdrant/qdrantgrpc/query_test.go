package qdrantgrpc_test

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/api/qdrant/qdrantgrpc"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// The Query API's prefetch and fusion over gRPC answer as points/query
// over REST does (whose answers the REST tests hold to a brute force):
// one implementation behind both transports.

func fusionQuery(f pb.Fusion) *pb.Query { return &pb.Query{Variant: &pb.Query_Fusion{Fusion: f}} }

func TestQueryPrefetch(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	res := e.Do(http.MethodPut, "/collections/gq", `{"vectors": {"size": 4, "distance": "Dot"}}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	rng := rand.New(rand.NewPCG(3, 7))
	vec := func() []float32 {
		return []float32{float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())}
	}
	type point struct {
		ID      int            `json:"id"`
		Vector  []float32      `json:"vector"`
		Payload map[string]any `json:"payload"`
	}
	var pts []point
	for i := 1; i <= 150; i++ {
		pts = append(pts, point{ID: i, Vector: vec(), Payload: map[string]any{"odd": i%2 == 1, "g": i % 5}})
	}
	body, err := json.Marshal(map[string]any{"points": pts})
	require.NoError(t, err)
	res = e.Do(http.MethodPut, "/collections/gq/points?wait=true", string(body), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	a, b, c := vec(), vec(), vec()
	odd := &pb.Filter{Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "odd",
		Match: &pb.Match{MatchValue: &pb.Match_Boolean{Boolean: true}}}}}}}
	k60 := uint32(60)
	for _, tc := range []struct {
		name string
		rest map[string]any
		grpc *pb.QueryPoints
	}{
		{"rrf", map[string]any{"prefetch": []any{map[string]any{"query": a, "limit": 20}, map[string]any{"query": b, "limit": 20}}, "query": map[string]any{"fusion": "rrf"}, "limit": 7},
			&pb.QueryPoints{Prefetch: []*pb.PrefetchQuery{{Query: nearest(a), Limit: new(uint64(20))}, {Query: nearest(b), Limit: new(uint64(20))}},
				Query: fusionQuery(pb.Fusion_RRF), Limit: new(uint64(7))}},
		{"dbsf with a filter and offset", map[string]any{"prefetch": []any{map[string]any{"query": a}, map[string]any{"query": b, "limit": 5}},
			"query": map[string]any{"fusion": "dbsf"}, "limit": 4, "offset": 2, "filter": json.RawMessage(`{"must": [{"key": "odd", "match": {"value": true}}]}`)},
			&pb.QueryPoints{Prefetch: []*pb.PrefetchQuery{{Query: nearest(a)}, {Query: nearest(b), Limit: new(uint64(5))}},
				Query: fusionQuery(pb.Fusion_DBSF), Limit: new(uint64(4)), Offset: new(uint64(2)), Filter: odd}},
		{"rrf k 60 with weights, re-scored", map[string]any{"prefetch": map[string]any{"prefetch": []any{map[string]any{"query": a, "limit": 30},
			map[string]any{"query": b, "limit": 30}}, "query": map[string]any{"rrf": map[string]any{"k": 60, "weights": []float32{2, 1}}}, "limit": 25},
			"query": c, "limit": 5, "score_threshold": -0.5},
			&pb.QueryPoints{Prefetch: []*pb.PrefetchQuery{{Prefetch: []*pb.PrefetchQuery{{Query: nearest(a), Limit: new(uint64(30))}, {Query: nearest(b), Limit: new(uint64(30))}},
				Query: &pb.Query{Variant: &pb.Query_Rrf{Rrf: &pb.Rrf{K: &k60, Weights: []float32{2, 1}}}}, Limit: new(uint64(25))}},
				Query: nearest(c), Limit: new(uint64(5)), ScoreThreshold: new(float32(-0.5))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := json.Marshal(tc.rest)
			require.NoError(t, err)
			res := e.Do(http.MethodPost, "/collections/gq/points/query", string(body), nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			var want struct {
				Result struct {
					Points []struct {
						ID    uint64  `json:"id"`
						Score float32 `json:"score"`
					} `json:"points"`
				} `json:"result"`
			}
			require.NoError(t, json.Unmarshal(res.Body, &want))
			require.NotEmpty(t, want.Result.Points)
			tc.grpc.CollectionName = "gq"
			var tr metadata.MD
			got, err := cl.p.Query(call(t), tc.grpc, grpc.Trailer(&tr))
			require.NoError(t, err)
			require.Equal(t, []string{"false"}, tr.Get(qdrantgrpc.DegradedKey))
			require.Len(t, got.GetResult(), len(want.Result.Points))
			for i, p := range got.GetResult() {
				require.Equal(t, want.Result.Points[i].ID, p.GetId().GetNum(), "hit %d", i)
				require.Equal(t, want.Result.Points[i].Score, p.GetScore(), "hit %d", i)
			}
			// The same query twice in a batch: each answered as alone.
			batch, err := cl.p.QueryBatch(call(t), &pb.QueryBatchPoints{CollectionName: "gq", QueryPoints: []*pb.QueryPoints{tc.grpc, {Query: nearest(a), Limit: new(uint64(3))}}})
			require.NoError(t, err)
			require.Len(t, batch.GetResult(), 2)
			require.Len(t, batch.GetResult()[1].GetResult(), 3)
			for i, p := range batch.GetResult()[0].GetResult() {
				require.Equal(t, want.Result.Points[i].ID, p.GetId().GetNum(), "batch hit %d", i)
			}
		})
	}

	// Bad trees are InvalidArgument naming the member.
	for _, tc := range []struct {
		name string
		q    *pb.QueryPoints
		msg  string
	}{
		{"fusion without prefetch in a prefetch", &pb.QueryPoints{CollectionName: "gq", Query: fusionQuery(pb.Fusion_RRF),
			Prefetch: []*pb.PrefetchQuery{{Query: fusionQuery(pb.Fusion_DBSF)}}}, "prefetch[0].query.fusion needs prefetch"},
		{"unknown fusion", &pb.QueryPoints{CollectionName: "gq", Query: fusionQuery(pb.Fusion(7)),
			Prefetch: []*pb.PrefetchQuery{{Query: nearest(a)}}}, "query.fusion: unknown fusion 7"},
		{"prefetch without query", &pb.QueryPoints{CollectionName: "gq", Query: fusionQuery(pb.Fusion_RRF),
			Prefetch: []*pb.PrefetchQuery{{Prefetch: []*pb.PrefetchQuery{{Query: nearest(a)}}}}}, "prefetch[0].query is missing"},
		{"limit 0", &pb.QueryPoints{CollectionName: "gq", Query: fusionQuery(pb.Fusion_RRF),
			Prefetch: []*pb.PrefetchQuery{{Query: nearest(a), Limit: new(uint64(0))}}}, "prefetch[0]: limit 0"},
		{"rrf k 0", &pb.QueryPoints{CollectionName: "gq", Query: &pb.Query{Variant: &pb.Query_Rrf{Rrf: &pb.Rrf{K: new(uint32(0))}}},
			Prefetch: []*pb.PrefetchQuery{{Query: nearest(a)}}}, "query.rrf.k is 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rpcs := e.ShardRPCs()
			_, err := cl.p.Query(call(t), tc.q)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.Contains(t, status.Convert(err).Message(), tc.msg)
			require.Equal(t, rpcs, e.ShardRPCs())
		})
	}

	// Groups over a fused tree answer as REST's query/groups.
	groups, err := cl.p.QueryGroups(call(t), &pb.QueryPointGroups{CollectionName: "gq", GroupBy: "g", GroupSize: new(uint64(2)), Limit: new(uint64(3)),
		Query: fusionQuery(pb.Fusion_RRF), Prefetch: []*pb.PrefetchQuery{{Query: nearest(a), Limit: new(uint64(8))}, {Query: nearest(b), Limit: new(uint64(8))}}})
	require.NoError(t, err)
	gb, err := json.Marshal(map[string]any{"group_by": "g", "group_size": 2, "limit": 3,
		"query": map[string]any{"fusion": "rrf"}, "prefetch": []any{map[string]any{"query": a, "limit": 8}, map[string]any{"query": b, "limit": 8}}})
	require.NoError(t, err)
	res = e.Do(http.MethodPost, "/collections/gq/points/query/groups", string(gb), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var rest struct {
		Result struct {
			Groups []struct {
				ID   int `json:"id"`
				Hits []struct {
					ID    uint64  `json:"id"`
					Score float32 `json:"score"`
				} `json:"hits"`
			} `json:"groups"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &rest))
	require.Len(t, rest.Result.Groups, 3, "%s", res.Body)
	require.Len(t, groups.GetResult().GetGroups(), 3)
	for i, g := range groups.GetResult().GetGroups() {
		require.Equal(t, uint64(rest.Result.Groups[i].ID), g.GetId().GetUnsignedValue(), "group %d", i)
		require.Len(t, g.GetHits(), len(rest.Result.Groups[i].Hits))
		for j, h := range g.GetHits() {
			require.Equal(t, rest.Result.Groups[i].Hits[j].ID, h.GetId().GetNum())
			require.Equal(t, rest.Result.Groups[i].Hits[j].Score, h.GetScore())
		}
	}
}

// TestQueryPrefetchDegraded: a fused query missing a shard says so in
// the trailer and counts once.
func TestQueryPrefetchDegraded(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	e.StopShard("shard-1")
	searches := map[string]string{"path": "search", "collection": "trawl"}
	d0 := counter(t, e, "trawl_scatter_degraded_total", searches)
	q0 := counter(t, e, "trawl_scatter_queries_total", searches)
	var tr metadata.MD
	res, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(unit(2)), Limit: new(uint64(5)),
		Prefetch: []*pb.PrefetchQuery{{Query: fusionQuery(pb.Fusion_RRF), Limit: new(uint64(20)),
			Prefetch: []*pb.PrefetchQuery{{Query: nearest(unit(0))}, {Query: nearest(unit(1))}}}}}, grpc.Trailer(&tr))
	require.NoError(t, err)
	require.NotEmpty(t, res.GetResult())
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))
	require.Equal(t, d0+1, counter(t, e, "trawl_scatter_degraded_total", searches))
	require.Equal(t, q0+1, counter(t, e, "trawl_scatter_queries_total", searches))
}
