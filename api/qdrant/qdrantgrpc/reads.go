package qdrantgrpc

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
)

// Facet counts the values of a payload key under a filter, exactly,
// across every shard (REST's POST /collections/{c}/facet).
func (p *pointsService) Facet(ctx context.Context, r *pb.FacetCounts) (*pb.FacetResponse, error) {
	coll, err := p.collection(ctx, r.GetCollectionName(), apikey.Read)
	if err != nil {
		return nil, err
	}
	f, err := decodeFacet(r)
	if err != nil {
		return nil, err
	}
	var ans coordinator.FacetAnswer
	err = p.gather(ctx, r.Timeout, func(ctx context.Context, call callParams) (fanout.Summary, error) {
		f.Collection, f.Budget, f.AllowPartial = coll, call.b, call.partial
		var err error
		ans, err = p.s.cfg.Coordinator.Facet(ctx, f)
		return ans.Summary, err
	})
	if err != nil {
		return nil, err
	}
	out := &pb.FacetResponse{Hits: make([]*pb.FacetHit, len(ans.Hits)), Time: elapsed(ctx)}
	for i, h := range ans.Hits {
		v := &pb.FacetValue{}
		switch x := h.Value.(type) {
		case string:
			v.Variant = &pb.FacetValue_StringValue{StringValue: x}
		case int64:
			v.Variant = &pb.FacetValue_IntegerValue{IntegerValue: x}
		case bool:
			v.Variant = &pb.FacetValue_BoolValue{BoolValue: x}
		}
		out.Hits[i] = &pb.FacetHit{Value: v, Count: h.Count}
	}
	return out, nil
}

func decodeFacet(r *pb.FacetCounts) (coordinator.Facet, error) {
	if err := refuseShardKey(r.ShardKeySelector); err != nil {
		return coordinator.Facet{}, err
	}
	if err := qdrantx.CheckKey("key", r.GetKey()); err != nil {
		return coordinator.Facet{}, err
	}
	out := coordinator.Facet{Key: r.GetKey(), Limit: qdrantx.DefaultLimit}
	if r.Limit != nil {
		if *r.Limit < 1 || *r.Limit > coordinator.MaxFacetLimit {
			return coordinator.Facet{}, invalidf("limit is %d, want 1..%d", *r.Limit, coordinator.MaxFacetLimit)
		}
		out.Limit = int(*r.Limit)
	}
	var err error
	if out.Filter, err = decodeFilter(r.Filter); err != nil {
		return coordinator.Facet{}, err
	}
	return out, nil // exact is accepted: trawl's counts are always exact
}

// decodeOrderBy reads a scroll's OrderBy: a key, a direction and a
// numeric start_from (a datetime or timestamp one is refused: trawl
// orders by numbers only).
func decodeOrderBy(ob *pb.OrderBy) (*coordinator.OrderBy, error) {
	if err := qdrantx.CheckKey("order_by.key", ob.GetKey()); err != nil {
		return nil, err
	}
	out := &coordinator.OrderBy{Key: ob.GetKey()}
	if ob.Direction != nil {
		switch *ob.Direction {
		case pb.Direction_Asc:
		case pb.Direction_Desc:
			out.Descending = true
		default:
			return nil, invalidf("order_by.direction %d is not Asc or Desc", *ob.Direction)
		}
	}
	if ob.StartFrom != nil {
		switch x := ob.StartFrom.GetValue().(type) {
		case *pb.StartFrom_Float:
			out.StartFrom = x.Float
		case *pb.StartFrom_Integer:
			out.StartFrom = float64(x.Integer)
		case nil:
			return nil, wire.Invalid("order_by.start_from is empty: give a float or an integer")
		default:
			return nil, wire.Invalid("order_by.start_from: " + qdrantx.ErrOrderByDatetime)
		}
		out.HasStart = true
	}
	return out, nil
}

// orderValue is a listed point's order_by value as Qdrant answers it.
func orderValue(pt coordinator.Point) *pb.OrderValue {
	if pt.OrderInt {
		return &pb.OrderValue{Variant: &pb.OrderValue_Int{Int: int64(pt.OrderValue)}}
	}
	return &pb.OrderValue{Variant: &pb.OrderValue_Float{Float: pt.OrderValue}}
}

