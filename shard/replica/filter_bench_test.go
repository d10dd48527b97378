package replica

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/internal/shardtest"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// benchServer is a 1536-D cosine replica (a group of one, its log in
// memory) of n rows with payloads and int8 codes, written and trained
// through its log.
func benchServer(b *testing.B, n int) *server.Server {
	b.Helper()
	const dim = vector.DefaultDim
	k, err := vector.FromEnv()
	if err != nil {
		b.Fatal(err)
	}
	rep, _ := serve(b, Config{Legacy: catalog.Settings{Dim: dim, Metric: vector.Cosine, Quantization: catalog.QuantInt8}, Kernel: k, Int8MinRows: neverTrain},
		nil, client.DialConfig{})
	rng := rand.New(rand.NewPCG(1, 2))
	req := &shardpb.UpsertRequest{Placement: &shardpb.Placement{Fingerprint: place.Fingerprint, Shard: place.Shard}}
	for i := range n {
		v := make([]float32, dim)
		for j := range v {
			v[j] = rng.Float32() - 0.5
		}
		req.Vectors = append(req.Vectors, &shardpb.Vector{Id: "doc-" + strconv.Itoa(i), Vector: shard.EncodeVector(v), Payload: shardtest.BenchPayload(rng, i)})
		if len(req.Vectors) == 1024 || i == n-1 {
			if _, err := rep.Server.Upsert(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			req.Vectors = nil
		}
	}
	commitTrained(b, rep, store.TrainedInt8Scale, trainScale(b, rep.Store))
	return rep.Server
}

// BenchmarkFilteredSearch: one top-10 query on a 200 000-row 1536-D
// shard, float32 (exact) and int8, with no filter, filters keeping 1 %,
// 10 % and 50 % of the rows, and one matching nothing. ns/op is the whole
// shard side of a query: filter parse, index selection, scan, answer.
func BenchmarkFilteredSearch(b *testing.B) {
	n := shardtest.BenchRows()
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
					res, err := srv.Search(context.Background(), &shardpb.SearchRequest{Queries: []*shardpb.Query{pq}})
					if err != nil {
						b.Fatal(err)
					}
					hits = len(res.GetResults()[0].GetHits())
				}
				b.ReportMetric(float64(hits), "hits")
			})
		}
	}
}

// BenchmarkUpsert: writes of 256 1536-D vectors with and without
// payloads, through the shard's Upsert (validation, payload check, a
// commit through a group of one whose log is in memory, store and index;
// a replica's fsync'd log on disk costs the same either way but for the
// payload bytes).
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
			rep, _ := serve(b, Config{Legacy: catalog.Settings{Dim: dim, Metric: vector.Cosine}, Kernel: k}, nil, client.DialConfig{})
			next := 0
			reqs := make([]*shardpb.UpsertRequest, 64)
			for r := range reqs {
				req := &shardpb.UpsertRequest{Placement: &shardpb.Placement{Fingerprint: place.Fingerprint, Shard: place.Shard}}
				for range batch {
					v := make([]float32, dim)
					for j := range v {
						v[j] = rng.Float32() - 0.5
					}
					pv := &shardpb.Vector{Id: "doc-" + strconv.Itoa(next), Vector: shard.EncodeVector(v)}
					if withPayload {
						pv.Payload = shardtest.BenchPayload(rng, next)
					}
					next++
					req.Vectors = append(req.Vectors, pv)
				}
				reqs[r] = req
			}
			i := 0
			for b.Loop() {
				if _, err := rep.Server.Upsert(context.Background(), reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
