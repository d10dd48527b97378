package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/index"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// benchRows is the shard size of the filter benchmarks (DESIGN.md's
// "1 % of a 200 000-vector shard"); TRAWL_FILTER_BENCH_ROWS makes it
// smaller for a quick look.
func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("TRAWL_FILTER_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// benchPayload is a document's payload in the benchmarks: bucket (0..99)
// makes selectivities exact (bucket == 7 keeps 1 %, bucket < 10 keeps
// 10 %), plus the dev corpus's kind of fields.
func benchPayload(rng *rand.Rand, i int) []byte {
	langs := []string{"en", "en", "de", "fr", "es", "ja"}
	return fmt.Appendf(nil, `{"bucket":%d,"lang":%q,"year":%d,"tags":["t%d","t%d"],"price":%d.%02d}`,
		i%100, langs[rng.IntN(len(langs))], 2000+rng.IntN(26), rng.IntN(20), rng.IntN(20), rng.IntN(1000), rng.IntN(100))
}

// benchServer is a 1536-D cosine shard of n rows with payloads and int8
// codes, served without raft (the scan path is the same).
func benchServer(b *testing.B, n int) *server.Server {
	b.Helper()
	const dim = vector.DefaultDim
	k, err := vector.FromEnv()
	if err != nil {
		b.Fatal(err)
	}
	mem := store.NewMemory(dim, store.WithQuantization(store.QuantInt8))
	srv := server.New(Config{Dim: dim, Metric: vector.Cosine, Kernel: k, Store: mem})
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]store.Record, 0, 1024)
	for i := range n {
		v := make([]float32, dim)
		for j := range v {
			v[j] = rng.Float32() - 0.5
		}
		k.Normalize(v)
		recs = append(recs, store.Record{ID: "doc-" + strconv.Itoa(i), Vector: v, Payload: benchPayload(rng, i)})
		if len(recs) == cap(recs) || i == n-1 {
			if err := mem.Upsert(context.Background(), place, recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	scale, err := mem.trainInt8()
	if err != nil {
		b.Fatal(err)
	}
	if err := mem.SetTrained(store.TrainedInt8Scale, scale); err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkFilteredSearch: one top-10 query on a 200 000-row 1536-D
// shard, float32 (exact) and int8, with no filter, filters keeping 1 %,
// 10 % and 50 % of the rows, and one matching nothing. ns/op is the whole
// shard side of a query: filter parse, index selection, scan, answer.
func BenchmarkFilteredSearch(b *testing.B) {
	n := benchRows()
	srv := benchServer(b, n)
	rng := rand.New(rand.NewPCG(3, 4))
	q := make([]float32, vector.DefaultDim)
	for j := range q {
		q[j] = rng.Float32() - 0.5
	}
	qb := shard.EncodeVector(q)
	filters := []struct{ name, json string }{
		{"none", ""},
		{"1pct", `{"must": {"key": "bucket", "match": {"value": 7}}}`},
		{"10pct", `{"must": {"key": "bucket", "range": {"lt": 10}}}`},
		{"50pct", `{"must": {"key": "bucket", "range": {"gte": 50}}}`},
		{"nothing", `{"must": {"key": "bucket", "match": {"value": 1000}}}`},
		{"1pct_two_keys", `{"must": [{"key": "bucket", "range": {"lt": 5}}, {"key": "lang", "match": {"value": "en"}}], "must_not": {"key": "tags", "match": {"any": ["t3"]}}}`},
	}
	for _, exact := range []bool{true, false} {
		kind := "float32"
		if !exact {
			kind = "int8"
		}
		for _, f := range filters {
			var fb []byte
			if f.json != "" {
				flt, err := filter.Parse([]byte(f.json))
				if err != nil {
					b.Fatal(err)
				}
				fb, _ = flt.MarshalJSON()
			}
			pq := &shardpb.Query{Vector: qb, K: 10, Exact: exact, Filter: fb}
			b.Run(kind+"/"+f.name, func(b *testing.B) {
				var hits int
				for b.Loop() {
					res, _, _, err := srv.search(context.Background(), []*shardpb.Query{pq})
					if err != nil {
						b.Fatal(err)
					}
					hits = len(res[0].GetHits())
				}
				b.ReportMetric(float64(hits), "hits")
			})
		}
	}
}

// BenchmarkPayloadIndexMemory reports the payload index's heap per
// document for the benchmark payloads (5 keys: a 100-value integer, a
// 6-value string, a 26-value integer, two of 20 tags, a price of ~100 000
// values), and how long building it takes.
func BenchmarkPayloadIndexMemory(b *testing.B) {
	n := benchRows()
	rng := rand.New(rand.NewPCG(5, 6))
	docs := make([]map[string]any, n)
	for i := range docs {
		docs[i], _ = filter.DecodePayload(benchPayload(rng, i))
	}
	var ix *index.Index
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ix = index.New(index.Config{})
		for i, d := range docs {
			ix.Add(uint32(i), d)
		}
		ix.Flush()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/doc")
	}
	runtime.KeepAlive(ix)
}

// BenchmarkUpsert: writes of 256 1536-D vectors with and without
// payloads, through the shard's Upsert (validation, payload check,
// store and index; no raft, whose fsync'd log costs the same either way
// but for the payload bytes).
func BenchmarkUpsert(b *testing.B) {
	const dim, batch = vector.DefaultDim, 256
	k, err := vector.FromEnv()
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, withPayload := range []bool{false, true} {
		name := "no_payload"
		if withPayload {
			name = "payload"
		}
		b.Run(name, func(b *testing.B) {
			srv := server.New(Config{Dim: dim, Metric: vector.Cosine, Kernel: k, Store: store.NewMemory(dim)})
			next := 0
			reqs := make([]*shardpb.UpsertRequest, 64)
			for r := range reqs {
				req := &shardpb.UpsertRequest{Placement: &shardpb.shard.Placement{Fingerprint: place.Fingerprint, Shard: place.Shard}}
				for range batch {
					v := make([]float32, dim)
					for j := range v {
						v[j] = rng.Float32() - 0.5
					}
					pv := &shardpb.Vector{Id: "doc-" + strconv.Itoa(next), Vector: shard.EncodeVector(v)}
					if withPayload {
						pv.Payload = benchPayload(rng, next)
					}
					next++
					req.Vectors = append(req.Vectors, pv)
				}
				reqs[r] = req
			}
			i := 0
			for b.Loop() {
				if _, err := srv.Upsert(context.Background(), reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
