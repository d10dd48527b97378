package apitest

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// StoreState is every replica's document count, [shard][replica].
func (e *Env) StoreState() [][]int {
	var out [][]int
	for _, reps := range e.DC.Replicas {
		var row []int
		for _, r := range reps {
			row = append(row, r.Store.Len())
		}
		out = append(out, row)
	}
	return out
}

// RequireAbsent checks that no replica stores any of ids.
func (e *Env) RequireAbsent(ids ...string) {
	e.T.Helper()
	for _, reps := range e.DC.Replicas {
		for _, r := range reps {
			for _, id := range ids {
				_, ok := r.Store.Get(id)
				require.False(e.T, ok, "replica %s/%d stores %q", r.Shard, r.Index, id)
			}
		}
	}
}

// EventuallyAbsent waits until no replica stores any of ids: followers
// apply a committed delete moments after the leader acknowledged it.
func (e *Env) EventuallyAbsent(ids ...string) {
	e.T.Helper()
	require.Eventually(e.T, func() bool {
		for _, reps := range e.DC.Replicas {
			for _, r := range reps {
				for _, id := range ids {
					if _, ok := r.Store.Get(id); ok {
						return false
					}
				}
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "a replica still stores one of %q", ids)
}

// Gather returns the router registry's metric families by name.
func (e *Env) Gather() map[string]*dto.MetricFamily {
	e.T.Helper()
	mfs, err := e.R.Registry.Gather()
	require.NoError(e.T, err)
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// ShardRPCs is how many shard RPCs the router has recorded: the sample
// count summed over every trawl_shard_request_duration_seconds series.
func (e *Env) ShardRPCs() uint64 {
	e.T.Helper()
	var n uint64
	if mf := e.Gather()["trawl_shard_request_duration_seconds"]; mf != nil {
		for _, m := range mf.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// WaitDown waits until /cluster/status shows no replica of shard READY:
// the router has seen the connections go.
func (e *Env) WaitDown(shard string) {
	e.T.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var st struct {
			Shards []struct {
				Name     string `json:"name"`
				Replicas []struct {
					ConnState string `json:"conn_state"`
				} `json:"replicas"`
			} `json:"shards"`
		}
		res := e.Do(http.MethodGet, "/cluster/status", "", nil)
		require.Equal(e.T, http.StatusOK, res.Status)
		require.NoError(e.T, json.Unmarshal(res.Body, &st))
		down := true
		for _, s := range st.Shards {
			if s.Name != shard {
				continue
			}
			for _, r := range s.Replicas {
				if r.ConnState == "READY" {
					down = false
				}
			}
		}
		if down {
			return
		}
		require.True(e.T, time.Now().Before(deadline), "%s still has a READY replica", shard)
		time.Sleep(10 * time.Millisecond)
	}
}

// StopShard stops every replica of a shard, as killed processes.
func (e *Env) StopShard(name string) {
	e.T.Helper()
	i := slices.Index(e.DC.Names, name)
	require.GreaterOrEqual(e.T, i, 0)
	for _, r := range e.DC.Replicas[i] {
		r.Proxy.Stop()
	}
	e.WaitDown(name)
}
