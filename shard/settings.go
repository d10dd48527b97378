package shard

import (
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
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
	if len(s.Named) > 0 {
		out.NamedVectors = make(map[string]*shardpb.DenseVectorSettings, len(s.Named))
		for name, d := range s.Named {
			out.NamedVectors[name] = &shardpb.DenseVectorSettings{Dim: uint32(d.Dim), Metric: d.Metric.String(), Quantization: d.Quantization}
		}
	}
	return out
}

// NamedFromPB is the named dense vectors of settings read off the wire
// (not yet normalised), nil for none. A metric that does not parse is
// kept as an unknown one, which Validate refuses.
func NamedFromPB(p map[string]*shardpb.DenseVectorSettings) map[string]catalog.Dense {
	if len(p) == 0 {
		return nil
	}
	out := make(map[string]catalog.Dense, len(p))
	for name, d := range p {
		m, err := vector.ParseMetric(d.GetMetric())
		if err != nil {
			m = vector.Metric(255)
		}
		out[name] = catalog.Dense{Dim: int(d.GetDim()), Metric: m, Quantization: d.GetQuantization()}
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
