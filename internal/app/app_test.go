package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = shardBin.Remove()
		_ = routerBin.Remove()
		os.Exit(code)
	}))
}

type harness struct {
	dc  *devcluster.Cluster
	r   *app.Router
	srv *httptest.Server
}

// start runs a dev cluster and a router over it (plus any extra shards),
// and waits until the router is ready.
func start(t *testing.T, cfg devcluster.Config, extra ...app.ShardSpec) *harness {
	t.Helper()
	return startWith(t, cfg, app.Config{}, extra...)
}

// startWith is start with a router configured as rcfg (its shards, kernel
// and warm-up are filled in).
func startWith(t *testing.T, cfg devcluster.Config, rcfg app.Config, extra ...app.ShardSpec) *harness {
	t.Helper()
	dc, err := devcluster.Start(cfg)
	require.NoError(t, err)
	rcfg.Shards = append(dc.Specs(), extra...)
	rcfg.Kernel, rcfg.WarmupTimeout = cfg.Kernel, 5*time.Second
	r, err := app.New(rcfg)
	require.NoError(t, err)
	srv := httptest.NewServer(r.API)
	h := &harness{dc: dc, r: r, srv: srv}
	t.Cleanup(func() {
		srv.Close()
		r.Close()
		dc.Close()
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
	return h
}

type item struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
	Shard string  `json:"shard"`
}

type answer struct {
	Items         []item `json:"items"`
	ScatterGather struct {
		Degraded          bool              `json:"degraded"`
		ShardsTotal       int               `json:"shards_total"`
		ShardsQueried     int               `json:"shards_queried"`
		UnavailableShards []string          `json:"unavailable_shards"`
		ShardErrors       map[string]string `json:"shard_errors"`
		Coverage          float64           `json:"coverage"`
		ElapsedMS         int               `json:"elapsed_ms"`
		DeadlineMS        int               `json:"deadline_ms"`
	} `json:"scatter_gather"`
	// body is the answer as sent, for a failing test to print.
	body string
}

func (h *harness) search(t *testing.T, query string, body any) (answer, *http.Response, time.Duration) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	t0 := time.Now()
	resp, err := http.Post(h.srv.URL+"/v1/search"+query, "application/json", bytes.NewReader(b))
	took := time.Since(t0)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var a answer
	require.NoError(t, json.Unmarshal(raw, &a), string(raw))
	a.body = string(raw)
	return a, resp, took
}

// completeTries is how many times completeOK asks a search whose answers
// keep running out of their deadline.
const completeTries = 10

// completeOK posts body as JSON to the router's path until the answer is
// complete, and decodes it into a T. An answer degraded because every
// shard it misses ran out of its deadline is what the deadline promises
// on a machine too loaded to scan in time, honestly marked (a 200, or a
// 503 when no shard answered): it is logged and the search is asked
// again. A shard missing for any other reason fails the test at once, as
// do completeTries such answers in a row. A test whose subject is not the
// scan's speed uses it so that its verdict does not depend on the load.
func completeOK[T any](t *testing.T, h *harness, path string, body any) T {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	for try := 1; ; try++ {
		resp, err := http.Post(h.srv.URL+path, "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		var sg struct {
			SG struct {
				Degraded    bool              `json:"degraded"`
				ShardErrors map[string]string `json:"shard_errors"`
			} `json:"scatter_gather"`
		}
		require.NoError(t, json.Unmarshal(raw, &sg), "%s", raw)
		if resp.StatusCode == http.StatusOK && !sg.SG.Degraded {
			var a T
			require.NoError(t, json.Unmarshal(raw, &a), "%s", raw)
			return a
		}
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, resp.StatusCode, "%s", raw)
		require.True(t, sg.SG.Degraded, "a 503 is marked degraded: %s", raw)
		require.NotEmpty(t, sg.SG.ShardErrors, "%s", raw)
		for s, why := range sg.SG.ShardErrors {
			require.Equal(t, "deadline_exceeded", why, "%s is missing for a reason other than the machine's load: %s", s, raw)
		}
		require.Less(t, try, completeTries, "%d answers in a row ran out of their deadline: %s", completeTries, raw)
		t.Logf("try %d ran out of its deadline (the machine is loaded), asking again: %v", try, sg.SG.ShardErrors)
	}
}

