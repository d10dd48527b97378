package fanout

import (
	"context"
	"testing"
	"time"
)

// BenchmarkGather is the engine's own cost of one healthy fan-out (3 shards
// × 2 replicas answering at once), without a network: the part of a query
// tracing-off instrumentation could add to. It names no tracing field, so
// it runs on builds from before tracing too (docs/tracing.md).
func BenchmarkGather(b *testing.B) {
	var shards []Shard[*fake]
	for _, n := range []string{"a", "b", "c"} {
		shards = append(shards, Shard[*fake]{Name: n, Replicas: []*fake{newFake(n+"0", nil), newFake(n+"1", nil)}})
	}
	c := New(shards, Options{HedgeBudget: -1})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		Gather(ctx, c, req(time.Second), call)
	}
}
