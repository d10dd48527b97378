package server

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// createSlotted creates a 2-D collection with slot map m on the machine,
// as the authority group does.
func (m *machine) createSlotted(name string, sm placement.SlotMap) *shardpb.CollectionEntry {
	m.t.Helper()
	res := m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
		Authority: true,
		Op: &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{
			Name: name, Settings: settingsToPB(catalog.Settings{Dim: 2, Metric: vector.DotProduct}.Normalize()),
			SlotMap: slotMapPB(&sm)}},
	}}})
	require.NoError(m.t, res.err)
	return res.catalog.entry
}

// idsIn returns n ids whose slot sm gives to owner.
func idsIn(sm placement.SlotMap, owner string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if id := fmt.Sprint("doc-", i); sm.Home(id) == owner {
			out = append(out, id)
		}
	}
	return out
}

func (m *machine) slotUpsert(ref *shardpb.CollectionRef, p *shardpb.Placement, ids ...string) applyResult {
	m.t.Helper()
	up := &shardpb.UpsertCommand{Placement: p}
	for i, id := range ids {
		up.Vectors = append(up.Vectors, &shardpb.Vector{Id: id, Vector: shard.EncodeVector([]float32{float32(i + 1), 1})})
	}
	return m.apply(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: up}, Collection: ref})
}

func slotMovedErr(t *testing.T, err error) *shard.SlotMovedError {
	t.Helper()
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	var sm *shard.SlotMovedError
	require.True(t, errors.As(shard.FromStatus(err), &sm), "want SLOT_MOVED, got %v", err)
	return sm
}

func TestSlotWriteCheck(t *testing.T) {
	m := newMachine(t, catalog.Settings{})
	sm := placement.Even([]string{"shard-0", "shard-1"}, 16)
	e := m.createSlotted("c", sm)
	ref := &shardpb.CollectionRef{Name: e.GetName(), Uid: e.GetUid()}
	mine, theirs := idsIn(sm, "shard-0", 5), idsIn(sm, "shard-1", 1)
	at := func(epoch uint64) *shardpb.Placement {
		return &shardpb.Placement{Fingerprint: placement.SlotsFingerprint, Shard: "shard-0", SlotEpoch: epoch}
	}
	require.NoError(t, m.slotUpsert(ref, at(1), mine...).err)
	store, _ := m.cols.Store("c")
	require.Equal(t, 5, store.Len())

	tests := []struct {
		name  string
		p     *shardpb.Placement
		ids   []string
		retry bool
		code  codes.Code
	}{
		{name: "slot of another shard", p: at(1), ids: append([]string{mine[0]}, theirs...)},
		{name: "map older than the slot's owner", p: at(0), ids: mine[:1]},
		{name: "map newer than the group's", p: at(2), ids: mine[:1], retry: true},
		{name: "routed by the shard list", p: testPlace, ids: mine[:1], code: codes.FailedPrecondition},
		{name: "another shard's group", p: &shardpb.Placement{Fingerprint: placement.SlotsFingerprint, Shard: "shard-1", SlotEpoch: 1},
			ids: theirs, code: codes.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.slotUpsert(ref, tt.p, tt.ids...).err
			if tt.code != 0 {
				require.Equal(t, tt.code, status.Code(err))
				var sm *shard.SlotMovedError
				require.False(t, errors.As(shard.FromStatus(err), &sm), "an identity refusal is not SLOT_MOVED")
			} else {
				require.Equal(t, tt.retry, slotMovedErr(t, err).Retry)
			}
			require.Equal(t, 5, store.Len(), "a refused write stores nothing")
		})
	}
}

