package qdrantgrpc_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// TestCollections: a collection's life through the Collections service,
// as a Qdrant application lives it: create (twice: idempotent), describe,
// list, exists, a payload index, aliases, points through an alias, delete
// (aliases go with it), delete again.
func TestCollections(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	create := &pb.CreateCollection{CollectionName: "docs", VectorsConfig: &pb.VectorsConfig{
		Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 4, Distance: pb.Distance_Dot}}},
		HnswConfig:         &pb.HnswConfigDiff{M: new(uint64(16))},
		QuantizationConfig: &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Scalar{Scalar: &pb.ScalarQuantization{Type: pb.QuantizationType_Int8}}}}
	for range 2 {
		res, err := cl.c.Create(call(t), create)
		require.NoError(t, err)
		require.True(t, res.GetResult())
	}
	ex, err := cl.c.CollectionExists(call(t), &pb.CollectionExistsRequest{CollectionName: "docs"})
	require.NoError(t, err)
	require.True(t, ex.GetResult().GetExists())
	ex, err = cl.c.CollectionExists(call(t), &pb.CollectionExistsRequest{CollectionName: "other"})
	require.NoError(t, err)
	require.False(t, ex.GetResult().GetExists())
	list, err := cl.c.List(call(t), &pb.ListCollectionsRequest{})
	require.NoError(t, err)
	var names []string
	for _, c := range list.GetCollections() {
		names = append(names, c.GetName())
	}
	require.Equal(t, []string{"docs", "trawl"}, names)

	_, err = cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "docs", Points: []*pb.PointStruct{
		{Id: num(1), Vectors: dense([]float32{1, 0, 0, 0}), Payload: map[string]*pb.Value{"lang": str("en")}},
		{Id: num(2), Vectors: dense([]float32{0, 2, 0, 0})}}})
	require.NoError(t, err)
	_, err = cl.p.CreateFieldIndex(call(t), &pb.CreateFieldIndexCollection{CollectionName: "docs", FieldName: "lang", FieldType: pb.FieldType_FieldTypeKeyword.Enum()})
	require.NoError(t, err)

	info, err := cl.c.Get(call(t), &pb.GetCollectionInfoRequest{CollectionName: "docs"})
	require.NoError(t, err)
	r := info.GetResult()
	require.Equal(t, pb.CollectionStatus_Green, r.GetStatus())
	require.Equal(t, uint64(2), r.GetPointsCount())
	require.Equal(t, uint64(4), r.GetConfig().GetParams().GetVectorsConfig().GetParams().GetSize())
	require.Equal(t, pb.Distance_Dot, r.GetConfig().GetParams().GetVectorsConfig().GetParams().GetDistance())
	require.Equal(t, pb.QuantizationType_Int8, r.GetConfig().GetQuantizationConfig().GetScalar().GetType())
	require.Equal(t, uint32(3), r.GetConfig().GetParams().GetShardNumber())
	require.Equal(t, pb.PayloadSchemaType_Keyword, r.GetPayloadSchema()["lang"].GetDataType())
	require.Equal(t, uint64(1), r.GetPayloadSchema()["lang"].GetPoints())

	// Aliases: create, rename, list; points through an alias.
	_, err = cl.c.UpdateAliases(call(t), &pb.ChangeAliases{Actions: []*pb.AliasOperations{
		{Action: &pb.AliasOperations_CreateAlias{CreateAlias: &pb.CreateAlias{CollectionName: "docs", AliasName: "a1"}}},
		{Action: &pb.AliasOperations_RenameAlias{RenameAlias: &pb.RenameAlias{OldAliasName: "a1", NewAliasName: "current"}}}}})
	require.NoError(t, err)
	as, err := cl.c.ListAliases(call(t), &pb.ListAliasesRequest{})
	require.NoError(t, err)
	require.Len(t, as.GetAliases(), 1)
	require.Equal(t, "current", as.GetAliases()[0].GetAliasName())
	require.Equal(t, "docs", as.GetAliases()[0].GetCollectionName())
	as, err = cl.c.ListCollectionAliases(call(t), &pb.ListCollectionAliasesRequest{CollectionName: "other"})
	require.NoError(t, err)
	require.Empty(t, as.GetAliases())
	q, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "current", Query: nearest([]float32{0, 1, 0, 0})})
	require.NoError(t, err)
	require.Len(t, q.GetResult(), 2)
	require.Equal(t, uint64(2), q.GetResult()[0].GetId().GetNum())
	require.InDelta(t, 2, q.GetResult()[0].GetScore(), 1e-6)
	_, err = cl.c.UpdateAliases(call(t), &pb.ChangeAliases{Actions: []*pb.AliasOperations{
		{Action: &pb.AliasOperations_CreateAlias{CreateAlias: &pb.CreateAlias{CollectionName: "nope", AliasName: "x"}}}}})
	code, msg := codeOf(err)
	require.Equal(t, codes.NotFound, code)
	require.Equal(t, "Not found: Collection `nope` doesn't exist!", msg)

	_, err = cl.p.DeleteFieldIndex(call(t), &pb.DeleteFieldIndexCollection{CollectionName: "docs", FieldName: "lang"})
	require.NoError(t, err)
	del, err := cl.c.Delete(call(t), &pb.DeleteCollection{CollectionName: "docs"})
	require.NoError(t, err)
	require.True(t, del.GetResult())
	del, err = cl.c.Delete(call(t), &pb.DeleteCollection{CollectionName: "docs"})
	require.NoError(t, err)
	require.False(t, del.GetResult())
	as, err = cl.c.ListAliases(call(t), &pb.ListAliasesRequest{})
	require.NoError(t, err)
	require.Empty(t, as.GetAliases())
	_, err = cl.p.Count(call(t), &pb.CountPoints{CollectionName: "current"})
	code, _ = codeOf(err)
	require.Equal(t, codes.NotFound, code)
}

