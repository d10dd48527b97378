package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/index"
)

// benchRows is the shard size of the payload index benchmark (DESIGN.md's
// 200 000-vector shard); TRAWL_FILTER_BENCH_ROWS makes it smaller for a
// quick look.
func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("TRAWL_FILTER_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// benchPayload is a document's payload in the benchmarks: bucket (0..99)
// makes selectivities exact, plus the dev corpus's kind of fields. It is
// shard/replica's filter benchmark payload.
func benchPayload(rng *rand.Rand, i int) []byte {
	langs := []string{"en", "en", "de", "fr", "es", "ja"}
	return fmt.Appendf(nil, `{"bucket":%d,"lang":%q,"year":%d,"tags":["t%d","t%d"],"price":%d.%02d}`,
		i%100, langs[rng.IntN(len(langs))], 2000+rng.IntN(26), rng.IntN(20), rng.IntN(20), rng.IntN(1000), rng.IntN(100))
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
