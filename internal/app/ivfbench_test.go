package app_test

// The end-to-end figures of issue 15: single-client p50/p99 and 4-client
// q/s through the router at 100 000 clustered 1536-D cosine documents over
// 3 shards, --index ivf --quantization int8 at the default nprobe against
// flat int8 and the exact float32 scan, with recall@10 by exact id set
// against the exact answer. Gated, as the other benchmarks here:
//
//	TRAWL_IVF_BENCH=1 go test -run TestIVFBench -v -timeout 30m ./internal/app
//
// Two clusters of one replica a shard hold the same corpus: one --index
// ivf, one --quantization int8 (flat); the exact figure is "exact": true
// on the flat one (the float32 scan any shard runs). Configurations are
// measured in interleaved rounds (TRAWL_IVF_BENCH_ROUNDS, default 3) and
// each figure is the median round; TRAWL_IVF_BENCH_DOCS changes the size.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
	"github.com/trawl-search/trawl/vector/quant"
)

func TestIVFBench(t *testing.T) {
	if os.Getenv("TRAWL_IVF_BENCH") != "1" {
		t.Skip("set TRAWL_IVF_BENCH=1 to run the IVF end-to-end benchmark")
	}
	envInt := func(name string, def int) int {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			require.NoError(t, err)
			return n
		}
		return def
	}
	var (
		docs   = envInt("TRAWL_IVF_BENCH_DOCS", 100000)
		rounds = envInt("TRAWL_IVF_BENCH_ROUNDS", 3)
	)
	const (
		dim     = 1536
		shards  = 3
		queries = 100
		clients = 4
		window  = 5 * time.Second
	)
	kernel, err := vector.FromEnv()
	require.NoError(t, err)
	corpus := devcluster.Corpus(docs, dim, 15)
	clone := func() []store.Record {
		out := make([]store.Record, len(corpus))
		for i, r := range corpus {
			out[i] = store.Record{ID: r.ID, Vector: slices.Clone(r.Vector), Payload: r.Payload}
		}
		return out
	}
	startCluster := func(name string, cfg devcluster.Config) (*devcluster.Cluster, string) {
		t0 := time.Now()
		cfg.Shards, cfg.Replicas, cfg.Dim, cfg.Kernel, cfg.Corpus = shards, 1, dim, kernel, clone()
		dc, err := devcluster.Start(cfg)
		require.NoError(t, err)
		t.Cleanup(dc.Close)
		t.Logf("%s: %d %d-D docs on %d shards loaded, encoded and indexed in %s", name, docs, dim, shards, time.Since(t0).Round(time.Millisecond))
		r, err := app.New(app.Config{Shards: dc.Specs(), Kernel: kernel, WarmupTimeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(r.Close)
		srv := httptest.NewServer(r.API)
		t.Cleanup(srv.Close)
		require.NoError(t, r.WaitReady(t.Context()))
		return dc, srv.URL
	}
	ivfDC, ivfURL := startCluster("ivf", devcluster.Config{Index: store.IndexIVF})
	_, flatURL := startCluster("flat int8", devcluster.Config{Quantization: store.QuantInt8})
	var lists []int
	var indexBytes int
	for _, reps := range ivfDC.Replicas {
		require.NoError(t, reps[0].Store.ViewIVF(func(_ vector.Rows, x *ivf.Index) error {
			require.NotNil(t, x)
			lists = append(lists, x.Lists())
			indexBytes += x.Bytes()
			return nil
		}))
	}

	// Queries near stored documents: noise of 0.3 times the (unit) norm.
	rng := rand.New(rand.NewPCG(15, 2))
	type config struct {
		name string
		url  string
		body func(i int) []byte
	}
	qvec := make([][]float32, queries)
	for i := range qvec {
		v := slices.Clone(corpus[(i*7919)%docs].Vector)
		kernel.Normalize(v)
		for j := range v {
			v[j] += float32(0.3 / math.Sqrt(dim) * rng.NormFloat64())
		}
		qvec[i] = v
	}
	body := func(exact bool) func(i int) []byte {
		bodies := make([][]byte, queries)
		for i, v := range qvec {
			q := map[string]any{"vector_b64": base64.StdEncoding.EncodeToString(vector.EncodeLE(v)), "k": 10}
			if exact {
				q["exact"] = true
			}
			b, err := json.Marshal(q)
			require.NoError(t, err)
			bodies[i] = b
		}
		return func(i int) []byte { return bodies[i%queries] }
	}
	configs := []config{
		{"exact float32", flatURL, body(true)},
		{"flat int8", flatURL, body(false)},
		{"ivf (default nprobe)", ivfURL, body(false)},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients}}
	search := func(c config, i int) ([]string, bool) {
		resp, err := client.Post(c.url+"/v1/search?deadline_ms=10000", "application/json", bytes.NewReader(c.body(i)))
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var a int8Answer
		require.NoError(t, json.Unmarshal(raw, &a))
		require.False(t, a.ScatterGather.Degraded)
		ids := make([]string, len(a.Items))
		for j, it := range a.Items {
			ids[j] = it.ID
		}
		return ids, a.ScatterGather.Exact
	}

	// Recall@10 by exact id set against the exact answers.
	truth := make([][]string, queries)
	for i := range queries {
		var exact bool
		truth[i], exact = search(configs[0], i)
		require.True(t, exact)
	}
	recall := map[string]float64{}
	for _, c := range configs[1:] {
		found := 0
		for i := range queries {
			got, exact := search(c, i)
			require.False(t, exact, c.name)
			for _, id := range got {
				if slices.Contains(truth[i], id) {
					found++
				}
			}
		}
		recall[c.name] = float64(found) / float64(10*queries)
	}
	recall[configs[0].name] = 1

	type result struct{ p50, p99, qps float64 }
	res := map[string][]result{}
	load0 := loadAvg()
	for round := range rounds {
		for _, c := range configs {
			n := queries
			if c.name == configs[0].name {
				n = queries / 2 // the exact scan is slow; half the queries are enough for a median
			}
			lat := make([]float64, 0, n)
			for i := range n {
				t0 := time.Now()
				search(c, i+round)
				lat = append(lat, time.Since(t0).Seconds()*1e3)
			}
			slices.Sort(lat)
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				count int
			)
			stop := time.Now().Add(window)
			t0 := time.Now()
			for w := range clients {
				wg.Go(func() {
					k := 0
					for i := w; time.Now().Before(stop); i += clients {
						search(c, i)
						k++
					}
					mu.Lock()
					count += k
					mu.Unlock()
				})
			}
			wg.Wait()
			res[c.name] = append(res[c.name], result{
				p50: lat[len(lat)/2], p99: lat[min(len(lat)-1, len(lat)*99/100)],
				qps: float64(count) / time.Since(t0).Seconds(),
			})
		}
	}
	load1 := loadAvg()
	median := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d clustered %d-D cosine docs over %d shards x 1 replica, k=10, %d queries; GOMAXPROCS %d, kernels %s/%s, load average %s -> %s; median of %d rounds\n",
		docs, dim, shards, queries, runtime.GOMAXPROCS(0), kernel.Name, quant.FromEnv().Name, load0, load1, rounds)
	fmt.Fprintf(&sb, "ivf: %v lists a shard, default nprobe %v; index %.0f bytes a row beside the float32 rows\n",
		lists, ivf.DefaultNProbe(lists[0]), float64(indexBytes)/float64(docs))
	fmt.Fprintf(&sb, "| scan | p50 ms (1 client) | p99 ms | q/s, %d clients | recall@10 |\n|---|---|---|---|---|\n", clients)
	for _, c := range configs {
		rs := res[c.name]
		fmt.Fprintf(&sb, "| %s | %.2f | %.2f | %.1f | %.3f |\n", c.name,
			median(rs, func(r result) float64 { return r.p50 }), median(rs, func(r result) float64 { return r.p99 }),
			median(rs, func(r result) float64 { return r.qps }), recall[c.name])
	}
	for round := range rounds {
		fmt.Fprintf(&sb, "round %d:", round+1)
		for _, c := range configs {
			r := res[c.name][round]
			fmt.Fprintf(&sb, " %s p50 %.2f ms %.1f q/s;", c.name, r.p50, r.qps)
		}
		e, f, x := res[configs[0].name][round], res[configs[1].name][round], res[configs[2].name][round]
		fmt.Fprintf(&sb, " ivf vs exact: p50 %.1fx, q/s %.1fx; ivf vs flat int8: p50 %.1fx, q/s %.1fx\n",
			e.p50/x.p50, x.qps/e.qps, f.p50/x.p50, x.qps/f.qps)
	}
	t.Log(sb.String())
	require.GreaterOrEqual(t, recall[configs[2].name], 0.99, "ivf recall@10 at the default nprobe")
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
