package app_test

// The same search through the Qdrant-compatible route and the native one,
// on one cluster, interleaved request by request so both see the same
// machine (the goal: the Qdrant route within 5 % of the native one).
//
//	go test -run '^$' -bench BenchmarkQdrantRoute -benchtime 2000x -count 5 ./internal/app
//
// It reports each route's median latency as the client sees it and their
// ratio (qdrant/native).

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

func BenchmarkQdrantRoute(b *testing.B) {
	// 1536-D bodies (the decode is where the routes differ) over a small
	// corpus, so the scan does not drown the router's share.
	kernel, err := vector.FromEnv()
	require.NoError(b, err)
	dcfg := devcluster.Config{Dim: vector.DefaultDim, Docs: 900, Seed: 7, Kernel: kernel}
	url, _ := benchRouter(b, dcfg, func(c app.Config) app.Config { return c })
	// The same query vector in both bodies, as JSON numbers.
	dc := queryVector(b, url)
	var native []byte
	native, err = json.Marshal(map[string]any{"vector": dc, "k": 10})
	require.NoError(b, err)
	qdrant, err := json.Marshal(map[string]any{"vector": dc, "limit": 10})
	require.NoError(b, err)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.Cleanup(c.CloseIdleConnections)
	one := func(path string, body []byte) time.Duration {
		t0 := time.Now()
		resp, err := c.Post(url+path, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Trawl-Degraded") != "false" {
			b.Fatalf("%s: HTTP %d, degraded %q", path, resp.StatusCode, resp.Header.Get("X-Trawl-Degraded"))
		}
		return time.Since(t0)
	}
	const nativePath, qdrantPath = "/v1/search?deadline_ms=5000", "/collections/trawl/points/search?deadline_ms=5000"
	for range 200 {
		one(nativePath, native)
		one(qdrantPath, qdrant)
	}
	nd := make([]time.Duration, 0, b.N)
	qd := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		// Alternate which goes first, so neither always follows the other.
		if i%2 == 0 {
			nd = append(nd, one(nativePath, native))
			qd = append(qd, one(qdrantPath, qdrant))
		} else {
			qd = append(qd, one(qdrantPath, qdrant))
			nd = append(nd, one(nativePath, native))
		}
	}
	b.StopTimer()
	slices.Sort(nd)
	slices.Sort(qd)
	n, q := nd[len(nd)/2], qd[len(qd)/2]
	b.ReportMetric(float64(n.Microseconds()), "native-p50-µs")
	b.ReportMetric(float64(q.Microseconds()), "qdrant-p50-µs")
	b.ReportMetric(float64(q)/float64(n), "qdrant/native")
}

// queryVector reads a stored vector back through the API, to search with.
func queryVector(b *testing.B, url string) []float32 {
	resp, err := http.Get(url + "/v1/vectors/doc-3")
	require.NoError(b, err)
	defer resp.Body.Close()
	var doc struct {
		Vector []float32 `json:"vector"`
	}
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&doc))
	require.Len(b, doc.Vector, vector.DefaultDim)
	return doc.Vector
}
