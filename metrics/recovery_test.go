package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestShardRecoveryCounters(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cpu, waited time.Duration
		want        string
	}{
		{"idle", 0, 0, `
trawl_shard_recovery_cpu_seconds_total 0
trawl_shard_recovery_throttled_seconds_total 0
`},
		{"throttled", 1500 * time.Millisecond, 4250 * time.Millisecond, `
trawl_shard_recovery_cpu_seconds_total 1.5
trawl_shard_recovery_throttled_seconds_total 4.25
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			RegisterShardRecovery(reg, func() (time.Duration, time.Duration) { return tc.cpu, tc.waited })
			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP trawl_shard_recovery_cpu_seconds_total CPU time this shard replica's throttled recovery work used: restoring snapshots, applying the log while catching up, streaming snapshots and catch-up entries to followers.
# TYPE trawl_shard_recovery_cpu_seconds_total counter
# HELP trawl_shard_recovery_throttled_seconds_total Time this shard replica's recovery work waited to stay within --recovery-cpu.
# TYPE trawl_shard_recovery_throttled_seconds_total counter`+tc.want)))
		})
	}
}
