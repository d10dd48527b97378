package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterShardRecovery exports a replica's recovery throttle
// (--recovery-cpu): the CPU its recovery work has used and the time it
// waited to stay within its share. stats reads both totals.
func RegisterShardRecovery(reg prometheus.Registerer, stats func() (cpu, waited time.Duration)) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "trawl_shard_recovery_cpu_seconds_total",
			Help: "CPU time this shard replica's throttled recovery work used: restoring snapshots, applying the log while catching up, streaming snapshots and catch-up entries to followers.",
		}, func() float64 { c, _ := stats(); return c.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "trawl_shard_recovery_throttled_seconds_total",
			Help: "Time this shard replica's recovery work waited to stay within --recovery-cpu.",
		}, func() float64 { _, w := stats(); return w.Seconds() }),
	)
}
