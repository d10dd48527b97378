package app_test

// The healthy query path through the real HTTP router over loopback gRPC,
// for the tracing overhead figures of docs/tracing.md. This file compiles
// on builds from before tracing too (it names no tracing field), so the same
// benchmark runs on both; querybench_trace_test.go adds tracing on.
//
//	go test -run '^$' -bench BenchmarkHealthyQuery -benchtime 2000x -count 10 ./internal/app
//
// Each run reports p50-µs: the median latency of its queries as the client
// sees them.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

// queryBenchCluster: 3 shards × 2 replicas of 3 000 128-D documents each,
// so a scan is far below a millisecond and the figure is the router's.
func queryBenchCluster() devcluster.Config {
	return devcluster.Config{Dim: 128, Docs: 9000, Seed: 7, Kernel: vector.Generic()}
}

// benchRouter starts cfg and a router built by mk over it, and returns the
// router's URL and the corpus.
func benchRouter(b *testing.B, dcfg devcluster.Config, mk func(app.Config) app.Config) (string, []byte) {
	b.Helper()
	dc, err := devcluster.Start(dcfg)
	require.NoError(b, err)
	r, err := app.New(mk(app.Config{Shards: dc.Specs(), Kernel: dcfg.Kernel, WarmupTimeout: 5 * time.Second}))
	require.NoError(b, err)
	srv := httptest.NewServer(r.API)
	b.Cleanup(func() {
		srv.Close()
		r.Close()
		dc.Close()
	})
	require.NoError(b, r.WaitReady(b.Context()))
	body, err := json.Marshal(map[string]any{"vector": dc.Corpus[3].Vector, "k": 10})
	require.NoError(b, err)
	return srv.URL, body
}

// runQueries sends b.N queries one after another and reports their median.
func runQueries(b *testing.B, url string, body []byte) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.Cleanup(c.CloseIdleConnections)
	one := func() time.Duration {
		t0 := time.Now()
		resp, err := c.Post(url+"/v1/search?deadline_ms=1000", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Trawl-Degraded") == "true" {
			b.Fatalf("HTTP %d, degraded %q", resp.StatusCode, resp.Header.Get("X-Trawl-Degraded"))
		}
		return time.Since(t0)
	}
	for range 200 { // warm connections and latency averages
		one()
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ds = append(ds, one())
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, "p50-µs")
}

func BenchmarkHealthyQuery(b *testing.B) {
	b.Run("tracing=off", func(b *testing.B) {
		url, body := benchRouter(b, queryBenchCluster(), func(c app.Config) app.Config { return c })
		runQueries(b, url, body)
	})
}
