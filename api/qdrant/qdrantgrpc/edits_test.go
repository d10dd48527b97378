package qdrantgrpc_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

func ids(ps ...*pb.PointId) *pb.PointsSelector {
	return &pb.PointsSelector{PointsSelectorOneOf: &pb.PointsSelector_Points{Points: &pb.PointsIdsList{Ids: ps}}}
}

func byFilter(f *pb.Filter) *pb.PointsSelector {
	return &pb.PointsSelector{PointsSelectorOneOf: &pb.PointsSelector_Filter{Filter: f}}
}

// state reads the seeded points back: id → payload (as JSON-ish text)
// and vector.
func state(t *testing.T, cl clients) map[string]string {
	t.Helper()
	got, err := cl.p.Get(call(t), &pb.GetPoints{CollectionName: "trawl", Ids: []*pb.PointId{num(1), num(2), uuid(uuidA), num(10)},
		WithPayload: withPayload(), WithVectors: &pb.WithVectorsSelector{SelectorOptions: &pb.WithVectorsSelector_Enable{Enable: true}}})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range got.GetResult() {
		out[idText(p.GetId())] = valuesText(p.GetPayload()) + " " + vecText(p.GetVectors().GetVector().GetDense().GetData())
	}
	return out
}

func vecText(v []float32) string {
	for i, x := range v {
		if x == 1 {
			return "e" + string(rune('0'+i))
		}
	}
	return "?"
}

// valuesText is a payload as sorted key=value text.
func valuesText(m map[string]*pb.Value) string {
	b, err := payloadText(m)
	if err != nil {
		return err.Error()
	}
	return b
}

