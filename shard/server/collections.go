package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/segment"
)

// collection is one collection a replica holds: its catalog entry and its
// store. None of its fields change but payloadSchema and slots (catalog
// changes of the same incarnation); a collection created again under its
// name is another collection.
type collection struct {
	name string
	uid  uint64
	// settings are as created: requests copy them without a lock, so
	// they are never written after. The quantization, which changes online
	// (catalog.Changeable), is quant's when set, read and written under
	// Collections.mu (current).
	settings catalog.Settings
	quant    string
	// settingsVersion is the authority's log index of the last settings
	// change (0: as created), ordering pushes of the entry.
	settingsVersion uint64
	// restoring marks a collection a restore is still filling (the
	// catalog entry's flag; routers answer clients 503 while it is set).
	restoring bool
	// payloadSchema is the payload index declarations (key → type), kept
	// to be shown: every key is indexed whatever they say.
	payloadSchema map[string]string
	mem           *store.Memory
	// virtual marks the legacy collection before any log entry created
	// it: not in the catalog, but what routers that name no collection
	// read (empty) and write (the entry creates it).
	virtual bool
	// slots is the collection's slot map, nil for a collection created
	// before slots (placed by jump hash over the shard list). A catalog
	// change replaces it whole; reads load it once.
	slots atomic.Pointer[placement.SlotMap]
	// dropping is the map a catalog change replaced while the rows of the
	// slots this group no longer holds are still in the store: dropUnheld
	// deletes them only after the new map is in place. Reads filter by
	// it too (slotReadFilter), so those rows are never counted beside
	// their new owner's in between. Nil when no drop is pending.
	dropping atomic.Pointer[placement.SlotMap]
	// readBits is what reads check their slot selections against,
	// computed from slots and dropping once per change of either
	// (slotBitsFor), not by every read.
	readBits atomic.Pointer[slotBits]
	// fences are the backup fences in place (name → lease end, the
	// leader's Unix ms): replicated state, read and written only by the
	// state machine (applies, and the snapshots it takes between them).
	fences map[string]int64
}

// remap replaces the collection's slot map with next and returns the old
// one, which stays in dropping until the rows it alone gave this group
// are gone (finishRemap). dropping is set first: a read that loads the
// new map then finds the old one there.
func (c *collection) remap(next *placement.SlotMap) *placement.SlotMap {
	old := c.slots.Load()
	c.dropping.Store(old)
	c.slots.Store(next)
	return old
}

// current is the collection's settings now, its quantization changed
// online included; Collections.mu is held.
func (c *collection) current() catalog.Settings {
	s := c.settings
	if c.quant != "" {
		s.Quantization = c.quant
	}
	return s
}

func (c *collection) entry() *shardpb.CollectionEntry {
	return &shardpb.CollectionEntry{Name: c.name, Uid: c.uid, Settings: settingsToPB(c.current()), PayloadSchema: maps.Clone(c.payloadSchema),
		SlotMap: slotMapPB(c.slotMap()), SettingsVersion: c.settingsVersion, Restoring: c.restoring}
}

// ref names exactly this incarnation, for log entries.
func (c *collection) ref() *shardpb.CollectionRef {
	return &shardpb.CollectionRef{Name: c.name, Uid: c.uid}
}

// needsTrainer: only int8 and IVF collections have values to train or an
// index to build; a flat float32 collection costs no goroutine.
func (c *collection) needsTrainer() bool {
	return c.current().Quantization == catalog.QuantInt8 || c.settings.Index == catalog.IndexIVF
}

// DocumentObserver is told each collection's document count as it changes,
// and when a collection is dropped; metrics.ShardServer is one.
type DocumentObserver interface {
	Documents(collection string, n int)
	ForgetCollection(collection string)
}

// CollectionsConfig is what a replica's collections are built with.
type CollectionsConfig struct {
	// Legacy are the settings of the legacy collection
	// (shard.LegacyCollection): catalog.Defaults() if zero.
	Legacy catalog.Settings
	// Kernel assigns rows to IVF lists and trains centroids.
	Kernel vector.Kernel
	// Observer may be nil.
	Observer DocumentObserver
	Logger   *slog.Logger
	// SegmentDir is where collections placed on disk
	// (catalog.Float32OnDisk) keep their float32 segment files, one
	// directory each; it is emptied when the collections are made. Empty:
	// every collection keeps its float32 rows in memory (a replica without
	// a data directory).
	SegmentDir string
	// SegmentRows is how many rows a segment file holds, a power of two
	// (segment.SegmentRows of the collection's dimension if zero): tests
	// use small segments to seal and compact often.
	SegmentRows int
	// Background runs the CPU work of applying writes that holds no
	// write lock: decoding log entries and the stores' preparation
	// (store.WithBackground); nil: on the applying goroutine.
	Background func(func())
}

