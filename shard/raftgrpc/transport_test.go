package raftgrpc

import (
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// A follower may trust a commit index only once its leader has committed an
// entry of its own term; before that, the index can lag writes the previous
// leader acknowledged (found by the chaos run: a replica restarted under a
// new leader served without the last acknowledged write).
func TestProvenCommit(t *testing.T) {
	entry := func(index, term uint64) *raft.Log { return &raft.Log{Index: index, Term: term} }
	for _, tc := range []struct {
		name string
		req  raft.AppendEntriesRequest
		want uint64
	}{
		{"new leader, nothing of its term committed yet",
			raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 4, Entries: []*raft.Log{entry(6, 3)}}, 0},
		{"new leader's first entry committed, sent with it",
			raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 6, Entries: []*raft.Log{entry(6, 3)}}, 6},
		{"entry before the request is of the leader's term and committed",
			raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 9, PrevLogTerm: 3, LeaderCommitIndex: 9}, 9},
		{"entry before the request is of the leader's term, not yet committed",
			raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 9, PrevLogTerm: 3, LeaderCommitIndex: 8}, 0},
		{"entries of the term beyond the commit index prove nothing",
			raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 5, Entries: []*raft.Log{entry(6, 3), entry(7, 3)}}, 0},
		{"heartbeat", raft.AppendEntriesRequest{Term: 3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, provenCommit(&tc.req))
		})
	}
}
