package qdrantgrpc_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// TestTextIndex: a text payload index declared over gRPC (its
// TextIndexParams recorded and shown) makes Match.text match tokens;
// tokenizers and options trawl does not follow are InvalidArgument naming
// them, and change nothing.
func TestTextIndex(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "docs", VectorsConfig: &pb.VectorsConfig{
		Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 4, Distance: pb.Distance_Dot}}}})
	require.NoError(t, err)
	_, err = cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "docs", Points: []*pb.PointStruct{
		{Id: num(1), Vectors: dense([]float32{1, 0, 0, 0}), Payload: map[string]*pb.Value{"d": str("Good, cheap food")}},
		{Id: num(2), Vectors: dense([]float32{0, 1, 0, 0}), Payload: map[string]*pb.Value{"d": str("good-cheapest")}}}})
	require.NoError(t, err)
	count := func(text string) uint64 {
		t.Helper()
		res, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "docs", Exact: new(true), Filter: &pb.Filter{Must: []*pb.Condition{
			{ConditionOneOf: &pb.Condition_Field{Field: &pb.FieldCondition{Key: "d", Match: &pb.Match{MatchValue: &pb.Match_Text{Text: text}}}}}}}})
		require.NoError(t, err)
		return res.GetResult().GetCount()
	}
	require.Equal(t, uint64(2), count("cheap"), "without an index: a substring")
	require.Equal(t, uint64(0), count("cheap good"))

	index := func(p *pb.TextIndexParams) error {
		_, err := cl.p.CreateFieldIndex(call(t), &pb.CreateFieldIndexCollection{CollectionName: "docs", FieldName: "d",
			FieldType: pb.FieldType_FieldTypeText.Enum(), FieldIndexParams: &pb.PayloadIndexParams{IndexParams: &pb.PayloadIndexParams_TextIndexParams{TextIndexParams: p}}})
		return err
	}
	for _, tc := range []struct {
		p   *pb.TextIndexParams
		msg string
	}{
		{&pb.TextIndexParams{Tokenizer: pb.TokenizerType_Prefix}, "tokenizer Prefix is not supported"},
		{&pb.TextIndexParams{Tokenizer: pb.TokenizerType_Multilingual}, "tokenizer Multilingual is not supported"},
		{&pb.TextIndexParams{Tokenizer: pb.TokenizerType_Word, MinTokenLen: new(uint64(5)), MaxTokenLen: new(uint64(2))}, "min_token_len 5 is over max_token_len 2"},
		{&pb.TextIndexParams{Tokenizer: pb.TokenizerType_Word, PhraseMatching: new(true)}, "phrase_matching is not supported"},
	} {
		err := index(tc.p)
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), tc.msg)
	}
	require.Equal(t, uint64(0), count("cheap good"), "a refused index changes nothing")

	require.NoError(t, index(&pb.TextIndexParams{Tokenizer: pb.TokenizerType_Word, Lowercase: new(true), MinTokenLen: new(uint64(2))}))
	require.Equal(t, uint64(1), count("cheap"), "whole tokens")
	require.Equal(t, uint64(1), count("CHEAP good"), "tokens, in any order and case")
	require.Equal(t, uint64(0), count("cheapest food"))
	require.Equal(t, uint64(1), count("good cheapest"), "punctuation splits words")
	info, err := cl.c.Get(call(t), &pb.GetCollectionInfoRequest{CollectionName: "docs"})
	require.NoError(t, err)
	s := info.GetResult().GetPayloadSchema()["d"]
	require.Equal(t, pb.PayloadSchemaType_Text, s.GetDataType())
	require.Equal(t, pb.TokenizerType_Word, s.GetParams().GetTextIndexParams().GetTokenizer())
	require.Equal(t, uint64(2), s.GetParams().GetTextIndexParams().GetMinTokenLen())
}