// postOK posts body as JSON to the router's path, requires a 200 and
// decodes the answer into a T.
func postOK[T any](t *testing.T, h *harness, path string, body any) T {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(h.srv.URL+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var a T
	require.NoError(t, json.Unmarshal(raw, &a), "%s", raw)
	return a
}

// corpus makes n vectors with values on a coarse grid, a share of them
// exact copies under other ids, so equal scores (across shards too) are
// common and the id tie-break is exercised.
func corpus(rng *rand.Rand, n, dim int) []store.Record {
	out := make([]store.Record, 0, n)
	for i := range n {
		id := "doc-" + strconv.Itoa(i)
		if i > 0 && rng.IntN(5) == 0 {
			src := out[rng.IntN(len(out))].Vector
			out = append(out, store.Record{ID: id, Vector: slices.Clone(src)})
			continue
		}
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.IntN(9)-4) / 4
		}
		v[rng.IntN(dim)] = 1 // never a zero vector
		out = append(out, store.Record{ID: id, Vector: v})
	}
	return out
}

type scored struct {
	id    string
	score float64
	bound float64
}

// bruteForce scores every stored vector in float64, with DESIGN.md's error
// bound for each: 1e-5 · Σ|qᵢxᵢ| (for l2, on the squared distance).
func bruteForce(m vector.Metric, q []float32, recs []store.Record) []scored {
	out := make([]scored, len(recs))
	for i, r := range recs {
		var s, abs float64
		for j := range q {
			if m == vector.Euclidean {
				d := float64(q[j]) - float64(r.Vector[j])
				s += d * d
				abs += d * d
			} else {
				p := float64(q[j]) * float64(r.Vector[j])
				s += p
				abs += math.Abs(p)
			}
		}
		out[i] = scored{id: r.ID, score: s, bound: 1e-5*abs + 1e-12}
	}
	slices.SortFunc(out, func(a, b scored) int {
		better := a.score > b.score
		if m == vector.Euclidean {
			better = a.score < b.score
		}
		switch {
		case a.score == b.score:
			if a.id < b.id {
				return -1
			}
			return 1
		case better:
			return -1
		}
		return 1
	})
	return out
}

func TestSearchIsExactTopKOfTheUnion(t *testing.T) {
	t.Parallel() // an exactness test: its own cluster, its own deadlines of seconds
	const dim = 16
	for _, m := range []vector.Metric{vector.Cosine, vector.DotProduct, vector.Euclidean} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", m, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				recs := corpus(rng, 400, dim)
				h := start(t, devcluster.Config{Dim: dim, Metric: m, Replicas: 1, Corpus: recs, Kernel: vector.Generic()})
				byID := map[string]scored{}
				for q := range 4 {
					qv := make([]float32, dim)
					if q == 0 {
						copy(qv, recs[rng.IntN(len(recs))].Vector) // a query equal to stored vectors: exact ties
					} else {
						for j := range qv {
							qv[j] = float32(rng.NormFloat64())
						}
					}
					scoredQ := slices.Clone(qv)
					if m == vector.Cosine {
						vector.Generic().Normalize(scoredQ)
					}
					ref := bruteForce(m, scoredQ, h.dc.Corpus)
					clear(byID)
					for _, s := range ref {
						byID[s.id] = s
					}
					for _, k := range []int{1, 10, 100} {
						a, resp, _ := h.search(t, "?deadline_ms=2000", map[string]any{"vector": qv, "k": k})
						require.Equal(t, http.StatusOK, resp.StatusCode)
						require.False(t, a.ScatterGather.Degraded)
						require.Len(t, a.Items, k)
						seen := map[string]bool{}
						for i, it := range a.Items {
							require.False(t, seen[it.ID], "duplicate id %s", it.ID)
							seen[it.ID] = true
							want, ok := byID[it.ID]
							require.True(t, ok)
							got := it.Score
							if m == vector.Euclidean {
								got *= got
							}
							require.InDelta(t, want.score, got, want.bound+1e-6*math.Abs(want.score), "score of %s", it.ID)
							if it.ID != ref[i].id {
								// Only near-ties within the bound may swap places.
								require.InDelta(t, ref[i].score, want.score, ref[i].bound+want.bound,
									"k=%d position %d: got %s (%.9g), want %s (%.9g)", k, i, it.ID, want.score, ref[i].id, ref[i].score)
							}
						}
					}
				}
			})
		}
	}
}