// Collections is a replica's catalog and one store per collection: the
// state its state machine (NewStateMachine) changes as the log commits,
// and its server reads. Its trainers (one per int8 or IVF collection) run
// once the server has started them.
type Collections struct {
	cfg CollectionsConfig
	log *slog.Logger
	// legacy is the legacy collection's store while it has the Legacy
	// settings: there from the start, so a replica that has applied no
	// write answers routers that name no collection (empty), and kept
	// across restores, so Replica.Store stays the same object.
	legacy *store.Memory

	mu  sync.RWMutex
	cat catalogState
	// start starts a collection's trainer; nil until the server sets it
	// (startTrainers), and again once Close has run.
	start    func(*collection) *store.Trainer
	trainers map[*collection]*store.Trainer
	closed   bool
	// onDrop is called after an applied entry dropped a collection.
	onDrop func()
	// stopping counts trainers of dropped collections still stopping.
	stopping sync.WaitGroup
	// cuts hands backup views from the state machine to Backup calls.
	cuts backupCuts
}

// NewCollections returns a replica's collections, empty until its log or a
// snapshot fills them.
func NewCollections(cfg CollectionsConfig) *Collections {
	if cfg.Legacy.IsZero() {
		cfg.Legacy = catalog.Defaults()
	}
	cfg.Legacy = cfg.Legacy.Normalize()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Collections{cfg: cfg, log: cfg.Logger, cat: newCatalogState(), trainers: map[*collection]*store.Trainer{}}
	if cfg.SegmentDir != "" {
		// Segment files are a cache of the snapshot and the log, which
		// the replica is about to restore and replay: those a previous
		// process left (of collections since dropped, or killed mid-way)
		// are removed, never read.
		if err := os.RemoveAll(cfg.SegmentDir); err != nil {
			c.log.Error("stale float32 segments not removed; collections keep their rows in memory", "dir", cfg.SegmentDir, "err", err)
			c.cfg.SegmentDir = ""
		}
	}
	c.legacy = c.newStore(shard.LegacyCollection, 0, cfg.Legacy)
	return c
}

// Legacy is the store of the legacy collection (shard.LegacyCollection
// with the Legacy settings): what routers that name no collection read
// and write.
func (c *Collections) Legacy() *store.Memory { return c.legacy }

// LegacySettings are the settings the legacy collection is created with.
func (c *Collections) LegacySettings() catalog.Settings { return c.cfg.Legacy }

// Store returns the store of the collection held under name.
func (c *Collections) Store(name string) (*store.Memory, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	col, ok := c.cat.collections[name]
	if !ok {
		return nil, false
	}
	return col.mem, true
}

// Placement is the shard list the replica's data was written under, zero
// before any write.
func (c *Collections) Placement() store.Placement {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cat.placement()
}

// newStore makes the empty store of a collection. One placed on disk
// whose segment directory cannot be made keeps its rows in memory, and
// says so: the rows are the same either way, only where they live
// differs.
func (c *Collections) newStore(name string, uid uint64, s catalog.Settings) *store.Memory {
	var opts []store.MemoryOption
	if s.Float32 == catalog.Float32OnDisk && c.cfg.SegmentDir != "" {
		dir := filepath.Join(c.cfg.SegmentDir, fmt.Sprintf("%s.%d", name, uid))
		rows := c.cfg.SegmentRows
		if rows == 0 {
			rows = segment.SegmentRows(s.Dim)
		}
		set, err := segment.OpenRows(dir, s.Dim, rows)
		if err != nil {
			c.log.Error("float32 rows kept in memory: segment directory unusable", "collection", name, "dir", dir, "err", err)
		} else {
			opts = append(opts, store.WithSegments(set))
		}
	}
	if s.Quantization == catalog.QuantInt8 {
		opts = append(opts, store.WithQuantization(store.QuantInt8))
	}
	if s.Index == catalog.IndexIVF {
		opts = append(opts, store.WithIVF(c.cfg.Kernel, s.Metric))
	}
	opts = append(opts, store.WithSparse(sparseNames(s)...), store.WithNamed(namedDims(s)))
	if c.cfg.Background != nil {
		opts = append(opts, store.WithBackground(c.cfg.Background))
	}
	return store.NewMemory(s.Dim, opts...)
}

