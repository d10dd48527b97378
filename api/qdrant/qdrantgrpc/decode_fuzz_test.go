package qdrantgrpc

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-search/trawl/api/internal/wire"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/vector"
)

// FuzzDecode feeds arbitrary bytes, as the wire would, to every request
// decoder: a message that unmarshals is either decoded or refused with a
// *wire.Error (InvalidArgument), never a panic or another kind of error;
// a decoded query's vector always fits the collection.
func FuzzDecode(f *testing.F) {
	sch := coordinator.Schema{Dim: 4, Metric: vector.Cosine}
	x := 1.5
	for _, m := range []proto.Message{
		&pb.QueryPoints{CollectionName: "c", Query: &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{Variant: &pb.VectorInput_Dense{Dense: &pb.DenseVector{Data: []float32{1, 2, 3, 4}}}}}},
			Filter: &pb.Filter{Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "a.b", Range: &pb.Range{Gte: &x}}}}},
				Should: []*pb.Condition{{ConditionOneOf: &pb.Condition_Filter{Filter: &pb.Filter{MustNot: []*pb.Condition{{ConditionOneOf: &pb.Condition_IsNull{IsNull: &pb.IsNullCondition{Key: "k"}}}}}}}}}},
		// A prefetch tree: a fusion of a leaf and a re-scored fusion.
		&pb.QueryPoints{CollectionName: "c", Query: &pb.Query{Variant: &pb.Query_Fusion{Fusion: pb.Fusion_DBSF}}, Prefetch: []*pb.PrefetchQuery{
			{Query: &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{Variant: &pb.VectorInput_Dense{Dense: &pb.DenseVector{Data: []float32{1, 2, 3, 4}}}}}}},
			{Query: &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{Variant: &pb.VectorInput_Id{Id: &pb.PointId{PointIdOptions: &pb.PointId_Num{Num: 3}}}}}},
				Prefetch: []*pb.PrefetchQuery{{Query: &pb.Query{Variant: &pb.Query_Rrf{Rrf: &pb.Rrf{K: new(uint32(60))}}}, Prefetch: []*pb.PrefetchQuery{
					{Query: &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{Variant: &pb.VectorInput_Dense{Dense: &pb.DenseVector{Data: []float32{0, 1, 0, 0}}}}}}}}}}}}},
		// The conditions written to their REST JSON: has_id, nested,
		// min_should, datetime, text and geo.
		&pb.SearchPoints{CollectionName: "c", Vector: []float32{1, 0, 0, 0}, Limit: 3, Filter: &pb.Filter{
			Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_HasId{HasId: &pb.HasIdCondition{HasId: []*pb.PointId{{PointIdOptions: &pb.PointId_Num{Num: 7}}}}}},
				{ConditionOneOf: &pb.Condition_Nested{Nested: &pb.NestedCondition{Key: "arr", Filter: &pb.Filter{Must: []*pb.Condition{
					{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "t", Match: &pb.Match{MatchValue: &pb.Match_Text{Text: "go"}}}}}}}}}},
				{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "d", DatetimeRange: &pb.DatetimeRange{Gt: &timestamppb.Timestamp{Seconds: 1700000000}}}}},
				{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "g", GeoRadius: &pb.GeoRadius{Center: &pb.GeoPoint{Lon: 1, Lat: 2}, Radius: 3}}}},
				{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "g", GeoPolygon: &pb.GeoPolygon{Exterior: &pb.GeoLineString{Points: []*pb.GeoPoint{
					{Lon: 0, Lat: 0}, {Lon: 1, Lat: 0}, {Lon: 1, Lat: 1}, {Lon: 0, Lat: 0}}}}}}}},
			MinShould: &pb.MinShould{Conditions: []*pb.Condition{{ConditionOneOf: &pb.Condition_IsEmpty{IsEmpty: &pb.IsEmptyCondition{Key: "e"}}}}, MinCount: 1}}},
		&pb.SearchPoints{CollectionName: "c", Vector: []float32{1, 0, 0, 0}, Limit: 3, WithPayload: &pb.WithPayloadSelector{SelectorOptions: &pb.WithPayloadSelector_Include{Include: &pb.PayloadIncludeSelector{Fields: []string{"a"}}}}},
		&pb.UpsertPoints{CollectionName: "c", Points: []*pb.PointStruct{{Id: &pb.PointId{PointIdOptions: &pb.PointId_Num{Num: 7}},
			Vectors: &pb.Vectors{VectorsOptions: &pb.Vectors_Vector{Vector: &pb.Vector{Data: []float32{1, 2, 3, 4}}}},
			Payload: map[string]*pb.Value{"a": {Kind: &pb.Value_ListValue{ListValue: &pb.ListValue{Values: []*pb.Value{{Kind: &pb.Value_DoubleValue{DoubleValue: 2}}}}}}}}}},
		&pb.ScrollPoints{CollectionName: "c", Offset: &pb.PointId{PointIdOptions: &pb.PointId_Uuid{Uuid: "8a1e0c4a7b4f4c1e9d2a0123456789ab"}}},
		&pb.DeletePoints{CollectionName: "c", Points: &pb.PointsSelector{PointsSelectorOneOf: &pb.PointsSelector_Filter{Filter: &pb.Filter{}}}},
		&pb.SetPayloadPoints{CollectionName: "c", Payload: map[string]*pb.Value{"a": {Kind: &pb.Value_StringValue{StringValue: "x"}}},
			PointsSelector: &pb.PointsSelector{PointsSelectorOneOf: &pb.PointsSelector_Points{Points: &pb.PointsIdsList{Ids: []*pb.PointId{{PointIdOptions: &pb.PointId_Num{Num: 7}}}}}},
			Key:            new("m.n")},
		&pb.UpdatePointVectors{CollectionName: "c", Points: []*pb.PointVectors{{Id: &pb.PointId{PointIdOptions: &pb.PointId_Num{Num: 7}},
			Vectors: &pb.Vectors{VectorsOptions: &pb.Vectors_Vector{Vector: &pb.Vector{Data: []float32{1, 2, 3, 4}}}}}}},
		&pb.UpdateBatchPoints{CollectionName: "c", Operations: []*pb.PointsUpdateOperation{
			{Operation: &pb.PointsUpdateOperation_DeletePayload_{DeletePayload: &pb.PointsUpdateOperation_DeletePayload{Keys: []string{"a"},
				PointsSelector: &pb.PointsSelector{PointsSelectorOneOf: &pb.PointsSelector_Filter{Filter: &pb.Filter{}}}}}},
			{Operation: &pb.PointsUpdateOperation_ClearPayload_{ClearPayload: &pb.PointsUpdateOperation_ClearPayload{
				Points: &pb.PointsSelector{PointsSelectorOneOf: &pb.PointsSelector_Points{Points: &pb.PointsIdsList{}}}}}}}},
		&pb.CreateCollection{CollectionName: "c", VectorsConfig: &pb.VectorsConfig{Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 4, Distance: pb.Distance_Dot}}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(what string, err error) {
			var we *wire.Error
			if err != nil && !errors.As(err, &we) {
				t.Fatalf("%s: %T %v is not a *wire.Error", what, err, err)
			}
		}
		var q pb.QueryPoints
		if proto.Unmarshal(b, &q) == nil {
			out, err := decodeQuery(&q, sch)
			check("query", err)
			if err == nil && out.tree != nil {
				requireRunnable(t, sch, out.tree, 0)
			} else if err == nil && out.q.LikeID == "" && out.q.Recommend == nil && len(out.q.Vector) != sch.Dim {
				t.Fatalf("query decoded a vector of %d, want %d", len(out.q.Vector), sch.Dim)
			}
		}
		var s pb.SearchPoints
		if proto.Unmarshal(b, &s) == nil {
			_, err := decodeSearch(&s, sch)
			check("search", err)
		}
		var u pb.UpsertPoints
		if proto.Unmarshal(b, &u) == nil {
			recs, err := decodeUpsert(&u, sch)
			check("upsert", err)
			for _, r := range recs {
				if len(r.Vector) != sch.Dim {
					t.Fatalf("upsert decoded a vector of %d, want %d", len(r.Vector), sch.Dim)
				}
			}
		}
		var sc pb.ScrollPoints
		if proto.Unmarshal(b, &sc) == nil {
			_, err := decodeScroll(&sc)
			check("scroll", err)
		}
		var d pb.DeletePoints
		if proto.Unmarshal(b, &d) == nil {
			rm, err := decodeDelete(&d)
			check("delete", err)
			if err == nil && rm.IDs == nil && rm.Filter.Empty() {
				t.Fatal("a delete of everything was decoded")
			}
		}
		var c pb.CreateCollection
		if proto.Unmarshal(b, &c) == nil {
			_, err := decodeCreate(&c)
			check("create", err)
		}
		var g pb.GetPoints
		if proto.Unmarshal(b, &g) == nil {
			_, err := decodeGet(&g)
			check("get", err)
		}
		edited := func(what string, es []coordinator.Edit, err error) {
			check(what, err)
			if err != nil {
				return
			}
			for _, e := range es {
				if len(e.IDs) == 0 && e.Filter.Empty() && len(e.Points) == 0 {
					t.Fatalf("%s: an edit of nothing, or of everything, was decoded", what)
				}
				for _, r := range e.Points {
					if len(r.Vector) != sch.Dim {
						t.Fatalf("%s decoded a vector of %d, want %d", what, len(r.Vector), sch.Dim)
					}
				}
			}
		}
		var sp pb.SetPayloadPoints
		if proto.Unmarshal(b, &sp) == nil {
			e, err := decodeSetPayload(sp.GetPayload(), sp.GetPointsSelector(), sp.Key, sp.ShardKeySelector, false)
			edited("set_payload", []coordinator.Edit{e}, err)
			e, err = decodeSetPayload(sp.GetPayload(), sp.GetPointsSelector(), sp.Key, sp.ShardKeySelector, true)
			edited("overwrite_payload", []coordinator.Edit{e}, err)
		}
		var dp pb.DeletePayloadPoints
		if proto.Unmarshal(b, &dp) == nil {
			e, err := decodeDeletePayload(dp.GetKeys(), dp.GetPointsSelector(), dp.ShardKeySelector)
			edited("delete_payload", []coordinator.Edit{e}, err)
		}
		var cp pb.ClearPayloadPoints
		if proto.Unmarshal(b, &cp) == nil {
			e, err := decodeSelected(coordinator.EditClearPayload, cp.GetPoints(), cp.ShardKeySelector, "points")
			edited("clear_payload", []coordinator.Edit{e}, err)
		}
		var uv pb.UpdatePointVectors
		if proto.Unmarshal(b, &uv) == nil {
			e, err := decodeUpdateVectors(uv.GetPoints(), uv.ShardKeySelector, uv.UpdateFilter, sch)
			edited("update_vectors", []coordinator.Edit{e}, err)
		}
		var ub pb.UpdateBatchPoints
		if proto.Unmarshal(b, &ub) == nil {
			es, err := decodeUpdateBatch(ub.GetOperations(), sch)
			edited("update_batch", es, err)
		}
	})
}

