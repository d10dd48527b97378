package store

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/index"
	"github.com/trawl-search/trawl/shard/internal/shardtest"
)

// BenchmarkPayloadIndexMemory reports the payload index's heap per
// document for the benchmark payloads (5 keys: a 100-value integer, a
// 6-value string, a 26-value integer, two of 20 tags, a price of ~100 000
// values), and how long building it takes.
func BenchmarkPayloadIndexMemory(b *testing.B) {
	n := shardtest.BenchRows()
	rng := rand.New(rand.NewPCG(5, 6))
	docs := make([]map[string]any, n)
	for i := range docs {
		docs[i], _ = filter.DecodePayload(shardtest.BenchPayload(rng, i))
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
