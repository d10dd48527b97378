package qdrantgrpc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/filter"
)

func field(fc *pb.FieldCondition) *pb.Condition {
	return &pb.Condition{ConditionOneOf: &pb.Condition_Field{Field: fc}}
}

func kw(key, v string) *pb.Condition {
	return field(&pb.FieldCondition{Key: key, Match: &pb.Match{MatchValue: &pb.Match_Keyword{Keyword: v}}})
}

func ring(pts ...float64) *pb.GeoLineString {
	r := &pb.GeoLineString{}
	for i := 0; i < len(pts); i += 2 {
		r.Points = append(r.Points, &pb.GeoPoint{Lon: pts[i], Lat: pts[i+1]})
	}
	return r
}

// TestDecodeFilterAsREST: each condition served over gRPC decodes to the
// filter its REST spelling parses to, so both transports answer alike.
func TestDecodeFilterAsREST(t *testing.T) {
	ts := func(s string) *timestamppb.Timestamp {
		tt, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return timestamppb.New(tt)
	}
	for _, tc := range []struct {
		name string
		pb   *pb.Filter
		rest string
	}{
		{"is_empty and is_null", &pb.Filter{Must: []*pb.Condition{
			{ConditionOneOf: &pb.Condition_IsEmpty{IsEmpty: &pb.IsEmptyCondition{Key: "a"}}},
			{ConditionOneOf: &pb.Condition_IsNull{IsNull: &pb.IsNullCondition{Key: "b"}}},
			field(&pb.FieldCondition{Key: "c", IsEmpty: new(true)})}},
			`{"must": [{"is_empty": {"key": "a"}}, {"is_null": {"key": "b"}}, {"is_empty": {"key": "c"}}]}`},
		{"has_id", &pb.Filter{Should: []*pb.Condition{{ConditionOneOf: &pb.Condition_HasId{HasId: &pb.HasIdCondition{HasId: []*pb.PointId{
			{PointIdOptions: &pb.PointId_Num{Num: 7}}, {PointIdOptions: &pb.PointId_Uuid{Uuid: "550E8400E29B41D4A716446655440000"}}}}}}}},
			`{"should": {"has_id": [7, "550e8400-e29b-41d4-a716-446655440000"]}}`},
		{"except", &pb.Filter{MustNot: []*pb.Condition{
			field(&pb.FieldCondition{Key: "c", Match: &pb.Match{MatchValue: &pb.Match_ExceptKeywords{ExceptKeywords: &pb.RepeatedStrings{Strings: []string{"black", "yellow"}}}}}),
			field(&pb.FieldCondition{Key: "n", Match: &pb.Match{MatchValue: &pb.Match_ExceptIntegers{ExceptIntegers: &pb.RepeatedIntegers{Integers: []int64{1, -2}}}}})}},
			`{"must_not": [{"key": "c", "match": {"except": ["black", "yellow"]}}, {"key": "n", "match": {"except": [1, -2]}}]}`},
		{"datetime range", &pb.Filter{Must: []*pb.Condition{field(&pb.FieldCondition{Key: "date", DatetimeRange: &pb.DatetimeRange{
			Gt: ts("2023-02-08T10:49:00Z"), Lte: ts("2024-01-31T10:14:31.5+01:00")}})}},
			`{"must": {"key": "date", "range": {"gt": "2023-02-08T10:49:00Z", "lte": "2024-01-31 09:14:31.5"}}}`},
		{"nested", &pb.Filter{Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_Nested{Nested: &pb.NestedCondition{Key: "diet",
			Filter: &pb.Filter{Must: []*pb.Condition{kw("food", "meat"), field(&pb.FieldCondition{Key: "likes", Match: &pb.Match{MatchValue: &pb.Match_Boolean{Boolean: true}}})}}}}}}},
			`{"must": {"nested": {"key": "diet", "filter": {"must": [{"key": "food", "match": {"value": "meat"}}, {"key": "likes", "match": {"value": true}}]}}}}`},
		{"min_should", &pb.Filter{Must: []*pb.Condition{kw("a", "b")}, MinShould: &pb.MinShould{Conditions: []*pb.Condition{kw("city", "London"), kw("color", "red")}, MinCount: 2}},
			`{"must": {"key": "a", "match": {"value": "b"}}, "min_should": {"conditions": [{"key": "city", "match": {"value": "London"}}, {"key": "color", "match": {"value": "red"}}], "min_count": 2}}`},
		{"text", &pb.Filter{Should: []*pb.Condition{
			field(&pb.FieldCondition{Key: "d", Match: &pb.Match{MatchValue: &pb.Match_Text{Text: "good cheap"}}}),
			field(&pb.FieldCondition{Key: "d", Match: &pb.Match{MatchValue: &pb.Match_Phrase{Phrase: "good cheap"}}}),
			field(&pb.FieldCondition{Key: "d", Match: &pb.Match{MatchValue: &pb.Match_TextAny{TextAny: "good cheap"}}})}},
			`{"should": [{"key": "d", "match": {"text": "good cheap"}}, {"key": "d", "match": {"phrase": "good cheap"}}, {"key": "d", "match": {"text_any": "good cheap"}}]}`},
		{"geo", &pb.Filter{Must: []*pb.Condition{
			field(&pb.FieldCondition{Key: "l", GeoRadius: &pb.GeoRadius{Center: &pb.GeoPoint{Lon: 52.520711, Lat: 13.403683}, Radius: 1000}}),
			field(&pb.FieldCondition{Key: "l", GeoBoundingBox: &pb.GeoBoundingBox{TopLeft: &pb.GeoPoint{Lon: 52.495862, Lat: 13.455868}, BottomRight: &pb.GeoPoint{Lon: 52.520711, Lat: 13.403683}}}),
			field(&pb.FieldCondition{Key: "l", GeoPolygon: &pb.GeoPolygon{Exterior: ring(-70, -70, 60, -70, 60, 60, -70, 60, -70, -70),
				Interiors: []*pb.GeoLineString{ring(-65, -65, 0, -65, 0, 0, -65, 0, -65, -65)}}})}},
			`{"must": [{"key": "l", "geo_radius": {"center": {"lon": 52.520711, "lat": 13.403683}, "radius": 1000.0}},
			 {"key": "l", "geo_bounding_box": {"top_left": {"lon": 52.495862, "lat": 13.455868}, "bottom_right": {"lon": 52.520711, "lat": 13.403683}}},
			 {"key": "l", "geo_polygon": {"exterior": {"points": [{"lon": -70, "lat": -70}, {"lon": 60, "lat": -70}, {"lon": 60, "lat": 60}, {"lon": -70, "lat": 60}, {"lon": -70, "lat": -70}]},
			  "interiors": [{"points": [{"lon": -65, "lat": -65}, {"lon": 0, "lat": -65}, {"lon": 0, "lat": 0}, {"lon": -65, "lat": 0}, {"lon": -65, "lat": -65}]}]}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeFilter(tc.pb)
			require.NoError(t, err)
			want, err := filter.Parse([]byte(tc.rest))
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// TestDecodeFilterRefusesNamingTheMember: malformed new conditions are
// InvalidArgument naming the place, as over REST.
func TestDecodeFilterRefusesNamingTheMember(t *testing.T) {
	for _, tc := range []struct {
		name string
		pb   *pb.Filter
		want string
	}{
		{"nested without filter", &pb.Filter{Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_Nested{Nested: &pb.NestedCondition{Key: "a"}}}}},
			"filter.must[0].nested.filter: is missing"},
		{"has_id in nested", &pb.Filter{Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_Nested{Nested: &pb.NestedCondition{Key: "a",
			Filter: &pb.Filter{Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_HasId{HasId: &pb.HasIdCondition{}}}}}}}}}},
			"filter.must[0].nested.filter: has a has_id condition; inside nested, conditions test the array's elements, which have no ids"},
		{"has_id without id", &pb.Filter{Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_HasId{HasId: &pb.HasIdCondition{HasId: []*pb.PointId{{}}}}}}},
			"filter.must[0].has_id[0] is missing: want num or uuid"},
		{"range and datetime_range", &pb.Filter{Must: []*pb.Condition{field(&pb.FieldCondition{Key: "d", Range: &pb.Range{Gt: new(1.0)},
			DatetimeRange: &pb.DatetimeRange{Gt: timestamppb.Now()}})}}, "filter.must[0]: has range and datetime_range; give one"},
		{"empty datetime_range", &pb.Filter{Must: []*pb.Condition{field(&pb.FieldCondition{Key: "d", DatetimeRange: &pb.DatetimeRange{}})}},
			"filter.must[0].range: needs at least one of gt, gte, lt, lte"},
		{"bad timestamp", &pb.Filter{Must: []*pb.Condition{field(&pb.FieldCondition{Key: "d", DatetimeRange: &pb.DatetimeRange{Lt: &timestamppb.Timestamp{Nanos: -1}}})}},
			"filter.must[0].datetime_range.lt: is not a valid timestamp: want seconds within years 1 to 9999 and nanos within 0 to 999999999"},
		{"radius without center", &pb.Filter{Must: []*pb.Condition{field(&pb.FieldCondition{Key: "l", GeoRadius: &pb.GeoRadius{Radius: 1}})}},
			`filter.must[0].geo_radius.center: is null, want {"lon": ..., "lat": ...}`},
		{"latitude out of range", &pb.Filter{Must: []*pb.Condition{field(&pb.FieldCondition{Key: "l", GeoBoundingBox: &pb.GeoBoundingBox{
			TopLeft: &pb.GeoPoint{Lat: 100}, BottomRight: &pb.GeoPoint{}}})}}, "filter.must[0].geo_bounding_box.top_left.lat: is 100, want a number within [-90, 90]"},
		{"polygon without exterior", &pb.Filter{Must: []*pb.Condition{field(&pb.FieldCondition{Key: "l", GeoPolygon: &pb.GeoPolygon{}})}},
			"filter.must[0].geo_polygon.exterior.points: has 0 points; a polygon ring has at least 4, the last the first"},
		{"min_count 0", &pb.Filter{MinShould: &pb.MinShould{Conditions: []*pb.Condition{kw("a", "b")}}},
			"filter.min_should.min_count: is 0, want a whole number of conditions, 1 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeFilter(tc.pb)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
