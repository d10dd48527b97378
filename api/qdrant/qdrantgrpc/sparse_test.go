package qdrantgrpc_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

func sparseVec(indices []uint32, values []float32) *pb.Vector {
	return &pb.Vector{Vector: &pb.Vector_Sparse{Sparse: &pb.SparseVector{Indices: indices, Values: values}}}
}

func namedVectors(m map[string]*pb.Vector) *pb.Vectors {
	return &pb.Vectors{VectorsOptions: &pb.Vectors_Vectors{Vectors: &pb.NamedVectors{Vectors: m}}}
}

func denseVec(v []float32) *pb.Vector {
	return &pb.Vector{Vector: &pb.Vector_Dense{Dense: &pb.DenseVector{Data: v}}}
}

// TestSparseVectors drives sparse vectors over gRPC as a hybrid client
// does: a collection with an unnamed dense vector and an idf sparse one,
// points with named vectors, a query using the sparse vector (scored with
// the collection's idf), the legacy search by a named sparse vector, and
// points read back with their named vectors.
func TestSparseVectors(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	idf := pb.Modifier_Idf
	_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "hy",
		VectorsConfig:       &pb.VectorsConfig{Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 2, Distance: pb.Distance_Dot}}},
		SparseVectorsConfig: &pb.SparseVectorConfig{Map: map[string]*pb.SparseVectorParams{"bm": {Modifier: &idf}}}})
	require.NoError(t, err)
	wait := true
	_, err = cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "hy", Wait: &wait, Points: []*pb.PointStruct{
		{Id: num(1), Vectors: namedVectors(map[string]*pb.Vector{"": denseVec([]float32{1, 0}), "bm": sparseVec([]uint32{1, 2}, []float32{1, 1})})},
		{Id: num(2), Vectors: namedVectors(map[string]*pb.Vector{"": denseVec([]float32{0, 1}), "bm": sparseVec([]uint32{2}, []float32{2})})},
		{Id: num(3), Vectors: namedVectors(map[string]*pb.Vector{"": denseVec([]float32{1, 1})})},
	}})
	require.NoError(t, err)

	// N = 2 points hold a bm vector (Qdrant counts the vectors of the
	// name); term 1 is in one, term 2 in two.
	idfOf := func(df float64) float32 { return float32(math.Log((2-df+0.5)/(df+0.5) + 1)) }
	using := "bm"
	res, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "hy", Using: &using,
		Query: &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{Variant: &pb.VectorInput_Sparse{
			Sparse: &pb.SparseVector{Indices: []uint32{1, 2}, Values: []float32{1, 1}}}}}}})
	require.NoError(t, err)
	require.Len(t, res.GetResult(), 2)
	s1 := idfOf(1) + idfOf(2) // point 1: both terms, value 1
	s2 := 2 * idfOf(2)        // point 2: term 2, value 2
	want := []uint64{1, 2}
	if s2 > s1 {
		want = []uint64{2, 1}
	}
	require.Equal(t, want[0], res.GetResult()[0].GetId().GetNum())
	require.InDelta(t, max(s1, s2), res.GetResult()[0].GetScore(), 1e-6)
	require.InDelta(t, min(s1, s2), res.GetResult()[1].GetScore(), 1e-6)

	// The legacy search: vector holds the values, sparse_indices the
	// indices, vector_name the sparse vector.
	sr, err := cl.p.Search(call(t), &pb.SearchPoints{CollectionName: "hy", VectorName: &using, Vector: []float32{1},
		SparseIndices: &pb.SparseIndices{Data: []uint32{1}}, Limit: 5})
	require.NoError(t, err)
	require.Len(t, sr.GetResult(), 1)
	require.Equal(t, uint64(1), sr.GetResult()[0].GetId().GetNum())
	require.InDelta(t, idfOf(1), sr.GetResult()[0].GetScore(), 1e-6)

	// Read back: the named map, the dense vector under "", for a point
	// with a sparse vector; the plain dense vector for one without, as
	// Qdrant answers a point holding only its default vector.
	withVectors := &pb.WithVectorsSelector{SelectorOptions: &pb.WithVectorsSelector_Enable{Enable: true}}
	got, err := cl.p.Get(call(t), &pb.GetPoints{CollectionName: "hy", Ids: []*pb.PointId{num(1), num(3)}, WithVectors: withVectors})
	require.NoError(t, err)
	require.Len(t, got.GetResult(), 2)
	for _, p := range got.GetResult() {
		if p.GetId().GetNum() == 1 {
			named := p.GetVectors().GetVectors().GetVectors()
			require.Equal(t, []float32{1, 0}, named[""].GetDense().GetData())
			require.Equal(t, []uint32{1, 2}, named["bm"].GetSparse().GetIndices())
		} else {
			require.Equal(t, []float32{1, 1}, p.GetVectors().GetVector().GetDense().GetData())
		}
	}

	// Bad sparse input is refused before it reaches a shard.
	for _, tc := range []struct {
		name string
		err  func() error
		msg  string
	}{
		{"repeated index", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "hy", Points: []*pb.PointStruct{
				{Id: num(9), Vectors: namedVectors(map[string]*pb.Vector{"": denseVec([]float32{1, 0}), "bm": sparseVec([]uint32{4, 4}, []float32{1, 1})})}}})
			return err
		}, "Bad request: points[0].vectors.bm: indices[1]: 4 repeats an earlier index"},
		{"unknown name", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "hy", Points: []*pb.PointStruct{
				{Id: num(9), Vectors: namedVectors(map[string]*pb.Vector{"": denseVec([]float32{1, 0}), "splade": sparseVec([]uint32{4}, []float32{1})})}}})
			return err
		}, `Bad request: points[0].vectors: the collection has no vector named "splade"`},
		{"no dense vector", func() error {
			_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "hy", Points: []*pb.PointStruct{
				{Id: num(9), Vectors: namedVectors(map[string]*pb.Vector{"bm": sparseVec([]uint32{4}, []float32{1})})}}})
			return err
		}, `Bad request: points[0].vectors: the dense vector is missing`},
		{"sparse query without using", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "hy", Query: &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{
				Variant: &pb.VectorInput_Sparse{Sparse: &pb.SparseVector{Indices: []uint32{1}, Values: []float32{1}}}}}}})
			return err
		}, "Bad request: query: a sparse query names its sparse vector in using"},
		{"sparse datatype", func() error {
			u8 := pb.Datatype_Uint8
			_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "hz",
				VectorsConfig: &pb.VectorsConfig{Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 2, Distance: pb.Distance_Dot}}},
				SparseVectorsConfig: &pb.SparseVectorConfig{Map: map[string]*pb.SparseVectorParams{
					"bm": {Index: &pb.SparseIndexConfig{Datatype: &u8}}}}})
			return err
		}, "Bad request: sparse_vectors_config.bm.index.datatype Uint8 is not supported"},
		{"sparse lengths", func() error {
			_, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "hy", Using: &using, Query: &pb.Query{Variant: &pb.Query_Nearest{Nearest: &pb.VectorInput{
				Variant: &pb.VectorInput_Sparse{Sparse: &pb.SparseVector{Indices: []uint32{1, 2}, Values: []float32{1}}}}}}})
			return err
		}, "Bad request: query.nearest.sparse: indices has 2 elements and values 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, msg := codeOf(tc.err())
			require.Equal(t, codes.InvalidArgument, c)
			require.Contains(t, msg, tc.msg)
		})
	}
	e.RequireAbsent("9")
}
