package qdrantgrpc_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/api/qdrant/qdrantgrpc"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// clients are the three Qdrant services over one connection.
type clients struct {
	q pb.QdrantClient
	c pb.CollectionsClient
	p pb.PointsClient
}

func dial(e *apitest.Env) clients {
	cc := e.GRPC()
	return clients{q: pb.NewQdrantClient(cc), c: pb.NewCollectionsClient(cc), p: pb.NewPointsClient(cc)}
}

// call is a context for one call: a 2 s gRPC deadline, as a client sets
// it (the query's deadline), and the optional metadata.
func call(t *testing.T, md ...string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	return ctx
}

func num(n uint64) *pb.PointId  { return &pb.PointId{PointIdOptions: &pb.PointId_Num{Num: n}} }
func uuid(s string) *pb.PointId { return &pb.PointId{PointIdOptions: &pb.PointId_Uuid{Uuid: s}} }

func dense(v []float32) *pb.Vectors {
	return &pb.Vectors{VectorsOptions: &pb.Vectors_Vector{Vector: &pb.Vector{Vector: &pb.Vector_Dense{Dense: &pb.DenseVector{Data: v}}}}}
}

func nearest(v []float32) *pb.Query {
	return &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{Variant: &pb.VectorInput_Dense{Dense: &pb.DenseVector{Data: v}}}}}
}

func str(s string) *pb.Value    { return &pb.Value{Kind: &pb.Value_StringValue{StringValue: s}} }
func integer(n int64) *pb.Value { return &pb.Value{Kind: &pb.Value_IntegerValue{IntegerValue: n}} }

func keyword(key, v string) *pb.Condition {
	return &pb.Condition{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: key,
		Match: &pb.Match{MatchValue: &pb.Match_Keyword{Keyword: v}}}}}
}

func gte(key string, x float64) *pb.Condition {
	return &pb.Condition{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: key, Range: &pb.Range{Gte: &x}}}}
}

func unit(i int) []float32 {
	v := make([]float32, apitest.Dim)
	v[i] = 1
	return v
}

func withPayload() *pb.WithPayloadSelector {
	return &pb.WithPayloadSelector{SelectorOptions: &pb.WithPayloadSelector_Enable{Enable: true}}
}

// idText is a PointId as the REST routes write it in JSON.
func idText(p *pb.PointId) string {
	if u, ok := p.GetPointIdOptions().(*pb.PointId_Uuid); ok {
		return `"` + u.Uuid + `"`
	}
	return strconv.FormatUint(p.GetNum(), 10)
}

const uuidA = "8a1e0c4a-7b4f-4c1e-9d2a-0123456789ab"

// seed upserts three points through gRPC: two integer ids and a UUID (in
// upper case: stored canonical), on basis vectors.
func seed(t *testing.T, cl clients) {
	t.Helper()
	res, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "trawl", Points: []*pb.PointStruct{
		{Id: num(1), Vectors: dense(unit(0)), Payload: map[string]*pb.Value{"suite": str("grpc"), "color": str("red"), "n": integer(1)}},
		{Id: num(2), Vectors: dense(unit(1)), Payload: map[string]*pb.Value{"suite": str("grpc"), "color": str("blue"), "n": integer(2),
			"w": {Kind: &pb.Value_DoubleValue{DoubleValue: 3}}}},
		{Id: uuid(strings.ToUpper(uuidA)), Vectors: dense(unit(2)), Payload: map[string]*pb.Value{"suite": str("grpc"), "color": str("red"), "n": integer(3)}},
	}})
	require.NoError(t, err)
	require.Equal(t, pb.UpdateStatus_Completed, res.GetResult().GetStatus())
}

func TestHealthCheck(t *testing.T) {
	e := apitest.NewFake(t, apitest.FakeConfig{})
	cl := dial(e)
	res, err := cl.q.HealthCheck(call(t), &pb.HealthCheckRequest{})
	require.NoError(t, err)
	require.Equal(t, qdrantgrpc.Version, res.GetVersion())
	require.Contains(t, res.GetTitle(), "trawl")
}

