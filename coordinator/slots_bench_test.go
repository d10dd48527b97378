package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// BenchmarkSlotSelection is what a fan-out over a 256-slot collection on
// 4 shards pays to name each shard's slots (one selection per shard).
func BenchmarkSlotSelection(b *testing.B) {
	names := []string{"shard-0", "shard-1", "shard-2", "shard-3"}
	c, coll := viewOf(names, placement.Even(names, 256))
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			if sel := c.slotSelection(coll, n); len(sel.GetHeld()) != 32 {
				b.Fatal(len(sel.GetHeld()))
			}
		}
	}
}

// viewOf is a coordinator whose catalog view holds one collection "c"
// with slot map sm, as a catalog reading leaves it.
func viewOf(names []string, sm placement.SlotMap) (*Coordinator, Collection) {
	shards := make([]fanout.Shard[*client.Conn], len(names))
	for i, n := range names {
		shards[i] = fanout.Shard[*client.Conn]{Name: n}
	}
	c := &Coordinator{shards: shards, cat: newCatalogState(shards, 0)}
	coll := collectionOf(&shardpb.CollectionEntry{Name: "c", Uid: 1, Settings: &shardpb.CollectionSettings{Dim: 4, Metric: "dot"},
		SlotMap: slotMapPB(sm)})
	c.cat.view.Store(&catalogView{colls: map[string]Collection{"c": coll}, held: map[string]*heldSlots{"c": c.heldOf(coll)}})
	return c, coll
}

// The bitmaps made once per catalog reading are the map's own, for every
// shard (one that owns nothing included); a map changed since is not read
// from them; and a map naming a shard the router does not list is seen.
func TestHeldSlotsAreTheMapsOwn(t *testing.T) {
	names := []string{"shard-0", "shard-1", "shard-2", "shard-3"}
	sm := placement.Even(names[:3], 100).Move(7, "shard-2")
	c, coll := viewOf(names, sm)
	for _, n := range names {
		require.Equal(t, sm.Held(n), c.slotSelection(coll, n).GetHeld(), n)
	}
	require.Empty(t, c.unlisted(coll))
	begun, err := coll.Slots.Begin(3, "shard-3")
	require.NoError(t, err)
	flipped := begun.Flip(3)
	coll.Slots = flipped
	require.False(t, c.cat.current().held["c"].madeFrom(coll), "a map changed since the bitmaps were made")
	require.Equal(t, flipped.Held("shard-3"), c.slotSelection(coll, "shard-3").GetHeld())
	c.shards = c.shards[:3]
	require.Equal(t, "shard-3", c.unlisted(coll), "slot 3 is on a shard this router does not list")

	// A view read by a router that lists three of the map's four owners
	// names the first unlisted one, by name, whichever map order.
	four := placement.Even(names, 100)
	c, coll = viewOf(names[:2], four)
	require.True(t, c.cat.current().held["c"].madeFrom(coll))
	require.Equal(t, "shard-2", c.unlisted(coll))
}
