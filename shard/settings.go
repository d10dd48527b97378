package shard

import (
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// SettingsToPB is a collection's settings on the wire.
func SettingsToPB(s catalog.Settings) *shardpb.CollectionSettings {
	out := &shardpb.CollectionSettings{Dim: uint32(s.Dim), Metric: s.Metric.String(), Quantization: s.Quantization, Index: s.Index,
		Float32Placement: s.Float32}
	if len(s.Sparse) > 0 {
		out.SparseVectors = make(map[string]*shardpb.SparseVectorSettings, len(s.Sparse))
		for name, sp := range s.Sparse {
			out.SparseVectors[name] = &shardpb.SparseVectorSettings{Modifier: sp.Modifier}
		}
	}
	return out
}

// SparseFromPB is the sparse vectors of settings read off the wire (not
// yet normalised), nil for none.
func SparseFromPB(p map[string]*shardpb.SparseVectorSettings) map[string]catalog.Sparse {
	if len(p) == 0 {
		return nil
	}
	out := make(map[string]catalog.Sparse, len(p))
	for name, sp := range p {
		out[name] = catalog.Sparse{Modifier: sp.GetModifier()}
	}
	return out
}
