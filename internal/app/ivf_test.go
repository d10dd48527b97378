package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
)

// TestIVFSearchThroughTheRouter is the brute-force property on --index ivf
// shards (IVFMinRows lowered so 1 500-row shards build an index, and set
// with Int8MinRows above the last full seeding batch, so the scale and
// centroids are trained on every row whatever the timing): with
// "exact": true the answer is the exact top-k of the union and says
// exact (at k = 1, 10, 100); without it every shard answers from its
// index (exact false), every score is still the exact one, and recall at
// k = 1, 10 and 100 against brute force on the clustered dev corpus is at
// least 0.99 each at the default nprobe; /cluster/status shows each
// replica's index as its store reports it; a
// selective filter is answered exactly (the exact filtered top-k); a
// batch answers each query as it would alone; and the replicas of each
// shard, asked directly, give identical answers (ids and scores).
func TestIVFSearchThroughTheRouter(t *testing.T) {
	t.Parallel() // an exactness test: its own cluster, its own deadlines of seconds
	const (
		dim  = 128
		docs = 4500
	)
	for _, m := range []vector.Metric{vector.Cosine, vector.DotProduct, vector.Euclidean} {
		t.Run(m.String(), func(t *testing.T) {
			if m != vector.Cosine {
				longtest.Mark(t) // make test trains one metric's indexes
			}
			// Each cluster spends more than half its time waiting on its
			// replicas' background training and calibration.
			t.Parallel()
			recs := devcluster.Corpus(docs, dim, 15+uint64(m))
			h := start(t, devcluster.Config{Dim: dim, Metric: m, Replicas: 2, Corpus: recs, Kernel: vector.Generic(),
				Index: store.IndexIVF, Int8MinRows: 1400, IVFMinRows: 1400})
			lists := 0
			for _, reps := range h.dc.Replicas {
				for _, r := range reps {
					require.True(t, r.Store.IVFIndexed(), "%s replica %d has its index", r.Shard, r.Index)
					require.NoError(t, r.Store.ViewIVF(func(_ vector.Rows, x *ivf.Index) error { lists = x.Lists(); return nil }))
				}
			}
			requireIndexStatus(t, h)
			payloads := map[string]map[string]any{}
			for _, r := range h.dc.Corpus {
				var p map[string]any
				require.NoError(t, json.Unmarshal(r.Payload, &p))
				payloads[r.ID] = p
			}
			rng := rand.New(rand.NewPCG(15, uint64(m)))
			better := func(a, b float64) bool {
				if m == vector.Euclidean {
					return a <= b
				}
				return a >= b
			}
			// Recall at each k, at the default nprobe; "exact": true at
			// the same k is the brute-force top-k.
			recallKs := []int{1, 10, 100}
			found, total := make([]int, len(recallKs)), make([]int, len(recallKs))
			var batch []map[string]any
			var direct []client.Query
			for q := range 20 {
				// Queries near stored documents, as real ones are: noise
				// of 0.3 times the document's norm.
				qv := slices.Clone(h.dc.Corpus[rng.IntN(len(h.dc.Corpus))].Vector)
				sigma := 0.3 * math.Sqrt(float64(vector.Generic().Dot(qv, qv))/dim)
				for j := range qv {
					qv[j] += float32(sigma * rng.NormFloat64())
				}
				scoredQ := slices.Clone(qv)
				if m == vector.Cosine {
					vector.Generic().Normalize(scoredQ)
				}
				ref := newExactRef(t, m, scoredQ, h.dc.Corpus)
				ref.requireExactTopK(h, qv, recallKs...)
				check := ref.check
				body := map[string]any{"vector": qv, "k": 10}
				for ki, k := range recallKs {
					a := h.int8Search(t, map[string]any{"vector": qv, "k": k})
					require.False(t, a.ScatterGather.Exact, "the index serves")
					require.Len(t, a.Items, k)
					kth := ref.ranked[k-1]
					for _, it := range a.Items {
						// A hit counts when it is as good as the k-th
						// best (within the score bound: near-ties may
						// swap).
						want := check(it)
						slack := kth.bound + want.bound
						if m != vector.Euclidean {
							slack = -slack
						}
						if better(want.score, kth.score+slack) {
							found[ki]++
						}
					}
					total[ki] += k
				}
				if q < 8 {
					batch = append(batch, body)
					direct = append(direct, client.Query{Vector: scoredQ, K: 10, NProbe: q % 2 * 3})
				}

				// A selective filter (one language, one year: ~0.6 % of the
				// documents) is scanned exactly: the exact filtered top-k.
				filt := map[string]any{"must": []any{
					map[string]any{"key": "lang", "match": map[string]any{"value": "ja"}},
					map[string]any{"key": "year", "match": map[string]any{"value": 2003}},
				}}
				var fref []scored
				for _, s := range ref.ranked {
					if p := payloads[s.id]; p["lang"] == "ja" && p["year"] == float64(2003) {
						fref = append(fref, s)
					}
				}
				require.NotEmpty(t, fref)
				fa := h.int8Search(t, map[string]any{"vector": qv, "k": 10, "filter": filt})
				require.True(t, fa.ScatterGather.Exact, "a selective filter scans exactly")
				require.Len(t, fa.Items, min(10, len(fref)))
				for i, it := range fa.Items {
					want := check(it)
					if it.ID != fref[i].id {
						require.InDelta(t, fref[i].score, want.score, fref[i].bound+want.bound, "filtered position %d", i)
					}
				}
			}
			for ki, k := range recallKs {
				recall := float64(found[ki]) / float64(total[ki])
				t.Logf("%s: ivf recall@%d through the router, %d clustered docs of %d-D on 3 shards (%d lists a shard, default nprobe %d): %.3f",
					m, k, docs, dim, lists, ivf.DefaultNProbe(lists), recall)
				require.GreaterOrEqual(t, recall, 0.99, "recall@%d", k)
			}

			// A batch answers each query as it would alone.
			ba := h.batchSearch(t, map[string]any{"queries": batch})
			for i, q := range batch {
				require.Equal(t, h.int8Search(t, q).Items, ba[i], "batch query %d", i)
			}

			// Every replica of a shard gives the same non-exact answers.
			for si, reps := range h.dc.Replicas {
				var first *client.SearchResult
				for _, r := range reps {
					c, err := client.Dial(r.Addr, client.DialConfig{})
					require.NoError(t, err)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					c.WaitSettled(ctx)
					got, err := c.Search(ctx, direct, 0)
					cancel()
					c.Close()
					require.NoError(t, err)
					require.False(t, got.Exact)
					if first == nil {
						first = &got
						continue
					}
					for qi := range direct {
						require.Equal(t, pairs(first.Hits[qi]), pairs(got.Hits[qi]),
							"shard %d query %d: replica %d answers as replica 0", si, qi, r.Index)
					}
				}
			}
		})
	}
}

