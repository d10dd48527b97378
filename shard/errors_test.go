package shard

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestFromStatusDecodesTheRefusals(t *testing.T) {
	var nf *CollectionNotFoundError
	err := FromStatus(CollectionNotFoundStatus("docs", 42))
	require.ErrorAs(t, err, &nf)
	require.Equal(t, "docs", nf.Name)
	require.EqualValues(t, 42, nf.HeldUID)
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	var ns interface{ NotServing() bool }
	require.True(t, errors.As(err, &ns) && ns.NotServing(), "fanout skips the replica")

	var nl *NotLeaderError
	require.ErrorAs(t, FromStatus(NotLeaderStatus("a:1")), &nl)
	require.Equal(t, "a:1", nl.Leader())
	require.True(t, errors.As(FromStatus(NotServingStatus("x")), &ns) && ns.NotServing())

	// A plain FailedPrecondition (a reshard refused) stays as it is.
	plain := status.Error(codes.FailedPrecondition, "changing the shard list is a reshard")
	require.Equal(t, plain, FromStatus(plain))
}
