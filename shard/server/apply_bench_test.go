package server

import (
	"log/slog"
	"math/rand/v2"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// BenchmarkApplyUpsert is what a committed upsert of 256 1536-D vectors
// costs every replica: decoding the log entry and writing the rows, the
// payload index and the documents gauge's count (the state machine's
// Apply), fsync and raft excluded.
//
//	go test -run '^$' -bench BenchmarkApplyUpsert -count 10 ./shard/server
func BenchmarkApplyUpsert(b *testing.B) {
	const dim, batch, entries = vector.DefaultDim, 256, 64
	rng := rand.New(rand.NewPCG(7, 8))
	logs := make([][]byte, entries)
	for e := range logs {
		cmd := &shardpb.UpsertCommand{Placement: &shardpb.Placement{Fingerprint: "fp", Shard: "shard-0"}}
		for i := range batch {
			v := make([]float32, dim)
			for j := range v {
				v[j] = rng.Float32() - 0.5
			}
			cmd.Vectors = append(cmd.Vectors, &shardpb.Vector{Id: "doc-" + strconv.Itoa(e*batch+i), Vector: shard.EncodeVector(v)})
		}
		data, err := proto.Marshal(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: cmd}})
		if err != nil {
			b.Fatal(err)
		}
		logs[e] = data
	}
	cols := NewCollections(CollectionsConfig{Legacy: catalog.Settings{Dim: dim}, Kernel: vector.Generic()})
	sm := NewStateMachine(cols, slog.New(slog.DiscardHandler), nil)
	i := 0
	for b.Loop() {
		res, _ := sm.Apply(raftnode.Entry{Index: uint64(i + 1), Data: logs[i%entries], Serving: true}).(applyResult)
		if res.err != nil {
			b.Fatal(res.err)
		}
		i++
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "docs/s")
}
