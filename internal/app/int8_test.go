package app_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

type int8Answer struct {
	Items         []item `json:"items"`
	ScatterGather struct {
		Degraded bool `json:"degraded"`
		Exact    bool `json:"exact"`
	} `json:"scatter_gather"`
}

func (h *harness) int8Search(t *testing.T, body any) int8Answer {
	t.Helper()
	a := postOK[int8Answer](t, h, "/v1/search?deadline_ms=5000", body)
	require.False(t, a.ScatterGather.Degraded)
	return a
}

// TestInt8SearchExactIsBruteForce is the brute-force property with
// --quantization int8 shards: with "exact": true the answer is still the
// exact top-k of the union (and says exact); without it the int8 scan
// serves (exact false), every score is still the exact one, and recall@10
// against brute force is measured and logged (asserted only loosely).
func TestInt8SearchExactIsBruteForce(t *testing.T) {
	t.Parallel() // an exactness test: its own cluster, its own deadlines of seconds
	const dim = 64
	for _, m := range []vector.Metric{vector.Cosine, vector.DotProduct, vector.Euclidean} {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel() // each cluster waits on its replicas training their scales
			rng := rand.New(rand.NewPCG(11, uint64(m)))
			recs := corpus(rng, 1200, dim)
			h := start(t, devcluster.Config{Dim: dim, Metric: m, Replicas: 2, Corpus: recs, Kernel: vector.Generic(),
				Quantization: store.QuantInt8, Int8MinRows: 200})
			for _, reps := range h.dc.Replicas {
				for _, r := range reps {
					require.True(t, r.Store.Int8Ready(), "%s replica %d has codes", r.Shard, r.Index)
				}
			}
			found, total, found1 := 0, 0, 0
			for q := range 12 {
				qv := make([]float32, dim)
				if q == 0 {
					copy(qv, recs[rng.IntN(len(recs))].Vector)
				} else {
					for j := range qv {
						qv[j] = float32(rng.NormFloat64())
					}
				}
				scoredQ := slices.Clone(qv)
				if m == vector.Cosine {
					vector.Generic().Normalize(scoredQ)
				}
				ref := newExactRef(t, m, scoredQ, h.dc.Corpus)
				ref.requireExactTopK(h, qv)
				checkScore := ref.check
				kth := ref.ranked[9]
				hits := func(body map[string]any) int {
					a := h.int8Search(t, body)
					require.False(t, a.ScatterGather.Exact, "without exact the int8 codes serve")
					require.Len(t, a.Items, 10)
					n := 0
					for _, it := range a.Items {
						want := checkScore(it)
						// A hit counts when it is as good as the 10th best
						// (ties at the boundary are common in this corpus).
						better := want.score >= kth.score-kth.bound-want.bound
						if m == vector.Euclidean {
							better = want.score <= kth.score+kth.bound+want.bound
						}
						if better {
							n++
						}
					}
					return n
				}
				found += hits(map[string]any{"vector": qv, "k": 10})
				found1 += hits(map[string]any{"vector": qv, "k": 10, "oversample": 1})
				total += 10
			}
			recall := float64(found) / float64(total)
			t.Logf("%s: int8 recall@10 over 12 queries, %d docs of %d-D on 3 shards: %.3f at the default oversample, %.3f at oversample 1",
				m, len(recs), dim, recall, float64(found1)/float64(total))
			require.GreaterOrEqual(t, recall, 0.9, fmt.Sprintf("recall@10 %.3f", recall))
		})
	}
}

// exactRef is one query's brute-force ranking over a corpus, for checking
// answered items against it.
type exactRef struct {
	t      *testing.T
	m      vector.Metric
	ranked []scored
	byID   map[string]scored
}

// newExactRef ranks corpus for scoredQ (normalised already for cosine).
func newExactRef(t *testing.T, m vector.Metric, scoredQ []float32, corpus []store.Record) *exactRef {
	e := &exactRef{t: t, m: m, ranked: bruteForce(m, scoredQ, corpus), byID: map[string]scored{}}
	for _, s := range e.ranked {
		e.byID[s.id] = s
	}
	return e
}

// check asserts an item is a corpus document answered with its own score
// (l2 answers distances, the ranking squared ones) and returns its entry.
func (e *exactRef) check(it item) scored {
	e.t.Helper()
	want, ok := e.byID[it.ID]
	require.True(e.t, ok)
	got := it.Score
	if e.m == vector.Euclidean {
		got *= got
	}
	require.InDelta(e.t, want.score, got, want.bound+1e-6*math.Abs(want.score), "score of %s", it.ID)
	return want
}

// requireExactTopK asks qv with "exact": true at each of ks (1, 10 and 50
// when none): each answer is exact and is the brute-force top-k (a
// different id at a position only where the two score the same within
// their bounds).
func (e *exactRef) requireExactTopK(h *harness, qv []float32, ks ...int) {
	t := e.t
	t.Helper()
	if len(ks) == 0 {
		ks = []int{1, 10, 50}
	}
	for _, k := range ks {
		a := h.int8Search(t, map[string]any{"vector": qv, "k": k, "exact": true})
		require.True(t, a.ScatterGather.Exact, "exact:true is answered exactly")
		require.Len(t, a.Items, k)
		for i, it := range a.Items {
			want := e.check(it)
			if r := e.ranked[i]; it.ID != r.id {
				require.InDelta(t, r.score, want.score, r.bound+want.bound,
					"k=%d position %d: got %s (%.9g), want %s (%.9g)", k, i, it.ID, want.score, r.id, r.score)
			}
		}
	}
}
