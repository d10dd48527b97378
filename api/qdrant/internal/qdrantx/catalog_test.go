package qdrantx

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/coordinator"
)

// A delete some shards refused answers, on both transports, the status
// their errors add up to and names where it was applied anyway.
func TestRemoveFailure(t *testing.T) {
	unavailable := &coordinator.Error{Code: coordinator.CodeUnavailable, Msg: "shard-1 has no leader."}
	unknown := &coordinator.Error{Code: coordinator.CodeOutcomeUnknown, Msg: "shard-2 may have applied it."}
	for _, tc := range []struct {
		name    string
		results []coordinator.ShardWrite
		status  int
		msg     string
	}{
		{"applied everywhere", []coordinator.ShardWrite{{Shard: "shard-0"}, {Shard: "shard-1"}}, 0, ""},
		{"one shard refused", []coordinator.ShardWrite{{Shard: "shard-0"}, {Shard: "shard-1", Err: unavailable}, {Shard: "shard-2"}},
			http.StatusServiceUnavailable, "shard-1 has no leader. The delete was applied on shard-0, shard-2."},
		{"unknown outranks unavailable", []coordinator.ShardWrite{{Shard: "shard-1", Err: unavailable}, {Shard: "shard-2", Err: unknown}},
			http.StatusBadGateway, "shard-1 has no leader. shard-2 may have applied it."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := RemoveFailure(tc.results)
			if tc.status == 0 {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			require.Equal(t, tc.status, err.Status)
			require.Equal(t, tc.msg, err.Msg)
		})
	}
}
