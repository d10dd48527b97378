package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard/shardpb"
)

func TestNewestVoters(t *testing.T) {
	members := func(commit uint64, ms ...*shardpb.Member) *shardpb.MembersResponse {
		return &shardpb.MembersResponse{CommitIndex: commit, Members: ms}
	}
	voter := func(a string) *shardpb.Member { return &shardpb.Member{Addr: a, Voter: true} }
	catchingUp := func(a string) *shardpb.Member { return &shardpb.Member{Addr: a} }
	tests := []struct {
		name  string
		resps []*shardpb.MembersResponse
		want  []string
	}{
		{name: "nobody answered", resps: []*shardpb.MembersResponse{nil, nil}},
		{name: "the highest commit index wins, whoever answers first",
			resps: []*shardpb.MembersResponse{members(7, voter("a"), voter("b"), voter("c")), nil, members(9, voter("a"), voter("b"), voter("d"))},
			want:  []string{"a", "b", "d"}},
		{name: "a replica still catching up is not asked yet",
			resps: []*shardpb.MembersResponse{members(9, voter("a"), voter("b"), catchingUp("d"))},
			want:  []string{"a", "b"}},
		{name: "a removed replica still lists itself, but its commit index stopped",
			resps: []*shardpb.MembersResponse{
				members(30, voter("a"), voter("b"), voter("c"), voter("d")),
				members(33, voter("a"), voter("b"), voter("c")),
				members(32, voter("a"), voter("b"), voter("c"))},
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