// TestStatusOfWrappedShardError: a coordinator error that wraps a shard's
// gRPC status is answered by the coordinator's code and message, never
// the shard's.
func TestStatusOfWrappedShardError(t *testing.T) {
	s := &server{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	shardErr := status.Error(codes.InvalidArgument, "shard says no")
	err := s.status(context.Background(), &coordinator.Error{Code: coordinator.CodeUnavailable, Msg: "shard-1 is unavailable", Err: shardErr})
	st, _ := status.FromError(err)
	if st.Code() != codes.Unavailable || st.Message() != "Service unavailable: shard-1 is unavailable" {
		t.Fatalf("got %v %q", st.Code(), st.Message())
	}
}

// requireRunnable checks a decoded tree is one the coordinator can run:
// limits in range, a vector of the collection's dimension (or an id, or
// a recommendation) on every stage but a fusion, prefetches under every
// fusion, nesting within Qdrant's limit.
func requireRunnable(t *testing.T, sch coordinator.Schema, st *coordinator.Stage, depth int) {
	t.Helper()
	q := st.Query
	switch {
	case depth > coordinator.MaxPrefetchDepth:
		t.Fatalf("%s: nested %d deep", st.Name, depth)
	case q.K < 1 || q.K > vector.MaxK:
		t.Fatalf("%s: limit %d accepted", st.Name, q.K)
	case st.Fusion != nil && len(st.Prefetch) == 0:
		t.Fatalf("%s: a fusion without prefetch accepted", st.Name)
	case st.Fusion == nil && len(q.Vector) != sch.Dim && q.LikeID == "" && q.Recommend == nil:
		t.Fatalf("%s: a query without a vector of %d dimensions accepted", st.Name, sch.Dim)
	}
	for i := range st.Prefetch {
		requireRunnable(t, sch, &st.Prefetch[i], depth+1)
	}
}