func pairs(hs []client.Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = fmt.Sprintf("%s %v", h.ID, h.Score)
	}
	return out
}

// batchSearch posts a /v1/search/batch and returns each query's items.
func (h *harness) batchSearch(t *testing.T, body any) [][]item {
	t.Helper()
	a := postOK[struct {
		Results []struct {
			Items []item `json:"items"`
		} `json:"results"`
		ScatterGather struct {
			Degraded bool `json:"degraded"`
			Exact    bool `json:"exact"`
		} `json:"scatter_gather"`
	}](t, h, "/v1/search/batch?deadline_ms=5000", body)
	require.False(t, a.ScatterGather.Degraded)
	require.False(t, a.ScatterGather.Exact)
	out := make([][]item, len(a.Results))
	for i, r := range a.Results {
		out[i] = r.Items
	}
	return out
}

// requireIndexStatus: /cluster/status shows, for every replica, exactly
// the index its store reports (kind ivf, ready, its lists, the rows its
// centroids were trained on, its measured default nprobe and memory).
func requireIndexStatus(t *testing.T, h *harness) {
	t.Helper()
	// The leader measures the default nprobe after each build and commits
	// it: compare once every replica has it, or the status read and the
	// store's could straddle the commit.
	require.Eventually(t, func() bool {
		for _, reps := range h.dc.Replicas {
			for _, r := range reps {
				if !r.Store.IndexStats().NProbeCalibrated {
					return false
				}
			}
		}
		return true
	}, 4*time.Minute, 10*time.Millisecond, "every replica has its leader's measured nprobe")
	var st struct {
		Collections []struct {
			Name         string `json:"name"`
			Quantization string `json:"quantization"`
			Index        string `json:"index"`
		} `json:"collections"`
		Shards []struct {
			Name     string `json:"name"`
			Replicas []struct {
				Collections []struct {
					Name  string          `json:"name"`
					Index json.RawMessage `json:"index"`
				} `json:"collections"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	// /cluster/status gives each replica a budget of its own (1 s): on a
	// loaded machine a replica, or the catalog, may be missing from one
	// answer, as it should be. Ask until every part is there.
	// EventuallyWithT: the condition runs on another goroutine, where
	// require's FailNow would not stop the test.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get(h.srv.URL + "/cluster/status")
		require.NoError(c, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(c, err)
		require.Equal(c, http.StatusOK, resp.StatusCode, "%s", raw)
		st.Collections, st.Shards = nil, nil
		require.NoError(c, json.Unmarshal(raw, &st), "%s", raw)
		require.NotEmpty(c, st.Collections)
		require.Len(c, st.Shards, len(h.dc.Replicas))
		for _, s := range st.Shards {
			for _, r := range s.Replicas {
				assert.NotEmpty(c, r.Collections, "replica %+v", r)
			}
		}
	}, 30*time.Second, 50*time.Millisecond, "a /cluster/status with every replica's collections")
	require.Len(t, st.Collections, 1)
	require.Equal(t, "int8", st.Collections[0].Quantization)
	require.Equal(t, "ivf", st.Collections[0].Index)
	require.Len(t, st.Shards, len(h.dc.Replicas))
	for si, reps := range h.dc.Replicas {
		require.Equal(t, h.dc.Names[si], st.Shards[si].Name)
		require.Len(t, st.Shards[si].Replicas, len(reps))
		for j, r := range reps {
			ix := r.Store.IndexStats()
			require.Equal(t, store.IndexStateReady, ix.State)
			require.Positive(t, ix.Lists)
			want := fmt.Sprintf(`{"kind": "ivf", "state": "ready", "lists": %d, "trained_rows": %d, "default_nprobe": %d,
				"nprobe_calibrated": %v, "rows": %d, "bytes": %d, "bytes_per_vector": %v}`, ix.Lists, ix.TrainedRows, ix.DefaultNProbe,
				ix.NProbeCalibrated, ix.Rows, ix.Bytes, math.Round(float64(ix.Bytes)/float64(ix.Rows)*10)/10)
			colls := st.Shards[si].Replicas[j].Collections
			require.Len(t, colls, 1, "%s replica %d", r.Shard, j)
			require.Equal(t, st.Collections[0].Name, colls[0].Name)
			require.JSONEq(t, want, string(colls[0].Index), "%s replica %d", r.Shard, j)
			if si == 0 && j == 0 {
				t.Logf("%s replica 0 in /cluster/status: %s", r.Shard, colls[0].Index)
			}
		}
	}
}