// Recommend is the legacy recommendation: examples as ids and vectors,
// answered as Search answers.
func (p *pointsService) Recommend(ctx context.Context, r *pb.RecommendPoints) (*pb.RecommendResponse, error) {
	lists, err := p.search(ctx, r.GetCollectionName(), r.Timeout, fanout.PathSearch, func(sch coordinator.Schema) ([]query, error) {
		q, err := decodeRecommend(r, sch)
		return []query{q}, err
	})
	if err != nil {
		return nil, err
	}
	return &pb.RecommendResponse{Result: lists[0], Time: elapsed(ctx)}, nil
}

// RecommendBatch is Recommend's requests in one fan-out.
func (p *pointsService) RecommendBatch(ctx context.Context, r *pb.RecommendBatchPoints) (*pb.RecommendBatchResponse, error) {
	lists, err := p.search(ctx, r.GetCollectionName(), r.Timeout, fanout.PathSearchBatch, func(sch coordinator.Schema) ([]query, error) {
		return decodeBatch(r.GetRecommendPoints(), r.GetCollectionName(), "recommend_points", func(q *pb.RecommendPoints) (query, error) { return decodeRecommend(q, sch) })
	})
	if err != nil {
		return nil, err
	}
	out := &pb.RecommendBatchResponse{Result: make([]*pb.BatchResult, len(lists)), Time: elapsed(ctx)}
	for i, l := range lists {
		out.Result[i] = &pb.BatchResult{Result: l}
	}
	return out, nil
}

// RecommendGroups is a grouped recommendation (REST's
// recommend/groups).
func (p *pointsService) RecommendGroups(ctx context.Context, r *pb.RecommendPointGroups) (*pb.RecommendGroupsResponse, error) {
	groups, err := p.groups(ctx, r.GetCollectionName(), r.Timeout, func(sch coordinator.Schema) (groupRequest, error) {
		if r.WithLookup != nil {
			return groupRequest{}, wire.Invalid(errWithLookup)
		}
		q, err := decodeRecommend(&pb.RecommendPoints{Positive: r.Positive, Negative: r.Negative, Filter: r.Filter, Limit: 1,
			WithPayload: r.WithPayload, Params: r.Params, ScoreThreshold: r.ScoreThreshold, Using: r.Using, WithVectors: r.WithVectors,
			LookupFrom: r.LookupFrom, Strategy: r.Strategy, PositiveVectors: r.PositiveVectors, NegativeVectors: r.NegativeVectors,
			ShardKeySelector: r.ShardKeySelector}, sch)
		if err != nil {
			return groupRequest{}, err
		}
		return groupSearch(q, r.GetGroupBy(), uint64(r.GetGroupSize()), uint64(r.GetLimit()))
	})
	if err != nil {
		return nil, err
	}
	return &pb.RecommendGroupsResponse{Result: &pb.GroupsResult{Groups: groups}, Time: elapsed(ctx)}, nil
}

func decodeRecommend(r *pb.RecommendPoints, sch coordinator.Schema) (query, error) {
	switch {
	case r.ShardKeySelector != nil:
		return query{}, wire.Invalid(qdrantx.ErrShardKey)
	case r.LookupFrom != nil:
		return query{}, wire.Invalid(qdrantx.ErrLookupFrom)
	case r.Using != nil && *r.Using != "":
		return query{}, invalidf("using: %s (got %q)", qdrantx.ErrNamedVectors, *r.Using)
	}
	if err := checkStrategy(r.Strategy, "strategy"); err != nil {
		return query{}, err
	}
	out, err := decodeCommon(r.GetLimit(), r.GetOffset(), r.Filter, r.WithPayload, r.WithVectors, r.Params, r.ScoreThreshold)
	if err != nil {
		return query{}, err
	}
	rec := &coordinator.Recommend{}
	for _, side := range []struct {
		ids   []*pb.PointId
		vecs  []*pb.Vector
		where string
		to    *[]coordinator.Example
	}{{r.Positive, r.PositiveVectors, "positive", &rec.Positive}, {r.Negative, r.NegativeVectors, "negative", &rec.Negative}} {
		for i, id := range side.ids {
			s, err := decodeID(id, fmt.Sprintf("%s[%d]", side.where, i))
			if err != nil {
				return query{}, err
			}
			*side.to = append(*side.to, coordinator.Example{ID: s})
		}
		for i, v := range side.vecs {
			x, err := decodeVector(v, fmt.Sprintf("%s_vectors[%d]", side.where, i), sch)
			if err != nil {
				return query{}, err
			}
			*side.to = append(*side.to, coordinator.Example{Vector: x})
		}
	}
	if out.q.Recommend, err = checkExamples(rec, "positive"); err != nil {
		return query{}, err
	}
	return out, nil
}

