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

// A SLOT_MOVED refusal is a definite refusal of a write (never retried on
// another replica, never "may have applied"), and a read's refusal is a
// replica not serving, so another replica is asked.
func TestSlotMovedError(t *testing.T) {
	err := FromStatus(SlotMovedStatus("slot 3 moved", 7, true))
	var sm *SlotMovedError
	require.ErrorAs(t, err, &sm)
	require.Equal(t, uint64(7), sm.Epoch)
	require.True(t, sm.Retry)
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	var ns interface{ NotServing() bool }
	require.ErrorAs(t, err, &ns)
	require.False(t, ns.NotServing(), "a write's refusal")
	var never interface{ NeverSent() bool }
	require.False(t, errors.As(err, &never), "a write refused so is not sent elsewhere")
	require.ErrorAs(t, AsRead(err), &ns)
	require.True(t, ns.NotServing(), "a read's refusal")
	plain := status.Error(codes.Internal, "x")
	require.Equal(t, plain, AsRead(plain))
}
