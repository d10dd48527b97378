package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// BenchmarkSlotSelection is what a fan-out over a 256-slot collection on
// 4 shards pays to name each shard's slots (one selection per shard).
func BenchmarkSlotSelection(b *testing.B) {
	names := []string{"shard-0", "shard-1", "shard-2", "shard-3"}
	sm := placement.Even(names, 256)
	coll := collectionOf(&shardpb.CollectionEntry{Name: "c", Uid: 1, Settings: &shardpb.CollectionSettings{Dim: 4, Metric: "dot"},
		SlotMap: slotMapPB(sm)})
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			if sel := slotSelection(coll, n); len(sel.GetHeld()) != 32 {
				b.Fatal(len(sel.GetHeld()))
			}
		}
	}
}

// The bitmaps made once per catalog reading are the map's own, for every
// shard (one that owns nothing included), and a map changed since is not
// read from them.
func TestHeldSlotsAreTheMapsOwn(t *testing.T) {
	names := []string{"shard-0", "shard-1", "shard-2"}
	sm := placement.Even(names, 100).Move(7, "shard-2")
	coll := collectionOf(&shardpb.CollectionEntry{Name: "c", Uid: 1, Settings: &shardpb.CollectionSettings{Dim: 4, Metric: "dot"},
		SlotMap: slotMapPB(sm)})
	require.NotNil(t, coll.held)
	for _, n := range append(names, "shard-3") {
		require.Equal(t, sm.Held(n), slotSelection(coll, n).GetHeld(), n)
	}
	begun, err := coll.Slots.Begin(3, "shard-3")
	require.NoError(t, err)
	flipped := begun.Flip(3)
	coll.Slots = flipped
	_, ok := coll.held.of(coll.Slots, "shard-3")
	require.False(t, ok, "a map changed since the bitmaps were made")
	require.Equal(t, flipped.Held("shard-3"), slotSelection(coll, "shard-3").GetHeld())
}
