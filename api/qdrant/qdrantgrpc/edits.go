package qdrantgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/filter"
)

// Point edits: payload and vector updates and UpdateBatch, decoded into
// coordinator.Edits and applied by Coordinator.Edit, as REST's twins are.

// SetPayload merges payload into the selected points' payloads (under
// key, a dotted path, when given).
func (p *pointsService) SetPayload(ctx context.Context, r *pb.SetPayloadPoints) (*pb.PointsOperationResponse, error) {
	return p.editOne(ctx, r.GetCollectionName(), func(coordinator.Schema) (coordinator.Edit, error) {
		return decodeSetPayload(r.GetPayload(), r.GetPointsSelector(), r.Key, r.ShardKeySelector, false)
	})
}

// OverwritePayload replaces the selected points' payloads.
func (p *pointsService) OverwritePayload(ctx context.Context, r *pb.SetPayloadPoints) (*pb.PointsOperationResponse, error) {
	return p.editOne(ctx, r.GetCollectionName(), func(coordinator.Schema) (coordinator.Edit, error) {
		return decodeSetPayload(r.GetPayload(), r.GetPointsSelector(), r.Key, r.ShardKeySelector, true)
	})
}

// DeletePayload removes top-level keys from the selected points' payloads.
func (p *pointsService) DeletePayload(ctx context.Context, r *pb.DeletePayloadPoints) (*pb.PointsOperationResponse, error) {
	return p.editOne(ctx, r.GetCollectionName(), func(coordinator.Schema) (coordinator.Edit, error) {
		return decodeDeletePayload(r.GetKeys(), r.GetPointsSelector(), r.ShardKeySelector)
	})
}

// ClearPayload removes the selected points' whole payloads.
func (p *pointsService) ClearPayload(ctx context.Context, r *pb.ClearPayloadPoints) (*pb.PointsOperationResponse, error) {
	return p.editOne(ctx, r.GetCollectionName(), func(coordinator.Schema) (coordinator.Edit, error) {
		return decodeSelected(coordinator.EditClearPayload, r.GetPoints(), r.ShardKeySelector, "points")
	})
}

// UpdateVectors replaces existing points' vectors, keeping their payloads.
func (p *pointsService) UpdateVectors(ctx context.Context, r *pb.UpdatePointVectors) (*pb.PointsOperationResponse, error) {
	return p.editOne(ctx, r.GetCollectionName(), func(sch coordinator.Schema) (coordinator.Edit, error) {
		return decodeUpdateVectors(r.GetPoints(), r.ShardKeySelector, r.UpdateFilter, sch)
	})
}

// DeleteVectors removes named and sparse vectors from points (a point
// cannot be without its unnamed vector).
func (p *pointsService) DeleteVectors(ctx context.Context, r *pb.DeletePointVectors) (*pb.PointsOperationResponse, error) {
	return p.editOne(ctx, r.GetCollectionName(), func(sch coordinator.Schema) (coordinator.Edit, error) {
		return decodeDeleteVectors(r.GetPointsSelector(), r.GetVectors(), sch)
	})
}

// UpdateBatch applies an ordered list of operations, answering one
// result per operation.
func (p *pointsService) UpdateBatch(ctx context.Context, r *pb.UpdateBatchPoints) (*pb.UpdateBatchResponse, error) {
	var n int
	err := p.edit(ctx, r.GetCollectionName(), func(sch coordinator.Schema) ([]coordinator.Edit, error) {
		n = len(r.GetOperations())
		return decodeUpdateBatch(r.GetOperations(), sch)
	})
	if err != nil {
		return nil, err
	}
	out := &pb.UpdateBatchResponse{Time: elapsed(ctx)}
	for range n {
		out.Result = append(out.Result, &pb.UpdateResult{Status: pb.UpdateStatus_Completed})
	}
	return out, nil
}

func (p *pointsService) editOne(ctx context.Context, name string, decode func(coordinator.Schema) (coordinator.Edit, error)) (*pb.PointsOperationResponse, error) {
	err := p.edit(ctx, name, func(sch coordinator.Schema) ([]coordinator.Edit, error) {
		e, err := decode(sch)
		if err != nil {
			return nil, err
		}
		return []coordinator.Edit{e}, nil
	})
	if err != nil {
		return nil, err
	}
	return completed(ctx), nil
}

