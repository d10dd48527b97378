//go:build linux

package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard/internal/shardtest"
)

// benchEditRows is the store size of the payload edit and facet
// benchmarks (issue 36: 100 000 points).
const benchEditRows = 100_000

// benchEditStore is a store of benchEditRows 64-D rows with the
// benchmark payloads (shardtest.BenchPayload: bucket 0..99, lang of 5
// values, two of 20 tags, ...).
func benchEditStore(b *testing.B) *Memory {
	b.Helper()
	const dim = 64
	rng := rand.New(rand.NewPCG(3, 6))
	m := NewMemory(dim)
	batch := make([]Record, 0, 1000)
	for i := range benchEditRows {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		batch = append(batch, Record{ID: fmt.Sprintf("doc-%06d", i), Vector: v, Payload: shardtest.BenchPayload(rng, i)})
		if len(batch) == cap(batch) {
			if err := m.Upsert(context.Background(), Placement{}, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return m
}

// cpuTime is the process's CPU time so far (user and system, every
// thread, the garbage collector's too): on a machine shared with other
// work a benchmark's wall time per op overstates its cost, its CPU time
// per op does not.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchFilter(b *testing.B, src string) *filter.Filter {
	b.Helper()
	f, err := filter.Parse([]byte(src))
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkSetPayloadByFilter is one replica applying a set_payload by
// filter (the work of its log entry) over 100 000 points, at three
// selectivities: the filter is evaluated on the payload index, and each
// matching point's payload is merged, re-encoded and re-indexed.
func BenchmarkSetPayloadByFilter(b *testing.B) {
	m := benchEditStore(b)
	for _, tc := range []struct {
		name, filter string
		matched      int
	}{
		{"1pct", `{"must":[{"key":"bucket","match":{"value":7}}]}`, benchEditRows / 100},
		{"10pct", `{"must":[{"key":"bucket","range":{"lt":10}}]}`, benchEditRows / 10},
		{"all", `{"must":[{"key":"bucket","range":{"gte":0}}]}`, benchEditRows},
	} {
		f := benchFilter(b, tc.filter)
		b.Run(tc.name, func(b *testing.B) {
			i := 0
			cpu0 := cpuTime(b)
			for b.Loop() {
				i++
				e := Edit{Kind: EditSetPayload, Filter: f, Payload: fmt.Appendf(nil, `{"flag":%d,"meta":{"seen":true}}`, i)}
				if err := m.Edit(context.Background(), Placement{}, []Edit{e}); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime(b) - cpu0
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(tc.matched*b.N), "cpu-ns/point")
		})
	}
}

// BenchmarkFacet is one replica counting a payload key's values over
// 100 000 points (what a shard answers a facet with; the router sums the
// shards'), on a key of 5 values and on an array key of 20, with no
// filter and under a 10 % filter.
func BenchmarkFacet(b *testing.B) {
	m := benchEditStore(b)
	tenPct := benchFilter(b, `{"must":[{"key":"bucket","range":{"lt":10}}]}`)
	for _, tc := range []struct {
		name string
		key  string
		f    *filter.Filter
	}{
		{"lang", "lang", nil},
		{"lang_10pct", "lang", tenPct},
		{"tags", "tags", nil},
		{"tags_10pct", "tags", tenPct},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var n int
			cpu0 := cpuTime(b)
			for b.Loop() {
				fs := m.Facet(FacetRequest{Filter: tc.f, Path: []string{tc.key}})
				n = len(fs.Counts)
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			if n == 0 {
				b.Fatal("no values counted")
			}
		})
	}
}