// TestCollectionsUpdate: Collections/Update switches int8 codes on and
// off as REST's PATCH does, and refuses what cannot change naming it.
func TestCollectionsUpdate(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "u", VectorsConfig: &pb.VectorsConfig{
		Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 4, Distance: pb.Distance_Dot}}}})
	require.NoError(t, err)
	quant := func() pb.QuantizationType {
		info, err := cl.c.Get(call(t), &pb.GetCollectionInfoRequest{CollectionName: "u"})
		require.NoError(t, err)
		return info.GetResult().GetConfig().GetQuantizationConfig().GetScalar().GetType()
	}
	scalar := &pb.QuantizationConfigDiff{Quantization: &pb.QuantizationConfigDiff_Scalar{Scalar: &pb.ScalarQuantization{Type: pb.QuantizationType_Int8}}}
	disabled := &pb.QuantizationConfigDiff{Quantization: &pb.QuantizationConfigDiff_Disabled{Disabled: &pb.Disabled{}}}
	res, err := cl.c.Update(call(t), &pb.UpdateCollection{CollectionName: "u", QuantizationConfig: scalar,
		OptimizersConfig: &pb.OptimizersConfigDiff{IndexingThreshold: new(uint64(0))}})
	require.NoError(t, err)
	require.True(t, res.GetResult())
	require.Equal(t, pb.QuantizationType_Int8, quant())

	for _, tc := range []struct {
		name string
		req  *pb.UpdateCollection
		msg  string
	}{
		{"on_disk", &pb.UpdateCollection{CollectionName: "u", VectorsConfig: &pb.VectorsConfigDiff{
			Config: &pb.VectorsConfigDiff_Params{Params: &pb.VectorParamsDiff{OnDisk: new(true)}}}}, "vectors.on_disk cannot change"},
		{"named vector", &pb.UpdateCollection{CollectionName: "u", VectorsConfig: &pb.VectorsConfigDiff{
			Config: &pb.VectorsConfigDiff_ParamsMap{ParamsMap: &pb.VectorParamsDiffMap{Map: map[string]*pb.VectorParamsDiff{"text": {}}}}}}, "vectors_config.params_map.text"},
		{"binary", &pb.UpdateCollection{CollectionName: "u", QuantizationConfig: &pb.QuantizationConfigDiff{
			Quantization: &pb.QuantizationConfigDiff_Binary{Binary: &pb.BinaryQuantization{}}}}, "quantization_config.binary is not supported"},
		{"two quantizations", &pb.UpdateCollection{CollectionName: "u", QuantizationConfig: disabled, VectorsConfig: &pb.VectorsConfigDiff{
			Config: &pb.VectorsConfigDiff_Params{Params: &pb.VectorParamsDiff{QuantizationConfig: scalar}}}}, "ask for different quantizations"},
		{"replication factor", &pb.UpdateCollection{CollectionName: "u", Params: &pb.CollectionParamsDiff{ReplicationFactor: new(uint32(7))}},
			"params.replication_factor cannot change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.c.Update(call(t), tc.req)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.ErrorContains(t, err, tc.msg)
			require.Equal(t, pb.QuantizationType_Int8, quant(), "nothing changed")
		})
	}
	_, err = cl.c.Update(call(t), &pb.UpdateCollection{CollectionName: "nope", QuantizationConfig: disabled})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	_, err = cl.c.Update(call(t), &pb.UpdateCollection{CollectionName: "u", VectorsConfig: &pb.VectorsConfigDiff{
		Config: &pb.VectorsConfigDiff_ParamsMap{ParamsMap: &pb.VectorParamsDiffMap{Map: map[string]*pb.VectorParamsDiff{"": {QuantizationConfig: disabled}}}}}})
	require.NoError(t, err)
	require.Equal(t, pb.QuantizationType_UnknownQuantization, quant())
}