// TestEdits drives each edit call through the real gRPC server on a
// real cluster and checks the state it leaves.
func TestEdits(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	red := &pb.Filter{Must: []*pb.Condition{keyword("color", "red")}}
	seeded := map[string]string{
		"1":               `{"color":"red","n":1,"suite":"grpc"} e0`,
		"2":               `{"color":"blue","n":2,"suite":"grpc","w":3} e1`,
		`"` + uuidA + `"`: `{"color":"red","n":3,"suite":"grpc"} e2`,
	}
	with := func(changes map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range seeded {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name string
		call func() error
		want map[string]string
	}{
		{"SetPayload under a key", func() error {
			_, err := cl.p.SetPayload(call(t), &pb.SetPayloadPoints{CollectionName: "trawl", Payload: map[string]*pb.Value{"x": integer(7)},
				PointsSelector: ids(num(2)), Key: new("meta")})
			return err
		}, with(map[string]string{"2": `{"color":"blue","meta":{"x":7},"n":2,"suite":"grpc","w":3} e1`})},
		{"SetPayload by filter", func() error {
			_, err := cl.p.SetPayload(call(t), &pb.SetPayloadPoints{CollectionName: "trawl", Payload: map[string]*pb.Value{"hot": str("yes")},
				PointsSelector: byFilter(red)})
			return err
		}, with(map[string]string{"1": `{"color":"red","hot":"yes","n":1,"suite":"grpc"} e0`,
			`"` + uuidA + `"`: `{"color":"red","hot":"yes","n":3,"suite":"grpc"} e2`})},
		{"OverwritePayload by filter", func() error {
			_, err := cl.p.OverwritePayload(call(t), &pb.SetPayloadPoints{CollectionName: "trawl", Payload: map[string]*pb.Value{"only": integer(1)},
				PointsSelector: byFilter(red)})
			return err
		}, with(map[string]string{"1": `{"only":1} e0`, `"` + uuidA + `"`: `{"only":1} e2`})},
		{"DeletePayload by ids", func() error {
			_, err := cl.p.DeletePayload(call(t), &pb.DeletePayloadPoints{CollectionName: "trawl", Keys: []string{"n", "w"},
				PointsSelector: ids(num(2))})
			return err
		}, with(map[string]string{"2": `{"color":"blue","suite":"grpc"} e1`})},
		{"ClearPayload by filter", func() error {
			_, err := cl.p.ClearPayload(call(t), &pb.ClearPayloadPoints{CollectionName: "trawl", Points: byFilter(red)})
			return err
		}, with(map[string]string{"1": `{} e0`, `"` + uuidA + `"`: `{} e2`})},
		{"UpdateVectors", func() error {
			_, err := cl.p.UpdateVectors(call(t), &pb.UpdatePointVectors{CollectionName: "trawl", Points: []*pb.PointVectors{
				{Id: num(1), Vectors: dense(unit(5))}}})
			return err
		}, with(map[string]string{"1": `{"color":"red","n":1,"suite":"grpc"} e5`})},
		{"UpdateBatch", func() error {
			res, err := cl.p.UpdateBatch(call(t), &pb.UpdateBatchPoints{CollectionName: "trawl", Operations: []*pb.PointsUpdateOperation{
				{Operation: &pb.PointsUpdateOperation_Upsert{Upsert: &pb.PointsUpdateOperation_PointStructList{Points: []*pb.PointStruct{
					{Id: num(10), Vectors: dense(unit(3)), Payload: map[string]*pb.Value{"color": str("red")}}}}}},
				{Operation: &pb.PointsUpdateOperation_SetPayload_{SetPayload: &pb.PointsUpdateOperation_SetPayload{
					Payload: map[string]*pb.Value{"hot": str("yes")}, PointsSelector: byFilter(red)}}},
				{Operation: &pb.PointsUpdateOperation_DeletePoints_{DeletePoints: &pb.PointsUpdateOperation_DeletePoints{Points: ids(num(2))}}},
				{Operation: &pb.PointsUpdateOperation_UpdateVectors_{UpdateVectors: &pb.PointsUpdateOperation_UpdateVectors{
					Points: []*pb.PointVectors{{Id: num(10), Vectors: dense(unit(4))}}}}},
			}})
			if err == nil {
				require.Len(t, res.GetResult(), 4)
				for _, r := range res.GetResult() {
					require.Equal(t, pb.UpdateStatus_Completed, r.GetStatus())
				}
			}
			return err
		}, map[string]string{"1": `{"color":"red","hot":"yes","n":1,"suite":"grpc"} e0`,
			`"` + uuidA + `"`: `{"color":"red","hot":"yes","n":3,"suite":"grpc"} e2`,
			"10":              `{"color":"red","hot":"yes"} e4`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed(t, cl)
			_, _ = cl.p.Delete(call(t), &pb.DeletePoints{CollectionName: "trawl", Points: ids(num(10))})
			require.NoError(t, tc.call())
			require.Equal(t, tc.want, state(t, cl))
		})
	}

	seed(t, cl)
	_, err := cl.p.Delete(call(t), &pb.DeletePoints{CollectionName: "trawl", Points: ids(num(10))})
	require.NoError(t, err)
	_, err = cl.p.SetPayload(call(t), &pb.SetPayloadPoints{CollectionName: "trawl", Payload: map[string]*pb.Value{"x": integer(1)},
		PointsSelector: ids(num(1), num(404))})
	code, msg := codeOf(err)
	require.Equal(t, codes.NotFound, code, msg)
	require.Equal(t, "Not found: No point with id 404 found", msg)
	_, err = cl.p.DeleteVectors(call(t), &pb.DeletePointVectors{CollectionName: "trawl", PointsSelector: ids(num(1))})
	code, msg = codeOf(err)
	require.Equal(t, codes.InvalidArgument, code, msg)
	require.Contains(t, msg, "deleting vectors is not supported")
	_, err = cl.p.ClearPayload(call(t), &pb.ClearPayloadPoints{CollectionName: "trawl", Points: byFilter(&pb.Filter{})})
	code, msg = codeOf(err)
	require.Equal(t, codes.InvalidArgument, code, msg)
	require.Contains(t, msg, "filter has no conditions")
	require.Equal(t, seeded, state(t, cl), "a refused edit changed data")
}

// payloadText is a payload as JSON with sorted keys.
func payloadText(m map[string]*pb.Value) (string, error) {
	b, err := json.Marshal(plain(&pb.Value{Kind: &pb.Value_StructValue{StructValue: &pb.Struct{Fields: m}}}))
	return string(b), err
}

func plain(v *pb.Value) any {
	switch k := v.GetKind().(type) {
	case *pb.Value_StringValue:
		return k.StringValue
	case *pb.Value_IntegerValue:
		return k.IntegerValue
	case *pb.Value_DoubleValue:
		return k.DoubleValue
	case *pb.Value_BoolValue:
		return k.BoolValue
	case *pb.Value_ListValue:
		out := []any{}
		for _, x := range k.ListValue.GetValues() {
			out = append(out, plain(x))
		}
		return out
	case *pb.Value_StructValue:
		out := map[string]any{}
		for key, x := range k.StructValue.GetFields() {
			out[key] = plain(x)
		}
		return out
	}
	return nil
}