// decodeRecommendInput reads Query's recommend variant.
func decodeRecommendInput(in *pb.RecommendInput, sch coordinator.Schema) (*coordinator.Recommend, error) {
	if err := checkStrategy(in.Strategy, "query.recommend.strategy"); err != nil {
		return nil, err
	}
	rec := &coordinator.Recommend{}
	for _, side := range []struct {
		ins   []*pb.VectorInput
		where string
		to    *[]coordinator.Example
	}{{in.GetPositive(), "query.recommend.positive", &rec.Positive}, {in.GetNegative(), "query.recommend.negative", &rec.Negative}} {
		for i, vi := range side.ins {
			at := fmt.Sprintf("%s[%d]", side.where, i)
			var ex coordinator.Example
			var err error
			switch x := vi.GetVariant().(type) {
			case *pb.VectorInput_Dense:
				ex.Vector, err = checkVector(x.Dense.GetData(), at, sch)
			case *pb.VectorInput_Id:
				ex.ID, err = decodeID(x.Id, at)
			case *pb.VectorInput_Sparse:
				err = wire.Invalid(at + ": " + qdrantx.ErrSparse)
			case *pb.VectorInput_MultiDense:
				err = wire.Invalid(at + ": " + qdrantx.ErrMulti)
			case nil:
				err = wire.Invalid(at + " is empty: give a dense vector or a point id")
			default:
				err = wire.Invalid(at + ": " + errInference)
			}
			if err != nil {
				return nil, err
			}
			*side.to = append(*side.to, ex)
		}
	}
	return checkExamples(rec, "query.recommend.positive")
}

func checkStrategy(s *pb.RecommendStrategy, member string) error {
	if s == nil {
		return nil
	}
	switch *s {
	case pb.RecommendStrategy_AverageVector:
		return nil
	case pb.RecommendStrategy_BestScore:
		return qdrantx.CheckRecommendStrategy(member, "best_score")
	case pb.RecommendStrategy_SumScores:
		return qdrantx.CheckRecommendStrategy(member, "sum_scores")
	}
	return qdrantx.CheckRecommendStrategy(member, s.String())
}

// checkExamples refuses a recommendation without a positive example or
// with too many.
func checkExamples(rec *coordinator.Recommend, positive string) (*coordinator.Recommend, error) {
	if len(rec.Positive) == 0 {
		return nil, wire.Invalid(positive + " is empty: the average_vector strategy needs at least one positive example")
	}
	if n := len(rec.Positive) + len(rec.Negative); n > coordinator.MaxExamples {
		return nil, invalidf("recommend has %d examples, want at most %d", n, coordinator.MaxExamples)
	}
	return rec, nil
}

// SearchGroups is the legacy grouped search (REST's search/groups).
func (p *pointsService) SearchGroups(ctx context.Context, r *pb.SearchPointGroups) (*pb.SearchGroupsResponse, error) {
	groups, err := p.groups(ctx, r.GetCollectionName(), r.Timeout, func(sch coordinator.Schema) (groupRequest, error) {
		if r.WithLookup != nil {
			return groupRequest{}, wire.Invalid(errWithLookup)
		}
		q, err := decodeSearch(&pb.SearchPoints{Vector: r.Vector, Filter: r.Filter, Limit: 1, WithPayload: r.WithPayload, Params: r.Params,
			ScoreThreshold: r.ScoreThreshold, VectorName: r.VectorName, WithVectors: r.WithVectors, ShardKeySelector: r.ShardKeySelector,
			SparseIndices: r.SparseIndices}, sch)
		if err != nil {
			return groupRequest{}, err
		}
		return groupSearch(q, r.GetGroupBy(), uint64(r.GetGroupSize()), uint64(r.GetLimit()))
	})
	if err != nil {
		return nil, err
	}
	return &pb.SearchGroupsResponse{Result: &pb.GroupsResult{Groups: groups}, Time: elapsed(ctx)}, nil
}

