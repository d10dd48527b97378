package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

type fakeRaft struct {
	commit, applied uint64
	leader          bool
}

func (f *fakeRaft) Shard() string        { return "shard-1" }
func (f *fakeRaft) CommitIndex() uint64  { return f.commit }
func (f *fakeRaft) AppliedIndex() uint64 { return f.applied }
func (f *fakeRaft) IsLeader() bool       { return f.leader }

func TestShardRaftGauges(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  fakeRaft
		want string
	}{
		{"follower", fakeRaft{commit: 12, applied: 10}, `
trawl_shard_raft_applied_index{shard="shard-1"} 10
trawl_shard_raft_commit_index{shard="shard-1"} 12
trawl_shard_raft_leader{shard="shard-1"} 0
`},
		{"leader", fakeRaft{commit: 7, applied: 7, leader: true}, `
trawl_shard_raft_applied_index{shard="shard-1"} 7
trawl_shard_raft_commit_index{shard="shard-1"} 7
trawl_shard_raft_leader{shard="shard-1"} 1
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			RegisterShardRaft(reg, &tc.src)
			got, err := testutil.GatherAndCount(reg)
			require.NoError(t, err)
			require.Equal(t, 3, got)
			var b strings.Builder
			b.WriteString("# HELP trawl_shard_raft_applied_index The index of the last write applied to this shard replica's store.\n# TYPE trawl_shard_raft_applied_index gauge\n")
			lines := strings.Split(strings.TrimSpace(tc.want), "\n")
			b.WriteString(lines[0] + "\n")
			b.WriteString("# HELP trawl_shard_raft_commit_index The consensus commit index this shard replica knows.\n# TYPE trawl_shard_raft_commit_index gauge\n")
			b.WriteString(lines[1] + "\n")
			b.WriteString("# HELP trawl_shard_raft_leader 1 while this shard replica is its group's leader, else 0.\n# TYPE trawl_shard_raft_leader gauge\n")
			b.WriteString(lines[2] + "\n")
			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(b.String())))
		})
	}
}