// edit resolves the collection, decodes and applies the edits.
func (p *pointsService) edit(ctx context.Context, name string, decode func(coordinator.Schema) ([]coordinator.Edit, error)) error {
	coll, err := p.collection(ctx, name, apikey.Write)
	if err != nil {
		return err
	}
	edits, err := decode(coll.Schema())
	if err != nil {
		return err
	}
	start := time.Now()
	permit, err := p.s.admit(ctx, 1, 0)
	if err != nil {
		return err
	}
	results, err := p.s.cfg.Coordinator.Edit(ctx, coll, edits)
	permit.Done(time.Since(start), false)
	if err != nil {
		return err
	}
	if werr := qdrantx.EditFailure(results); werr != nil {
		return werr
	}
	return nil
}

// decodeSelection decodes the points (ids) or filter an edit acts on; an
// empty filter, which would edit every point, is refused.
func decodeSelection(sel *pb.PointsSelector, where string, e *coordinator.Edit) error {
	switch x := sel.GetPointsSelectorOneOf().(type) {
	case *pb.PointsSelector_Points:
		ids, err := decodeIDs(x.Points.GetIds(), where, qdrantx.MaxUpsert)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return invalidf("%s has no ids", where)
		}
		e.IDs = ids
	case *pb.PointsSelector_Filter:
		f, err := decodeFilter(x.Filter)
		if err != nil {
			return err
		}
		if f.Empty() {
			return wire.Invalid(qdrantx.ErrEmptyEdit)
		}
		e.Filter = f
	default:
		return invalidf("%s is missing: give ids or a filter", where)
	}
	return nil
}

func decodeSelected(kind coordinator.EditKind, sel *pb.PointsSelector, sk *pb.ShardKeySelector, where string) (coordinator.Edit, error) {
	if err := refuseShardKey(sk); err != nil {
		return coordinator.Edit{}, err
	}
	e := coordinator.Edit{Kind: kind}
	return e, decodeSelection(sel, where, &e)
}

func decodeSetPayload(payload map[string]*pb.Value, sel *pb.PointsSelector, key *string, sk *pb.ShardKeySelector, overwrite bool) (coordinator.Edit, error) {
	kind := coordinator.EditSetPayload
	if overwrite {
		kind = coordinator.EditOverwritePayload
		if key != nil {
			return coordinator.Edit{}, wire.Invalid(qdrantx.ErrOverwriteKey)
		}
	}
	e, err := decodeSelected(kind, sel, sk, "points_selector")
	if err != nil {
		return coordinator.Edit{}, err
	}
	if e.Payload, err = payloadJSON(payload, "payload"); err != nil {
		return coordinator.Edit{}, err
	}
	if e.Payload == nil {
		e.Payload = []byte("{}")
	}
	if key != nil {
		if _, err := filter.PayloadPath(*key); err != nil {
			return coordinator.Edit{}, wire.Invalid(err.Error())
		}
		e.Key = *key
	}
	return e, nil
}

func decodeDeletePayload(keys []string, sel *pb.PointsSelector, sk *pb.ShardKeySelector) (coordinator.Edit, error) {
	if len(keys) == 0 {
		return coordinator.Edit{}, wire.Invalid("keys is empty: give the payload keys to delete")
	}
	for i, k := range keys {
		if k == "" || strings.ContainsAny(k, ".[]") {
			return coordinator.Edit{}, invalidf("keys[%d] (%q): want a top-level payload key (trawl deletes whole top-level keys, not nested paths)", i, k)
		}
	}
	e, err := decodeSelected(coordinator.EditDeletePayload, sel, sk, "points_selector")
	e.Keys = keys
	return e, err
}

func decodeUpdateVectors(points []*pb.PointVectors, sk *pb.ShardKeySelector, updateFilter *pb.Filter, sch coordinator.Schema) (coordinator.Edit, error) {
	switch {
	case sk != nil:
		return coordinator.Edit{}, wire.Invalid(qdrantx.ErrShardKey)
	case updateFilter != nil:
		return coordinator.Edit{}, wire.Invalid("update_filter is not supported: trawl updates the vectors of the listed points unconditionally")
	case len(points) < 1 || len(points) > qdrantx.MaxUpsert:
		return coordinator.Edit{}, invalidf("points has %d entries, want 1..%d", len(points), qdrantx.MaxUpsert)
	}
	e := coordinator.Edit{Kind: coordinator.EditUpdateVectors, Points: make([]coordinator.Record, len(points))}
	seen := make(map[string]int, len(points))
	for i, p := range points {
		where := fmt.Sprintf("points[%d]", i)
		id, err := decodeID(p.GetId(), where+".id")
		if err != nil {
			return coordinator.Edit{}, err
		}
		if j, dup := seen[id]; dup {
			return coordinator.Edit{}, invalidf("%s: id %s repeats points[%d]", where, id, j)
		}
		seen[id] = i
		v, sp, named, err := decodePointVectors(p.GetVectors(), where+".vectors", sch, false)
		if err != nil {
			return coordinator.Edit{}, err
		}
		if v == nil && sp == nil && named == nil {
			return coordinator.Edit{}, invalidf("%s.vectors names no vector to update", where)
		}
		e.Points[i] = coordinator.Record{ID: id, Vector: v, Sparse: sp, Named: named}
	}
	return e, nil
}

