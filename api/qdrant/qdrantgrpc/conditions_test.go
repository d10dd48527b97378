package qdrantgrpc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

func object(fields map[string]*pb.Value) *pb.Value {
	return &pb.Value{Kind: &pb.Value_StructValue{StructValue: &pb.Struct{Fields: fields}}}
}

func list(vs ...*pb.Value) *pb.Value {
	return &pb.Value{Kind: &pb.Value_ListValue{ListValue: &pb.ListValue{Values: vs}}}
}

func boolean(b bool) *pb.Value { return &pb.Value{Kind: &pb.Value_BoolValue{BoolValue: b}} }

func fieldCond(fc *pb.FieldCondition) *pb.Condition {
	return &pb.Condition{ConditionOneOf: &pb.Condition_Field{Field: fc}}
}

// TestFilterConditions: the conditions beyond match and range, over gRPC
// end to end, on points whose payloads hold an array of objects (written
// and read back through Struct values), datetimes and geo points.
func TestFilterConditions(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	diet := func(meatLiked bool) *pb.Value {
		return list(object(map[string]*pb.Value{"food": str("leaves"), "likes": boolean(!meatLiked)}),
			object(map[string]*pb.Value{"food": str("meat"), "likes": boolean(meatLiked)}))
	}
	geo := func(lon, lat float64) *pb.Value {
		return object(map[string]*pb.Value{"lon": {Kind: &pb.Value_DoubleValue{DoubleValue: lon}}, "lat": {Kind: &pb.Value_DoubleValue{DoubleValue: lat}}})
	}
	_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "trawl", Points: []*pb.PointStruct{
		{Id: num(11), Vectors: dense(unit(0)), Payload: map[string]*pb.Value{"suite": str("conds"), "diet": diet(true),
			"date": str("2023-02-08T10:49:00Z"), "location": geo(52.5, 13.43), "description": str("good cheap food")}},
		{Id: num(12), Vectors: dense(unit(1)), Payload: map[string]*pb.Value{"suite": str("conds"), "diet": diet(false),
			"date": str("2024-01-31 10:14:31"), "location": geo(52.520711, 13.403683), "description": str("cheap and good")}},
		{Id: uuid(strings.ToUpper(uuidA)), Vectors: dense(unit(2)), Payload: map[string]*pb.Value{"suite": str("conds")}},
	}})
	require.NoError(t, err)
	got, err := cl.p.Get(call(t), &pb.GetPoints{CollectionName: "trawl", Ids: []*pb.PointId{num(11)}, WithPayload: withPayload()})
	require.NoError(t, err)
	require.Equal(t, "meat", got.GetResult()[0].GetPayload()["diet"].GetListValue().GetValues()[1].GetStructValue().GetFields()["food"].GetStringValue())

	date := func(s string) *timestamppb.Timestamp {
		tt, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return timestamppb.New(tt)
	}
	for _, tc := range []struct {
		name string
		cond *pb.Condition
		want uint64
	}{
		{"has_id", &pb.Condition{ConditionOneOf: &pb.Condition_HasId{HasId: &pb.HasIdCondition{HasId: []*pb.PointId{num(11), uuid(uuidA), num(404)}}}}, 2},
		{"nested", &pb.Condition{ConditionOneOf: &pb.Condition_Nested{Nested: &pb.NestedCondition{Key: "diet", Filter: &pb.Filter{Must: []*pb.Condition{
			keyword("food", "meat"), fieldCond(&pb.FieldCondition{Key: "likes", Match: &pb.Match{MatchValue: &pb.Match_Boolean{Boolean: true}}})}}}}}, 1},
		{"datetime_range", fieldCond(&pb.FieldCondition{Key: "date", DatetimeRange: &pb.DatetimeRange{Gt: date("2023-02-08T10:49:00Z"), Lte: date("2024-01-31T10:14:31Z")}}), 1},
		{"text", fieldCond(&pb.FieldCondition{Key: "description", Match: &pb.Match{MatchValue: &pb.Match_Text{Text: "good cheap"}}}), 1},
		{"geo_radius", fieldCond(&pb.FieldCondition{Key: "location", GeoRadius: &pb.GeoRadius{Center: &pb.GeoPoint{Lon: 52.520711, Lat: 13.403683}, Radius: 1000}}), 1},
		{"geo_bounding_box", fieldCond(&pb.FieldCondition{Key: "location", GeoBoundingBox: &pb.GeoBoundingBox{
			TopLeft: &pb.GeoPoint{Lon: 52.495862, Lat: 13.455868}, BottomRight: &pb.GeoPoint{Lon: 52.520711, Lat: 13.403683}}}), 1},
		{"is_empty", fieldCond(&pb.FieldCondition{Key: "diet", IsEmpty: new(true)}), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: &pb.Filter{Must: []*pb.Condition{keyword("suite", "conds"), tc.cond}}})
			require.NoError(t, err)
			require.Equal(t, tc.want, n.GetResult().GetCount())
		})
	}
	n, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: &pb.Filter{Must: []*pb.Condition{keyword("suite", "conds")},
		MinShould: &pb.MinShould{Conditions: []*pb.Condition{keyword("description", "cheap and good"),
			{ConditionOneOf: &pb.Condition_HasId{HasId: &pb.HasIdCondition{HasId: []*pb.PointId{num(12)}}}}}, MinCount: 2}}})
	require.NoError(t, err)
	require.Equal(t, uint64(1), n.GetResult().GetCount())
}