// newCollection makes a collection with an empty store. The legacy
// incarnation (uid 0, the Legacy settings) reuses the legacy store,
// emptied.
func (c *Collections) newCollection(name string, uid uint64, s catalog.Settings, p store.Placement) *collection {
	col := &collection{name: name, uid: uid, settings: s}
	if name == shard.LegacyCollection && uid == 0 && s.Equal(c.cfg.Legacy) {
		col.mem = c.legacy
		col.mem.Reset(p, nil, 0)
		_ = col.mem.FinishRestore(context.Background(), nil, nil)
		return col
	}
	col.mem = c.newStore(name, uid, s)
	if p != (store.Placement{}) {
		col.mem.Reset(p, nil, 0)
		_ = col.mem.FinishRestore(context.Background(), nil, nil)
	}
	return col
}

// resolve finds the collection a request names: its name and uid (0:
// whatever incarnation is held). An empty name is the legacy collection,
// whatever incarnation of it is held, else (unless it was dropped) the
// legacy store as it would be created. A collection not held is refused
// with COLLECTION_NOT_FOUND, naming the uid held.
func (c *Collections) resolve(ref *shardpb.CollectionRef) (*collection, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	name, uid := ref.GetName(), ref.GetUid()
	if name == "" {
		if col, ok := c.cat.collections[shard.LegacyCollection]; ok {
			return col, nil
		}
		if _, dropped := c.cat.dropped[shard.LegacyCollection]; dropped {
			return nil, shard.CollectionNotFoundStatus(shard.LegacyCollection, 0)
		}
		return &collection{name: shard.LegacyCollection, settings: c.cfg.Legacy, mem: c.legacy, virtual: true}, nil
	}
	col, ok := c.cat.collections[name]
	switch {
	case !ok:
		return nil, shard.CollectionNotFoundStatus(name, 0)
	case uid != 0 && col.uid != uid:
		return nil, shard.CollectionNotFoundStatus(name, col.uid)
	}
	return col, nil
}

