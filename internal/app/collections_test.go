package app_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/vector"
)

// model is what a test wrote to one collection: its settings and the
// documents it holds, as the router should store them (normalised under
// cosine).
type model struct {
	settings catalog.Settings
	docs     map[string][]float32
}

// score is metric m's score of x for q, in float64: the reference the
// router's answers are checked against.
func score(m vector.Metric, q, x []float32) float64 {
	var s float64
	switch m {
	case vector.Euclidean:
		for i := range q {
			d := float64(q[i]) - float64(x[i])
			s += d * d
		}
		return math.Sqrt(s)
	default:
		for i := range q {
			s += float64(q[i]) * float64(x[i])
		}
		return s
	}
}

func normalized(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(n))
	}
	return out
}

// requireBruteForce checks a search answer against brute force over the
// model: the answer's scores are the k best the model holds, and each
// returned id is in the model with the score returned. Comparing scores
// rather than id lists leaves near-ties free to order either way.
func requireBruteForce(t *testing.T, m *model, q []float32, k int, got []item, what string) {
	t.Helper()
	if m.settings.Metric == vector.Cosine {
		q = normalized(q)
	}
	want := make([]float64, 0, len(m.docs))
	for _, v := range m.docs {
		want = append(want, score(m.settings.Metric, q, v))
	}
	slices.Sort(want)
	if m.settings.Metric != vector.Euclidean {
		slices.Reverse(want)
	}
	want = want[:min(k, len(want))]
	require.Len(t, got, len(want), "%s: hits", what)
	for i, h := range got {
		v, ok := m.docs[h.ID]
		require.True(t, ok, "%s: hit %q is not in this collection", what, h.ID)
		ref := score(m.settings.Metric, q, v)
		tol := 1e-4 * (1 + math.Abs(ref))
		require.InDelta(t, ref, h.Score, tol, "%s: score of %q", what, h.ID)
		require.InDelta(t, want[i], h.Score, tol, "%s: hit %d is not the %d-th best", what, i, i+1)
	}
}

// httpAPI is a router's HTTP API, spoken the way a client would.
type httpAPI struct {
	t   *testing.T
	url string
}

// do sends one request. A GET that names no deadline of its own is sent
// with deadline_ms=3000: these tests check what a read returns, and the
// 50 ms default is not a promise that a loaded machine (make test beside
// a CPU hog, under -race) finishes the fan-out in time; the tests of the
// default deadline itself use search, which adds nothing.
func (a httpAPI) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	if method == http.MethodGet && !strings.Contains(path, "deadline_ms=") && !strings.Contains(path, "timeout=") {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "deadline_ms=3000"
	}
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(a.t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.url+path, r)
	require.NoError(a.t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return resp.StatusCode, raw
}

func (a httpAPI) create(name string, s catalog.Settings) (int, []byte) {
	return a.do(http.MethodPut, "/v1/collections/"+name, map[string]any{
		"dimension": s.Dim, "metric": s.Metric.String(), "quantization": s.Quantization, "index": s.Index})
}

func (a httpAPI) search(coll string, q []float32, k int) (int, answer) {
	a.t.Helper()
	// 2 s for -race on two cores; TRAWL_COLLECTIONS_DEADLINE_MS=50 runs
	// the property test at the default deadline, to measure.
	deadline := cmp.Or(os.Getenv("TRAWL_COLLECTIONS_DEADLINE_MS"), "2000")
	code, raw := a.do(http.MethodPost, "/v1/collections/"+coll+"/search?deadline_ms="+deadline, map[string]any{"vector": q, "k": k})
	var ans answer
	if code == http.StatusOK {
		require.NoError(a.t, json.Unmarshal(raw, &ans), "%s", raw)
	}
	return code, ans
}

// routerOver starts a router over dc's shards and its HTTP server, both
// closed when the test ends (or by the returned stop, once).
func routerOver(t *testing.T, dc *devcluster.Cluster) (httpAPI, *app.Router, func()) {
	t.Helper()
	r, err := app.New(app.Config{Shards: dc.Specs(), Kernel: vector.Generic(), WarmupTimeout: 10 * time.Second})
	require.NoError(t, err)
	srv := httptest.NewServer(r.API)
	var once sync.Once
	stop := func() { once.Do(func() { srv.Close(); r.Close() }) }
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, r.WaitReady(ctx))
	return httpAPI{t: t, url: srv.URL}, r, stop
}

