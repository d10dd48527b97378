package qdrantgrpc_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// TestNamedVectors drives named dense vectors over gRPC as LlamaIndex's
// hybrid store does: a create of params_map (a cosine and an int8 Euclid
// vector) with a sparse vector, points carrying some of them, queries
// using each (and a fusion of two), the legacy search by vector_name,
// points read back with their named vectors, the collection's info, and
// bad names refused as InvalidArgument.
func TestNamedVectors(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	int8q := &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Scalar{Scalar: &pb.ScalarQuantization{Type: pb.QuantizationType_Int8}}}
	_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "nv",
		VectorsConfig: &pb.VectorsConfig{Config: &pb.VectorsConfig_ParamsMap{ParamsMap: &pb.VectorParamsMap{Map: map[string]*pb.VectorParams{
			"text":  {Size: 2, Distance: pb.Distance_Cosine},
			"image": {Size: 3, Distance: pb.Distance_Euclid, QuantizationConfig: int8q},
		}}}},
		SparseVectorsConfig: &pb.SparseVectorConfig{Map: map[string]*pb.SparseVectorParams{"bm": {}}}})
	require.NoError(t, err)
	info, err := cl.c.Get(call(t), &pb.GetCollectionInfoRequest{CollectionName: "nv"})
	require.NoError(t, err)
	m := info.GetResult().GetConfig().GetParams().GetVectorsConfig().GetParamsMap().GetMap()
	require.Len(t, m, 2)
	require.Equal(t, uint64(3), m["image"].GetSize())
	require.Equal(t, pb.Distance_Euclid, m["image"].GetDistance())
	require.NotNil(t, m["image"].GetQuantizationConfig().GetScalar())

	wait := true
	_, err = cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "nv", Wait: &wait, Points: []*pb.PointStruct{
		{Id: num(1), Vectors: namedVectors(map[string]*pb.Vector{"text": denseVec([]float32{1, 0}), "image": denseVec([]float32{0, 0, 0}),
			"bm": sparseVec([]uint32{1}, []float32{1})})},
		{Id: num(2), Vectors: namedVectors(map[string]*pb.Vector{"text": denseVec([]float32{0, 1})})},
		{Id: num(3), Vectors: namedVectors(map[string]*pb.Vector{"image": denseVec([]float32{1, 1, 1})})},
	}})
	require.NoError(t, err)

	ids := func(ps []*pb.ScoredPoint) []uint64 {
		var out []uint64
		for _, p := range ps {
			out = append(out, p.GetId().GetNum())
		}
		return out
	}
	nearest := func(v ...float32) *pb.Query {
		return &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{Variant: &pb.VectorInput_Dense{Dense: &pb.DenseVector{Data: v}}}}}
	}
	text, image := "text", "image"
	res, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "nv", Using: &text, Query: nearest(1, 0.1)})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2}, ids(res.GetResult())) // point 3 has no text vector
	res, err = cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "nv", Using: &image, Query: nearest(0.9, 0.9, 0.9)})
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 1}, ids(res.GetResult())) // nearer first
	res, err = cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "nv",
		Prefetch: []*pb.PrefetchQuery{{Query: nearest(0, 1), Using: &text}, {Query: nearest(1, 1, 1), Using: &image}},
		Query:    &pb.Query{Variant: &pb.Query_Fusion{Fusion: pb.Fusion_RRF}}})
	require.NoError(t, err)
	require.ElementsMatch(t, []uint64{1, 2, 3}, ids(res.GetResult()))

	sr, err := cl.p.Search(call(t), &pb.SearchPoints{CollectionName: "nv", VectorName: &text, Vector: []float32{0, 1}, Limit: 5})
	require.NoError(t, err)
	require.Equal(t, []uint64{2, 1}, ids(sr.GetResult()))

	withVectors := &pb.WithVectorsSelector{SelectorOptions: &pb.WithVectorsSelector_Enable{Enable: true}}
	got, err := cl.p.Get(call(t), &pb.GetPoints{CollectionName: "nv", Ids: []*pb.PointId{num(1)}, WithVectors: withVectors})
	require.NoError(t, err)
	vs := got.GetResult()[0].GetVectors().GetVectors().GetVectors()
	require.Len(t, vs, 3)
	require.Equal(t, []float32{1, 0}, vs["text"].GetDense().GetData())
	require.Equal(t, []float32{0, 0, 0}, vs["image"].GetDense().GetData())

	for _, tc := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"upsert wrong size", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "nv", Points: []*pb.PointStruct{
				{Id: num(4), Vectors: namedVectors(map[string]*pb.Vector{"text": denseVec([]float32{1, 2, 3})})}}})
			return err
		}, "points[0].vectors.text: vector has 3 dimensions, want 2"},
		{"upsert unknown name", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "nv", Points: []*pb.PointStruct{
				{Id: num(4), Vectors: namedVectors(map[string]*pb.Vector{"txt": denseVec([]float32{1, 2})})}}})
			return err
		}, `points[0].vectors: the collection has no vector named "txt" (its vectors: "image", "text", "bm" (sparse))`},
		{"query unknown using", func() error {
			txt := "txt"
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "nv", Using: &txt, Query: nearest(1, 0)})
			return err
		}, `using: the collection has no vector named "txt" (its vectors: "image", "text", "bm" (sparse))`},
		{"query without using", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "nv", Query: nearest(1, 0)})
			return err
		}, "using is missing: the collection's vectors are named (image, text); name the one the query searches"},
		{"query wrong size", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "nv", Using: &image, Query: nearest(1, 0)})
			return err
		}, "query: vector has 2 dimensions, want 3"},
		{"create on disk", func() error {
			on := true
			_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "nd",
				VectorsConfig: &pb.VectorsConfig{Config: &pb.VectorsConfig_ParamsMap{ParamsMap: &pb.VectorParamsMap{Map: map[string]*pb.VectorParams{
					"text": {Size: 2, Distance: pb.Distance_Cosine, OnDisk: &on}}}}}})
			return err
		}, "vectors_config.params_map.text.on_disk true is not supported: a named vector's rows are kept in memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rpcs := e.ShardRPCs()
			err := tc.call()
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.Equal(t, "Bad request: "+tc.msg, status.Convert(err).Message())
			require.Equal(t, rpcs, e.ShardRPCs(), "a shard RPC was made for bad input")
		})
	}
}