// QueryGroups is a grouped query (REST's query/groups): group_size 3
// and limit 10 by default.
func (p *pointsService) QueryGroups(ctx context.Context, r *pb.QueryPointGroups) (*pb.QueryGroupsResponse, error) {
	groups, err := p.groups(ctx, r.GetCollectionName(), r.Timeout, func(sch coordinator.Schema) (groupRequest, error) {
		if r.WithLookup != nil {
			return groupRequest{}, wire.Invalid(errWithLookup)
		}
		q, err := decodeQuery(&pb.QueryPoints{Prefetch: r.Prefetch, Query: r.Query, Using: r.Using, Filter: r.Filter, Params: r.Params,
			ScoreThreshold: r.ScoreThreshold, WithPayload: r.WithPayload, WithVectors: r.WithVectors, LookupFrom: r.LookupFrom,
			ShardKeySelector: r.ShardKeySelector}, sch)
		if err != nil {
			return groupRequest{}, err
		}
		size, limit := uint64(3), uint64(qdrantx.DefaultLimit)
		if r.GroupSize != nil {
			size = *r.GroupSize
		}
		if r.Limit != nil {
			limit = *r.Limit
		}
		return groupSearch(q, r.GetGroupBy(), size, limit)
	})
	if err != nil {
		return nil, err
	}
	return &pb.QueryGroupsResponse{Result: &pb.GroupsResult{Groups: groups}, Time: elapsed(ctx)}, nil
}

const errWithLookup = "with_lookup is not supported: trawl groups points of one collection"

// groupRequest is a decoded grouped search.
type groupRequest struct {
	g       coordinator.GroupSearch
	exclude []string
}

func groupSearch(q query, groupBy string, size, limit uint64) (groupRequest, error) {
	if err := qdrantx.CheckKey("group_by", groupBy); err != nil {
		return groupRequest{}, err
	}
	if size < 1 || size > coordinator.MaxGroupSize {
		return groupRequest{}, invalidf("group_size is %d, want 1..%d", size, coordinator.MaxGroupSize)
	}
	if limit < 1 || limit > coordinator.MaxGroups {
		return groupRequest{}, invalidf("limit is %d, want 1..%d", limit, coordinator.MaxGroups)
	}
	return groupRequest{g: coordinator.GroupSearch{Query: q.q, Tree: q.tree, GroupBy: groupBy, GroupSize: int(size), Limit: int(limit)}, exclude: q.exclude}, nil
}

// groups runs a grouped search: the same coordinator.SearchGroups as
// REST's groups routes, its verdict in the trailer.
func (p *pointsService) groups(ctx context.Context, name string, timeout *uint64, decode func(coordinator.Schema) (groupRequest, error)) ([]*pb.PointGroup, error) {
	arrived := time.Now()
	coll, err := p.collection(ctx, name, apikey.Read)
	if err != nil {
		return nil, err
	}
	gr, err := decode(coll.Schema())
	if err != nil {
		return nil, err
	}
	b, err := p.s.resolveBudget(ctx, timeout)
	if err != nil {
		return nil, err
	}
	partial, err := allowPartial(ctx)
	if err != nil {
		return nil, err
	}
	permit, err := p.s.admit(ctx, gr.g.Limit, b.Deadline)
	if err != nil {
		return nil, err
	}
	gr.g.Collection, gr.g.Budget, gr.g.AllowPartial = coll, b, partial
	ans, err := p.s.cfg.Coordinator.SearchGroups(ctx, gr.g)
	permit.Done(time.Since(arrived), wire.Late(ans.Summary))
	if ans.Summary.ShardsTotal > 0 {
		setVerdict(ctx, ans.Summary)
	}
	if err != nil {
		if ans.Summary.ShardsTotal == 0 && coordinator.CodeOf(err) == coordinator.CodeNotFound {
			return nil, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: err.Error()}
		}
		return nil, err
	}
	out := make([]*pb.PointGroup, len(ans.Groups))
	for i, g := range ans.Groups {
		pg := &pb.PointGroup{Id: &pb.GroupId{}, Hits: make([]*pb.ScoredPoint, len(g.Hits))}
		switch v := g.Value.(type) {
		case string:
			pg.Id.Kind = &pb.GroupId_StringValue{StringValue: v}
		case int64:
			if v >= 0 {
				pg.Id.Kind = &pb.GroupId_UnsignedValue{UnsignedValue: uint64(v)}
			} else {
				pg.Id.Kind = &pb.GroupId_IntegerValue{IntegerValue: v}
			}
		}
		for j, h := range g.Hits {
			sp := &pb.ScoredPoint{Id: encodeID(h.ID), Score: h.Score, Vectors: vectorsOutput(coll.Schema(), h.Vector, h.Sparse, h.Named)}
			if h.Payload != nil {
				if sp.Payload, err = projectedValues(h.Payload, gr.exclude); err != nil {
					return nil, err
				}
			}
			pg.Hits[j] = sp
		}
		out[i] = pg
	}
	return out, nil
}
