package qdrantgrpc

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/catalog"
)

// snapshotsService is Qdrant's Snapshots service over trawl's backups, as
// the REST snapshot routes serve them (docs/qdrant.md, "Snapshots"): a
// snapshot's name is its backup id and ".snapshot". Full-cluster
// snapshots are not served.
type snapshotsService struct {
	pb.UnimplementedSnapshotsServer
	s *server
}

const snapshotSuffix = ".snapshot"

func describe(m backup.Manifest) *pb.SnapshotDescription {
	return &pb.SnapshotDescription{Name: m.ID + snapshotSuffix, CreationTime: timestamppb.New(m.Created), Size: httpx.Size(m)}
}

// Create backs the collection up (a cut of every shard group), answered
// once complete. Needs read.
func (x *snapshotsService) Create(ctx context.Context, r *pb.CreateSnapshotRequest) (*pb.CreateSnapshotResponse, error) {
	name := r.GetCollectionName()
	if err := x.s.permit(ctx, name, apikey.Read); err != nil {
		return nil, err
	}
	m, err := x.s.cfg.Backups.Create(ctx, x.s.cfg.Coordinator, name)
	if err != nil {
		return nil, err
	}
	return &pb.CreateSnapshotResponse{SnapshotDescription: describe(m), Time: elapsed(ctx)}, nil
}

// List lists the collection's snapshots, oldest first. Needs read.
func (x *snapshotsService) List(ctx context.Context, r *pb.ListSnapshotsRequest) (*pb.ListSnapshotsResponse, error) {
	name := r.GetCollectionName()
	if err := x.s.permit(ctx, name, apikey.Read); err != nil {
		return nil, err
	}
	ms, err := x.s.cfg.Backups.List(ctx, x.s.cfg.Coordinator, name)
	if err != nil {
		return nil, err
	}
	out := &pb.ListSnapshotsResponse{Time: elapsed(ctx)}
	for _, m := range ms {
		out.SnapshotDescriptions = append(out.SnapshotDescriptions, describe(m))
	}
	return out, nil
}

// Delete removes one of the collection's snapshots. Needs write.
func (x *snapshotsService) Delete(ctx context.Context, r *pb.DeleteSnapshotRequest) (*pb.DeleteSnapshotResponse, error) {
	name := r.GetCollectionName()
	if err := x.s.permit(ctx, name, apikey.Write); err != nil {
		return nil, err
	}
	id, ok := strings.CutSuffix(r.GetSnapshotName(), snapshotSuffix)
	if !ok || catalog.ValidName(id) != nil {
		return nil, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: fmt.Sprintf("Snapshot %s not found", r.GetSnapshotName())}
	}
	if err := x.s.cfg.Backups.Delete(ctx, x.s.cfg.Coordinator, name, id); err != nil {
		return nil, err
	}
	return &pb.DeleteSnapshotResponse{Time: elapsed(ctx)}, nil
}

// fullSnapshots refuses the full-cluster snapshot calls.
var fullSnapshots = status.Error(codes.Unimplemented, "a full snapshot is not served: trawl backs up one collection at a time (Snapshots/Create, or router admin backup --all)")

func (x *snapshotsService) CreateFull(context.Context, *pb.CreateFullSnapshotRequest) (*pb.CreateSnapshotResponse, error) {
	return nil, fullSnapshots
}

func (x *snapshotsService) ListFull(context.Context, *pb.ListFullSnapshotsRequest) (*pb.ListSnapshotsResponse, error) {
	return nil, fullSnapshots
}

func (x *snapshotsService) DeleteFull(context.Context, *pb.DeleteFullSnapshotRequest) (*pb.DeleteSnapshotResponse, error) {
	return nil, fullSnapshots
}
