package qdrantgrpc

import (
	"context"

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
