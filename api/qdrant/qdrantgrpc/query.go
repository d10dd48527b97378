package qdrantgrpc

import (
	"fmt"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/coordinator"
)

// queryFusion reads a Query that is a fusion (Fusion RRF or DBSF, or a
// parameterised Rrf) and reports false for any other.
func queryFusion(q *pb.Query, name string) (*coordinator.Fusion, bool, error) {
	switch x := q.GetVariant().(type) {
	case *pb.Query_Fusion:
		switch x.Fusion {
		case pb.Fusion_RRF:
			return &coordinator.Fusion{Method: coordinator.FusionRRF}, true, nil
		case pb.Fusion_DBSF:
			return &coordinator.Fusion{Method: coordinator.FusionDBSF}, true, nil
		}
		return nil, true, invalidf("%s.fusion: unknown fusion %d, want RRF or DBSF", name, x.Fusion)
	case *pb.Query_Rrf:
		out := &coordinator.Fusion{Method: coordinator.FusionRRF, Weights: x.Rrf.GetWeights()}
		if len(out.Weights) == 0 {
			out.Weights = nil
		}
		if k := x.Rrf.K; k != nil {
			if *k < 1 {
				return nil, true, invalidf("%s.rrf.k is %d, want at least 1", name, *k)
			}
			out.K = int(*k)
		}
		return out, true, nil
	}
	return nil, false, nil
}

// refuseStage refuses what no stage of a tree may name (as decodeQuery
// refuses them): another collection to look ids up in, a named vector.
func refuseStage(lookup *pb.LookupLocation, using *string) error {
	if lookup != nil {
		return wire.Invalid(qdrantx.ErrLookupFrom)
	}
	if using != nil && *using != "" {
		return invalidf("using: %s (got %q)", qdrantx.ErrNamedVectors, *using)
	}
	return nil
}

// decodeQueryTree decodes a QueryPoints with prefetch, or with a fusion
// query (which needs one), as REST's points/query decodes it: the root
// stage and its prefetches; everything else as decodeQuery decodes a
// plain query.
func decodeQueryTree(r *pb.QueryPoints, sch coordinator.Schema) (query, error) {
	f, isFusion, err := queryFusion(r.Query, "query")
	if err != nil {
		return query{}, err
	}
	var out query
	if isFusion {
		if err := refuseShardKey(r.ShardKeySelector); err != nil {
			return query{}, err
		}
		if err := refuseStage(r.LookupFrom, r.Using); err != nil {
			return query{}, err
		}
		limit := uint64(qdrantx.DefaultLimit)
		if r.Limit != nil {
			limit = *r.Limit
		}
		out, err = decodeCommon(limit, r.GetOffset(), r.Filter, r.WithPayload, r.WithVectors, r.Params, r.ScoreThreshold)
	} else {
		out, err = decodeQuery(&pb.QueryPoints{CollectionName: r.CollectionName, Query: r.Query, Using: r.Using, Filter: r.Filter,
			Params: r.Params, ScoreThreshold: r.ScoreThreshold, Limit: r.Limit, Offset: r.Offset, WithVectors: r.WithVectors,
			WithPayload: r.WithPayload, LookupFrom: r.LookupFrom, ShardKeySelector: r.ShardKeySelector}, sch)
	}
	if err != nil {
		return query{}, err
	}
	root := coordinator.Stage{Query: out.q, Fusion: f}
	if root.Prefetch, err = decodePrefetches("prefetch", r.Prefetch, sch, 1); err != nil {
		return query{}, err
	}
	if f != nil && len(root.Prefetch) == 0 {
		return query{}, wire.Invalid("query.fusion needs prefetch: a fusion fuses the results of prefetches")
	}
	out.tree = &root
	return out, nil
}

// decodePrefetches decodes a list of PrefetchQuery named name[i].
func decodePrefetches(name string, ps []*pb.PrefetchQuery, sch coordinator.Schema, depth int) ([]coordinator.Stage, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	if depth > coordinator.MaxPrefetchDepth {
		return nil, invalidf("%s: prefetches nest deeper than %d", name, coordinator.MaxPrefetchDepth)
	}
	out := make([]coordinator.Stage, len(ps))
	for i, p := range ps {
		at := fmt.Sprintf("%s[%d]", name, i)
		st := coordinator.Stage{Name: at}
		var err error
		if st.Prefetch, err = decodePrefetches(at+".prefetch", p.GetPrefetch(), sch, depth+1); err != nil {
			return nil, err
		}
		if p.GetQuery().GetVariant() == nil && len(st.Prefetch) > 0 {
			return nil, invalidf("%s.query is missing: a prefetch with prefetches needs a query (a fusion or a vector to re-score them with)", at)
		}
		f, isFusion, err := queryFusion(p.GetQuery(), at+".query")
		if err != nil {
			return nil, err
		}
		var q query
		switch {
		case isFusion && len(st.Prefetch) == 0:
			return nil, invalidf("%s.query.fusion needs prefetch: a fusion fuses the results of prefetches", at)
		case isFusion:
			limit := uint64(qdrantx.DefaultLimit)
			if p.Limit != nil {
				limit = *p.Limit
			}
			if err = refuseStage(p.LookupFrom, p.Using); err == nil {
				q, err = decodeCommon(limit, 0, p.Filter, nil, nil, p.Params, p.ScoreThreshold)
			}
		default:
			q, err = decodeQuery(&pb.QueryPoints{Query: p.Query, Using: p.Using, Filter: p.Filter, Params: p.Params,
				ScoreThreshold: p.ScoreThreshold, Limit: p.Limit, LookupFrom: p.LookupFrom}, sch)
		}
		if err != nil {
			return nil, invalidf("%s: %v", at, err)
		}
		st.Query, st.Fusion = q.q, f
		out[i] = st
	}
	return out, nil
}