// TestPoints drives the Points calls a Qdrant application makes and
// checks each answer exactly: what was written reads back, queries agree
// with the REST routes' answers to the same queries and with a brute
// force, and every fan-out says in its trailer that it is complete.
func TestPoints(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	seed(t, cl)
	suite := &pb.Filter{Must: []*pb.Condition{keyword("suite", "grpc")}}
	red := &pb.Filter{Must: []*pb.Condition{keyword("suite", "grpc"), keyword("color", "red")}}

	// Query by a vector with a filter: the two red points, best first,
	// payloads as written (3.0 stays a double).
	var trailer metadata.MD
	res, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(unit(0)), Filter: red, WithPayload: withPayload(),
		Limit: new(uint64(5))}, grpc.Trailer(&trailer))
	require.NoError(t, err)
	require.Len(t, res.GetResult(), 2)
	require.Equal(t, uint64(1), res.GetResult()[0].GetId().GetNum())
	require.InDelta(t, 1, res.GetResult()[0].GetScore(), 1e-6)
	require.Equal(t, uuidA, res.GetResult()[1].GetId().GetUuid())
	require.Equal(t, "red", res.GetResult()[0].GetPayload()["color"].GetStringValue())
	require.Equal(t, int64(1), res.GetResult()[0].GetPayload()["n"].GetIntegerValue())
	require.Equal(t, []string{"false"}, trailer.Get(qdrantgrpc.DegradedKey))
	// The client's 2 s deadline is the query's, less what the call spent
	// on its way.
	require.Len(t, trailer.Get(qdrantgrpc.DeadlineKey), 1)
	ms, err := strconv.Atoi(trailer.Get(qdrantgrpc.DeadlineKey)[0])
	require.NoError(t, err)
	require.True(t, ms > 1500 && ms <= 2000, "deadline %d ms", ms)
	require.Empty(t, trailer.Get(qdrantgrpc.UnavailableKey))

	got, err := cl.p.Get(call(t), &pb.GetPoints{CollectionName: "trawl", Ids: []*pb.PointId{num(2), uuid(uuidA), num(404), num(2)},
		WithVectors: &pb.WithVectorsSelector{SelectorOptions: &pb.WithVectorsSelector_Enable{Enable: true}}})
	require.NoError(t, err)
	require.Len(t, got.GetResult(), 2)
	require.Equal(t, uint64(2), got.GetResult()[0].GetId().GetNum())
	require.Equal(t, unit(1), got.GetResult()[0].GetVectors().GetVector().GetDense().GetData())
	require.Equal(t, 3.0, got.GetResult()[0].GetPayload()["w"].GetDoubleValue())
	require.IsType(t, &pb.Value_DoubleValue{}, got.GetResult()[0].GetPayload()["w"].GetKind(), "3.0 stays a double")
	require.Equal(t, uuidA, got.GetResult()[1].GetId().GetUuid())

	n, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: suite})
	require.NoError(t, err)
	require.Equal(t, uint64(3), n.GetResult().GetCount())
	all, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl"})
	require.NoError(t, err)
	require.Equal(t, uint64(303), all.GetResult().GetCount())
	// values_count: a missing key counts zero values, a scalar one.
	for _, tc := range []struct {
		count *pb.ValuesCount
		want  uint64
	}{{&pb.ValuesCount{Gte: new(uint64(1))}, 1}, {&pb.ValuesCount{Lt: new(uint64(1))}, 2}, {&pb.ValuesCount{Gt: new(uint64(1))}, 0}} {
		f := &pb.Filter{Must: []*pb.Condition{keyword("suite", "grpc"),
			{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "w", ValuesCount: tc.count}}}}}
		n, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: f})
		require.NoError(t, err)
		require.Equal(t, tc.want, n.GetResult().GetCount(), "values_count %v", tc.count)
	}

	// Scroll to the end, 50 a page: every point once, in id order.
	var seen []string
	var offset *pb.PointId
	for pages := 0; ; pages++ {
		require.Less(t, pages, 20)
		page, err := cl.p.Scroll(call(t), &pb.ScrollPoints{CollectionName: "trawl", Limit: new(uint32(50)), Offset: offset,
			WithPayload: &pb.WithPayloadSelector{SelectorOptions: &pb.WithPayloadSelector_Enable{Enable: false}}})
		require.NoError(t, err)
		for _, p := range page.GetResult() {
			require.Nil(t, p.GetPayload())
			seen = append(seen, p.GetId().String())
		}
		if offset = page.GetNextPageOffset(); offset == nil {
			break
		}
	}
	require.Len(t, seen, 303)
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(seen))), 303)

	// Queries agree with the REST routes' answers to the same queries,
	// score for score, and a batch with its single queries.
	queries := [][]float32{unit(0), unit(3), {0.3, -0.2, 0.9, 0.1, 0, 0.5, -0.7, 0.2}, {-1, 1, -1, 1, -1, 1, -1, 1}}
	batch := &pb.QueryBatchPoints{CollectionName: "trawl"}
	for _, q := range queries {
		batch.QueryPoints = append(batch.QueryPoints, &pb.QueryPoints{CollectionName: "trawl", Query: nearest(q), Limit: new(uint64(10))})
	}
	br, err := cl.p.QueryBatch(call(t), batch)
	require.NoError(t, err)
	require.Len(t, br.GetResult(), len(queries))
	for i, q := range queries {
		one, err := cl.p.Query(call(t), batch.QueryPoints[i])
		require.NoError(t, err)
		require.Len(t, one.GetResult(), 10)
		rest := e.Post("/collections/trawl/points/query?deadline_ms=2000", map[string]any{"query": q, "limit": 10})
		require.Equal(t, http.StatusOK, rest.Status, "%s", rest.Body)
		var body struct {
			Result struct {
				Points []struct {
					ID    json.RawMessage `json:"id"`
					Score float32         `json:"score"`
				} `json:"points"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(rest.Body, &body))
		require.Len(t, body.Result.Points, 10)
		for j, h := range one.GetResult() {
			require.Equal(t, string(body.Result.Points[j].ID), idText(h.GetId()), "query %d hit %d", i, j)
			require.Equal(t, body.Result.Points[j].Score, h.GetScore(), "query %d hit %d", i, j)
			require.Equal(t, h.GetId().String(), br.GetResult()[i].GetResult()[j].GetId().String())
		}
	}

	// The filtered answer is the brute force over the corpus and the
	// seeded points: lang en and year >= 2015, cosine, ties by id.
	q := []float32{0.3, -0.2, 0.9, 0.1, 0, 0.5, -0.7, 0.2}
	f := &pb.Filter{Must: []*pb.Condition{keyword("lang", "en"), gte("year", 2015)}}
	sr, err := cl.p.Search(call(t), &pb.SearchPoints{CollectionName: "trawl", Vector: q, Filter: f, Limit: 7})
	require.NoError(t, err)
	type scored struct {
		id    string
		score float64
	}
	var want []scored
	for _, d := range e.DC.Corpus {
		var p struct {
			Lang string `json:"lang"`
			Year int    `json:"year"`
		}
		require.NoError(t, json.Unmarshal(d.Payload, &p))
		if p.Lang == "en" && p.Year >= 2015 {
			want = append(want, scored{d.ID, cosine(q, d.Vector)})
		}
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].score != want[j].score {
			return want[i].score > want[j].score
		}
		return want[i].id < want[j].id
	})
	require.Len(t, sr.GetResult(), 7)
	for i, h := range sr.GetResult() {
		require.Equal(t, want[i].id, h.GetId().GetUuid(), "hit %d", i)
		require.InDelta(t, want[i].score, h.GetScore(), 1e-5, "hit %d", i)
	}

	// Offset skips the best hits; a threshold keeps only good ones.
	off, err := cl.p.Search(call(t), &pb.SearchPoints{CollectionName: "trawl", Vector: q, Filter: f, Limit: 3, Offset: new(uint64(4))})
	require.NoError(t, err)
	for i, h := range off.GetResult() {
		require.Equal(t, want[4+i].id, h.GetId().GetUuid())
	}
	sb, err := cl.p.SearchBatch(call(t), &pb.SearchBatchPoints{CollectionName: "trawl", SearchPoints: []*pb.SearchPoints{
		{Vector: unit(0), Filter: suite, Limit: 3, ScoreThreshold: new(float32(0.5))},
		{Vector: unit(1), Filter: suite, Limit: 1}}})
	require.NoError(t, err)
	require.Len(t, sb.GetResult()[0].GetResult(), 1)
	require.Equal(t, uint64(2), sb.GetResult()[1].GetResult()[0].GetId().GetNum())

	// Query by a stored point's id: that point left out.
	byID, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Filter: suite, Limit: new(uint64(5)),
		Query: &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{Variant: &pb.VectorInput_Id{Id: num(1)}}}}})
	require.NoError(t, err)
	require.Len(t, byID.GetResult(), 2)
	for _, h := range byID.GetResult() {
		require.NotEqual(t, uint64(1), h.GetId().GetNum())
	}

	// Delete by filter, then by ids: gone from counts and reads.
	_, err = cl.p.Delete(call(t), &pb.DeletePoints{CollectionName: "trawl", Points: &pb.PointsSelector{
		PointsSelectorOneOf: &pb.PointsSelector_Filter{Filter: red}}})
	require.NoError(t, err)
	n, err = cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: suite})
	require.NoError(t, err)
	require.Equal(t, uint64(1), n.GetResult().GetCount())
	_, err = cl.p.Delete(call(t), &pb.DeletePoints{CollectionName: "trawl", Points: &pb.PointsSelector{
		PointsSelectorOneOf: &pb.PointsSelector_Points{Points: &pb.PointsIdsList{Ids: []*pb.PointId{num(2)}}}}})
	require.NoError(t, err)
	got, err = cl.p.Get(call(t), &pb.GetPoints{CollectionName: "trawl", Ids: []*pb.PointId{num(1), num(2), uuid(uuidA)}})
	require.NoError(t, err)
	require.Empty(t, got.GetResult())
}

func cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}

// codeOf is a call's status code and message.
func codeOf(err error) (codes.Code, string) {
	st, _ := status.FromError(err)
	return st.Code(), st.Message()
}
