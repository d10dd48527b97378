package qdrant_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/trawl-search/trawl/internal/apitest"
)

// benchEnv reads an integer knob of the hybrid benchmark.
func benchEnv(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// hybridDoc is one generated document's sparse vector: term ids
// ascending and their BM25 term-frequency weights.
type hybridDoc struct {
	terms  []uint32
	values []float32
}

// BenchmarkHybrid: hybrid retrieval as RAG stacks run it — a dense
// prefetch and a sparse (BM25-style, idf modifier) prefetch, 50 each,
// fused by RRF to 10 — against a dense-only top-10 query and a
// sparse-only one, on the same in-process cluster (3 shards × 2
// replicas, through the router's REST route) in the same run, at the
// product's 50 ms default deadline and at 1 s (a 503, no shard in time,
// is counted, not fatal). Documents (default
// 100 000) carry a 768-D vector and a sparse vector of ~100 distinct
// terms drawn from a Zipf vocabulary of 30 000 (s = 1.1), weighted
// tf·2.2/(tf + 1.2) as BM25 with k1 = 1.2 and |d| = avgdl; queries are
// 3..8 Zipf terms valued 1. Reports p50, p99, q/s and the shares of
// degraded answers and 503s, one client at a time. Before timing, it checks that
// sparse-only top-10s equal a brute force (collection-wide idf) on 50
// queries and reports that recall.
//
//	go test -run XXX -bench BenchmarkHybrid -benchtime 200x -timeout 60m ./api/qdrant/
//
// Knobs: TRAWL_BENCH_DOCS, TRAWL_BENCH_DIM, TRAWL_BENCH_VOCAB and
// TRAWL_BENCH_TERMS (distinct terms a document) shrink it for a quick
// run.
func BenchmarkHybrid(b *testing.B) {
	n := benchEnv(b, "TRAWL_BENCH_DOCS", 100000)
	dim := benchEnv(b, "TRAWL_BENCH_DIM", 768)
	vocab := benchEnv(b, "TRAWL_BENCH_VOCAB", 30000)
	terms := min(benchEnv(b, "TRAWL_BENCH_TERMS", 100), vocab/2)
	e := apitest.New(b, apitest.Config{})
	create := fmt.Sprintf(`{"vectors": {"size": %d, "distance": "Cosine"}, "sparse_vectors": {"text": {"modifier": "idf"}}}`, dim)
	if res := e.Do(http.MethodPut, "/collections/hybrid", create, nil); res.Status != http.StatusOK {
		b.Fatalf("%d %s", res.Status, res.Body)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(vocab-1))
	docs := make([]hybridDoc, n)
	df := make([]int, vocab)
	type point struct {
		ID     int            `json:"id"`
		Vector map[string]any `json:"vector"`
	}
	loadStart := time.Now()
	const batch = 400
	for start := 0; start < n; start += batch {
		var pts []point
		for i := start; i < min(start+batch, n); i++ {
			tf := map[uint32]int{}
			for len(tf) < terms {
				tf[uint32(zipf.Uint64())]++
			}
			d := hybridDoc{}
			for t := range tf {
				d.terms = append(d.terms, t)
			}
			slices.Sort(d.terms)
			for _, t := range d.terms {
				f := float32(tf[t])
				d.values = append(d.values, f*2.2/(f+1.2))
				df[t]++
			}
			docs[i] = d
			pts = append(pts, point{ID: i + 1, Vector: map[string]any{
				"": randomVector(rng, dim), "text": map[string]any{"indices": d.terms, "values": d.values}}})
		}
		if res := e.Do(http.MethodPut, "/collections/hybrid/points?wait=true", string(mustJSON(b, map[string]any{"points": pts})), nil); res.Status != http.StatusOK {
			b.Fatalf("%d %s", res.Status, res.Body)
		}
	}
	b.Logf("loaded %d documents (%d-D, %d distinct terms each of a %d-term vocabulary) in %s", n, dim, terms, vocab, time.Since(loadStart).Round(time.Second))

	// Queries: a dense vector and 3..8 distinct Zipf terms.
	const nq = 64
	dense := make([][]float32, nq)
	sparse := make([]map[string]any, nq)
	sparseTerms := make([][]uint32, nq)
	for i := range nq {
		dense[i] = randomVector(rng, dim)
		set := map[uint32]bool{}
		for len(set) < 3+rng.IntN(6) {
			set[uint32(zipf.Uint64())] = true
		}
		for t := range set {
			sparseTerms[i] = append(sparseTerms[i], t)
		}
		slices.Sort(sparseTerms[i])
		ones := make([]float32, len(sparseTerms[i]))
		for j := range ones {
			ones[j] = 1
		}
		sparse[i] = map[string]any{"indices": sparseTerms[i], "values": ones}
	}

	// Sparse-only recall against a brute force with collection-wide idf.
	post := map[uint32][]int{} // term → the documents holding it
	for i, d := range docs {
		for _, t := range d.terms {
			post[t] = append(post[t], i)
		}
	}
	idf := func(t uint32) float64 {
		return math.Log((float64(n)-float64(df[t])+0.5)/(float64(df[t])+0.5) + 1)
	}
	hits, wanted := 0, 0
	for i := range 50 {
		score := map[int]float64{}
		for _, t := range sparseTerms[i] {
			for _, di := range post[t] {
				j, _ := slices.BinarySearch(docs[di].terms, t)
				score[di] += idf(t) * float64(docs[di].values[j])
			}
		}
		var all []float64
		for _, s := range score {
			all = append(all, s)
		}
		slices.SortFunc(all, func(a, b float64) int { return -cmpFloat(a, b) })
		k := min(10, len(all))
		res := e.Do(http.MethodPost, "/collections/hybrid/points/query?deadline_ms=10000", string(mustJSON(b, map[string]any{"query": sparse[i], "using": "text", "limit": 10})), nil)
		if res.Status != http.StatusOK || res.Header.Get("X-Trawl-Degraded") != "false" {
			b.Fatalf("%d %s", res.Status, res.Body)
		}
		var ans struct {
			Result struct {
				Points []struct {
					ID int `json:"id"`
				} `json:"points"`
			} `json:"result"`
		}
		if err := json.Unmarshal(res.Body, &ans); err != nil {
			b.Fatal(err)
		}
		wanted += k
		if k == 0 {
			continue
		}
		kth := all[k-1]
		for _, p := range ans.Result.Points[:min(k, len(ans.Result.Points))] {
			// A hit counts when it is as good as the brute force's k-th
			// (ties at the cut may come in either order).
			if s, ok := score[p.ID-1]; ok && s >= kth*(1-1e-5) {
				hits++
			}
		}
	}
	recall := float64(hits) / float64(wanted)
	b.Logf("sparse-only recall@10 against brute force over 50 queries: %.3f", recall)
	if recall < 1 {
		b.Errorf("sparse-only recall %.3f, want 1.000: sparse search is exact", recall)
	}

	bodies := map[string]func(i int) string{
		"dense": func(i int) string {
			return string(mustJSON(b, map[string]any{"query": dense[i%nq], "limit": 10}))
		},
		"sparse": func(i int) string {
			return string(mustJSON(b, map[string]any{"query": sparse[i%nq], "using": "text", "limit": 10}))
		},
		"hybrid": func(i int) string {
			return string(mustJSON(b, map[string]any{
				"prefetch": []any{
					map[string]any{"query": dense[i%nq], "limit": 50},
					map[string]any{"query": sparse[i%nq], "using": "text", "limit": 50},
				},
				"query": map[string]any{"fusion": "rrf"}, "limit": 10}))
		},
	}
	for _, deadline := range []int{50, 1000} {
		for _, name := range []string{"dense", "sparse", "hybrid"} {
			b.Run(fmt.Sprintf("%s/deadline=%dms", name, deadline), func(b *testing.B) {
				var lat []time.Duration
				degraded, unanswered, i := 0, 0, 0
				start := time.Now()
				for b.Loop() {
					body := bodies[name](i)
					t0 := time.Now()
					res := e.Do(http.MethodPost, fmt.Sprintf("/collections/hybrid/points/query?deadline_ms=%d", deadline), body, nil)
					lat = append(lat, time.Since(t0))
					switch {
					case res.Status == http.StatusServiceUnavailable:
						// No shard answered within the deadline: what a
						// client sees at 50 ms on a loaded machine.
						unanswered++
					case res.Status != http.StatusOK:
						b.Fatalf("%d %s", res.Status, res.Body)
					case res.Header.Get("X-Trawl-Degraded") != "false":
						if degraded == 0 {
							var a struct {
								SG json.RawMessage `json:"scatter_gather"`
							}
							_ = json.Unmarshal(res.Body, &a)
							b.Logf("first degraded answer: %s", a.SG)
						}
						degraded++
					}
					i++
				}
				total := time.Since(start)
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(len(lat))/total.Seconds(), "q/s")
				b.ReportMetric(100*float64(degraded)/float64(len(lat)), "degraded-%")
				b.ReportMetric(100*float64(unanswered)/float64(len(lat)), "503-%")
				b.ReportMetric(recall, "sparse-recall")
			})
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