func TestSlotMapPushMovesForwardOnly(t *testing.T) {
	m := newMachine(t, catalog.Settings{})
	sm := placement.Even([]string{"shard-0", "shard-1"}, 8)
	e := m.createSlotted("c", sm)
	push := func(next placement.SlotMap) applyResult {
		entry := &shardpb.CollectionEntry{Name: "c", Uid: e.GetUid(), Settings: e.GetSettings(), SlotMap: slotMapPB(&next)}
		return m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
			Op: &shardpb.ChangeCatalogRequest_Create{Create: entry}}}})
	}
	moved := sm.Move(0, "shard-1")
	res := push(moved)
	require.NoError(t, res.err)
	require.True(t, res.catalog.changed)
	res = push(sm)
	require.NoError(t, res.err)
	require.False(t, res.catalog.changed, "an older map never replaces a newer one")
	_, cat := m.cols.held()
	require.Equal(t, moved.Owners, cat.GetCollections()[0].GetSlotMap().GetOwners())

	// A snapshot carries the map: a replica restored from it holds it.
	snap := m.snapshot()
	r := newMachine(t, catalog.Settings{})
	_, err := r.sm.Restore(bytes.NewReader(snap), nil)
	require.NoError(t, err)
	_, rcat := r.cols.held()
	require.Equal(t, uint64(2), rcat.GetCollections()[0].GetSlotMap().GetEpoch())
	require.Equal(t, moved.Since, rcat.GetCollections()[0].GetSlotMap().GetSince())
}

func TestSlotCreateOnTheAuthority(t *testing.T) {
	m := newMachine(t, catalog.Settings{})
	e := m.createSlotted("c", placement.Even([]string{"a", "b"}, 8))
	create := func(asked uint32, sm placement.SlotMap) error {
		return m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{Authority: true,
			Op: &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{Name: "c", Settings: e.GetSettings(),
				SlotsAsked: asked, SlotMap: slotMapPB(&sm)}}}}}).err
	}
	require.NoError(t, create(0, placement.Even([]string{"a", "b"}, 256)), "a create naming no slots is the existing one")
	require.NoError(t, create(8, placement.Even([]string{"a", "b"}, 8)))
	err := create(16, placement.Even([]string{"a", "b"}, 16))
	require.Equal(t, codes.AlreadyExists, status.Code(err))
	require.ErrorContains(t, err, "exists with 8 slots")
}

func TestSlotReadFilter(t *testing.T) {
	m := newMachine(t, catalog.Settings{})
	sm := placement.Even([]string{"shard-0", "shard-1"}, 16)
	e := m.createSlotted("c", sm)
	ref := &shardpb.CollectionRef{Name: e.GetName(), Uid: e.GetUid()}
	mine := idsIn(sm, "shard-0", 20)
	require.NoError(t, m.slotUpsert(ref, &shardpb.Placement{Fingerprint: placement.SlotsFingerprint, Shard: "shard-0", SlotEpoch: 1}, mine...).err)
	col, err := m.cols.resolve(ref)
	require.NoError(t, err)

	keep, err := m.cols.slotReadFilter(col, &shardpb.SlotSelection{Epoch: 1, Shard: "shard-0", Held: sm.Held("shard-0")})
	require.NoError(t, err)
	require.Nil(t, keep, "asked for every slot it holds: no filtering")

	// A reader whose map moved slot s away asks for the others only.
	s := placement.Slot(mine[0], 16)
	narrower := sm.Move(s, "shard-1")
	keep, err = m.cols.slotReadFilter(col, &shardpb.SlotSelection{Epoch: 2, Shard: "shard-0", Held: narrower.Held("shard-0")})
	require.NoError(t, err)
	require.NotNil(t, keep)
	for _, id := range mine {
		require.Equal(t, placement.Slot(id, 16) != s, keep(id), id)
	}

	// Asked for a slot it does not hold: refused, never answered without it.
	wider := sm.Move(placement.Slot(idsIn(sm, "shard-1", 1)[0], 16), "shard-0")
	_, err = m.cols.slotReadFilter(col, &shardpb.SlotSelection{Epoch: 2, Shard: "shard-0", Held: wider.Held("shard-0")})
	slotMovedErr(t, err)
	_, err = m.cols.slotReadFilter(col, &shardpb.SlotSelection{Epoch: 1, Shard: "shard-1", Held: sm.Held("shard-1")})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "a read meant for another shard")
	_, err = m.cols.slotReadFilter(col, &shardpb.SlotSelection{Epoch: 1, Shard: "shard-0", Held: []byte{1}})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}

