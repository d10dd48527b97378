package server

import (
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
)

// A collection's hash slots on a replica (DESIGN.md, "Growing"). The slot
// map is part of the catalog entry, so every replica of every group that
// applied the same catalog changes holds the same map; the checks below
// read it in the state machine (writes) or under the scan (reads), never
// anything local to one replica.

// slotMapOf reads a slot map off the wire: nil for none (a collection
// created before slots), an error for one that is not a whole map.
func slotMapOf(pb *shardpb.SlotMap) (*placement.SlotMap, error) {
	if pb == nil || len(pb.GetOwners()) == 0 {
		return nil, nil
	}
	m := &placement.SlotMap{Epoch: pb.GetEpoch(), Owners: slices.Clone(pb.GetOwners()), Since: slices.Clone(pb.GetSince())}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// slotMapPB is m on the wire, nil for none.
func slotMapPB(m *placement.SlotMap) *shardpb.SlotMap {
	if m == nil {
		return nil
	}
	return &shardpb.SlotMap{Epoch: m.Epoch, Owners: slices.Clone(m.Owners), Since: slices.Clone(m.Since)}
}

// slotMap is the collection's slot map, nil when it predates slots.
func (c *collection) slotMap() *placement.SlotMap { return c.slots.Load() }

// slotIdentity is the shard name this group's data was written as: the
// collection's own placement, else the replica's (any collection's).
// Empty before the group's first write.
func (c *Collections) slotIdentity(col *collection) string {
	if p := col.mem.Placement(); p.Shard != "" {
		return p.Shard
	}
	return c.Placement().Shard
}

// slotWriteCheck is the placement check of a write to a collection with a
// slot map: the write must be for this group's shard name, and every id's
// slot must be one the group's map gives that shard, unchanged since the
// epoch the router routed by. A router whose map is older than the slot's
// last move, or newer than this group's (a move this group has not
// applied yet), is refused SLOT_MOVED: it re-reads the catalog and routes
// the write again, so a write never lands on a group that no longer (or
// not yet) answers for its slot.
func (c *Collections) slotWriteCheck(col *collection, m *placement.SlotMap, p *shardpb.Placement, ids []string) (store.Placement, error) {
	got := store.Placement{Fingerprint: placement.SlotsFingerprint, Shard: p.GetShard()}
	if p.GetShard() == "" || p.GetFingerprint() != placement.SlotsFingerprint {
		return got, status.Errorf(codes.FailedPrecondition,
			"collection %q is placed by hash slots; this write was routed by the shard list (%q): the router predates slots", col.name, p.GetFingerprint())
	}
	if me := c.slotIdentity(col); me != "" && me != got.Shard {
		return got, status.Errorf(codes.FailedPrecondition,
			"this group holds data written as shard %q; the write is for shard %q", me, got.Shard)
	}
	if p.GetSlotEpoch() > m.Epoch {
		return got, shard.SlotMovedStatus(fmt.Sprintf(
			"collection %q: the write was routed by slot map epoch %d, this group holds epoch %d; retry once it has the newer map",
			col.name, p.GetSlotEpoch(), m.Epoch), m.Epoch, true)
	}
	for _, id := range ids {
		s := placement.Slot(id, m.Slots())
		if owner := m.Owners[s]; owner != got.Shard || m.Since[s] > p.GetSlotEpoch() {
			return got, shard.SlotMovedStatus(fmt.Sprintf(
				"collection %q: id %q is in slot %d, which slot map epoch %d gives to shard %q (since epoch %d); the write was routed to %q by epoch %d",
				col.name, id, s, m.Epoch, owner, m.Since[s], got.Shard, p.GetSlotEpoch()), m.Epoch, false)
		}
	}
	return got, nil
}

// slotReadFilter checks a read's slot selection against the collection's
// map and returns the rows to keep: nil when every row this replica holds
// is in the selection (the common case: no filtering, no hashing), else a
// test of an id's slot. A selection naming a slot this group does not
// hold is refused SLOT_MOVED (another replica, or a re-read of the
// catalog, may do better); answering without those rows would leave them
// out of the merged answer unmarked.
func (c *Collections) slotReadFilter(col *collection, sel *shardpb.SlotSelection) (func(id string) bool, error) {
	m := col.slotMap()
	if sel == nil || m == nil {
		// A reader without a map (a tool, or a collection that predates
		// slots): every row, as before slots.
		return nil, nil
	}
	me := c.slotIdentity(col)
	if me == "" {
		me = sel.GetShard()
	}
	if sel.GetShard() != me {
		return nil, status.Errorf(codes.FailedPrecondition, "this group holds data written as shard %q; the read is for shard %q", me, sel.GetShard())
	}
	held := sel.GetHeld()
	if len(held) != (m.Slots()+7)/8 {
		return nil, status.Errorf(codes.InvalidArgument, "slot selection of %d bytes for a collection of %d slots", len(held), m.Slots())
	}
	narrower := false
	for s, owner := range m.Owners {
		asked, mine := placement.HeldBit(held, s), owner == me
		switch {
		case asked && !mine:
			return nil, shard.SlotMovedStatus(fmt.Sprintf(
				"collection %q: slot %d is asked of shard %q by slot map epoch %d, but this group's map (epoch %d) gives it to %q",
				col.name, s, me, sel.GetEpoch(), m.Epoch, owner), m.Epoch, false)
		case mine && !asked:
			narrower = true
		}
	}
	if !narrower {
		return nil, nil
	}
	n := m.Slots()
	return func(id string) bool { return placement.HeldBit(held, placement.Slot(id, n)) }, nil
}
