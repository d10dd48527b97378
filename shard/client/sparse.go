package client

import (
	"context"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// SparseQuery makes a Query a sparse one: scored by the named sparse
// vector's inverted index. Weights, when set (one per term), multiply the
// query's values: the collection-wide idf of each term.
type SparseQuery struct {
	Name    string
	Vector  sparsevec.Vector
	Weights []float32
}

// SparseToPB is named sparse vectors on the wire, names ascending.
func SparseToPB(vs map[string]sparsevec.Vector) []*shardpb.SparseVector {
	if len(vs) == 0 {
		return nil
	}
	out := make([]*shardpb.SparseVector, 0, len(vs))
	for name, v := range vs {
		out = append(out, &shardpb.SparseVector{Name: name, Indices: v.Indices, Values: v.Values})
	}
	// Names ascending, as the shard keeps them: equal requests are equal
	// bytes.
	slices.SortFunc(out, func(a, b *shardpb.SparseVector) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// SparseFromPB is named sparse vectors off the wire, nil for none.
func SparseFromPB(in []*shardpb.SparseVector) map[string]sparsevec.Vector {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]sparsevec.Vector, len(in))
	for _, sv := range in {
		out[sv.GetName()] = sparsevec.Vector{Indices: sv.GetIndices(), Values: sv.GetValues()}
	}
	return out
}

// SparseStats is a replica's answer to a statistics round: its document
// count and the asked terms' document frequencies.
type SparseStats struct {
	// Docs is every document (coverage); Vectors those holding a vector
	// of the name (idf's N).
	Docs    uint64
	Vectors uint64
	DF      []uint64
}

// GetDocCount is Docs: what fanout reads a shard's coverage from.
func (s SparseStats) GetDocCount() uint64 { return s.Docs }

// SparseStats asks for the document count and the terms' document
// frequencies of the sparse vector name, from the slots sel names (nil:
// every row).
func (c Scoped) SparseStats(ctx context.Context, name string, terms []uint32, minIndex uint64, sel *shardpb.SlotSelection) (SparseStats, error) {
	resp, err := c.conn.shard.SparseStats(ctx, &shardpb.SparseStatsRequest{Collection: c.ref(), Name: name, Terms: terms, MinIndex: minIndex, Slots: sel})
	if err != nil {
		return SparseStats{}, shard.AsRead(shard.FromStatus(err))
	}
	return SparseStats{Docs: resp.GetDocCount(), Vectors: resp.GetVectors(), DF: resp.GetDf()}, nil
}