// A move's steps on the groups involved: the owner refuses writes to the
// fenced slot (retryable), the receiver takes the copy only for the slot
// moving to it, a read at the new epoch reaches the receiver before it
// applied the flip, and once the map settles the old owner has dropped
// the slot's rows while the others stay.
func TestSlotMoveOnTheGroups(t *testing.T) {
	sm := placement.Even([]string{"shard-0", "shard-1"}, 8)
	src, dst := newMachine(t, catalog.Settings{}), newMachine(t, catalog.Settings{})
	e := src.createSlotted("c", sm)
	dst.createSlotted("c", sm)
	ref := &shardpb.CollectionRef{Name: "c"}
	mine := idsIn(sm, "shard-0", 12)
	s := placement.Slot(mine[0], 8)
	var inSlot, others []string
	for _, id := range mine {
		if placement.Slot(id, 8) == s {
			inSlot = append(inSlot, id)
		} else {
			others = append(others, id)
		}
	}
	at := func(shardName string, epoch uint64, migrate bool) *shardpb.Placement {
		return &shardpb.Placement{Fingerprint: placement.SlotsFingerprint, Shard: shardName, SlotEpoch: epoch, Migrate: migrate}
	}
	require.NoError(t, src.slotUpsert(ref, at("shard-0", 1, false), mine...).err)
	require.NoError(t, dst.slotUpsert(ref, at("shard-1", 1, false), idsIn(sm, "shard-1", 3)...).err)
	push := func(m *machine, next placement.SlotMap) {
		entry := &shardpb.CollectionEntry{Name: "c", Uid: e.GetUid(), Settings: e.GetSettings(), SlotMap: slotMapPB(&next)}
		res := m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
			Op: &shardpb.ChangeCatalogRequest_Create{Create: entry}}}})
		require.NoError(t, res.err)
	}

	begun, err := sm.Begin(s, "shard-1")
	require.NoError(t, err)
	push(src, begun)
	push(dst, begun)
	require.True(t, slotMovedErr(t, src.slotUpsert(ref, at("shard-0", 1, false), inSlot[0]).err).Retry, "fenced: retry after the flip")
	require.NoError(t, src.slotUpsert(ref, at("shard-0", 1, false), others[0]).err, "other slots take writes")
	slotMovedErr(t, dst.slotUpsert(ref, at("shard-1", 1, true), others[0]).err) // not moving here
	require.NoError(t, dst.slotUpsert(ref, at("shard-1", 1, true), inSlot...).err)
	// A write by filter waits for the move on the owner and on the
	// receiver alike: on the receiver, the rest of the copy would write
	// the owner's rows over what it changed.
	byFilter := func(m *machine, p *shardpb.Placement) error {
		return m.apply(&shardpb.Command{Collection: ref, Op: &shardpb.Command_Edit{Edit: &shardpb.EditCommand{Version: editVersion, Placement: p,
			Edits: []*shardpb.Edit{{Kind: shardpb.EditKind_EDIT_KIND_SET_PAYLOAD, Payload: []byte(`{"x":1}`),
				Filter: []byte(`{"must":[{"is_empty":{"key":"x"}}]}`)}}}}}).err
	}
	require.True(t, slotMovedErr(t, byFilter(src, at("shard-0", 1, false))).Retry)
	require.True(t, slotMovedErr(t, byFilter(dst, at("shard-1", 1, false))).Retry)
	dcol, err := dst.cols.resolve(ref)
	require.NoError(t, err)
	r, ok := dcol.mem.Record(inSlot[0])
	require.True(t, ok)
	require.Empty(t, r.Payload, "a refused edit changed nothing")

	col, err := dst.cols.resolve(ref)
	require.NoError(t, err)
	keep, err := dst.cols.slotReadFilter(col, &shardpb.SlotSelection{Epoch: 1, Shard: "shard-1", Held: sm.Held("shard-1")})
	require.NoError(t, err)
	require.NotNil(t, keep, "the copy is not the receiver's to count before the flip")
	require.False(t, keep(inSlot[0]))
	flipped := begun.Flip(s)
	// A replica of the receiver that has not applied the flip may not
	// have applied every row of the copy either (a follower catching up):
	// it refuses a reader already on the flipped map, which asks another
	// replica, rather than answer the slot from part of its rows.
	_, err = dst.cols.slotReadFilter(col, &shardpb.SlotSelection{Epoch: flipped.Epoch, Shard: "shard-1", Held: flipped.Held("shard-1")})
	slotMovedErr(t, err)

	push(src, flipped)
	push(dst, flipped)
	require.NoError(t, byFilter(dst, at("shard-1", flipped.Epoch, false)), "after the flip the receiver edits by filter")
	r, _ = dcol.mem.Record(inSlot[0])
	require.JSONEq(t, `{"x":1}`, string(r.Payload))
	_, err = dst.cols.slotReadFilter(col, &shardpb.SlotSelection{Epoch: flipped.Epoch, Shard: "shard-1", Held: flipped.Held("shard-1")})
	require.NoError(t, err, "once it has applied the flip, it has every row of the copy")
	scol, err := src.cols.resolve(ref)
	require.NoError(t, err)
	keep, err = src.cols.slotReadFilter(scol, &shardpb.SlotSelection{Epoch: 1, Shard: "shard-0", Held: sm.Held("shard-0")})
	require.NoError(t, err, "the old owner answers readers on the old epoch until the map settles")
	require.Nil(t, keep)
	before := scol.mem.Len()
	push(src, flipped.Settle(s))
	require.Equal(t, before-len(inSlot), scol.mem.Len(), "the old owner dropped the slot's rows, and only those")
	_, err = src.cols.slotReadFilter(scol, &shardpb.SlotSelection{Epoch: 1, Shard: "shard-0", Held: sm.Held("shard-0")})
	slotMovedErr(t, err)
}