// Random creates, drops, upserts, deletes and searches over three
// collections of different dimensions and metrics that share document
// ids: every answer is brute force over its own collection only, and
// stays so after every replica restarts (DESIGN.md, "Collections").
func TestCollectionsAnswerFromTheirOwnDocuments(t *testing.T) {
	t.Parallel() // an exactness test: its own cluster, its own deadlines of seconds
	dir := t.TempDir()
	dcfg := devcluster.Config{Shards: 3, Replicas: 2, Dim: 8, Kernel: vector.Generic(), DataDir: dir}
	dc, err := devcluster.Start(dcfg)
	require.NoError(t, err)
	a, _, stop := routerOver(t, dc)

	models := map[string]*model{
		"text":  {settings: catalog.Settings{Dim: 8, Metric: vector.Cosine}.Normalize()},
		"image": {settings: catalog.Settings{Dim: 12, Metric: vector.DotProduct, Quantization: catalog.QuantInt8}.Normalize()},
		"geo":   {settings: catalog.Settings{Dim: 3, Metric: vector.Euclidean}.Normalize()},
	}
	names := []string{"geo", "image", "text"}
	for _, n := range names {
		code, raw := a.create(n, models[n].settings)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		models[n].docs = map[string][]float32{}
	}
	rng := rand.New(rand.NewPCG(23, 5))
	const steps = 400
	for step := range steps {
		n := names[rng.IntN(len(names))]
		m := models[n]
		switch op := rng.IntN(100); {
		case op < 40: // upsert a batch; ids are shared across collections
			var vs []map[string]any
			batch := map[string]bool{}
			for range 1 + rng.IntN(16) {
				id := fmt.Sprintf("doc-%d", rng.IntN(80))
				if batch[id] {
					continue // ids are unique within a request
				}
				batch[id] = true
				v := randomVector(rng, m.settings.Dim)
				vs = append(vs, map[string]any{"id": id, "vector": v})
				if m.settings.Metric == vector.Cosine {
					v = normalized(v)
				}
				m.docs[id] = v
			}
			code, raw := a.do(http.MethodPost, "/v1/collections/"+n+"/vectors", map[string]any{"vectors": vs})
			require.Equal(t, http.StatusOK, code, "step %d: upsert into %s: %s", step, n, raw)
		case op < 52:
			id := fmt.Sprintf("doc-%d", rng.IntN(80))
			code, raw := a.do(http.MethodDelete, "/v1/collections/"+n+"/vectors/"+id, nil)
			require.Equal(t, http.StatusOK, code, "step %d: delete from %s: %s", step, n, raw)
			delete(m.docs, id)
		case op < 94:
			k := 1 + rng.IntN(12)
			q := randomVector(rng, m.settings.Dim)
			code, ans := a.search(n, q, k)
			require.Equal(t, http.StatusOK, code)
			require.False(t, ans.ScatterGather.Degraded, "step %d: %v", step, ans.ScatterGather.ShardErrors)
			requireBruteForce(t, m, q, k, ans.Items, fmt.Sprintf("step %d: %s", step, n))
		case op < 97: // a query of another collection's size is refused
			code, _ := a.search(n, randomVector(rng, m.settings.Dim+1), 3)
			require.Equal(t, http.StatusBadRequest, code)
		default: // drop and create again, empty
			code, raw := a.do(http.MethodDelete, "/v1/collections/"+n, nil)
			require.Equal(t, http.StatusOK, code, "%s", raw)
			code, _ = a.search(n, randomVector(rng, m.settings.Dim), 3)
			require.Equal(t, http.StatusNotFound, code, "step %d: %s answered after its drop", step, n)
			code, raw = a.create(n, m.settings)
			require.Equal(t, http.StatusOK, code, "%s", raw)
			m.docs = map[string][]float32{}
		}
	}

	check := func(when string) {
		for _, n := range names {
			m := models[n]
			for i := range 5 {
				q := randomVector(rng, m.settings.Dim)
				code, ans := a.search(n, q, 20)
				require.Equal(t, http.StatusOK, code)
				require.False(t, ans.ScatterGather.Degraded)
				requireBruteForce(t, m, q, 20, ans.Items, fmt.Sprintf("%s: %s query %d", when, n, i))
			}
		}
	}
	check("before the restart")

	// Every replica stops, and starts again from its data directory.
	stop()
	dc.Close()
	dc, err = devcluster.Start(dcfg)
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	require.True(t, dc.Loaded)
	a, _, _ = routerOver(t, dc)
	check("after the restart")
}

// Two routers creating one name with different settings at once: exactly
// one wins, the other gets a conflict, and every replica of every group
// holds the winner's settings under one uid.
func TestConcurrentCreatesHaveOneWinner(t *testing.T) {
	longtest.Mark(t)
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 2, Dim: 8, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	_, r1, _ := routerOver(t, dc)
	_, r2, _ := routerOver(t, dc)
	ctx := context.Background()
	const rounds = 25
	winners := map[int]int{}
	for round := range rounds {
		name := fmt.Sprintf("race-%d", round)
		type outcome struct {
			created bool
			err     error
		}
		var o [2]outcome
		var wg sync.WaitGroup
		for i, r := range []*app.Router{r1, r2} {
			wg.Go(func() {
				created, err := r.Coordinator.CreateCollection(ctx, name, catalog.Settings{Dim: 8 * (i + 1), Metric: vector.Cosine})
				o[i] = outcome{created, err}
			})
		}
		wg.Wait()
		won := -1
		for i, x := range o {
			if x.err == nil {
				require.Equal(t, -1, won, "round %d: both creates succeeded", round)
				require.True(t, x.created)
				won = i
				continue
			}
			require.Equal(t, coordinator.CodeConflict, coordinator.CodeOf(x.err), "round %d: router %d: %v", round, i, x.err)
		}
		require.NotEqual(t, -1, won, "round %d: nobody won: %v / %v", round, o[0].err, o[1].err)
		winners[won]++

		// Every replica of every group holds the winner under one uid.
		var uid uint64
		for _, reps := range dc.Replicas {
			for _, rep := range reps {
				c, err := client.Dial(rep.Addr, client.DialConfig{})
				require.NoError(t, err)
				var dim uint32
				require.Eventually(t, func() bool {
					cctx, cancel := context.WithTimeout(ctx, time.Second)
					defer cancel()
					cat, err := c.Catalog(cctx, 0)
					if err != nil {
						return false
					}
					for _, e := range cat.GetCollections() {
						if e.GetName() == name {
							dim = e.GetSettings().GetDim()
							uid = cmp.Or(uid, e.GetUid())
							return e.GetUid() == uid
						}
					}
					return false
				}, 10*time.Second, 20*time.Millisecond, "round %d: %s replica %d never held %s under uid %d", round, rep.Shard, rep.Index, name, uid)
				require.Equal(t, uint32(8*(won+1)), dim, "round %d: %s replica %d", round, rep.Shard, rep.Index)
				c.Close()
			}
		}
	}
	t.Logf("winners by router: %v", winners)
}
