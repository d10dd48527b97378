package api

import (
	"math"
	"net/http"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
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
	Role                string  `json:"role"`
	Serving             bool    `json:"serving"`
	CommitIndex         uint64  `json:"commit_index"`
	AppliedIndex        uint64  `json:"applied_index"`
	Lag                 uint64  `json:"lag"`
	CatalogVersion      uint64  `json:"catalog_version"`
	// Collections is what the replica holds of each collection.
	Collections []replicaCollection `json:"collections"`
	// ScanRate is 1536-D-equivalent rows per second one core of the
	// replica scans (measured at its start), ScanRateLive the running
	// rate of its real full scans; MaxRowsInDeadline how many 1536-D rows
	// one core scans within the default per-shard budget
	// (shard_budget_ms): the shard-sizing rule, from a measurement.
	ScanRate          float64 `json:"scan_rate"`
	ScanRateLive      float64 `json:"scan_rate_live"`
	MaxRowsInDeadline uint64  `json:"max_rows_in_deadline"`
}

type replicaCollection struct {
	Name     string `json:"name"`
	UID      uint64 `json:"uid"`
	DocCount uint64 `json:"doc_count"`
	Bytes    uint64 `json:"bytes"`
	// Index is null when the replica did not say.
	Index *indexStatus `json:"index"`
}

type collectionSettings struct {
	Name         string `json:"name"`
	Dimension    int    `json:"dimension"`
	Metric       string `json:"metric"`
	Quantization string `json:"quantization"`
	Index        string `json:"index"`
	Float32      string `json:"float32"`
	// SparseVectors are the named sparse vectors, left out when none.
	SparseVectors map[string]sparseSettingsJSON `json:"sparse_vectors,omitempty"`
	// Vectors are the named dense vectors, left out when none (the
	// collection then has the unnamed one: dimension is 0 otherwise).
	Vectors map[string]namedSettingsOut `json:"vectors,omitempty"`
}

type sparseSettingsJSON struct {
	Modifier string `json:"modifier"`
}

type indexStatus struct {
	Kind           string  `json:"kind"`
	State          string  `json:"state"`
	Lists          int     `json:"lists"`
	TrainedRows    uint64  `json:"trained_rows"`
	DefaultNProbe  int     `json:"default_nprobe"`
	Calibrated     bool    `json:"nprobe_calibrated"`
	Rows           uint64  `json:"rows"`
	Bytes          uint64  `json:"bytes"`
	BytesPerVector float64 `json:"bytes_per_vector"`
	Error          string  `json:"error,omitempty"`
}

type shardStatus struct {
	Name     string          `json:"name"`
	DocCount uint64          `json:"doc_count"`
	Replicas []replicaStatus `json:"replicas"`
}

type clusterStatus struct {
	// Collections is the catalog as the router last read it.
	Collections   []collectionSettings `json:"collections"`
	Disagreements []string             `json:"disagreements"`
	// ShardBudgetMS is the per-shard RPC budget of a query that names no
	// deadline (the default deadline less the network allowance), the
	// budget max_rows_in_deadline is computed for.
	ShardBudgetMS int64         `json:"shard_budget_ms"`
	Shards        []shardStatus `json:"shards"`
}

// clusterStatus always answers 200: it is how an operator sees what is
// wrong.
func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) {
	st := s.cfg.Coordinator.Status(r.Context())
	shardBudget := budget.ForDeadline(s.cfg.Budget.Default()).Shard
	out := clusterStatus{Collections: []collectionSettings{}, Disagreements: st.Disagreements, ShardBudgetMS: shardBudget.Milliseconds()}
	for _, c := range st.Collections {
		out.Collections = append(out.Collections, settingsOf(c))
	}
	for _, sh := range st.Shards {
		ss := shardStatus{Name: sh.Name, DocCount: sh.DocCount}
		for _, rep := range sh.Replicas {
			rs := replicaStatus{
				Addr: rep.Addr, ConnState: rep.ConnState, Suspect: rep.Suspect,
				ConsecutiveFailures: rep.ConsecutiveFailures, LastError: rep.LastError,
				LatencyMS: float64(rep.Latency.Microseconds()) / 1000,
			}
			if rep.Answered {
				n := rep.DocCount
				rs.DocCount, rs.Kernel, rs.CatalogVersion = &n, rep.Kernel, rep.CatalogVersion
				rs.Role, rs.Serving, rs.CommitIndex, rs.AppliedIndex, rs.Lag = rep.Role, rep.Serving, rep.CommitIndex, rep.AppliedIndex, rep.Lag
				rs.ScanRate, rs.ScanRateLive = rep.ScanRate, rep.ScanRateLive
				rs.MaxRowsInDeadline = rep.MaxRowsWithin(catalog.DefaultDim, shardBudget)
				rs.Collections = []replicaCollection{}
				for _, rc := range rep.Collections {
					rs.Collections = append(rs.Collections, replicaCollection{Name: rc.Name, UID: rc.UID, DocCount: rc.DocCount,
						Bytes: rc.Bytes, Index: indexStatusOf(rc.Index)})
				}
			}
			ss.Replicas = append(ss.Replicas, rs)
		}
		out.Shards = append(out.Shards, ss)
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

func indexStatusOf(ix *coordinator.IndexStatus) *indexStatus {
	if ix == nil {
		return nil
	}
	return &indexStatus{
		Kind: ix.Kind, State: ix.State, Lists: ix.Lists, TrainedRows: ix.TrainedRows, DefaultNProbe: ix.DefaultNProbe,
		Calibrated: ix.NProbeCalibrated,
		Rows:       ix.Rows, Bytes: ix.Bytes, BytesPerVector: math.Round(ix.BytesPerVector()*10) / 10, Error: ix.Error,
	}
}

func settingsOf(c coordinator.Collection) collectionSettings {
	out := collectionSettings{Name: c.Name, Dimension: c.Settings.Dim, Metric: c.Settings.Metric.String(),
		Quantization: c.Settings.Quantization, Index: c.Settings.Index, Float32: c.Settings.Float32, Vectors: namedSettingsOf(c.Settings.Named)}
	for name, sp := range c.Settings.Sparse {
		if out.SparseVectors == nil {
			out.SparseVectors = map[string]sparseSettingsJSON{}
		}
		out.SparseVectors[name] = sparseSettingsJSON{Modifier: sp.Modifier}
	}
	return out
}
