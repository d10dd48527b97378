package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// BenchmarkSlotReadFilter is the slot check every read of a slotted
// collection pays on a replica: a 256-slot map over 4 shards, asked for
// every slot the replica holds (no filtering), and asked for all but one
// (filtering, as while a move settles).
func BenchmarkSlotReadFilter(b *testing.B) {
	names := []string{"shard-0", "shard-1", "shard-2", "shard-3"}
	m := newMachine(b, catalog.Settings{})
	sm := placement.Even(names, 256)
	e := m.createSlotted("c", sm)
	ref := &shardpb.CollectionRef{Name: e.GetName(), Uid: e.GetUid()}
	col, err := m.cols.resolve(ref)
	require.NoError(b, err)
	narrower := sm.Move(0, "shard-1")
	for _, c := range []struct {
		name string
		sel  *shardpb.SlotSelection
	}{
		{"all_held", &shardpb.SlotSelection{Epoch: sm.Epoch, Shard: "shard-0", Held: sm.Held("shard-0")}},
		{"narrower", &shardpb.SlotSelection{Epoch: narrower.Epoch, Shard: "shard-0", Held: narrower.Held("shard-0")}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.cols.slotReadFilter(col, c.sel); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
