package qdrantgrpc_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// Qdrant's Snapshots service over trawl's backups: create, list, delete;
// full snapshots and unknown names refused; a router without a backup
// directory says so.
func TestSnapshots(t *testing.T) {
	e := apitest.New(t, apitest.Config{BackupDir: t.TempDir()})
	sn := pb.NewSnapshotsClient(e.GRPC())
	made, err := sn.Create(call(t), &pb.CreateSnapshotRequest{CollectionName: "trawl"})
	require.NoError(t, err)
	name := made.GetSnapshotDescription().GetName()
	require.Regexp(t, `\.snapshot$`, name)
	require.Positive(t, made.GetSnapshotDescription().GetSize())

	list, err := sn.List(call(t), &pb.ListSnapshotsRequest{CollectionName: "trawl"})
	require.NoError(t, err)
	require.Len(t, list.GetSnapshotDescriptions(), 1)
	require.Equal(t, name, list.GetSnapshotDescriptions()[0].GetName())

	_, err = sn.Delete(call(t), &pb.DeleteSnapshotRequest{CollectionName: "trawl", SnapshotName: "nope.snapshot"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = sn.Delete(call(t), &pb.DeleteSnapshotRequest{CollectionName: "trawl", SnapshotName: name})
	require.NoError(t, err)
	list, err = sn.List(call(t), &pb.ListSnapshotsRequest{CollectionName: "trawl"})
	require.NoError(t, err)
	require.Empty(t, list.GetSnapshotDescriptions())

	_, err = sn.CreateFull(call(t), &pb.CreateFullSnapshotRequest{})
	require.Equal(t, codes.Unimplemented, status.Code(err), "%v", err)
	_, err = sn.Create(call(t), &pb.CreateSnapshotRequest{CollectionName: "absent"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	bare := apitest.New(t, apitest.Config{})
	_, err = pb.NewSnapshotsClient(bare.GRPC()).Create(call(t), &pb.CreateSnapshotRequest{CollectionName: "trawl"})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "--backup-dir")
}
