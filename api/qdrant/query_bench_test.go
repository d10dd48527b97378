package qdrant_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/trawl-search/trawl/internal/apitest"
)

// BenchmarkQueryFusion: a two-branch RRF query (a dense prefetch and a
// filtered dense prefetch, 50 each, fused to 10) against a single dense
// top-10 query, on the same in-process cluster (3 shards × 2 replicas,
// one 768-D cosine collection of TRAWL_BENCH_DOCS points, default
// 20 000) in the same run, through the REST route. Reports p50 and p99
// latency and queries per second, one client at a time.
//
//	go test -run XXX -bench BenchmarkQueryFusion -benchtime 2000x ./api/qdrant/
func BenchmarkQueryFusion(b *testing.B) {
	n := 20000
	if s := os.Getenv("TRAWL_BENCH_DOCS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	const dim = 768
	e := apitest.New(b, apitest.Config{})
	if res := e.Do(http.MethodPut, "/collections/bench", fmt.Sprintf(`{"vectors": {"size": %d, "distance": "Cosine"}}`, dim), nil); res.Status != http.StatusOK {
		b.Fatalf("%d %s", res.Status, res.Body)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	langs := []string{"en", "de", "fr", "es"}
	type point struct {
		ID      int            `json:"id"`
		Vector  []float32      `json:"vector"`
		Payload map[string]any `json:"payload"`
	}
	for start := 0; start < n; start += 500 {
		var pts []point
		for i := start; i < min(start+500, n); i++ {
			pts = append(pts, point{ID: i + 1, Vector: randomVector(rng, dim), Payload: map[string]any{"lang": langs[rng.IntN(4)]}})
		}
		if res := e.Do(http.MethodPut, "/collections/bench/points?wait=true", string(mustJSON(b, map[string]any{"points": pts})), nil); res.Status != http.StatusOK {
			b.Fatalf("%d %s", res.Status, res.Body)
		}
	}
	queries := make([][]float32, 64)
	for i := range queries {
		queries[i] = randomVector(rng, dim)
	}
	bodies := map[string]func(i int) string{
		"dense": func(i int) string {
			return string(mustJSON(b, map[string]any{"query": queries[i%64], "limit": 10}))
		},
		"rrf2": func(i int) string {
			return string(mustJSON(b, map[string]any{
				"prefetch": []any{
					map[string]any{"query": queries[i%64], "limit": 50},
					map[string]any{"query": queries[(i+1)%64], "limit": 50, "filter": map[string]any{"must": []any{map[string]any{"key": "lang", "match": map[string]any{"value": "en"}}}}},
				},
				"query": map[string]any{"fusion": "rrf"}, "limit": 10}))
		},
	}
	for _, name := range []string{"dense", "rrf2"} {
		b.Run(name, func(b *testing.B) {
			var lat []time.Duration
			start := time.Now()
			i := 0
			for b.Loop() {
				body := bodies[name](i)
				t0 := time.Now()
				res := e.Do(http.MethodPost, "/collections/bench/points/query?deadline_ms=5000", body, nil)
				lat = append(lat, time.Since(t0))
				if res.Status != http.StatusOK || res.Header.Get("X-Trawl-Degraded") != "false" {
					b.Fatalf("%d %s", res.Status, res.Body)
				}
				i++
			}
			total := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(len(lat))/total.Seconds(), "q/s")
		})
	}
}
