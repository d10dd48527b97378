package server

import (
	"context"
	"math"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/shard/store/sparse"
)

// upsertVersion is the UpsertCommand version this code writes when a
// point carries sparse vectors, and the newest it applies.
const upsertVersion = 1

// checkSparse checks a point's sparse vectors as the router does (a
// vector the collection names, at most once, each valid) and returns them
// as the log entry carries them: names ascending.
func checkSparse(set catalog.Settings, pv *shardpb.Vector, i int) ([]*shardpb.SparseVector, error) {
	in := pv.GetSparse()
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]*shardpb.SparseVector, 0, len(in))
	seen := map[string]bool{}
	for _, sv := range in {
		name := sv.GetName()
		if _, ok := set.Sparse[name]; !ok {
			return nil, status.Errorf(codes.InvalidArgument, "vector %d: the collection has no sparse vector %q", i, name)
		}
		if seen[name] {
			return nil, status.Errorf(codes.InvalidArgument, "vector %d: sparse vector %q given twice", i, name)
		}
		seen[name] = true
		if err := (sparse.Vector{Indices: sv.GetIndices(), Values: sv.GetValues()}).Validate(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "vector %d: sparse vector %q: %v", i, name, err)
		}
		out = append(out, &shardpb.SparseVector{Name: name, Indices: sv.GetIndices(), Values: sv.GetValues()})
	}
	slices.SortFunc(out, func(a, b *shardpb.SparseVector) int {
		switch {
		case a.GetName() < b.GetName():
			return -1
		case a.GetName() > b.GetName():
			return 1
		}
		return 0
	})
	return out, nil
}

// sparseOfPB is a point's sparse vectors off a log entry or snapshot row,
// nil for none.
func sparseOfPB(in []*shardpb.SparseVector) map[string]sparse.Vector {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]sparse.Vector, len(in))
	for _, sv := range in {
		out[sv.GetName()] = sparse.Vector{Indices: sv.GetIndices(), Values: sv.GetValues()}
	}
	return out
}

// sparseToPB is a point's sparse vectors on the wire, names ascending.
func sparseToPB(vs map[string]sparse.Vector) []*shardpb.SparseVector {
	if len(vs) == 0 {
		return nil
	}
	out := make([]*shardpb.SparseVector, 0, len(vs))
	for name, v := range vs {
		out = append(out, &shardpb.SparseVector{Name: name, Indices: v.Indices, Values: v.Values})
	}
	slices.SortFunc(out, func(a, b *shardpb.SparseVector) int {
		if a.GetName() < b.GetName() {
			return -1
		}
		return 1
	})
	return out
}

// sparseNames are the collection's sparse vectors, for the store.
func sparseNames(set catalog.Settings) []string {
	out := make([]string, 0, len(set.Sparse))
	for name := range set.Sparse {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// decodeSparseQuery checks a sparse query as the router does.
func decodeSparseQuery(set catalog.Settings, i int, pq *shardpb.Query) (*store.SparseQuery, error) {
	sq := pq.GetSparse()
	if len(pq.GetVector()) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "query %d: a sparse query carries no dense vector", i)
	}
	if _, ok := set.Sparse[sq.GetName()]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "query %d: the collection has no sparse vector %q", i, sq.GetName())
	}
	v := sparse.Vector{Indices: sq.GetIndices(), Values: sq.GetValues()}
	if err := v.Validate(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "query %d: sparse vector %q: %v", i, sq.GetName(), err)
	}
	w := sq.GetWeights()
	if len(w) != 0 && len(w) != v.Len() {
		return nil, status.Errorf(codes.InvalidArgument, "query %d: %d weights for %d terms", i, len(w), v.Len())
	}
	for j, x := range w {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, status.Errorf(codes.InvalidArgument, "query %d: weight %d is not a finite number", i, j)
		}
	}
	if len(w) == 0 {
		w = nil
	}
	return &store.SparseQuery{Name: sq.GetName(), Vector: v, Weights: w, K: int(pq.GetK()), Exclude: pq.GetExcludeId()}, nil
}

// SparseStats implements shardpb.ShardServer: the document count and the
// terms' document frequencies of one sparse vector, for the router's
// collection-wide idf. It reads like a search (min_index, slots).
func (s *Server) SparseStats(ctx context.Context, req *shardpb.SparseStatsRequest) (*shardpb.SparseStatsResponse, error) {
	if err := s.readable(ctx, req.GetMinIndex()); err != nil {
		return nil, err
	}
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		return nil, err
	}
	if _, ok := col.settings.Sparse[req.GetName()]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "the collection has no sparse vector %q", req.GetName())
	}
	keep, err := s.cfg.Collections.slotReadFilter(col, req.GetSlots())
	if err != nil {
		return nil, err
	}
	st, err := col.mem.SparseStats(req.GetName(), req.GetTerms(), keep)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sparse stats: %v", err)
	}
	out := &shardpb.SparseStatsResponse{DocCount: uint64(st.Docs), Vectors: uint64(st.Vectors), Df: make([]uint64, len(st.DF))}
	for i, n := range st.DF {
		out.Df[i] = uint64(n)
	}
	return out, nil
}
