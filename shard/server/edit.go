package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
)

// editVersion is the EditCommand version this code writes and applies.
const editVersion = 1

// Edit implements shardpb.ShardServer. The edits are checked here as
// Upsert and Delete check theirs (vectors against the collection's
// settings and normalised under cosine, payloads, filters, paths), then
// committed in one log entry; the state machine applies them in order,
// all or nothing, evaluating filters as the entry applies. A follower
// forwards the write to its leader.
func (s *Server) Edit(ctx context.Context, req *shardpb.EditRequest) (*shardpb.EditResponse, error) {
	fwd := func(err error) (*shardpb.EditResponse, error) {
		var resp *shardpb.EditResponse
		leader, err := s.forward(ctx, err, func(ctx context.Context, c shardpb.ShardClient) (err error) {
			resp, err = c.Edit(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		resp.ForwardedTo = leader
		return resp, nil
	}
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		if !s.cfg.Node.IsLeader() {
			return fwd(s.notLeader())
		}
		return nil, err
	}
	if len(req.GetEdits()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "edit without edits")
	}
	edits := make([]*shardpb.Edit, len(req.GetEdits()))
	for i, e := range req.GetEdits() {
		if edits[i], err = s.checkEdit(col.settings, e); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "edit %d: %s", i, status.Convert(err).Message())
		}
	}
	version := uint32(editVersion)
	for _, e := range edits {
		for _, v := range e.GetVectors() {
			if len(v.GetNamed()) > 0 {
				version = editVersionNamed
			}
		}
		if e.GetKind() == shardpb.EditKind_EDIT_KIND_DELETE_VECTORS {
			version = editVersionNamed
		}
	}
	res, idx, err := s.propose(ctx, col, &shardpb.Command{Op: &shardpb.Command_Edit{Edit: &shardpb.EditCommand{
		Version: version, Placement: req.GetPlacement(), Edits: edits}}})
	if err != nil {
		return fwd(err)
	}
	return &shardpb.EditResponse{Index: idx, DocCount: uint64(res.docs)}, nil
}

// checkEdit checks one edit and returns what the log entry carries.
func (s *Server) checkEdit(set catalog.Settings, e *shardpb.Edit) (*shardpb.Edit, error) {
	out := &shardpb.Edit{Kind: e.GetKind(), Ids: e.GetIds(), Filter: e.GetFilter(), Key: e.GetKey(), Keys: e.GetKeys()}
	if fb := e.GetFilter(); len(fb) > 0 {
		if _, err := filter.Parse(fb); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "filter: %v", err)
		}
	}
	for _, id := range e.GetIds() {
		if id == "" {
			return nil, status.Error(codes.InvalidArgument, "empty id")
		}
	}
	selects := len(e.GetIds()) > 0 || len(e.GetFilter()) > 0
	switch e.GetKind() {
	case shardpb.EditKind_EDIT_KIND_UPSERT, shardpb.EditKind_EDIT_KIND_UPDATE_VECTORS:
		if selects {
			return nil, status.Error(codes.InvalidArgument, "an upsert or vector update names its points in vectors, not ids or filter")
		}
		out.Vectors = make([]*shardpb.Vector, len(e.GetVectors()))
		for i, pv := range e.GetVectors() {
			if pv.GetId() == "" {
				return nil, status.Errorf(codes.InvalidArgument, "vector %d: empty id", i)
			}
			// An update of sparse or named vectors alone leaves the
			// unnamed one as it is.
			if err := checkUnnamed(set, pv, i); err != nil {
				return nil, err
			}
			var v []byte
			namedOnly := len(pv.GetSparse()) > 0 || len(pv.GetNamed()) > 0 || !set.HasUnnamed()
			sparseOnly := e.GetKind() == shardpb.EditKind_EDIT_KIND_UPDATE_VECTORS && len(pv.GetVector()) == 0 && namedOnly
			if !sparseOnly && set.HasUnnamed() {
				var err error
				if v, err = s.logVector(set, pv.GetVector(), i); err != nil {
					return nil, err
				}
			}
			var (
				payload []byte
				err     error
			)
			if b := pv.GetPayload(); len(b) > 0 {
				if e.GetKind() == shardpb.EditKind_EDIT_KIND_UPDATE_VECTORS {
					return nil, status.Errorf(codes.InvalidArgument, "vector %d: a vector update carries no payload", i)
				}
				if payload, err = filter.CheckPayload(b); err != nil {
					return nil, status.Errorf(codes.InvalidArgument, "vector %d: %v", i, err)
				}
			}
			sp, err := checkSparse(set, pv, i)
			if err != nil {
				return nil, err
			}
			named, err := s.checkNamed(set, pv, i)
			if err != nil {
				return nil, err
			}
			out.Vectors[i] = &shardpb.Vector{Id: pv.GetId(), Vector: v, Payload: payload, Sparse: sp, Named: named}
		}
		return out, nil
	case shardpb.EditKind_EDIT_KIND_DELETE, shardpb.EditKind_EDIT_KIND_CLEAR_PAYLOAD:
	case shardpb.EditKind_EDIT_KIND_SET_PAYLOAD, shardpb.EditKind_EDIT_KIND_OVERWRITE_PAYLOAD:
		pl, err := filter.CheckPayload(e.GetPayload())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%v", err)
		}
		out.Payload = pl
		if _, err := filter.PayloadPath(e.GetKey()); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%v", err)
		}
	case shardpb.EditKind_EDIT_KIND_DELETE_PAYLOAD:
		if len(e.GetKeys()) == 0 {
			return nil, status.Error(codes.InvalidArgument, "delete_payload without keys")
		}
		for _, k := range e.GetKeys() {
			if k == "" {
				return nil, status.Error(codes.InvalidArgument, "delete_payload: empty key")
			}
		}
	case shardpb.EditKind_EDIT_KIND_DELETE_VECTORS:
		if err := checkDeleteVectors(set, e.GetKeys()); err != nil {
			return nil, err
		}
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown edit kind %v", e.GetKind())
	}
	if len(e.GetVectors()) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "%v carries no vectors", e.GetKind())
	}
	if !selects {
		return nil, status.Errorf(codes.InvalidArgument, "%v names no ids and no filter", e.GetKind())
	}
	return out, nil
}

