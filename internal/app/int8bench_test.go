package app_test

// The end-to-end figure of issue 14: a /v1/search/batch of 64 queries sent
// as vector_b64 over a 2-shard cluster of 30 000 1536-D vectors, int8
// against float32 in the same run. Gated, as the other benchmarks here:
//
//	TRAWL_INT8_BENCH=1 go test -run TestInt8Bench -v -timeout 20m ./internal/app
//
// One --quantization int8 cluster serves both: the float32 figure is the
// same batch with "exact": true on every query, which is exactly the
// float32 scan an unquantized shard runs (same kernel, same rows), so the
// two differ only in the scan. Batches alternate, each kind's median of
// TRAWL_INT8_BENCH_RUNS (default 15) runs is reported with the ratio, and
// the int8 answers' recall@10 against the exact ones.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

func TestInt8Bench(t *testing.T) {
	if os.Getenv("TRAWL_INT8_BENCH") != "1" {
		t.Skip("set TRAWL_INT8_BENCH=1 to run the int8 end-to-end benchmark")
	}
	runs := 15
	if s := os.Getenv("TRAWL_INT8_BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		runs = max(n, 10)
	}
	const (
		docs  = 30000
		dim   = 1536
		batch = 64
	)
	kernel, err := vector.FromEnv()
	require.NoError(t, err)
	t0 := time.Now()
	dc, err := devcluster.Start(devcluster.Config{Shards: 2, Replicas: 1, Dim: dim, Docs: docs, Seed: 14,
		Kernel: kernel, Quantization: store.QuantInt8})
	require.NoError(t, err)
	defer dc.Close()
	t.Logf("cluster of %d %d-D docs on 2 shards loaded and encoded in %s (kernel %s)", docs, dim, time.Since(t0).Round(time.Millisecond), kernel.Name)
	r, err := app.New(app.Config{Shards: dc.Specs(), Kernel: kernel, WarmupTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	srv := httptest.NewServer(r.API)
	defer srv.Close()
	require.NoError(t, r.WaitReady(t.Context()))

	rng := rand.New(rand.NewPCG(14, 1))
	body := func(exact bool) []byte {
		qs := make([]map[string]any, batch)
		for i := range qs {
			v := slices.Clone(dc.Corpus[(i*457)%docs].Vector)
			for j := range v {
				v[j] += 0.3 * float32(rng.NormFloat64())
			}
			q := map[string]any{"vector_b64": base64.StdEncoding.EncodeToString(vector.EncodeLE(v)), "k": 10}
			if exact {
				q["exact"] = true
			}
			qs[i] = q
		}
		b, err := json.Marshal(map[string]any{"queries": qs})
		require.NoError(t, err)
		return b
	}
	rng = rand.New(rand.NewPCG(14, 1))
	int8Body := body(false)
	rng = rand.New(rand.NewPCG(14, 1)) // the same queries
	exactBody := body(true)

	c := &http.Client{}
	defer c.CloseIdleConnections()
	type batchAnswer struct {
		Results []struct {
			Items []item `json:"items"`
		} `json:"results"`
		ScatterGather struct {
			Degraded bool `json:"degraded"`
			Exact    bool `json:"exact"`
		} `json:"scatter_gather"`
	}
	one := func(b []byte, wantExact bool) (time.Duration, batchAnswer) {
		t0 := time.Now()
		resp, err := c.Post(srv.URL+"/v1/search/batch?deadline_ms=10000", "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var a batchAnswer
		require.NoError(t, json.Unmarshal(raw, &a))
		require.False(t, a.ScatterGather.Degraded)
		require.Equal(t, wantExact, a.ScatterGather.Exact)
		require.Len(t, a.Results, batch)
		return d, a
	}
	for range 2 { // warm up
		one(exactBody, true)
		one(int8Body, false)
	}
	var ds8, ds32 []time.Duration
	var a8, a32 batchAnswer
	for range runs {
		d, a := one(exactBody, true)
		ds32, a32 = append(ds32, d), a
		d, a = one(int8Body, false)
		ds8, a8 = append(ds8, d), a
	}
	found := 0
	for i := range batch {
		want := map[string]bool{}
		for _, it := range a32.Results[i].Items {
			want[it.ID] = true
		}
		for _, it := range a8.Results[i].Items {
			if want[it.ID] {
				found++
			}
		}
	}
	median := func(ds []time.Duration) time.Duration {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	m8, m32 := median(ds8), median(ds32)
	t.Logf("/v1/search/batch of %d vector_b64 queries, k=10, 2 shards x %d %d-D docs, %d runs each: float32 (exact:true) median %s, int8 median %s, speed-up %.2fx; int8 recall@10 vs exact %.4f",
		batch, docs/2, dim, runs, m32.Round(10*time.Microsecond), m8.Round(10*time.Microsecond), float64(m32)/float64(m8), float64(found)/float64(batch*10))
}