func TestSilentShardAnswersDegradedByTheDeadline(t *testing.T) {
	h := start(t, devcluster.Config{Dim: 32, Docs: 600, Seed: 3, Kernel: vector.Generic()})
	a, _, _ := h.search(t, "?deadline_ms=1000", map[string]any{"like_id": "doc-1", "k": 10})
	require.False(t, a.ScatterGather.Degraded, "warm-up query")

	// Both replicas of shard-1 go silent on their warm, READY connections.
	for i := range 2 {
		rep, ok := h.dc.Replica("shard-1", i)
		require.True(t, ok)
		require.NoError(t, rep.Proxy.Blackhole())
	}
	const deadline = 300 * time.Millisecond
	vec := h.dc.Corpus[1].Vector
	a, resp, took := h.search(t, "?deadline_ms=300", map[string]any{"vector": vec, "k": 10})
	t.Logf("silent shard: answered in %s for a %s deadline (overshoot %s)", took, deadline, took-deadline)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("X-Trawl-Degraded"))
	require.Less(t, took, deadline+50*time.Millisecond)
	require.True(t, a.ScatterGather.Degraded)
	require.Equal(t, []string{"shard-1"}, a.ScatterGather.UnavailableShards)
	require.Equal(t, map[string]string{"shard-1": "deadline_exceeded"}, a.ScatterGather.ShardErrors)
	require.Equal(t, 2, a.ScatterGather.ShardsQueried)
	require.Less(t, a.ScatterGather.Coverage, 1.0)
	require.Greater(t, a.ScatterGather.Coverage, 0.5)
	require.Len(t, a.Items, 10, "k items from the live shards")
	for _, it := range a.Items {
		require.NotEqual(t, "shard-1", it.Shard)
	}
}

func TestShardSilentSinceStartLowersCoverage(t *testing.T) {
	longtest.Mark(t)
	// A listener that accepts and never speaks: the connection never
	// becomes READY, so the shard's document count is never learned.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	h := start(t, devcluster.Config{Dim: 32, Docs: 300, Seed: 4, Kernel: vector.Generic()},
		app.ShardSpec{Name: "shard-9", Addrs: []string{ln.Addr().String()}})
	a, resp, _ := h.search(t, "?deadline_ms=500", map[string]any{"like_id": "doc-2", "k": 5})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, a.ScatterGather.Degraded)
	require.Equal(t, []string{"shard-9"}, a.ScatterGather.UnavailableShards)
	require.Less(t, a.ScatterGather.Coverage, 1.0)
	require.InDelta(t, 0.75, a.ScatterGather.Coverage, 0.01, "the unseen shard counts as the mean of the three known ones")
}

func TestRefusedShardFailsAtOnce(t *testing.T) {
	longtest.Mark(t)
	// Port 1: nothing listens there (a freed ephemeral port could be taken
	// by a test running in parallel, which then answers as shard-9).
	const dead = "127.0.0.1:1"
	h := start(t, devcluster.Config{Dim: 32, Docs: 300, Seed: 5, Kernel: vector.Generic()},
		app.ShardSpec{Name: "shard-9", Addrs: []string{dead}})
	a, resp, took := h.search(t, "?deadline_ms=2000", map[string]any{"like_id": "doc-3", "k": 5})
	t.Logf("refused shard: answered in %s of a 2s deadline", took)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The router's /readyz waited its ready timeout for shard-9 to serve,
	// and the prober has long made its only replica suspect: the shard is
	// answered at once as suspect, without touching the network.
	require.Equal(t, map[string]string{"shard-9": "suspect"}, a.ScatterGather.ShardErrors)
	require.Less(t, took, time.Second, "a refused shard must not cost the deadline")
}

func TestOneReplicaOfEveryShardStopped(t *testing.T) {
	h := start(t, devcluster.Config{Dim: 32, Docs: 300, Seed: 6, Kernel: vector.Generic()})
	for _, n := range h.dc.Names {
		rep, _ := h.dc.Replica(n, 0)
		rep.Proxy.Stop()
	}
	for range 5 {
		a, resp, _ := h.search(t, "?deadline_ms=1000", map[string]any{"like_id": "doc-4", "k": 5})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.False(t, a.ScatterGather.Degraded, "%v", a.ScatterGather.ShardErrors)
		require.Len(t, a.Items, 5)
	}
}

// waitReady waits, boundedly, for the router's warm-up to end (generously:
// a loaded machine slows the handshakes and catalog reads it waits on).
func waitReady(t *testing.T, r *app.Router) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.WaitReady(ctx))
}