// editIDs are the ids an edit command names (not those its filters
// match), and whether any of its edits has a filter.
func editIDs(c *shardpb.EditCommand) (ids []string, filtered bool) {
	for _, e := range c.GetEdits() {
		ids = append(ids, e.GetIds()...)
		for _, v := range e.GetVectors() {
			ids = append(ids, v.GetId())
		}
		filtered = filtered || len(e.GetFilter()) > 0
	}
	return ids, filtered
}

// editPlacementCheck is placementCheck for an edit: the slots of the ids
// it names and, when it has a filter, the check of a delete by filter
// (which waits for a fenced slot's move).
func (c *Collections) editPlacementCheck(col *collection, cmd *shardpb.EditCommand) (store.Placement, error) {
	ids, filtered := editIDs(cmd)
	if filtered {
		if _, err := c.placementCheck(col, cmd.GetPlacement(), nil); err != nil {
			return store.Placement{}, err
		}
	}
	return c.placementCheck(col, cmd.GetPlacement(), ids)
}

// applyEdit applies a committed EditCommand to col's store: decoded as
// the leader checked it, all or nothing.
func (f *stateMachine) applyEdit(ctx context.Context, col *collection, cmd *shardpb.EditCommand) applyResult {
	if v := cmd.GetVersion(); v != editVersion && v != editVersionNamed {
		return applyResult{err: status.Errorf(codes.Internal, "log entry edit version %d, this replica applies versions %d and %d", v, editVersion, editVersionNamed)}
	}
	p, err := f.cols.editPlacementCheck(col, cmd)
	if err != nil {
		return applyResult{err: err}
	}
	mem := col.mem
	edits := make([]store.Edit, len(cmd.GetEdits()))
	for i, e := range cmd.GetEdits() {
		se := store.Edit{Kind: storeEditKind(e.GetKind()), IDs: e.GetIds(), Payload: e.GetPayload(), Keys: e.GetKeys()}
		if len(e.GetFilter()) > 0 {
			// The leader parsed it before proposing; a replica that
			// cannot is running other code, and every one skips alike.
			if se.Filter, err = filter.Parse(e.GetFilter()); err != nil {
				return applyResult{err: status.Errorf(codes.Internal, "log entry edit %d filter: %v", i, err)}
			}
		}
		if se.Path, err = filter.PayloadPath(e.GetKey()); err != nil {
			return applyResult{err: status.Errorf(codes.Internal, "log entry edit %d: %v", i, err)}
		}
		for j, v := range e.GetVectors() {
			named, ok := namedOfPB(col.settings, v.GetNamed())
			if !ok {
				return applyResult{err: status.Errorf(codes.Internal, "log entry edit %d vector %d: a named vector does not fit collection %q", i, j, col.name)}
			}
			if len(v.GetVector()) == 0 && se.Kind == store.EditUpdateVectors {
				// The unnamed vector stays as it is (nil Vector).
				se.Records = append(se.Records, store.Record{ID: v.GetId(), Sparse: sparseOfPB(v.GetSparse()), Named: named})
				continue
			}
			vec, err := shard.DecodeVector(v.GetVector())
			if err != nil || len(vec) != mem.Dim() {
				return applyResult{err: status.Errorf(codes.Internal, "log entry edit %d vector %d does not fit collection %q", i, j, col.name)}
			}
			se.Records = append(se.Records, store.Record{ID: v.GetId(), Vector: vec, Payload: v.GetPayload(), Sparse: sparseOfPB(v.GetSparse()), Named: named})
		}
		edits[i] = se
	}
	err = mem.Edit(ctx, p, edits)
	var (
		missing *store.MissingError
		bad     *store.EditError
	)
	switch {
	case errors.As(err, &missing):
		// Qdrant's words, which clients show.
		return applyResult{err: status.Errorf(codes.NotFound, "No point with id %s found", missing.ID)}
	case errors.As(err, &bad):
		return applyResult{err: status.Errorf(codes.InvalidArgument, "%v", bad)}
	}
	return applyResult{err: err}
}

// storeEditKind is the store's name for an edit kind (0 for one it does
// not know, which it refuses).
func storeEditKind(k shardpb.EditKind) store.EditKind {
	switch k {
	case shardpb.EditKind_EDIT_KIND_UPSERT:
		return store.EditUpsert
	case shardpb.EditKind_EDIT_KIND_DELETE:
		return store.EditDelete
	case shardpb.EditKind_EDIT_KIND_SET_PAYLOAD:
		return store.EditSetPayload
	case shardpb.EditKind_EDIT_KIND_OVERWRITE_PAYLOAD:
		return store.EditOverwritePayload
	case shardpb.EditKind_EDIT_KIND_DELETE_PAYLOAD:
		return store.EditDeletePayload
	case shardpb.EditKind_EDIT_KIND_CLEAR_PAYLOAD:
		return store.EditClearPayload
	case shardpb.EditKind_EDIT_KIND_UPDATE_VECTORS:
		return store.EditUpdateVectors
	case shardpb.EditKind_EDIT_KIND_DELETE_VECTORS:
		return store.EditDeleteVectors
	}
	return 0
}
