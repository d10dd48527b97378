package coordinator

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

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
	p := newProgress(2, time.Now)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { p.acked(1, "r0", uint64(i)) })
	}
	wg.Wait()
	require.EqualValues(t, 99, p.minIndex(1))
	p.acked(1, "r0", 5)
	require.EqualValues(t, 99, p.minIndex(1))
	require.Zero(t, p.minIndex(0))
}

// Which replicas a read asks first: those known to have applied the
// index it must see — the one that acknowledged it, and any that has
// since answered a read at it — for PreferFor after the acknowledgement.
func TestProgressPrefersReplicasKnownToHaveApplied(t *testing.T) {
	type step struct {
		ack    bool // else a read served
		rep    string
		index  uint64
		after  time.Duration
		prefer []bool // replicas 0..2 after the step
	}
	none := []bool{false, false, false}
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing written: nobody", []step{{ack: false, rep: "r1", index: 0, prefer: none}}},
		{"the acknowledging replica", []step{{ack: true, rep: "r2", index: 7, prefer: []bool{false, false, true}}}},
		{"a forwarded write to an unknown leader: nobody", []step{{ack: true, rep: noReplica, index: 7, prefer: none}}},
		{"a replica that served the index joins", []step{
			{ack: true, rep: "r0", index: 7, prefer: []bool{true, false, false}},
			{rep: "r1", index: 7, prefer: []bool{true, true, false}},
		}},
		{"a read at an older index teaches nothing", []step{
			{ack: true, rep: "r0", index: 7, prefer: []bool{true, false, false}},
			{rep: "r1", index: 6, prefer: []bool{true, false, false}},
		}},
		{"a newer write replaces what was known", []step{
			{ack: true, rep: "r0", index: 7},
			{rep: "r1", index: 7},
			{ack: true, rep: "r2", index: 8, prefer: []bool{false, false, true}},
		}},
		{"an older write answering late changes nothing", []step{
			{ack: true, rep: "r0", index: 8},
			{ack: true, rep: "r1", index: 7, prefer: []bool{true, false, false}},
		}},
		{"two writes at the same index: both", []step{
			{ack: true, rep: "r0", index: 8},
			{ack: true, rep: "r1", index: 8, prefer: []bool{true, true, false}},
		}},
		{"the preference ends after PreferFor", []step{
			{ack: true, rep: "r0", index: 8, after: PreferFor - time.Millisecond, prefer: []bool{true, false, false}},
			{rep: "r1", index: 8, after: time.Millisecond, prefer: none},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			p := newProgress(1, func() time.Time { return now })
			for i, st := range tc.steps {
				if st.ack {
					p.acked(0, st.rep, st.index)
				} else {
					p.served(0, st.rep, st.index)
				}
				now = now.Add(st.after)
				if st.prefer == nil {
					continue
				}
				got := []bool{p.prefer(0, "r0"), p.prefer(0, "r1"), p.prefer(0, "r2")}
				require.Equal(t, st.prefer, got, "after step %d", i)
			}
		})
	}
}
