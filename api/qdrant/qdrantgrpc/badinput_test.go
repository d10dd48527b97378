package qdrantgrpc_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// TestBadInput: every bad request gets Qdrant's status code and a
// message naming what is wrong, and none reaches a shard (the router
// records no shard RPC) or changes what is stored.
func TestBadInput(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	v := unit(0)
	badRange := &pb.Filter{Must: []*pb.Condition{{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "year", Range: &pb.Range{}}}}}}
	for _, tc := range []struct {
		name string
		do   func() error
		code codes.Code
		msg  string
	}{
		{"wrong size", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest([]float32{1, 2, 3})})
			return err
		}, codes.InvalidArgument, "Bad request: query: vector has 3 dimensions, want 8"},
		{"wrong size, search", func() error {
			_, err := cl.p.Search(call(t), &pb.SearchPoints{CollectionName: "trawl", Vector: []float32{1}, Limit: 3})
			return err
		}, codes.InvalidArgument, "Bad request: vector has 1 dimensions, want 8"},
		{"zero vector under cosine", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(make([]float32, 8))})
			return err
		}, codes.InvalidArgument, "Bad request: query: vector is all zeros, which has no direction under the cosine metric"},
		{"unknown collection", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "nope", Query: nearest(v)})
			return err
		}, codes.NotFound, "Not found: Collection `nope` doesn't exist!"},
		{"unknown collection, upsert", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "nope", Points: []*pb.PointStruct{{Id: num(1), Vectors: dense(v)}}})
			return err
		}, codes.NotFound, "Not found: Collection `nope` doesn't exist!"},
		{"unknown collection, info", func() error {
			_, err := cl.c.Get(call(t), &pb.GetCollectionInfoRequest{CollectionName: "nope"})
			return err
		}, codes.NotFound, "Not found: Collection `nope` doesn't exist!"},
		{"range without bounds", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(v), Filter: badRange})
			return err
		}, codes.InvalidArgument, "Bad request: filter.must[0].range: needs at least one of gt, gte, lt, lte"},
		{"has_id with a bad id", func() error {
			_, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: &pb.Filter{Should: []*pb.Condition{keyword("a", "b"),
				{ConditionOneOf: &pb.Condition_HasId{HasId: &pb.HasIdCondition{HasId: []*pb.PointId{num(1), uuid("42")}}}}}}})
			return err
		}, codes.InvalidArgument, `Bad request: filter.should[1].has_id[1]: id "42" is a string; an integer id is sent as a number (42)`},
		{"has_vector", func() error {
			_, err := cl.p.Scroll(call(t), &pb.ScrollPoints{CollectionName: "trawl", Filter: &pb.Filter{Must: []*pb.Condition{
				{ConditionOneOf: &pb.Condition_HasVector{HasVector: &pb.HasVectorCondition{HasVector: "v"}}}}}})
			return err
		}, codes.InvalidArgument, "Bad request: filter.must[0].has_vector: is not supported; conditions are key with match, range, values_count or a geo area, is_empty, is_null, has_id, nested, or a nested filter"},
		{"open polygon", func() error {
			ring := &pb.GeoLineString{Points: []*pb.GeoPoint{{Lon: 0, Lat: 0}, {Lon: 1, Lat: 0}, {Lon: 1, Lat: 1}, {Lon: 0, Lat: 1}}}
			_, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: &pb.Filter{Must: []*pb.Condition{
				{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "at", GeoPolygon: &pb.GeoPolygon{Exterior: ring}}}}}}})
			return err
		}, codes.InvalidArgument, "Bad request: filter.must[0].geo_polygon.exterior.points: is not closed; its last point must be its first"},
		{"min_count 0", func() error {
			_, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: &pb.Filter{MinShould: &pb.MinShould{
				Conditions: []*pb.Condition{keyword("a", "b")}}}})
			return err
		}, codes.InvalidArgument, "Bad request: filter.min_should.min_count: is 0, want a whole number of conditions, 1 or more"},
		{"empty condition", func() error {
			_, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: &pb.Filter{MustNot: []*pb.Condition{{}}}})
			return err
		}, codes.InvalidArgument, "Bad request: filter.must_not[0]: is empty; want a field, is_empty, is_null or filter condition"},
		{"empty key", func() error {
			_, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl", Filter: &pb.Filter{Must: []*pb.Condition{keyword("", "x")}}})
			return err
		}, codes.InvalidArgument, "Bad request: filter.must[0].key: is empty"},
		{"named vector", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(v), Using: new("image")})
			return err
		}, codes.InvalidArgument, `Bad request: using: the collection has no named vectors: it holds one unnamed vector per point (got "image")`},
		{"prefetch", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(v), Prefetch: []*pb.PrefetchQuery{{}}})
			return err
		}, codes.InvalidArgument, "Bad request: prefetch[0]: query is missing: trawl serves nearest-vector queries (a vector or a point id); list points with Scroll"},
		{"fusion", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: &pb.Query{Variant: &pb.Query_Fusion{Fusion: pb.Fusion_RRF}}})
			return err
		}, codes.InvalidArgument, "Bad request: query.fusion needs prefetch: a fusion fuses the results of prefetches"},
		{"sparse", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "trawl", Points: []*pb.PointStruct{{Id: num(1),
				Vectors: &pb.Vectors{VectorsOptions: &pb.Vectors_Vector{Vector: &pb.Vector{Vector: &pb.Vector_Sparse{Sparse: &pb.SparseVector{}}}}}}}})
			return err
		}, codes.InvalidArgument, "Bad request: points[0].vectors: sparse vectors are not supported: trawl stores one dense vector per point"},
		{"upsert all or nothing", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "trawl", Points: []*pb.PointStruct{
				{Id: num(900), Vectors: dense(v)}, {Id: num(901), Vectors: dense(v[:7])}}})
			return err
		}, codes.InvalidArgument, "Bad request: points[1].vectors: vector has 7 dimensions, want 8"},
		{"repeated id", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "trawl", Points: []*pb.PointStruct{
				{Id: num(900), Vectors: dense(v)}, {Id: num(900), Vectors: dense(v)}}})
			return err
		}, codes.InvalidArgument, "Bad request: points[1]: id 900 repeats points[0]"},
		{"integer id as a string", func() error {
			_, err := cl.p.Get(call(t), &pb.GetPoints{CollectionName: "trawl", Ids: []*pb.PointId{uuid("42")}})
			return err
		}, codes.InvalidArgument, `Bad request: ids[0]: id "42" is a string; an integer id is sent as a number (42)`},
		{"missing id", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "trawl", Points: []*pb.PointStruct{{Vectors: dense(v)}}})
			return err
		}, codes.InvalidArgument, "Bad request: points[0].id is missing: want num or uuid"},
		{"bad payload", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "trawl", Points: []*pb.PointStruct{{Id: num(1), Vectors: dense(v),
				Payload: map[string]*pb.Value{"x": {Kind: &pb.Value_ListValue{ListValue: &pb.ListValue{Values: []*pb.Value{
					{Kind: &pb.Value_ListValue{ListValue: &pb.ListValue{}}}}}}}}}}})
			return err
		}, codes.InvalidArgument, "Bad request: points[0].payload: payload.x[0]: is an array inside an array; array elements must be strings, numbers, booleans, null or objects"},
		{"limit 0", func() error {
			_, err := cl.p.Search(call(t), &pb.SearchPoints{CollectionName: "trawl", Vector: v})
			return err
		}, codes.InvalidArgument, "Bad request: limit 0 and offset 0: want limit at least 1 and limit + offset at most 1000"},
		{"delete everything", func() error {
			_, err := cl.p.Delete(call(t), &pb.DeletePoints{CollectionName: "trawl", Points: &pb.PointsSelector{
				PointsSelectorOneOf: &pb.PointsSelector_Filter{Filter: &pb.Filter{}}}})
			return err
		}, codes.InvalidArgument, "Bad request: filter has no conditions, which would delete every point; trawl refuses that (delete by ids, or give the filter a condition)"},
		{"batch of none", func() error {
			_, err := cl.p.QueryBatch(call(t), &pb.QueryBatchPoints{CollectionName: "trawl"})
			return err
		}, codes.InvalidArgument, "Bad request: query_points has 0 entries, want 1..256"},
		{"batch entry", func() error {
			_, err := cl.p.SearchBatch(call(t), &pb.SearchBatchPoints{CollectionName: "trawl", SearchPoints: []*pb.SearchPoints{
				{Vector: v, Limit: 1}, {Vector: v, Limit: 1, ShardKeySelector: &pb.ShardKeySelector{}}}})
			return err
		}, codes.InvalidArgument, "Bad request: search_points[1]: shard_key is not supported: trawl places points by a hash of their id over every shard"},
		{"scroll order_by with offset", func() error {
			_, err := cl.p.Scroll(call(t), &pb.ScrollPoints{CollectionName: "trawl", OrderBy: &pb.OrderBy{Key: "year"}, Offset: num(3)})
			return err
		}, codes.InvalidArgument, "Bad request: offset cannot be used with order_by: page on with order_by.start_from"},
		{"scroll order_by datetime", func() error {
			_, err := cl.p.Scroll(call(t), &pb.ScrollPoints{CollectionName: "trawl", OrderBy: &pb.OrderBy{Key: "year",
				StartFrom: &pb.StartFrom{Value: &pb.StartFrom_Datetime{Datetime: "2024-01-01T00:00:00Z"}}}})
			return err
		}, codes.InvalidArgument, "Bad request: order_by.start_from: trawl orders by numbers only, not datetimes"},
		{"scroll order_by bad key", func() error {
			_, err := cl.p.Scroll(call(t), &pb.ScrollPoints{CollectionName: "trawl", OrderBy: &pb.OrderBy{Key: ".year"}})
			return err
		}, codes.InvalidArgument, `Bad request: order_by.key ".year" is not a payload key: a key is a dotted path like meta.draft`},
		{"facet no key", func() error {
			_, err := cl.p.Facet(call(t), &pb.FacetCounts{CollectionName: "trawl"})
			return err
		}, codes.InvalidArgument, "Bad request: key is empty: want a payload key"},
		{"facet limit", func() error {
			zero := uint64(0)
			_, err := cl.p.Facet(call(t), &pb.FacetCounts{CollectionName: "trawl", Key: "color", Limit: &zero})
			return err
		}, codes.InvalidArgument, "Bad request: limit is 0, want 1..10000"},
		{"facet bad filter", func() error {
			_, err := cl.p.Facet(call(t), &pb.FacetCounts{CollectionName: "trawl", Key: "color", Filter: &pb.Filter{Must: []*pb.Condition{
				{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "n", Range: &pb.Range{}}}}}}})
			return err
		}, codes.InvalidArgument, "Bad request: filter.must[0].range: needs at least one of gt, gte, lt, lte"},
		{"create Manhattan", func() error {
			_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "m", VectorsConfig: &pb.VectorsConfig{
				Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 4, Distance: pb.Distance_Manhattan}}}})
			return err
		}, codes.InvalidArgument, "Bad request: vectors_config.params.distance Manhattan is not supported: trawl scores Cosine, Dot and Euclid"},
		{"create product quantization", func() error {
			_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "m", VectorsConfig: &pb.VectorsConfig{
				Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 4, Distance: pb.Distance_Dot}}},
				QuantizationConfig: &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Product{Product: &pb.ProductQuantization{}}}})
			return err
		}, codes.InvalidArgument, "Bad request: quantization_config.product is not supported: trawl quantizes to int8 codes only (scalar Int8)"},
		{"create other settings", func() error {
			_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "trawl", VectorsConfig: &pb.VectorsConfig{
				Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 4, Distance: pb.Distance_Dot}}}})
			return err
		}, codes.AlreadyExists, "Wrong input: Collection `trawl` already exists! It holds vectors of size 8 and distance Cosine, no quantization, flat index, float32 in memory; this create asks for vectors of size 4 and distance Dot, no quantization, flat index, float32 in memory. Delete it first to change its settings"},
		{"unserved RPC", func() error {
			_, err := cl.p.Discover(call(t), &pb.DiscoverPoints{CollectionName: "trawl"})
			return err
		}, codes.Unimplemented, "/qdrant.Points/Discover is not served: trawl serves the subset of Qdrant's API applications use (docs/qdrant.md)"},
		{"recommend best_score", func() error {
			_, err := cl.p.Recommend(call(t), &pb.RecommendPoints{CollectionName: "trawl", Positive: []*pb.PointId{num(1)}, Limit: 3,
				Strategy: pb.RecommendStrategy_BestScore.Enum()})
			return err
		}, codes.InvalidArgument, "Bad request: strategy best_score is not supported: trawl recommends with average_vector (one search with 2·avg(positive) − avg(negative))"},
		{"recommend no positive", func() error {
			_, err := cl.p.Recommend(call(t), &pb.RecommendPoints{CollectionName: "trawl", Negative: []*pb.PointId{num(1)}, Limit: 3})
			return err
		}, codes.InvalidArgument, "Bad request: positive is empty: the average_vector strategy needs at least one positive example"},
		{"query recommend bad vector", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: &pb.Query{Variant: &pb.Query_Recommend{Recommend: &pb.RecommendInput{
				Positive: []*pb.VectorInput{{Variant: &pb.VectorInput_Dense{Dense: &pb.DenseVector{Data: []float32{1, 2}}}}}}}}})
			return err
		}, codes.InvalidArgument, "Bad request: query.recommend.positive[0]: vector has 2 dimensions, want 8"},
		{"search groups size", func() error {
			_, err := cl.p.SearchGroups(call(t), &pb.SearchPointGroups{CollectionName: "trawl", Vector: unit(0), GroupBy: "color", Limit: 3})
			return err
		}, codes.InvalidArgument, "Bad request: group_size is 0, want 1..100"},
		{"query groups lookup", func() error {
			_, err := cl.p.QueryGroups(call(t), &pb.QueryPointGroups{CollectionName: "trawl", Query: nearest(unit(0)), GroupBy: "color",
				WithLookup: &pb.WithLookup{Collection: "other"}})
			return err
		}, codes.InvalidArgument, "Bad request: with_lookup is not supported: trawl groups points of one collection"},
		{"query groups no group_by", func() error {
			_, err := cl.p.QueryGroups(call(t), &pb.QueryPointGroups{CollectionName: "trawl", Query: nearest(unit(0))})
			return err
		}, codes.InvalidArgument, "Bad request: group_by is empty: want a payload key"},
		{"query recommend sum_scores", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: &pb.Query{Variant: &pb.Query_Recommend{Recommend: &pb.RecommendInput{
				Positive: []*pb.VectorInput{{Variant: &pb.VectorInput_Id{Id: num(1)}}}, Strategy: pb.RecommendStrategy_SumScores.Enum()}}}})
			return err
		}, codes.InvalidArgument, "Bad request: query.recommend.strategy sum_scores is not supported: trawl recommends with average_vector (one search with 2·avg(positive) − avg(negative))"},
		{"set payload without a selector", func() error {
			_, err := cl.p.SetPayload(call(t), &pb.SetPayloadPoints{CollectionName: "trawl", Payload: map[string]*pb.Value{"a": integer(1)}})
			return err
		}, codes.InvalidArgument, "Bad request: points_selector is missing: give ids or a filter"},
		{"set payload under an array index", func() error {
			_, err := cl.p.SetPayload(call(t), &pb.SetPayloadPoints{CollectionName: "trawl", Payload: map[string]*pb.Value{"a": integer(1)},
				PointsSelector: ids(num(1)), Key: new("a[0]")})
			return err
		}, codes.InvalidArgument, `Bad request: key "a[0]": trawl sets payload under a dotted path of object members; array indexes and quoted segments are not supported`},
		{"overwrite with a key", func() error {
			_, err := cl.p.OverwritePayload(call(t), &pb.SetPayloadPoints{CollectionName: "trawl", Payload: map[string]*pb.Value{"a": integer(1)},
				PointsSelector: ids(num(1)), Key: new("a")})
			return err
		}, codes.InvalidArgument, "Bad request: key is not supported on an overwrite: trawl overwrites the whole payload (use set_payload with key to set under a path)"},
		{"delete a nested payload key", func() error {
			_, err := cl.p.DeletePayload(call(t), &pb.DeletePayloadPoints{CollectionName: "trawl", Keys: []string{"meta.a"}, PointsSelector: ids(num(1))})
			return err
		}, codes.InvalidArgument, `Bad request: keys[0] ("meta.a"): want a top-level payload key (trawl deletes whole top-level keys, not nested paths)`},
		{"clear payload by an empty filter", func() error {
			_, err := cl.p.ClearPayload(call(t), &pb.ClearPayloadPoints{CollectionName: "trawl", Points: byFilter(&pb.Filter{})})
			return err
		}, codes.InvalidArgument, "Bad request: filter has no conditions, which would edit every point; trawl refuses that (edit by ids, or give the filter a condition)"},
		{"update a vector of the wrong size", func() error {
			_, err := cl.p.UpdateVectors(call(t), &pb.UpdatePointVectors{CollectionName: "trawl", Points: []*pb.PointVectors{{Id: num(1), Vectors: dense([]float32{1, 2})}}})
			return err
		}, codes.InvalidArgument, "Bad request: points[0].vectors: vector has 2 dimensions, want 8"},
		{"delete vectors", func() error {
			_, err := cl.p.DeleteVectors(call(t), &pb.DeletePointVectors{CollectionName: "trawl", PointsSelector: ids(num(1))})
			return err
		}, codes.InvalidArgument, "Bad request: deleting vectors is not supported: a trawl point has exactly one unnamed vector, which it cannot be without (delete the point instead)"},
		{"batch with a bad operation", func() error {
			_, err := cl.p.UpdateBatch(call(t), &pb.UpdateBatchPoints{CollectionName: "trawl", Operations: []*pb.PointsUpdateOperation{
				{Operation: &pb.PointsUpdateOperation_ClearPayload_{ClearPayload: &pb.PointsUpdateOperation_ClearPayload{Points: ids(num(1))}}},
				{Operation: &pb.PointsUpdateOperation_DeletePayload_{DeletePayload: &pb.PointsUpdateOperation_DeletePayload{PointsSelector: ids(num(1))}}}}})
			return err
		}, codes.InvalidArgument, "Bad request: operations[1]: keys is empty: give the payload keys to delete"},
		{"empty batch", func() error {
			_, err := cl.p.UpdateBatch(call(t), &pb.UpdateBatchPoints{CollectionName: "trawl"})
			return err
		}, codes.InvalidArgument, "Bad request: operations has 0 entries, want 1..256"},
		{"bad allow-partial", func() error {
			_, err := cl.p.Count(call(t, "x-trawl-allow-partial", "maybe"), &pb.CountPoints{CollectionName: "trawl"})
			return err
		}, codes.InvalidArgument, `Bad request: x-trawl-allow-partial is "maybe", want true or false, once`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.ShardRPCs()
			code, msg := codeOf(tc.do())
			require.Equal(t, tc.code, code, msg)
			require.Equal(t, tc.msg, msg)
			// A name the router's catalog lacks is looked up again (it may
			// have been created through another router): catalog reads,
			// never a data request. A create asks the catalog's authority.
			if tc.code != codes.NotFound && !strings.HasPrefix(tc.name, "create other") {
				require.Equal(t, before, e.ShardRPCs(), "a bad request reached a shard")
			}
		})
	}
	// Nothing was written.
	n, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl"})
	require.NoError(t, err)
	require.Equal(t, uint64(300), n.GetResult().GetCount())
}
