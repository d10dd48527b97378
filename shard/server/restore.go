package server

import (
	"fmt"
	"maps"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
)

// beginRestore replaces the catalog with a snapshot's, before its rows
// are read: a collection the snapshot holds as well (same name, uid and
// settings) keeps its store and trainer, emptied; the others get new,
// empty stores; the collections it lacks are dropped. Every store is
// empty when it returns, so a restore never holds the old rows beside the
// new. It returns the snapshot's collections in its order.
func (c *Collections) beginRestore(cat *shardpb.CatalogResponse) ([]*collection, error) {
	type want struct {
		name      string
		uid       uint64
		settings  catalog.Settings
		schema    map[string]string
		slots     *placement.SlotMap
		version   uint64
		restoring bool
	}
	wants := make([]want, 0, len(cat.GetCollections()))
	seen := map[string]bool{}
	for _, e := range cat.GetCollections() {
		s, err := settingsFromPB(e.GetSettings())
		if err == nil {
			err = catalog.ValidName(e.GetName())
		}
		if err == nil && seen[e.GetName()] {
			err = fmt.Errorf("listed twice")
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot catalog: collection %q: %w", e.GetName(), err)
		}
		slots, err := slotMapOf(e.GetSlotMap())
		if err != nil {
			return nil, fmt.Errorf("snapshot catalog: collection %q: %w", e.GetName(), err)
		}
		seen[e.GetName()] = true
		wants = append(wants, want{name: e.GetName(), uid: e.GetUid(), settings: s, schema: e.GetPayloadSchema(), slots: slots, version: e.GetSettingsVersion(), restoring: e.GetRestoring()})
	}
	next := newCatalogState()
	next.version = cat.GetVersion()
	maps.Copy(next.dropped, cat.GetDropped())
	for _, a := range cat.GetAliases() {
		next.aliases[a.GetAlias()] = cloneAlias(a)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*collection, len(wants))
	for i, w := range wants {
		col, ok := c.cat.collections[w.name]
		if ok && col.uid == w.uid && col.current().Equal(w.settings) {
			col.mem.Reset(store.Placement{}, nil, 0)
		} else {
			col = c.newCollection(w.name, w.uid, w.settings, store.Placement{})
		}
		col.payloadSchema = maps.Clone(w.schema)
		col.settingsVersion, col.restoring = w.version, w.restoring
		col.slots.Store(w.slots)
		next.collections[w.name] = col
		out[i] = col
	}
	for _, col := range c.cat.collections {
		if next.collections[col.name] != col {
			c.removed(col)
		}
	}
	c.cat = next
	return out, nil
}

// finishRestore starts the trainers of the collections a restore added and
// reports every collection's document count.
func (c *Collections) finishRestore() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, col := range c.cat.collections {
		if _, ok := c.trainers[col]; !ok && c.start != nil && col.needsTrainer() {
			c.trainers[col] = c.start(col)
		}
		c.observe(col)
	}
}
