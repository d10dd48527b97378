package coordinator

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/fanout"
)

func TestWriteResultMapsEveryOutcome(t *testing.T) {
	tests := []struct {
		name    string
		in      fanout.WriteResult
		outcome string
		code    Code
		ok      bool
	}{
		{name: "committed", in: fanout.WriteResult{Outcome: fanout.WriteOK}, outcome: fanout.WriteOK, ok: true},
		{name: "maybe delivered", in: fanout.WriteResult{Outcome: fanout.WriteUnknown, Replica: "a",
			Err: status.Error(codes.Unavailable, "reset")}, outcome: fanout.WriteUnknown, code: CodeOutcomeUnknown},
		{name: "no leader", in: fanout.WriteResult{Outcome: fanout.WriteFailed,
			Err: fmt.Errorf("%w: x", fanout.ErrNoLeader)}, outcome: fanout.WriteFailed, code: CodeUnavailable},
		{name: "reshard", in: fanout.WriteResult{Outcome: fanout.WriteFailed,
			Err: status.Error(codes.FailedPrecondition, "placement")}, outcome: fanout.WriteFailed, code: CodeConflict},
		{name: "refused as invalid", in: fanout.WriteResult{Outcome: fanout.WriteFailed,
			Err: status.Error(codes.InvalidArgument, "bad")}, outcome: fanout.WriteFailed, code: CodeInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := writeResult("shard-0", tc.in)
			require.Equal(t, tc.outcome, got.Outcome)
			if tc.ok {
				require.Nil(t, got.Err)
				return
			}
			require.NotNil(t, got.Err)
			require.Equal(t, tc.code, got.Err.Code)
			require.Contains(t, got.Err.Msg, "shard-0")
			require.Contains(t, got.Err.Msg, "retrying the request is safe")
			require.True(t, errors.Is(got.Err, tc.in.Err), "the cause is kept")
		})
	}
}

// The acknowledged index only ever grows, whatever order concurrent
// writes report in.
func TestAckedIndexOnlyGrows(t *testing.T) {
	a := acked{index: make([]atomic.Uint64, 2)}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { a.note(1, uint64(i)) })
	}
	wg.Wait()
	require.EqualValues(t, 99, a.index[1].Load())
	a.note(1, 5)
	require.EqualValues(t, 99, a.index[1].Load())
	require.Zero(t, a.index[0].Load())
}
