package server

import (
	"context"
	"fmt"
	"maps"
	mathbits "math/bits"
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
	m := &placement.SlotMap{Epoch: pb.GetEpoch(), Owners: slices.Clone(pb.GetOwners()), Since: slices.Clone(pb.GetSince()), Version: pb.GetVersion()}
	for _, mv := range pb.GetMoves() {
		if m.Moves == nil {
			m.Moves = map[int]placement.SlotMove{}
		}
		m.Moves[int(mv.GetSlot())] = placement.SlotMove{To: mv.GetTo(), Prev: mv.GetPrev()}
	}
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
	out := &shardpb.SlotMap{Epoch: m.Epoch, Owners: slices.Clone(m.Owners), Since: slices.Clone(m.Since), Version: m.Version}
	for _, s := range slices.Sorted(maps.Keys(m.Moves)) {
		mv := m.Moves[s]
		out.Moves = append(out.Moves, &shardpb.SlotMove{Slot: uint32(s), To: mv.To, Prev: mv.Prev})
	}
	return out
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
	if p.GetMigrate() {
		// A move's copy: only rows of a slot the map is moving here.
		for _, id := range ids {
			if s := placement.Slot(id, m.Slots()); m.Moves[s].To != got.Shard {
				return got, shard.SlotMovedStatus(fmt.Sprintf(
					"collection %q: id %q is in slot %d, which is not moving to shard %q (map version %d)", col.name, id, s, got.Shard, m.Ver()), m.Epoch, false)
			}
		}
		return got, nil
	}
	if len(ids) == 0 && len(m.Moves) > 0 {
		// A write by filter (a delete or an edit) would reach the rows of
		// a slot being copied: on its owner, behind the copy's back; on
		// its receiver, rows the copy may then write again as the owner
		// holds them, undoing it. It waits for the move on both.
		for s := range m.Moves {
			if m.Fenced(s) && (m.Owners[s] == got.Shard || m.Moves[s].To == got.Shard) {
				return got, shard.SlotMovedStatus(fmt.Sprintf(
					"collection %q: slot %d is fenced while it moves; retry once it has", col.name, s), m.Epoch, true)
			}
		}
	}
	for _, id := range ids {
		s := placement.Slot(id, m.Slots())
		if m.Fenced(s) && m.Owners[s] == got.Shard {
			return got, shard.SlotMovedStatus(fmt.Sprintf(
				"collection %q: id %q is in slot %d, fenced while it moves to shard %q; retry once it has", col.name, id, s, m.Moves[s].To), m.Epoch, true)
		}
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
// out of the merged answer unmarked. Every read pays it, so it compares
// bitmaps a byte at a time against ones computed once per map
// (slotBitsFor).
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
	// Loaded after m: a map swapped in since comes with the one it
	// replaced, whose rows may not be dropped yet (collection.remap).
	bits := col.slotBitsFor(m, col.dropping.Load(), me)
	may := bits.answer
	narrower := false
	for i, h := range held {
		h &= bits.valid[i] // bits past the last slot name nothing
		if bad := h &^ may[i]; bad != 0 {
			s := i*8 + mathbits.TrailingZeros8(bad)
			return nil, shard.SlotMovedStatus(fmt.Sprintf(
				"collection %q: slot %d is asked of shard %q by slot map epoch %d, but this group's map (epoch %d) gives it to %q",
				col.name, s, me, sel.GetEpoch(), m.Epoch, m.Owners[s]), m.Epoch, false)
		}
		if bits.rows[i]&^h != 0 {
			narrower = true
		}
	}
	if !narrower {
		return nil, nil
	}
	n := m.Slots()
	return func(id string) bool { return placement.HeldBit(held, placement.Slot(id, n)) }, nil
}

// slotBits is one slot map (and the map pending drop) seen from one
// group, as bitmaps of the map's slots (bit s of byte s/8).
type slotBits struct {
	m, dropping *placement.SlotMap
	me          string
	// answer is the slots this replica answers for: those it owns, and
	// those of a flip it has applied but not settled (it owned them; their
	// rows are final, the slot was fenced while copied). Never a slot
	// being copied here, even to a reader whose map has its flip: this
	// replica may not have applied every row of the copy yet (a follower
	// catching up, the flip committed after the copy), and answering from
	// part of them would be an answer short of rows that says complete.
	// Such a reader asks another replica (the flip's own log entry comes
	// after the copy's, so one that has applied it has every row), and
	// until one has, the shard is missing from its answer, marked.
	answer []byte
	// rows is the slots this group holds rows of, under the map or the
	// one pending drop; valid is every slot of the map.
	rows, valid []byte
}

// slotBitsFor is the collection's slotBits for map m, the map pending
// drop and the group's shard name me: the last one computed when it was
// for the same three (a catalog change swaps in a new map pointer, so
// pointers name versions), else computed now and kept for the reads
// after.
func (c *collection) slotBitsFor(m, dropping *placement.SlotMap, me string) *slotBits {
	if b := c.readBits.Load(); b != nil && b.m == m && b.dropping == dropping && b.me == me {
		return b
	}
	n := (m.Slots() + 7) / 8
	b := &slotBits{m: m, dropping: dropping, me: me,
		answer: make([]byte, n), rows: make([]byte, n), valid: make([]byte, n)}
	set := func(bm []byte, s int) { bm[s/8] |= 1 << (s % 8) }
	for s, owner := range m.Owners {
		mv := m.Moves[s]
		set(b.valid, s)
		if owner == me || mv.Prev == me {
			set(b.answer, s)
		}
		if m.HoldsRows(me, s) || (dropping != nil && dropping.Slots() == m.Slots() && dropping.HoldsRows(me, s)) {
			set(b.rows, s)
		}
	}
	c.readBits.Store(b)
	return b
}

// dropUnheld deletes, through the state machine applying a catalog change
// to col's slot map, the rows of every slot this group held rows of under
// old and no longer does under the new map: the old owner's once a move
// settles, the receiver's when a move is abandoned before its flip. Every
// replica applies the same change at the same index, so they drop the
// same rows.
func (c *Collections) dropUnheld(col *collection, old *placement.SlotMap) int {
	m := col.slotMap()
	me := c.slotIdentity(col)
	if old == nil || m == nil || me == "" || old.Slots() != m.Slots() {
		return 0
	}
	var gone []int
	for s := range m.Owners {
		if old.HoldsRows(me, s) && !m.HoldsRows(me, s) {
			gone = append(gone, s)
		}
	}
	if len(gone) == 0 {
		return 0
	}
	n := m.Slots()
	page, err := col.mem.Page(store.PageRequest{Limit: col.mem.Len() + 1, Keep: func(id string) bool {
		return slices.Contains(gone, placement.Slot(id, n))
	}})
	if err != nil || len(page.Records) == 0 {
		return 0
	}
	ids := make([]string, len(page.Records))
	for i, r := range page.Records {
		ids[i] = r.ID
	}
	deleted, err := col.mem.DeleteMatching(context.Background(), col.mem.Placement(), ids, nil)
	if err != nil {
		c.log.Error("rows of a slot moved away not dropped", "collection", col.name, "err", err)
	}
	return deleted
}