// forEntry finds the collection a log entry acts on, as resolve does, and
// creates the legacy collection when an entry without a collection first
// needs it (the upgrade path: a log written before collections). exact
// refuses uid 0 as "any": a trainer's value is for the incarnation it
// trained, never its successor.
func (c *Collections) forEntry(ref *shardpb.CollectionRef, exact bool) (*collection, error) {
	if exact && ref.GetName() != "" {
		c.mu.RLock()
		col, ok := c.cat.collections[ref.GetName()]
		c.mu.RUnlock()
		if !ok || col.uid != ref.GetUid() {
			held := uint64(0)
			if ok {
				held = col.uid
			}
			return nil, shard.CollectionNotFoundStatus(ref.GetName(), held)
		}
		return col, nil
	}
	col, err := c.resolve(ref)
	if err != nil || !col.virtual {
		return col, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if held, ok := c.cat.collections[shard.LegacyCollection]; ok {
		return held, nil // created since resolve looked
	}
	// Not a catalog change (the version stays): a replica that replays a
	// pre-collections log and one that restores a snapshot of it must
	// agree, and the latter never saw the entry that created it.
	col = c.newCollection(shard.LegacyCollection, 0, c.cfg.Legacy, store.Placement{})
	c.cat.collections[col.name] = col
	c.added(col)
	return col, nil
}

// catalogAnswer is what a catalog change answers its proposer: entries
// only, never the collections, so a proposer's future holding the answer
// keeps no dropped store alive.
type catalogAnswer struct {
	entry   *shardpb.CollectionEntry
	alias   *shardpb.AliasEntry
	changed bool
}

// changeCatalog applies a committed catalog change.
func (c *Collections) changeCatalog(req *shardpb.ChangeCatalogRequest, index uint64) (catalogAnswer, error) {
	c.mu.Lock()
	ch, err := c.cat.change(req, index, c.newCollection)
	for _, col := range ch.removed {
		c.removed(col)
	}
	for _, col := range ch.added {
		c.added(col)
	}
	quants := make([]store.Quantization, len(ch.requantized))
	for i, col := range ch.requantized {
		if _, ok := c.trainers[col]; !ok && c.start != nil && col.needsTrainer() {
			c.trainers[col] = c.start(col)
		}
		if col.current().Quantization == catalog.QuantInt8 {
			quants[i] = store.QuantInt8
		}
	}
	onDrop := c.onDrop
	c.mu.Unlock()
	for i, col := range ch.requantized {
		// Still in log order: the next entry applies after this returns.
		q := quants[i]
		if err := col.mem.SetQuantization(q); err != nil {
			c.log.Error("quantization not switched; the collection scans exactly", "collection", col.name, "err", err)
		} else {
			c.log.Info("quantization switched", "collection", col.name, "quantization", q, "index", index)
		}
	}
	for _, rm := range ch.remapped {
		n := c.dropUnheld(rm.col, rm.old)
		rm.col.dropping.Store(nil)
		if n > 0 {
			c.log.Info("rows of slots no longer held dropped", "collection", rm.col.name, "rows", n, "index", index)
			c.observe(rm.col)
		}
	}
	if len(ch.removed) > 0 {
		c.log.Info("collection dropped", "collection", req.GetDrop().GetName(), "index", index)
		if onDrop != nil {
			onDrop()
		}
	}
	return catalogAnswer{entry: ch.entry, alias: ch.alias, changed: ch.changed}, err
}

// added starts a new collection's trainer and gauge. c.mu is held.
func (c *Collections) added(col *collection) {
	if c.start != nil && col.needsTrainer() {
		c.trainers[col] = c.start(col)
	}
	c.observe(col)
}

// removed lets a dropped collection go: its trainer stops in the
// background (it may be waiting for this very apply to commit a value, so
// waiting for it here would deadlock), its gauge series is deleted, and
// nothing here refers to its store any more, so its memory is freed once
// scans under way finish. The legacy store, kept for Replica.Store, is
// emptied instead. c.mu is held.
func (c *Collections) removed(col *collection) {
	if t, ok := c.trainers[col]; ok {
		delete(c.trainers, col)
		c.stopping.Add(1)
		go func() {
			defer c.stopping.Done()
			t.Close()
		}()
	}
	if col.mem == c.legacy {
		col.mem.Reset(store.Placement{}, nil, 0)
		_ = col.mem.FinishRestore(context.Background(), nil, nil)
	} else if col.mem.OnDisk() {
		// Close waits for scans under way, so not with c.mu held; its
		// files go once no snapshot view holds them either.
		c.stopping.Add(1)
		go func() {
			defer c.stopping.Done()
			if err := col.mem.Close(); err != nil {
				c.log.Warn("float32 segments of a dropped collection not all removed", "collection", col.name, "err", err)
			}
		}()
	}
	if o := c.cfg.Observer; o != nil {
		o.ForgetCollection(col.name)
	}
}

// observe reports a collection's document count.
func (c *Collections) observe(col *collection) {
	if o := c.cfg.Observer; o != nil {
		o.Documents(col.name, col.mem.Len())
	}
}

// startTrainers makes start the way every int8 or IVF collection's
// trainer starts, from now on and for those already held.
func (c *Collections) startTrainers(start func(*collection) *store.Trainer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.start = start
	for _, col := range c.cat.collections {
		if _, ok := c.trainers[col]; !ok && col.needsTrainer() {
			c.trainers[col] = start(col)
		}
	}
}

// onDropped sets what an applied drop calls (the server asks its node for
// a snapshot, so the dropped rows leave the disk too).
func (c *Collections) onDropped(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onDrop = fn
}

// Close stops every trainer and waits for them. Trainers may be waiting
// for the log to apply, so none is waited for with c.mu held.
func (c *Collections) Close() {
	c.mu.Lock()
	c.closed, c.start, c.onDrop = true, nil, nil
	ts := make([]*store.Trainer, 0, len(c.trainers))
	for col, t := range c.trainers {
		ts = append(ts, t)
		delete(c.trainers, col)
	}
	c.mu.Unlock()
	for _, t := range ts {
		t.Close()
	}
	c.stopping.Wait()
}

// ready reports whether every collection may serve (store.IndexReady: an
// IVF collection whose committed centroids have no index yet may not).
func (c *Collections) ready() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, col := range c.cat.collections {
		if !col.mem.IndexReady() {
			return false
		}
	}
	return true
}

// held lists the collections in name order, with the catalog.
func (c *Collections) held() ([]*collection, *shardpb.CatalogResponse) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cat.sorted(), c.cat.response()
}

// entryOf is col's catalog entry, read under the lock the catalog's
// changes take: a change (a payload index declared, a legacy collection
// adopted) rewrites the fields an entry is made of.
func (c *Collections) entryOf(col *collection) *shardpb.CollectionEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return col.entry()
}

// Bytes is the memory each collection holds (store.Memory.Bytes), by
// name, for the shard's metrics.
func (c *Collections) Bytes() map[string]int {
	cols, _ := c.held()
	out := make(map[string]int, len(cols))
	for _, col := range cols {
		out[col.name] = col.mem.Bytes()
	}
	return out
}