func decodeDeleteVectors(sel *pb.PointsSelector, vs *pb.VectorsSelector, sch coordinator.Schema) (coordinator.Edit, error) {
	e := coordinator.Edit{Kind: coordinator.EditDeleteVectors}
	if err := decodeSelection(sel, "points_selector", &e); err != nil {
		return coordinator.Edit{}, err
	}
	if err := qdrantx.CheckDeleteVectors(sch, vs.GetNames(), "vectors.names"); err != nil {
		return coordinator.Edit{}, err
	}
	e.Keys = vs.GetNames()
	return e, nil
}

// decodeUpdateBatch decodes UpdateBatch's operations, all or nothing.
func decodeUpdateBatch(ops []*pb.PointsUpdateOperation, sch coordinator.Schema) ([]coordinator.Edit, error) {
	if len(ops) < 1 || len(ops) > coordinator.MaxEdits {
		return nil, invalidf("operations has %d entries, want 1..%d", len(ops), coordinator.MaxEdits)
	}
	out := make([]coordinator.Edit, 0, len(ops))
	for i, op := range ops {
		e, err := decodeOperation(op, sch)
		if err != nil {
			return nil, invalidf("operations[%d]: %s", i, message(err))
		}
		out = append(out, e)
	}
	return out, nil
}

func decodeOperation(op *pb.PointsUpdateOperation, sch coordinator.Schema) (coordinator.Edit, error) {
	switch x := op.GetOperation().(type) {
	case *pb.PointsUpdateOperation_Upsert:
		recs, err := decodeUpsert(&pb.UpsertPoints{Points: x.Upsert.GetPoints(), ShardKeySelector: x.Upsert.ShardKeySelector,
			UpdateFilter: x.Upsert.UpdateFilter, UpdateMode: x.Upsert.UpdateMode}, sch)
		return coordinator.Edit{Kind: coordinator.EditUpsert, Points: recs}, err
	case *pb.PointsUpdateOperation_DeletePoints_:
		return decodeSelected(coordinator.EditDelete, x.DeletePoints.GetPoints(), x.DeletePoints.ShardKeySelector, "delete_points.points")
	case *pb.PointsUpdateOperation_DeleteDeprecated:
		return decodeSelected(coordinator.EditDelete, x.DeleteDeprecated, nil, "delete")
	case *pb.PointsUpdateOperation_SetPayload_:
		s := x.SetPayload
		return decodeSetPayload(s.GetPayload(), s.GetPointsSelector(), s.Key, s.ShardKeySelector, false)
	case *pb.PointsUpdateOperation_OverwritePayload_:
		s := x.OverwritePayload
		return decodeSetPayload(s.GetPayload(), s.GetPointsSelector(), s.Key, s.ShardKeySelector, true)
	case *pb.PointsUpdateOperation_DeletePayload_:
		d := x.DeletePayload
		return decodeDeletePayload(d.GetKeys(), d.GetPointsSelector(), d.ShardKeySelector)
	case *pb.PointsUpdateOperation_ClearPayload_:
		return decodeSelected(coordinator.EditClearPayload, x.ClearPayload.GetPoints(), x.ClearPayload.ShardKeySelector, "clear_payload.points")
	case *pb.PointsUpdateOperation_ClearPayloadDeprecated:
		return decodeSelected(coordinator.EditClearPayload, x.ClearPayloadDeprecated, nil, "clear_payload")
	case *pb.PointsUpdateOperation_UpdateVectors_:
		u := x.UpdateVectors
		return decodeUpdateVectors(u.GetPoints(), u.ShardKeySelector, u.UpdateFilter, sch)
	case *pb.PointsUpdateOperation_DeleteVectors_:
		return decodeDeleteVectors(x.DeleteVectors.GetPointsSelector(), x.DeleteVectors.GetVectors(), sch)
	}
	return coordinator.Edit{}, wire.Invalid("operation is missing")
}

// message is an error's text without its status.
func message(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Msg
	}
	return err.Error()
}
