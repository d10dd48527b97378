package server

import (
	"context"

	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// upsertVersionNamed is the UpsertCommand version written when a point
// carries named dense vectors: a replica of older code refuses the entry
// rather than apply the point without them.
const upsertVersionNamed = 2

// editVersionNamed is the EditCommand version written when an edit
// carries named dense vectors, for the same reason.
const editVersionNamed = 2

// namedSettings is col's named vector name as a dense collection's
// settings, for checkVector and decodeVector; ok is false when the
// collection has no named vector of that name.
func namedSettings(set catalog.Settings, name string) (catalog.Settings, bool) {
	d, ok := set.Named[name]
	if !ok {
		return catalog.Settings{}, false
	}
	return catalog.Settings{Dim: d.Dim, Metric: d.Metric}, true
}

// checkNamed checks a point's named dense vectors as the router does (a
// name the collection has, at most once, of its size, finite, not zero
// under cosine) and returns them as the log entry carries them: names
// ascending, normalised under cosine on the leader so every replica
// applies the same bytes.
func (s *Server) checkNamed(set catalog.Settings, pv *shardpb.Vector, i int) ([]*shardpb.NamedVector, error) {
	in := pv.GetNamed()
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]*shardpb.NamedVector, 0, len(in))
	seen := map[string]bool{}
	for _, nv := range in {
		name := nv.GetName()
		ns, ok := namedSettings(set, name)
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "vector %d: the collection has no named vector %q", i, name)
		}
		if seen[name] {
			return nil, status.Errorf(codes.InvalidArgument, "vector %d: named vector %q given twice", i, name)
		}
		seen[name] = true
		b, err := s.logVector(ns, nv.GetVector(), i)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "named vector %q: %v", name, status.Convert(err).Message())
		}
		out = append(out, &shardpb.NamedVector{Name: name, Vector: b})
	}
	slices.SortFunc(out, func(a, b *shardpb.NamedVector) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// checkUnnamed refuses an unnamed vector sent to a collection that has
// none (only named vectors), naming the problem rather than its size.
func checkUnnamed(set catalog.Settings, pv *shardpb.Vector, i int) error {
	if !set.HasUnnamed() && len(pv.GetVector()) > 0 {
		return status.Errorf(codes.InvalidArgument, "vector %d: the collection has no unnamed vector, only named ones (%s)", i, strings.Join(slices.Sorted(maps.Keys(set.Named)), ", "))
	}
	return nil
}

// namedOfPB is a point's named vectors off a log entry or snapshot row,
// nil for none; ok is false when one does not fit the collection (an
// entry of other code: every replica refuses it alike).
func namedOfPB(set catalog.Settings, in []*shardpb.NamedVector) (map[string][]float32, bool) {
	if len(in) == 0 {
		return nil, true
	}
	out := make(map[string][]float32, len(in))
	for _, nv := range in {
		d, ok := set.Named[nv.GetName()]
		if !ok {
			return nil, false
		}
		v, err := shard.DecodeVector(nv.GetVector())
		if err != nil || len(v) != d.Dim {
			return nil, false
		}
		out[nv.GetName()] = v
	}
	return out, true
}

// namedToPB is a point's named vectors on the wire, names ascending.
func namedToPB(vs map[string][]float32) []*shardpb.NamedVector {
	if len(vs) == 0 {
		return nil
	}
	out := make([]*shardpb.NamedVector, 0, len(vs))
	for _, name := range slices.Sorted(maps.Keys(vs)) {
		out = append(out, &shardpb.NamedVector{Name: name, Vector: shard.EncodeVector(vs[name])})
	}
	return out
}

// namedDims are the collection's named vectors' sizes, for the store.
func namedDims(set catalog.Settings) map[string]int {
	if len(set.Named) == 0 {
		return nil
	}
	out := make(map[string]int, len(set.Named))
	for name, d := range set.Named {
		out[name] = d.Dim
	}
	return out
}

// namedQueryMetric is the metric a query is scored by: its named
// vector's, or the collection's.
func namedQueryMetric(set catalog.Settings, using string) vector.Metric {
	if d, ok := set.Named[using]; ok {
		return d.Metric
	}
	return set.Metric
}

// scanNamed answers the queries idx of qs, each by a named dense vector,
// into results: one exact float32 pass per name over the rows sel names
// (every row when nil) that hold the vector. A named vector keeps no int8
// codes, so its answers are always exact.
func (s *Server) scanNamed(ctx context.Context, v *store.ScanView, qs []scanQuery, idx []int, sel []uint32, results []scanResult) error {
	for _, group := range groupBy(len(idx), func(j int) string { return qs[idx[j]].Using }) {
		first := qs[idx[group[0]]]
		rows, has, err := v.NamedRows(first.Using, sel)
		if err != nil {
			return err
		}
		vs := make([]vector.Query, len(group))
		for j, gi := range group {
			vs[j] = qs[idx[gi]].Query
		}
		hs, err := s.cfg.Kernel.ScanSelected(ctx, first.Metric, rows, vs, has)
		if err != nil {
			return err
		}
		for j, gi := range group {
			results[idx[gi]] = scanResult{Hits: hs[j], Kind: ScanExact}
		}
	}
	return nil
}

// checkDeleteVectors checks delete_vectors' names: at least one, each a
// named dense or sparse vector of the collection (the unnamed vector
// cannot be removed from a point).
func checkDeleteVectors(set catalog.Settings, names []string) error {
	if len(names) == 0 {
		return status.Error(codes.InvalidArgument, "delete_vectors names no vector")
	}
	for _, name := range names {
		_, named := set.Named[name]
		_, sparse := set.Sparse[name]
		if !named && !sparse {
			return status.Errorf(codes.InvalidArgument, "delete_vectors: the collection has no named or sparse vector %q", name)
		}
	}
	return nil
}
