package metrics

import "github.com/prometheus/client_golang/prometheus"

// RaftSource is what a shard replica's raft gauges read at each scrape.
type RaftSource interface {
	// Shard is the shard's name, from the placement its data was written
	// under; empty before the first write.
	Shard() string
	CommitIndex() uint64
	AppliedIndex() uint64
	IsLeader() bool
}

// RegisterShardRaft registers trawl_shard_raft_commit_index,
// trawl_shard_raft_applied_index and trawl_shard_raft_leader {shard} on
// reg, read from src at scrape time (nothing to keep in step).
func RegisterShardRaft(reg prometheus.Registerer, src RaftSource) {
	reg.MustRegister(raftCollector{src: src})
}

var (
	raftCommitDesc = prometheus.NewDesc("trawl_shard_raft_commit_index",
		"The consensus commit index this shard replica knows.", []string{"shard"}, nil)
	raftAppliedDesc = prometheus.NewDesc("trawl_shard_raft_applied_index",
		"The index of the last write applied to this shard replica's store.", []string{"shard"}, nil)
	raftLeaderDesc = prometheus.NewDesc("trawl_shard_raft_leader",
		"1 while this shard replica is its group's leader, else 0.", []string{"shard"}, nil)
)

type raftCollector struct{ src RaftSource }

func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- raftCommitDesc
	ch <- raftAppliedDesc
	ch <- raftLeaderDesc
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	shard := c.src.Shard()
	leader := 0.0
	if c.src.IsLeader() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(raftCommitDesc, prometheus.GaugeValue, float64(c.src.CommitIndex()), shard)
	ch <- prometheus.MustNewConstMetric(raftAppliedDesc, prometheus.GaugeValue, float64(c.src.AppliedIndex()), shard)
	ch <- prometheus.MustNewConstMetric(raftLeaderDesc, prometheus.GaugeValue, leader, shard)
}
