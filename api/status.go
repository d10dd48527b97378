package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/trawl-search/trawl/shard/shardpb"
)

type replicaStatus struct {
	Addr                string  `json:"addr"`
	ConnState           string  `json:"conn_state"`
	Suspect             bool    `json:"suspect"`
	ConsecutiveFailures int     `json:"consecutive_failures"`
	LastError           string  `json:"last_error"`
	LatencyMS           float64 `json:"latency_ms"`
	Kernel              string  `json:"kernel"`
	DocCount            *uint64 `json:"doc_count"`
	Metric              string  `json:"metric,omitempty"`
	Dimension           uint32  `json:"dimension,omitempty"`
}

type shardStatus struct {
	Name     string          `json:"name"`
	DocCount uint64          `json:"doc_count"`
	Replicas []replicaStatus `json:"replicas"`
}

type clusterStatus struct {
	Metric        string        `json:"metric"`
	Dimension     int           `json:"dimension"`
	Disagreements []string      `json:"disagreements"`
	Shards        []shardStatus `json:"shards"`
}

// statsTimeout bounds the Stats calls /cluster/status makes; a dead replica
// shows as such instead of holding the page.
const statsTimeout = time.Second

// Stats asks every replica for its stats at once. Answers are indexed
// [shard][replica]; nil where the replica did not answer.
func (s *Server) Stats(ctx context.Context) [][]*shardpb.StatsResponse {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	out := make([][]*shardpb.StatsResponse, len(s.cfg.Shards))
	var wg sync.WaitGroup
	for i, sh := range s.cfg.Shards {
		out[i] = make([]*shardpb.StatsResponse, len(sh.Replicas))
		for j, c := range sh.Replicas {
			wg.Go(func() {
				if st, err := c.Stats(ctx); err == nil {
					out[i][j] = st
				}
			})
		}
	}
	wg.Wait()
	return out
}

// clusterStatus always answers 200: it is how an operator sees what is
// wrong.
func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) {
	stats := s.Stats(r.Context())
	health := s.cfg.Cluster.Status()
	sch := *s.schema.Load()
	out := clusterStatus{Metric: sch.Metric.String(), Dimension: sch.Dim, Disagreements: []string{}}
	for i, sh := range s.cfg.Shards {
		ss := shardStatus{Name: sh.Name, DocCount: health[i].Docs}
		for j, c := range sh.Replicas {
			h := health[i].Replicas[j]
			rs := replicaStatus{
				Addr: c.Addr(), ConnState: c.State().String(), Suspect: h.Suspect,
				ConsecutiveFailures: h.ConsecutiveFailures, LastError: h.LastError,
				LatencyMS: float64(h.Latency.Microseconds()) / 1000,
			}
			if st := stats[i][j]; st != nil {
				n := st.GetDocCount()
				rs.DocCount, rs.Kernel, rs.Metric, rs.Dimension = &n, st.GetKernel(), st.GetMetric(), st.GetDim()
				if !health[i].DocsSeen {
					ss.DocCount = max(ss.DocCount, n)
				}
				if st.GetMetric() != out.Metric || int(st.GetDim()) != out.Dimension {
					out.Disagreements = append(out.Disagreements, fmt.Sprintf(
						"%s replica %s has metric %s dimension %d, the cluster %s dimension %d",
						sh.Name, c.Addr(), st.GetMetric(), st.GetDim(), out.Metric, out.Dimension))
				}
			}
			ss.Replicas = append(ss.Replicas, rs)
		}
		out.Shards = append(out.Shards, ss)
	}
	writeJSON(w, http.StatusOK, out)
}
