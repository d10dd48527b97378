package qdrantgrpc

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/filter"
)

// Payloads: Qdrant's gRPC payload is a map of its JSON-like Value (with
// integers apart from doubles); trawl stores payloads as JSON. A payload
// is written as JSON — an integer as an integer literal, a double always
// with a fraction or exponent, so 3.0 stays a double and never matches an
// integer condition, as in Qdrant — then checked as REST payloads are. It
// is read back with filter.DecodePayload, which gives integer literals as
// int64 and other numbers as float64: each comes back as the kind it went
// in as.

// maxValueDepth bounds the recursion over a Value before the payload check
// (whose limit is far lower) sees the JSON.
const maxValueDepth = filter.MaxDepth + 2

// payloadJSON writes a point's payload as JSON and checks it; nil for no
// payload.
func payloadJSON(m map[string]*pb.Value, where string) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := appendObject(nil, m, 1)
	if err != nil {
		return nil, invalidf("%s: %v", where, err)
	}
	out, err := wire.CheckPayload(b)
	if err != nil {
		return nil, invalidf("%s: %v", where, err)
	}
	return out, nil
}

func appendObject(b []byte, m map[string]*pb.Value, depth int) ([]byte, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("payload is nested deeper than %d levels", filter.MaxDepth)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, m[k], depth); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v *pb.Value, depth int) ([]byte, error) {
	switch x := v.GetKind().(type) {
	case nil, *pb.Value_NullValue:
		return append(b, "null"...), nil
	case *pb.Value_DoubleValue:
		f := x.DoubleValue
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("payload number %v is not finite", f)
		}
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return append(b, s...), nil
	case *pb.Value_IntegerValue:
		return strconv.AppendInt(b, x.IntegerValue, 10), nil
	case *pb.Value_StringValue:
		return appendString(b, x.StringValue), nil
	case *pb.Value_BoolValue:
		return strconv.AppendBool(b, x.BoolValue), nil
	case *pb.Value_StructValue:
		return appendObject(b, x.StructValue.GetFields(), depth+1)
	case *pb.Value_ListValue:
		if depth+1 > maxValueDepth {
			return nil, fmt.Errorf("payload is nested deeper than %d levels", filter.MaxDepth)
		}
		b = append(b, '[')
		for i, e := range x.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return nil, fmt.Errorf("payload value of unknown kind %T", v.GetKind())
}

// payloadValues reads a stored payload (JSON) as Qdrant's map of Values;
// nil for none.
func payloadValues(p []byte) (map[string]*pb.Value, error) {
	m, err := filter.DecodePayload(p)
	if err != nil {
		return nil, fmt.Errorf("stored payload does not decode: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]*pb.Value, len(m))
	for k, v := range m {
		out[k] = toValue(v)
	}
	return out, nil
}

func toValue(v any) *pb.Value {
	switch x := v.(type) {
	case string:
		return &pb.Value{Kind: &pb.Value_StringValue{StringValue: x}}
	case int64:
		return &pb.Value{Kind: &pb.Value_IntegerValue{IntegerValue: x}}
	case float64:
		return &pb.Value{Kind: &pb.Value_DoubleValue{DoubleValue: x}}
	case bool:
		return &pb.Value{Kind: &pb.Value_BoolValue{BoolValue: x}}
	case []any:
		vs := make([]*pb.Value, len(x))
		for i, e := range x {
			vs[i] = toValue(e)
		}
		return &pb.Value{Kind: &pb.Value_ListValue{ListValue: &pb.ListValue{Values: vs}}}
	case map[string]any:
		fs := make(map[string]*pb.Value, len(x))
		for k, e := range x {
			fs[k] = toValue(e)
		}
		return &pb.Value{Kind: &pb.Value_StructValue{StructValue: &pb.Struct{Fields: fs}}}
	}
	return &pb.Value{Kind: &pb.Value_NullValue{}}
}
