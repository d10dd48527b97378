package client

import (
	"maps"
	"slices"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// NamedToPB is named dense vectors on the wire, names ascending (as the
// shard keeps them: equal requests are equal bytes).
func NamedToPB(vs map[string][]float32) []*shardpb.NamedVector {
	if len(vs) == 0 {
		return nil
	}
	out := make([]*shardpb.NamedVector, 0, len(vs))
	for _, name := range slices.Sorted(maps.Keys(vs)) {
		out = append(out, &shardpb.NamedVector{Name: name, Vector: shard.EncodeVector(vs[name])})
	}
	return out
}

// NamedFromPB is named dense vectors off the wire, nil for none; a
// vector that does not decode is an error.
func NamedFromPB(in []*shardpb.NamedVector) (map[string][]float32, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string][]float32, len(in))
	for _, nv := range in {
		v, err := shard.DecodeVector(nv.GetVector())
		if err != nil {
			return nil, err
		}
		out[nv.GetName()] = v
	}
	return out, nil
}
