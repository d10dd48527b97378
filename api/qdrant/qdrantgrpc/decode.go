package qdrantgrpc

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/coordinator"
)

// Decoding of Qdrant's request messages, checked as completely as the
// REST routes check their JSON before anything reaches a shard. Fields
// Qdrant defines that change nothing here (HNSW and quantization tuning,
// read consistency, write ordering) are accepted and ignored; fields that
// would change an answer in a way trawl cannot honour (named, sparse or
// multi vectors, shard keys, prefetch, order_by, ...) are refused by name.

// invalidf is a refusal of bad input: InvalidArgument.
func invalidf(format string, args ...any) *wire.Error {
	return wire.Invalid(fmt.Sprintf(format, args...))
}

// decodeID maps a PointId to its trawl id (qdrantx: integers in decimal,
// UUIDs canonical, other strings as they are).
func decodeID(p *pb.PointId, where string) (string, error) {
	switch v := p.GetPointIdOptions().(type) {
	case *pb.PointId_Num:
		return qdrantx.NumID(v.Num), nil
	case *pb.PointId_Uuid:
		id, err := qdrantx.StringID(v.Uuid)
		if err != nil {
			return "", invalidf("%s: %v", where, err)
		}
		return id, nil
	}
	return "", invalidf("%s is missing: want num or uuid", where)
}

// encodeID is a trawl id as a PointId: a canonical unsigned integer as
// num, anything else as uuid (a UUID, or a trawl id written through /v1).
func encodeID(id string) *pb.PointId {
	if n, ok := qdrantx.IsNum(id); ok {
		return &pb.PointId{PointIdOptions: &pb.PointId_Num{Num: n}}
	}
	return &pb.PointId{PointIdOptions: &pb.PointId_Uuid{Uuid: id}}
}

// decodeIDs maps a list of ids, dropping repeats (Qdrant answers each
// point once).
func decodeIDs(ps []*pb.PointId, where string, limit int) ([]string, error) {
	if len(ps) > limit {
		return nil, invalidf("%s has %d ids, want at most %d", where, len(ps), limit)
	}
	out := make([]string, 0, len(ps))
	seen := make(map[string]bool, len(ps))
	for i, p := range ps {
		id, err := decodeID(p, fmt.Sprintf("%s[%d]", where, i))
		if err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// checkVector checks a dense vector against the collection: its size,
// finite values, not all zeros under cosine.
func checkVector(v []float32, where string, sch coordinator.Schema) ([]float32, error) {
	if err := wire.CheckVector(sch, v); err != nil {
		if where == "vector" {
			return nil, err // "vector has 3 dimensions, want 4" names it already
		}
		return nil, invalidf("%s: %v", where, err)
	}
	return v, nil
}

// errInference refuses Qdrant's server-side embedding inputs.
const errInference = "documents, images and inference objects are not supported: trawl stores the vectors it is given; embed on the client and send the vector"

// decodeVector decodes a Vector (the dense form, or the deprecated data
// of older clients) into a checked dense vector.
func decodeVector(v *pb.Vector, where string, sch coordinator.Schema) ([]float32, error) {
	if v == nil {
		return nil, invalidf("%s is missing", where)
	}
	var data []float32
	switch x := v.GetVector().(type) {
	case *pb.Vector_Dense:
		data = x.Dense.GetData()
	case *pb.Vector_Sparse:
		return nil, invalidf("%s: %s", where, qdrantx.ErrSparse)
	case *pb.Vector_MultiDense:
		return nil, invalidf("%s: %s", where, qdrantx.ErrMulti)
	case *pb.Vector_Document, *pb.Vector_Image, *pb.Vector_Object:
		return nil, invalidf("%s: %s", where, errInference)
	default:
		switch {
		case v.GetIndices() != nil:
			return nil, invalidf("%s: %s", where, qdrantx.ErrSparse)
		case v.VectorsCount != nil:
			return nil, invalidf("%s: %s", where, qdrantx.ErrMulti)
		}
		data = v.GetData()
	}
	return checkVector(data, where, sch)
}

// decodeVectors decodes a point's Vectors: one unnamed vector (or a named
// map holding only the unnamed, default vector "").
func decodeVectors(v *pb.Vectors, where string, sch coordinator.Schema) ([]float32, error) {
	switch x := v.GetVectorsOptions().(type) {
	case *pb.Vectors_Vector:
		return decodeVector(x.Vector, where, sch)
	case *pb.Vectors_Vectors:
		named := x.Vectors.GetVectors()
		if only, ok := named[""]; ok && len(named) == 1 {
			return decodeVector(only, where, sch)
		}
		return nil, invalidf("%s: %s (got the names %s)", where, qdrantx.ErrNamedVectors, strings.Join(slices.Sorted(maps.Keys(named)), ", "))
	}
	return nil, invalidf("%s is missing", where)
}

// decodeWithPayload decodes a WithPayloadSelector: enable, include or
// exclude top-level keys. Unset is def. An exclude is returned as all of
// the payload and the keys to drop.
func decodeWithPayload(s *pb.WithPayloadSelector, def bool) (*coordinator.PayloadSelection, []string, error) {
	var keys []string
	exclude := false
	switch x := s.GetSelectorOptions().(type) {
	case nil:
		if def {
			return &coordinator.PayloadSelection{All: true}, nil, nil
		}
		return nil, nil, nil
	case *pb.WithPayloadSelector_Enable:
		if x.Enable {
			return &coordinator.PayloadSelection{All: true}, nil, nil
		}
		return nil, nil, nil
	case *pb.WithPayloadSelector_Include:
		keys = x.Include.GetFields()
	case *pb.WithPayloadSelector_Exclude:
		keys, exclude = x.Exclude.GetFields(), true
	}
	for i, k := range keys {
		if k == "" || strings.Contains(k, ".") {
			return nil, nil, invalidf("with_payload key %d (%q): want a top-level payload key (trawl selects whole top-level keys, not nested paths)", i, k)
		}
	}
	if exclude {
		return &coordinator.PayloadSelection{All: true}, keys, nil
	}
	if keys == nil {
		keys = []string{}
	}
	return &coordinator.PayloadSelection{Keys: keys}, nil, nil
}

// decodeWithVectors decodes a WithVectorsSelector: enable, or a list of
// vector names (refused: there is one unnamed vector; an empty list is
// false).
func decodeWithVectors(s *pb.WithVectorsSelector) (bool, error) {
	switch x := s.GetSelectorOptions().(type) {
	case *pb.WithVectorsSelector_Enable:
		return x.Enable, nil
	case *pb.WithVectorsSelector_Include:
		if len(x.Include.GetNames()) == 0 {
			return false, nil
		}
		return false, invalidf("with_vectors: %s; use enable true or false", qdrantx.ErrNamedVectors)
	}
	return false, nil
}
