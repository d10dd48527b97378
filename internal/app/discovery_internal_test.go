package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard/shardpb"
)

func TestNewestVoters(t *testing.T) {
	members := func(idx uint64, ms ...*shardpb.Member) *shardpb.MembersResponse {
		return &shardpb.MembersResponse{ConfigIndex: idx, Members: ms}
	}
	voter := func(a string) *shardpb.Member { return &shardpb.Member{Addr: a, Voter: true} }
	catchingUp := func(a string) *shardpb.Member { return &shardpb.Member{Addr: a} }
	tests := []struct {
		name  string
		resps []*shardpb.MembersResponse
		want  []string
	}{
		{name: "nobody answered", resps: []*shardpb.MembersResponse{nil, nil}},
		{name: "the newest configuration wins, whoever answers first",
			resps: []*shardpb.MembersResponse{members(7, voter("a"), voter("b"), voter("c")), nil, members(9, voter("a"), voter("b"), voter("d"))},
			want:  []string{"a", "b", "d"}},
		{name: "a replica still catching up is not asked yet",
			resps: []*shardpb.MembersResponse{members(9, voter("a"), voter("b"), catchingUp("d"))},
			want:  []string{"a", "b"}},
		{name: "without configuration indexes the highest commit index wins, whoever answers first",
			// hashicorp/raft reports configuration index 0: a removed
			// replica (d) still lists itself, its commit index stopped.
			resps: []*shardpb.MembersResponse{
				{CommitIndex: 30, Members: []*shardpb.Member{voter("a"), voter("b"), voter("c"), voter("d")}},
				{CommitIndex: 33, Members: []*shardpb.Member{voter("a"), voter("b"), voter("c")}},
				{CommitIndex: 32, Members: []*shardpb.Member{voter("a"), voter("b"), voter("c")}}},
			want: []string{"a", "b", "c"}},
		{name: "an empty answer is no answer",
			resps: []*shardpb.MembersResponse{members(12), members(9, voter("a"))},
			want:  []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, newestVoters(tc.resps))
		})
	}
}