// Between a settled map taking effect and its dropped rows being deleted
// (dropUnheld runs after the swap), the old owner still holds the slot's
// rows: a reader on the new map must get them filtered out, not counted
// beside the new owner's. The window is set up by hand here; in the grow
// test it duplicated a hit once in a CI run.
func TestSlotRowsPendingDropAreFiltered(t *testing.T) {
	sm := placement.Even([]string{"shard-0", "shard-1"}, 8)
	m := newMachine(t, catalog.Settings{})
	e := m.createSlotted("c", sm)
	ref := &shardpb.CollectionRef{Name: e.GetName(), Uid: e.GetUid()}
	mine := idsIn(sm, "shard-0", 12)
	require.NoError(t, m.slotUpsert(ref, &shardpb.Placement{Fingerprint: placement.SlotsFingerprint, Shard: "shard-0", SlotEpoch: 1}, mine...).err)
	col, err := m.cols.resolve(ref)
	require.NoError(t, err)

	s := placement.Slot(mine[0], 8)
	begun, err := sm.Begin(s, "shard-1")
	require.NoError(t, err)
	settled := begun.Flip(s).Settle(s)
	col.remap(&settled) // the swap, its drop not run yet
	sel := &shardpb.SlotSelection{Epoch: settled.Epoch, Shard: "shard-0", Held: settled.Held("shard-0")}
	keep, err := m.cols.slotReadFilter(col, sel)
	require.NoError(t, err)
	require.NotNil(t, keep, "rows of the slot moved away are still in the store")
	for _, id := range mine {
		require.Equal(t, placement.Slot(id, 8) != s, keep(id), id)
	}

	// Once dropped, nothing is left to filter.
	m.cols.dropUnheld(col, col.dropping.Load())
	col.dropping.Store(nil)
	keep, err = m.cols.slotReadFilter(col, sel)
	require.NoError(t, err)
	require.Nil(t, keep)
}
