package server

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// catalogState is a group's catalog as its state machine holds it. It is
// changed only by log entries (Command.catalog, applied by change), so
// every replica that applies the same log holds the same catalog.
type catalogState struct {
	collections map[string]*collection
	aliases     map[string]*shardpb.AliasEntry
	// version is the log index of the last change.
	version uint64
	// dropped maps a name to the highest uid of it dropped here: a create
	// at or below it is refused, so a late push never resurrects it. A name
	// is present once something of it was dropped, uid 0 included (the
	// legacy collection).
	dropped map[string]uint64
}

func newCatalogState() catalogState {
	return catalogState{collections: map[string]*collection{}, aliases: map[string]*shardpb.AliasEntry{}, dropped: map[string]uint64{}}
}

// sorted is the collections in name order: the order of Catalog answers
// and of snapshot sections.
func (st *catalogState) sorted() []*collection {
	out := slices.Collect(maps.Values(st.collections))
	slices.SortFunc(out, func(a, b *collection) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return out
}

// response is the catalog as the Catalog RPC and snapshots carry it.
func (st *catalogState) response() *shardpb.CatalogResponse {
	out := &shardpb.CatalogResponse{Version: st.version, Dropped: maps.Clone(st.dropped)}
	for _, c := range st.sorted() {
		out.Collections = append(out.Collections, c.entry())
	}
	for _, a := range slices.Sorted(maps.Keys(st.aliases)) {
		out.Aliases = append(out.Aliases, cloneAlias(st.aliases[a]))
	}
	return out
}

func cloneAlias(a *shardpb.AliasEntry) *shardpb.AliasEntry {
	return &shardpb.AliasEntry{Alias: a.GetAlias(), Collection: a.GetCollection(), Uid: a.GetUid()}
}

// placement is the shard list the group's data was written under: that of
// the first collection, in name order, that holds one (zero before any
// write).
func (st *catalogState) placement() store.Placement {
	for _, c := range st.sorted() {
		if p := c.mem.Placement(); p != (store.Placement{}) {
			return p
		}
	}
	return store.Placement{}
}

// catalogChange is what one catalog entry did.
type catalogChange struct {
	entry   *shardpb.CollectionEntry // the collection as held after it (drop: what was dropped)
	alias   *shardpb.AliasEntry
	changed bool // false: it was already so
	// added and removed are the collections the change created and
	// dropped (a replace does both), for their stores' trainers, metrics
	// and the snapshot that frees their disk.
	added, removed []*collection
	// remapped are the collections whose slot map the change replaced,
	// with the map before, so rows of slots no longer held are dropped.
	remapped []remap
	// requantized are the collections whose quantization the change
	// switched, for their stores and trainers.
	requantized []*collection
}

// remap is one collection's slot map change.
type remap struct {
	col *collection
	old *placement.SlotMap
}

// newCollectionFunc makes the collection a create adds: its store, empty,
// adopting placement p.
type newCollectionFunc func(name string, uid uint64, s catalog.Settings, p store.Placement) *collection

// change applies one ChangeCatalogRequest committed at index (DESIGN.md,
// "Collections"). On the authority a create of an absent name gets uid
// index, one equal to what exists is a no-op, a different one is refused
// AlreadyExists. Elsewhere a create carries the authority's uid: absent
// creates it (refused FailedPrecondition at or below dropped[name]), the
// same uid is a no-op, an older uid held is replaced, a newer one held
// refuses the stale pusher (FailedPrecondition). A refused change changes
// nothing.
func (st *catalogState) change(req *shardpb.ChangeCatalogRequest, index uint64, mk newCollectionFunc) (catalogChange, error) {
	p := store.Placement{Fingerprint: req.GetPlacement().GetFingerprint(), Shard: req.GetPlacement().GetShard()}
	if have := st.placement(); p.Shard != "" && have.Shard != "" && have.Shard != p.Shard {
		// Only the group's identity: a catalog change routed under
		// another shard list is how shards are added once collections
		// are placed by slots (a write under another list is still
		// refused for a collection that predates them).
		return catalogChange{}, status.Errorf(codes.FailedPrecondition,
			"this group holds data written as shard %q; the catalog change is for shard %q", have.Shard, p.Shard)
	}
	if p.Fingerprint == placement.SlotsFingerprint || p.Shard == "" {
		// A new collection of a group that has never been written adopts
		// no shard-list placement: its writes bring their own.
		p = store.Placement{}
	}
	var (
		ch  catalogChange
		err error
	)
	switch op := req.GetOp().(type) {
	case *shardpb.ChangeCatalogRequest_Create:
		ch, err = st.create(op.Create, req.GetAuthority(), index, p, mk)
	case *shardpb.ChangeCatalogRequest_Drop:
		ch, err = st.drop(op.Drop)
	case *shardpb.ChangeCatalogRequest_Alias:
		ch, err = st.alias(op.Alias, req.GetAuthority(), index)
	case *shardpb.ChangeCatalogRequest_PayloadIndex:
		ch, err = st.payloadIndex(op.PayloadIndex, req.GetAuthority())
	case *shardpb.ChangeCatalogRequest_SetSlots:
		ch, err = st.setSlots(op.SetSlots, req.GetAuthority())
	case *shardpb.ChangeCatalogRequest_UpdateSettings:
		ch, err = st.updateSettings(op.UpdateSettings, req.GetAuthority(), index)
	case *shardpb.ChangeCatalogRequest_Restored:
		ch, err = st.restored(op.Restored, req.GetAuthority(), index)
	default:
		return catalogChange{}, status.Error(codes.InvalidArgument, "catalog change with no operation")
	}
	if err == nil && ch.changed {
		st.version = index
	}
	return ch, err
}

func (st *catalogState) create(e *shardpb.CollectionEntry, authority bool, index uint64, p store.Placement, mk newCollectionFunc) (catalogChange, error) {
	name := e.GetName()
	s, err := settingsFromPB(e.GetSettings())
	if err == nil {
		err = catalog.ValidName(name)
	}
	if err != nil {
		return catalogChange{}, status.Error(codes.InvalidArgument, err.Error())
	}
	slots, err := slotMapOf(e.GetSlotMap())
	if err != nil {
		return catalogChange{}, status.Error(codes.InvalidArgument, err.Error())
	}
	held := st.collections[name]
	uid := e.GetUid()
	if authority {
		if held != nil {
			if held.current().Equal(s) {
				if asked := int(e.GetSlotsAsked()); asked != 0 && asked != held.slotMap().Slots() {
					return catalogChange{}, status.Errorf(codes.AlreadyExists,
						"collection %q exists with %d slots (0: created before slots); the create asks for %d", name, held.slotMap().Slots(), asked)
				}
				return catalogChange{entry: held.entry()}, nil
			}
			return catalogChange{}, status.Errorf(codes.AlreadyExists,
				"collection %q exists with settings %s; the create asks for %s", name, held.current(), s)
		}
		uid = index
	} else {
		if held != nil {
			switch {
			case held.uid == uid && e.GetSettingsVersion() < held.settingsVersion:
				// Pushed before the settings held were decided: the
				// authority's entry had older settings, schema and map
				// then, so nothing of it is news.
				return catalogChange{entry: held.entry()}, nil
			case held.uid == uid && (!held.current().Equal(s) || e.GetSettingsVersion() > held.settingsVersion):
				if err := catalog.Changeable(held.current(), s); err != nil {
					return catalogChange{}, status.Errorf(codes.AlreadyExists,
						"collection %q uid %d is held with settings %s; the create asks for %s: %v", name, uid, held.current(), s, err)
				}
				ch := catalogChange{changed: true}
				if held.current().Quantization != s.Quantization {
					ch.requantized = []*collection{held}
				}
				held.quant, held.settingsVersion, held.restoring = s.Quantization, e.GetSettingsVersion(), e.GetRestoring()
				held.payloadSchema = maps.Clone(e.GetPayloadSchema())
				if newerSlots(held.slotMap(), slots) {
					ch.remapped = []remap{{col: held, old: held.remap(slots)}}
				}
				ch.entry = held.entry()
				return ch, nil
			case held.uid == uid && held.current().Equal(s) && maps.Equal(held.payloadSchema, e.GetPayloadSchema()) && !newerSlots(held.slotMap(), slots):
				return catalogChange{entry: held.entry()}, nil
			case held.uid == uid && held.current().Equal(s):
				// The authority's payload index declarations or slot map
				// changed (a map only ever moves forward: a push of an
				// older one, overtaken, changes nothing).
				held.payloadSchema = maps.Clone(e.GetPayloadSchema())
				ch := catalogChange{changed: true}
				if newerSlots(held.slotMap(), slots) {
					ch.remapped = []remap{{col: held, old: held.remap(slots)}}
				}
				ch.entry = held.entry()
				return ch, nil
			case held.uid == 0 && uid > 0 && held.current().Equal(s):
				// The legacy collection of a data directory written
				// before collections, created by name with its own
				// settings: it is adopted, rows and all, not replaced.
				held.uid, held.payloadSchema, held.virtual = uid, maps.Clone(e.GetPayloadSchema()), false
				held.slots.Store(slots)
				return catalogChange{entry: held.entry(), changed: true}, nil
			case held.uid == uid:
				return catalogChange{}, status.Errorf(codes.AlreadyExists,
					"collection %q uid %d is held with settings %s; the create asks for %s", name, uid, held.current(), s)
			case held.uid > uid:
				return catalogChange{}, status.Errorf(codes.FailedPrecondition,
					"collection %q: this group holds uid %d, newer than the create's %d (the pusher is stale)", name, held.uid, uid)
			}
		}
		if d, ok := st.dropped[name]; ok && uid <= d {
			return catalogChange{}, status.Errorf(codes.FailedPrecondition,
				"collection %q uid %d was dropped here (dropped up to uid %d); it is not created again", name, uid, d)
		}
	}
	ch := catalogChange{changed: true}
	if held != nil {
		// An older incarnation the authority has replaced.
		st.remove(held)
		ch.removed = append(ch.removed, held)
	}
	c := mk(name, uid, s, p)
	c.slots.Store(slots)
	c.restoring = e.GetRestoring()
	if !authority {
		c.payloadSchema = maps.Clone(e.GetPayloadSchema())
		c.settingsVersion = e.GetSettingsVersion()
	}
	st.collections[name] = c
	ch.added = append(ch.added, c)
	ch.entry = c.entry()
	return ch, nil
}

// drop drops the held incarnation of ref.Name if its uid is at most
// ref.Uid (any incarnation when ref.Uid is 0), and records the uid
// dropped, so a late create push of it is refused.
func (st *catalogState) drop(ref *shardpb.CollectionRef) (catalogChange, error) {
	name, uid := ref.GetName(), ref.GetUid()
	if err := catalog.ValidName(name); err != nil {
		return catalogChange{}, status.Error(codes.InvalidArgument, err.Error())
	}
	held := st.collections[name]
	if uid == 0 {
		if held == nil {
			return catalogChange{}, nil
		}
		uid = held.uid
	}
	var ch catalogChange
	if held != nil && held.uid <= uid {
		st.remove(held)
		ch = catalogChange{entry: held.entry(), changed: true, removed: []*collection{held}}
	}
	if d, ok := st.dropped[name]; !ok || d < uid {
		// Nothing held to drop, but a push of that incarnation must not
		// create it later: the catalog changed.
		st.dropped[name] = uid
		ch.changed = true
	}
	return ch, nil
}

// remove takes a collection out of the catalog with the aliases that
// point at it (as Qdrant does when a collection is deleted).
func (st *catalogState) remove(c *collection) {
	delete(st.collections, c.name)
	if d, ok := st.dropped[c.name]; !ok || d < c.uid {
		st.dropped[c.name] = c.uid
	}
	for a, e := range st.aliases {
		if e.GetCollection() == c.name {
			delete(st.aliases, a)
		}
	}
}

// alias sets an alias, or deletes it when the entry names no collection.
// The authority requires the collection to exist and stamps the change
// with index; elsewhere the authority's uid orders pushes.
func (st *catalogState) alias(a *shardpb.AliasEntry, authority bool, index uint64) (catalogChange, error) {
	name, target := a.GetAlias(), a.GetCollection()
	err := catalog.ValidName(name)
	if err == nil && target != "" {
		err = catalog.ValidName(target)
	}
	if err != nil {
		return catalogChange{}, status.Error(codes.InvalidArgument, err.Error())
	}
	held := st.aliases[name]
	uid := a.GetUid()
	if authority {
		if target != "" && st.collections[target] == nil {
			return catalogChange{}, shard.CollectionNotFoundStatus(target, 0)
		}
		if held != nil && held.GetCollection() == target {
			return catalogChange{alias: cloneAlias(held)}, nil
		}
		uid = index
	} else if held != nil {
		switch {
		case held.GetUid() > uid:
			return catalogChange{}, status.Errorf(codes.FailedPrecondition,
				"alias %q: this group holds uid %d, newer than the change's %d (the pusher is stale)", name, held.GetUid(), uid)
		case held.GetUid() == uid && held.GetCollection() == target:
			return catalogChange{alias: cloneAlias(held)}, nil
		}
	}
	if target == "" {
		if held == nil {
			return catalogChange{}, nil
		}
		delete(st.aliases, name)
		return catalogChange{alias: cloneAlias(held), changed: true}, nil
	}
	e := &shardpb.AliasEntry{Alias: name, Collection: target, Uid: uid}
	st.aliases[name] = e
	return catalogChange{alias: cloneAlias(e), changed: true}, nil
}

// payloadIndex declares (schema set) or removes (schema empty) a payload
// index of a collection, on the authority only: the other groups receive
// the changed entry as a create of the same uid.
func (st *catalogState) payloadIndex(pi *shardpb.PayloadIndex, authority bool) (catalogChange, error) {
	if !authority {
		return catalogChange{}, status.Error(codes.InvalidArgument, "a payload index change is decided by the authority group only")
	}
	if pi.GetField() == "" {
		return catalogChange{}, status.Error(codes.InvalidArgument, "a payload index needs a field name")
	}
	held := st.collections[pi.GetCollection()]
	if held == nil || held.virtual {
		return catalogChange{}, status.Errorf(codes.NotFound, "collection %q does not exist", pi.GetCollection())
	}
	cur, ok := held.payloadSchema[pi.GetField()]
	switch {
	case pi.GetSchema() == "" && !ok, pi.GetSchema() != "" && ok && cur == pi.GetSchema():
		return catalogChange{entry: held.entry()}, nil
	case pi.GetSchema() == "":
		delete(held.payloadSchema, pi.GetField())
	default:
		if held.payloadSchema == nil {
			held.payloadSchema = map[string]string{}
		}
		held.payloadSchema[pi.GetField()] = pi.GetSchema()
	}
	return catalogChange{entry: held.entry(), changed: true}, nil
}

// updateSettings changes the settings of a collection that can change
// online (catalog.Changeable), on the authority only, stamping them with
// index: the other groups receive the changed entry as a create of the
// same uid and that settings version.
func (st *catalogState) updateSettings(u *shardpb.UpdateSettings, authority bool, index uint64) (catalogChange, error) {
	if !authority {
		return catalogChange{}, status.Error(codes.InvalidArgument, "a settings change is decided by the authority group only")
	}
	held := st.collections[u.GetCollection()]
	if held == nil || held.virtual || u.GetUid() != 0 && held.uid != u.GetUid() {
		return catalogChange{}, shard.CollectionNotFoundStatus(u.GetCollection(), 0)
	}
	// What the change leaves unset is what is held, not the default of
	// the quantization asked (where float32 rows live).
	asked := proto.Clone(u.GetSettings()).(*shardpb.CollectionSettings)
	if asked == nil {
		asked = &shardpb.CollectionSettings{}
	}
	if asked.GetFloat32Placement() == "" {
		asked.Float32Placement = held.current().Float32
	}
	if asked.GetIndex() == "" {
		asked.Index = held.current().Index
	}
	s, err := settingsFromPB(asked)
	if err != nil {
		return catalogChange{}, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := catalog.Changeable(held.current(), s); err != nil {
		return catalogChange{}, status.Error(codes.InvalidArgument, err.Error())
	}
	if s.Equal(held.current()) {
		return catalogChange{entry: held.entry()}, nil
	}
	ch := catalogChange{changed: true}
	if held.current().Quantization != s.Quantization {
		ch.requantized = []*collection{held}
	}
	held.quant, held.settingsVersion = s.Quantization, index
	ch.entry = held.entry()
	return ch, nil
}

// restored clears the restoring flag of a collection once its restore has
// written every row, on the authority only, stamping the change with index
// as a settings change: the other groups receive the changed entry as a
// create of the same uid and that settings version.
func (st *catalogState) restored(ref *shardpb.CollectionRef, authority bool, index uint64) (catalogChange, error) {
	if !authority {
		return catalogChange{}, status.Error(codes.InvalidArgument, "the end of a restore is decided by the authority group only")
	}
	held := st.collections[ref.GetName()]
	if held == nil || held.virtual || ref.GetUid() != 0 && held.uid != ref.GetUid() {
		return catalogChange{}, shard.CollectionNotFoundStatus(ref.GetName(), 0)
	}
	if !held.restoring {
		return catalogChange{entry: held.entry()}, nil
	}
	held.restoring, held.settingsVersion = false, index
	return catalogChange{entry: held.entry(), changed: true}, nil
}

// settingsFromPB reads a collection's settings off the wire, normalised
// (catalog.Settings.Normalize) and validated.
func settingsFromPB(p *shardpb.CollectionSettings) (catalog.Settings, error) {
	s := catalog.Settings{Dim: int(p.GetDim()), Quantization: p.GetQuantization(), Index: p.GetIndex(), Float32: p.GetFloat32Placement(),
		Sparse: shard.SparseFromPB(p.GetSparseVectors()), Named: shard.NamedFromPB(p.GetNamedVectors())}
	if m := p.GetMetric(); m != "" {
		var err error
		if s.Metric, err = vector.ParseMetric(m); err != nil {
			return s, fmt.Errorf("%w: %v", catalog.ErrInvalid, err)
		}
	}
	s = s.Normalize()
	return s, s.Validate()
}

// settingsToPB is s on the wire.
func settingsToPB(s catalog.Settings) *shardpb.CollectionSettings {
	return shard.SettingsToPB(s)
}

// setSlots replaces a collection's slot map on the authority, when the
// held map is at the version the change expects: a move's steps are
// compare-and-set, so two movers never interleave. The other groups
// receive the changed entry as a create of the same uid.
func (st *catalogState) setSlots(ss *shardpb.SetSlots, authority bool) (catalogChange, error) {
	if !authority {
		return catalogChange{}, status.Error(codes.InvalidArgument, "a slot map change is decided by the authority group only")
	}
	held := st.collections[ss.GetCollection()]
	if held == nil || held.virtual || held.uid != ss.GetUid() {
		return catalogChange{}, shard.CollectionNotFoundStatus(ss.GetCollection(), 0)
	}
	next, err := slotMapOf(ss.GetSlotMap())
	if err != nil || next == nil {
		return catalogChange{}, status.Errorf(codes.InvalidArgument, "slot map: %v", err)
	}
	old := held.slotMap()
	if old == nil {
		return catalogChange{}, status.Errorf(codes.FailedPrecondition, "collection %q predates slots: its map is not set here", held.name)
	}
	if old.Ver() != ss.GetExpectVersion() || next.Ver() <= old.Ver() || next.Slots() != old.Slots() {
		return catalogChange{}, status.Errorf(codes.Aborted,
			"collection %q: slot map is at version %d, the change expects %d (another move changed it)", held.name, old.Ver(), ss.GetExpectVersion())
	}
	held.remap(next)
	return catalogChange{entry: held.entry(), changed: true, remapped: []remap{{col: held, old: old}}}, nil
}

// newerSlots reports whether a pushed slot map replaces the one held: a
// map where there was none, or one of a later epoch.
func newerSlots(held, pushed *placement.SlotMap) bool {
	return pushed != nil && (held == nil || pushed.Ver() > held.Ver())
}
