package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
)

// Catalog implements shardpb.ShardServer: this group's catalog, read as
// searches are (readable: serving, and min_index applied).
func (s *Server) Catalog(ctx context.Context, req *shardpb.CatalogRequest) (*shardpb.CatalogResponse, error) {
	if err := s.readable(ctx, req.GetMinIndex()); err != nil {
		return nil, err
	}
	_, cat := s.cfg.Collections.held()
	return cat, nil
}

// ChangeCatalog implements shardpb.ShardServer: a write, committed through
// the log as upserts are (a follower forwards it to its leader). The name
// and settings are checked here, as the router checks them, and a create's
// settings are normalised, so the entry carries exactly what every
// replica compares; what the change does is decided when it applies
// (catalogState.change).
func (s *Server) ChangeCatalog(ctx context.Context, req *shardpb.ChangeCatalogRequest) (*shardpb.ChangeCatalogResponse, error) {
	entry, err := checkCatalogChange(req)
	if err != nil {
		return nil, err
	}
	res, idx, err := s.proposeCommand(ctx, &shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: entry}})
	if err != nil {
		var resp *shardpb.ChangeCatalogResponse
		leader, err := s.forward(ctx, err, func(ctx context.Context, c shardpb.ShardClient) (err error) {
			resp, err = c.ChangeCatalog(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		resp.ForwardedTo = leader
		return resp, nil
	}
	return &shardpb.ChangeCatalogResponse{Entry: res.catalog.entry, Alias: res.catalog.alias, Changed: res.catalog.changed, Index: idx}, nil
}

// checkCatalogChange validates a catalog change (InvalidArgument) and
// returns it as its log entry carries it: a create's settings normalised.
func checkCatalogChange(req *shardpb.ChangeCatalogRequest) (*shardpb.ChangeCatalogRequest, error) {
	invalid := func(err error) error { return status.Error(codes.InvalidArgument, err.Error()) }
	out := &shardpb.ChangeCatalogRequest{Authority: req.GetAuthority(), Placement: req.GetPlacement()}
	switch op := req.GetOp().(type) {
	case *shardpb.ChangeCatalogRequest_Create:
		if err := catalog.ValidName(op.Create.GetName()); err != nil {
			return nil, invalid(err)
		}
		set, err := settingsFromPB(op.Create.GetSettings())
		if err != nil {
			return nil, invalid(err)
		}
		if _, err := slotMapOf(op.Create.GetSlotMap()); err != nil {
			return nil, invalid(err)
		}
		if n := op.Create.GetSlotsAsked(); n != 0 {
			if err := placement.ValidSlots(int(n)); err != nil {
				return nil, invalid(err)
			}
			if int(n) != len(op.Create.GetSlotMap().GetOwners()) {
				return nil, status.Errorf(codes.InvalidArgument, "a create asking for %d slots needs a map of %d slots, not %d", n, n, len(op.Create.GetSlotMap().GetOwners()))
			}
		}
		out.Op = &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{
			Name: op.Create.GetName(), Uid: op.Create.GetUid(), Settings: settingsToPB(set), PayloadSchema: op.Create.GetPayloadSchema(),
			SlotMap: op.Create.GetSlotMap(), SlotsAsked: op.Create.GetSlotsAsked(), SettingsVersion: op.Create.GetSettingsVersion(),
			Restoring: op.Create.GetRestoring()}}
	case *shardpb.ChangeCatalogRequest_Drop:
		if err := catalog.ValidName(op.Drop.GetName()); err != nil {
			return nil, invalid(err)
		}
		out.Op = op
	case *shardpb.ChangeCatalogRequest_Alias:
		if err := catalog.ValidName(op.Alias.GetAlias()); err != nil {
			return nil, invalid(err)
		}
		if c := op.Alias.GetCollection(); c != "" {
			if err := catalog.ValidName(c); err != nil {
				return nil, invalid(err)
			}
		}
		out.Op = op
	case *shardpb.ChangeCatalogRequest_PayloadIndex:
		if err := catalog.ValidName(op.PayloadIndex.GetCollection()); err != nil {
			return nil, invalid(err)
		}
		if op.PayloadIndex.GetField() == "" {
			return nil, status.Error(codes.InvalidArgument, "a payload index needs a field name")
		}
		out.Op = op
	case *shardpb.ChangeCatalogRequest_SetSlots:
		if err := catalog.ValidName(op.SetSlots.GetCollection()); err != nil {
			return nil, invalid(err)
		}
		if m, err := slotMapOf(op.SetSlots.GetSlotMap()); err != nil || m == nil {
			return nil, status.Errorf(codes.InvalidArgument, "set_slots needs a whole slot map: %v", err)
		}
		out.Op = op
	case *shardpb.ChangeCatalogRequest_UpdateSettings:
		if err := catalog.ValidName(op.UpdateSettings.GetCollection()); err != nil {
			return nil, invalid(err)
		}
		if op.UpdateSettings.GetSettings() == nil {
			return nil, status.Error(codes.InvalidArgument, "update_settings needs the settings")
		}
		out.Op = op
	case *shardpb.ChangeCatalogRequest_Restored:
		if err := catalog.ValidName(op.Restored.GetName()); err != nil {
			return nil, invalid(err)
		}
		out.Op = op
	default:
		return nil, status.Error(codes.InvalidArgument, "catalog change with no operation: want create, drop, alias, payload_index, set_slots, update_settings or restored")
	}
	if p := req.GetPlacement(); p != nil && (p.GetFingerprint() == "") != (p.GetShard() == "") {
		return nil, status.Error(codes.InvalidArgument, "catalog change placement needs both fingerprint and shard")
	}
	return out, nil
}

// Stats implements shardpb.ShardServer: the replica, and its collections
// (or the one asked for). dim, metric, quantization and index describe
// the legacy collection (held, or as it would be created), for routers
// that name no collection.
func (s *Server) Stats(_ context.Context, req *shardpb.StatsRequest) (*shardpb.StatsResponse, error) {
	cols, cat := s.cfg.Collections.held()
	legacy, err := s.cfg.Collections.resolve(nil)
	if name := req.GetCollection().GetName(); name != "" {
		col, err := s.cfg.Collections.resolve(req.GetCollection())
		if err != nil {
			return nil, err
		}
		cols, legacy = []*collection{col}, col
	} else if err != nil {
		// The legacy collection was dropped: describe what it would be.
		legacy = &collection{settings: s.cfg.Collections.LegacySettings(), mem: s.cfg.Collections.Legacy()}
	}
	p := s.cfg.Collections.Placement()
	n := s.cfg.Node
	resp := &shardpb.StatsResponse{
		Dim:            uint32(legacy.settings.Dim),
		Metric:         legacy.settings.Metric.String(),
		Quantization:   legacy.settings.Quantization,
		Index:          indexStatsPB(legacy.mem.IndexStats()),
		Kernel:         s.cfg.Kernel.Name,
		Placement:      &shardpb.Placement{Fingerprint: p.Fingerprint, Shard: p.Shard},
		Serving:        s.Serving(),
		ScanRate:       s.rates.getCalibrated(),
		ScanRateLive:   s.rates.getLive(),
		Role:           n.Role(),
		CommitIndex:    n.CommitIndex(),
		AppliedIndex:   n.AppliedIndex(),
		Leader:         n.Leader(),
		CatalogVersion: cat.GetVersion(),
	}
	for _, col := range cols {
		docs := uint64(col.mem.Len())
		resp.DocCount += docs
		resp.Collections = append(resp.Collections, &shardpb.CollectionStats{
			Entry: s.cfg.Collections.entryOf(col), DocCount: docs, Bytes: uint64(col.mem.Bytes()), Index: indexStatsPB(col.mem.IndexStats()),
		})
	}
	return resp, nil
}

func indexStatsPB(st store.IndexStats) *shardpb.IndexStats {
	out := &shardpb.IndexStats{
		Kind: st.Kind.String(), State: st.State, Lists: uint32(st.Lists), TrainedRows: uint64(st.TrainedRows),
		DefaultNprobe: uint32(st.DefaultNProbe), NprobeCalibrated: st.NProbeCalibrated, Rows: uint64(st.Rows), Bytes: uint64(st.Bytes),
	}
	if st.Err != nil {
		out.Error = st.Err.Error()
	}
	return out
}
