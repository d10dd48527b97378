package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// The catalog as the router sees it. Its truth is in the shard groups'
// logs (DESIGN.md, "Collections"): the authority group — the lowest-sorted
// shard name's — decides every create and drop, and every other group
// holds a copy the router pushes to it. The router caches the catalog it
// last read, and answers from the cache: a collection serves once every
// group holds it.

// Collection is one collection as the router knows it.
type Collection struct {
	Name string
	// UID is the catalog's id of this incarnation of the name: a
	// collection dropped and created again under one name gets another,
	// and a replica holding the old one refuses requests for the new.
	UID      uint64
	Settings catalog.Settings
	// PayloadSchema maps a payload key to the type a client declared for
	// it (Qdrant's payload indexes). Every key is indexed whatever it
	// says; the declarations are kept so they can be shown.
	PayloadSchema map[string]string
	// Slots is the collection's slot map: which shard holds each of its
	// hash slots. The zero map: a collection created before slots, placed
	// by jump hash over the sorted shard names (placement.Table).
	Slots placement.SlotMap
	// Restoring is set while a restore fills the collection: it answers
	// clients CodeUnavailable until the restore has written every row
	// (RestoreFrom clears it); a restore that died leaves it set, and
	// the collection is deleted to be restored again.
	Restoring bool
}

// UUIDKeys are the payload keys c declares a uuid index on: a filter's
// match on them compares UUIDs, whatever way each is written, as
// Qdrant's uuid index does (filter.Filter.WithUUIDKeys). Nil when none.
func (c Collection) UUIDKeys() map[string]bool {
	var out map[string]bool
	for k, t := range c.PayloadSchema {
		if t == "uuid" {
			if out == nil {
				out = map[string]bool{}
			}
			out[k] = true
		}
	}
	return out
}

// TextIndexes are the payload keys c declares a text index on, with its
// tokenizer: a filter's match.text and match.text_any on them match
// tokens, as Qdrant's full-text index does (filter.Filter.WithTextIndexes).
// Nil when none.
func (c Collection) TextIndexes() map[string]filter.TextIndex {
	var out map[string]filter.TextIndex
	for k, t := range c.PayloadSchema {
		if ti, ok := filter.TextIndexOf(t); ok {
			if out == nil {
				out = map[string]filter.TextIndex{}
			}
			out[k] = ti
		}
	}
	return out
}

// shardFilter is f as c's shards evaluate it: with c's uuid and text
// payload indexes' meanings applied.
func (c Collection) shardFilter(f *filter.Filter) *filter.Filter {
	return f.WithUUIDKeys(c.UUIDKeys()).WithTextIndexes(c.TextIndexes())
}

func (c Collection) ref() client.Collection { return client.Collection{Name: c.Name, UID: c.UID} }

// Alias points a name at a collection (Qdrant's aliases).
type Alias struct {
	Alias      string
	Collection string
}

// DefaultMaxCollections is --max-collections' default.
const DefaultMaxCollections = 1000

// catalogTimeout bounds a catalog read of one group and each catalog
// change: the catalog is small, and a group that cannot answer within it
// is treated as unreachable (its last answer stands).
const catalogTimeout = 2 * time.Second

// DefaultCatalogRefresh is how often RunCatalog reads the catalog and
// completes the creates and drops some group has not received.
const DefaultCatalogRefresh = 5 * time.Second

// minRefreshGap bounds how often a lookup miss re-reads the catalog, so a
// client asking for absent collections cannot turn every request into a
// catalog read.
const minRefreshGap = 200 * time.Millisecond

// catalogView is one reading of the catalog.
type catalogView struct {
	// fromAuthority: the authority group answered; else the view is the
	// union of the groups that did.
	fromAuthority bool
	version       uint64
	colls         map[string]Collection
	aliases       map[string]string
	// lacking names, per collection, the groups known not to hold it
	// (yet): it answers 503 until none is left.
	lacking map[string][]string
	read    time.Time
	// held is, per collection with a slot map, each shard's slots as a
	// read names them: made once per reading of the catalog, not by every
	// read (slotSelection).
	held map[string]*heldSlots
}

// groupCatalog is one group's last answer.
type groupCatalog struct {
	colls   map[string]uint64 // name → uid
	entries map[string]*shardpb.CollectionEntry
	schemas map[string]map[string]string
	aliases map[string]*shardpb.AliasEntry
	dropped map[string]uint64
	version uint64
}

// catalogState is the coordinator's catalog cache.
type catalogState struct {
	// mu serializes refreshes, which read the groups over the network and
	// push what they lack; groups is written under it. Readers never take
	// it: every request resolves its collection from view, which a
	// refresh swaps whole, so a query never waits behind a catalog read.
	mu   sync.Mutex
	view atomic.Pointer[catalogView]
	// groups are the groups' last answers, by shard index; nil: never
	// heard from (assumed to hold everything: it answers nothing anyway,
	// and its absence shows in every answer as a missing shard).
	groups []*groupCatalog
	// authority is the index of the authority group's shard.
	authority int
	max       int
}

func newCatalogState(shards []fanout.Shard[*client.Conn], maxCollections int) *catalogState {
	if maxCollections <= 0 {
		maxCollections = DefaultMaxCollections
	}
	auth := 0
	for i, s := range shards {
		if s.Name < shards[auth].Name {
			auth = i
		}
	}
	cs := &catalogState{groups: make([]*groupCatalog, len(shards)), authority: auth, max: maxCollections}
	cs.view.Store(&catalogView{colls: map[string]Collection{}, aliases: map[string]string{}, lacking: map[string][]string{}})
	return cs
}

func (cs *catalogState) current() *catalogView { return cs.view.Load() }

// Collection resolves name (a collection or an alias) to the collection a
// request acts on. It answers CodeCollectionNotFound when the catalog has
// no such name, and CodeUnavailable while a create has not yet reached
// every group (a repeated create, or RunCatalog, completes it) or while a
// restore fills the collection (Collection.Restoring). A name the
// cached catalog lacks is looked up again first, so a collection created
// through another router is found.
func (c *Coordinator) Collection(ctx context.Context, name string) (Collection, error) {
	v := c.cat.current()
	coll, err := v.resolve(name)
	if err == nil || time.Since(v.read) < minRefreshGap {
		return coll, err
	}
	v2, rerr := c.refreshCatalog(ctx)
	if rerr == nil {
		return v2.resolve(name)
	}
	if v.read.IsZero() {
		// Never read: the name may well exist. Unavailable, not absent.
		return Collection{}, errorf(CodeUnavailable, rerr, "collection `%s`: the catalog cannot be read: %v", name, rerr)
	}
	return coll, err
}

func (v *catalogView) resolve(name string) (Collection, error) {
	target := name
	if a, ok := v.aliases[name]; ok {
		target = a
	}
	coll, ok := v.colls[target]
	if !ok {
		return Collection{}, errorf(CodeCollectionNotFound, nil, "collection `%s` does not exist", name)
	}
	if lack := v.lacking[target]; len(lack) > 0 {
		return coll, errorf(CodeUnavailable, nil,
			"collection `%s` is still being created: shards %v do not hold it yet; retry shortly (repeating the create completes it)", target, lack)
	}
	if coll.Restoring {
		return coll, errorf(CodeUnavailable, nil,
			"collection `%s` is being restored from a backup: it serves once every row is in; retry later (a restore that died leaves it so: delete it and restore again)", target)
	}
	return coll, nil
}

// Collections lists the catalog's collections by name, those still being
// created too.
func (c *Coordinator) Collections(ctx context.Context) ([]Collection, error) {
	v := c.cat.current()
	if v.read.IsZero() {
		var err error
		if v, err = c.refreshCatalog(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]Collection, 0, len(v.colls))
	for _, coll := range v.colls {
		out = append(out, coll)
	}
	slices.SortFunc(out, func(a, b Collection) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Aliases lists the catalog's aliases by alias.
func (c *Coordinator) Aliases(ctx context.Context) ([]Alias, error) {
	v := c.cat.current()
	if v.read.IsZero() {
		var err error
		if v, err = c.refreshCatalog(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]Alias, 0, len(v.aliases))
	for a, coll := range v.aliases {
		out = append(out, Alias{Alias: a, Collection: coll})
	}
	slices.SortFunc(out, func(a, b Alias) int { return cmp.Compare(a.Alias, b.Alias) })
	return out, nil
}

// CreateCollection creates name with settings s, or finds it created with
// equal settings (created false). The authority group decides: a name
// created with other settings is CodeConflict, whoever asked first. The
// create then reaches every other group; while one has not acknowledged
// it the answer is CodeUnavailable, and a repeat of the create (or
// RunCatalog) completes it.
func (c *Coordinator) CreateCollection(ctx context.Context, name string, s catalog.Settings) (created bool, err error) {
	created, _, err = c.CreateCollectionSlots(ctx, name, s, 0)
	return created, err
}

// CreateCollectionSlots is CreateCollection with the number of hash slots
// the collection is split into: fixed at creation, spread evenly over the
// shards present (placement.Even). 0 names none: a new collection gets
// placement.DefaultSlots, an existing one keeps what it has (so
// --ensure-collection never conflicts with a collection created before
// slots); any other count that differs from the existing one's is
// CodeConflict. held is the collection's slot count as the catalog holds
// it (0: it predates slots).
func (c *Coordinator) CreateCollectionSlots(ctx context.Context, name string, s catalog.Settings, slots int) (created bool, held int, err error) {
	if slots != 0 {
		if err := placement.ValidSlots(slots); err != nil {
			return false, 0, errorf(CodeInvalid, err, "%v", err)
		}
	}
	created, entry, err := c.createCollection(ctx, name, s, slots, false)
	return created, len(entry.GetSlotMap().GetOwners()), err
}

// restoring creates it with its restoring flag set (RestoreFrom).
func (c *Coordinator) createCollection(ctx context.Context, name string, s catalog.Settings, slots int, restoring bool) (created bool, won *shardpb.CollectionEntry, err error) {
	s = s.Normalize()
	if err := catalog.ValidName(name); err != nil {
		return false, nil, errorf(CodeInvalid, err, "%v", err)
	}
	if err := s.Validate(); err != nil {
		return false, nil, errorf(CodeInvalid, err, "%v", err)
	}
	v := c.cat.current()
	if _, exists := v.colls[name]; !exists && len(v.colls) >= c.cat.max {
		return false, nil, errorf(CodeInvalid, nil, "the cluster holds %d collections, the most --max-collections allows", len(v.colls))
	}
	if _, isAlias := v.aliases[name]; isAlias {
		return false, nil, errorf(CodeConflict, nil, "`%s` is an alias; delete the alias first", name)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	names := make([]string, len(c.shards))
	for i, sh := range c.shards {
		names[i] = sh.Name
	}
	m := placement.Even(names, cmp.Or(slots, placement.DefaultSlots))
	entry := &shardpb.CollectionEntry{Name: name, Settings: settingsPB(s), SlotsAsked: uint32(slots), Restoring: restoring,
		SlotMap: &shardpb.SlotMap{Epoch: m.Epoch, Owners: m.Owners, Since: m.Since}}
	resp, err := c.changeCatalog(ctx, c.cat.authority, &shardpb.ChangeCatalogRequest{Authority: true, Op: &shardpb.ChangeCatalogRequest_Create{Create: entry}})
	if err != nil {
		if status.Code(err) == codes.AlreadyExists {
			return false, nil, errorf(CodeConflict, err, "collection `%s` exists with other settings: %s", name, status.Convert(err).Message())
		}
		return false, nil, c.catalogWriteError("creating", name, err)
	}
	won = resp.GetEntry()
	if err := c.pushEverywhere(ctx, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: won}}); err != nil {
		_, _ = c.refreshCatalog(ctx)
		return false, nil, errorf(CodeUnavailable, err,
			"collection `%s` is created but has not reached every shard yet (%v); retry the create to complete it, or wait: the router completes it", name, err)
	}
	_, _ = c.refreshCatalog(ctx)
	return resp.GetChanged(), won, nil
}

// DropCollection drops name (a collection, not an alias) from the catalog
// and every group, freeing its memory and disk; dropping an absent name
// answers dropped false. The collection is gone (404) as soon as the
// authority group committed the drop; a group that did not acknowledge
// it drops it when RunCatalog reaches it.
func (c *Coordinator) DropCollection(ctx context.Context, name string) (dropped bool, err error) {
	if err := catalog.ValidName(name); err != nil {
		return false, errorf(CodeInvalid, err, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	resp, err := c.changeCatalog(ctx, c.cat.authority, &shardpb.ChangeCatalogRequest{Authority: true,
		Op: &shardpb.ChangeCatalogRequest_Drop{Drop: &shardpb.CollectionRef{Name: name}}})
	if err != nil {
		return false, c.catalogWriteError("dropping", name, err)
	}
	if e := resp.GetEntry(); e.GetName() != "" {
		if perr := c.pushEverywhere(ctx, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Drop{
			Drop: &shardpb.CollectionRef{Name: name, Uid: e.GetUid()}}}); perr != nil {
			c.log.Warn("collection dropped; some shards drop it later", "collection", name, "err", perr)
		}
	}
	_, _ = c.refreshCatalog(ctx)
	return resp.GetChanged(), nil
}

// SetAlias points alias at collection, replacing what it pointed at.
func (c *Coordinator) SetAlias(ctx context.Context, alias, collection string) error {
	if err := catalog.ValidName(alias); err != nil {
		return errorf(CodeInvalid, err, "%v", err)
	}
	v := c.cat.current()
	if _, ok := v.colls[collection]; !ok {
		if v, _ = c.refreshCatalog(ctx); v == nil || v.colls[collection].Name == "" {
			return errorf(CodeCollectionNotFound, nil, "collection `%s` does not exist", collection)
		}
	}
	if _, ok := v.colls[alias]; ok {
		return errorf(CodeConflict, nil, "`%s` is a collection, it cannot be an alias too", alias)
	}
	return c.changeAlias(ctx, alias, collection)
}

// DeleteAlias removes alias; removing an absent one is not an error.
func (c *Coordinator) DeleteAlias(ctx context.Context, alias string) error {
	if err := catalog.ValidName(alias); err != nil {
		return errorf(CodeInvalid, err, "%v", err)
	}
	return c.changeAlias(ctx, alias, "")
}

func (c *Coordinator) changeAlias(ctx context.Context, alias, collection string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	resp, err := c.changeCatalog(ctx, c.cat.authority, &shardpb.ChangeCatalogRequest{Authority: true,
		Op: &shardpb.ChangeCatalogRequest_Alias{Alias: &shardpb.AliasEntry{Alias: alias, Collection: collection}}})
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.NotFound {
			return errorf(CodeCollectionNotFound, err, "%s", status.Convert(err).Message())
		}
		return c.catalogWriteError("changing alias", alias, err)
	}
	if a := resp.GetAlias(); a != nil && resp.GetChanged() {
		if collection == "" {
			// A delete: the others drop every setting of the alias
			// older than this change.
			a = &shardpb.AliasEntry{Alias: alias, Uid: resp.GetIndex()}
		}
		if perr := c.pushEverywhere(ctx, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Alias{Alias: a}}); perr != nil {
			c.log.Warn("alias changed; some shards learn it later", "alias", alias, "err", perr)
		}
	}
	_, _ = c.refreshCatalog(ctx)
	return nil
}

// catalogWriteError maps a failed change on the authority group.
func (c *Coordinator) catalogWriteError(doing, name string, err error) error {
	var refused *Error
	if errors.As(err, &refused) {
		return refused
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return errorf(CodeInvalid, err, "%s", status.Convert(err).Message())
	case codes.FailedPrecondition:
		return errorf(CodeConflict, err, "%s `%s`: %s", doing, name, status.Convert(err).Message())
	}
	return errorf(CodeUnavailable, err, "%s `%s`: the catalog's shard %s could not commit it: %v; retrying is safe",
		doing, name, c.shards[c.cat.authority].Name, err)
}

// changeCatalog commits req through group i's log (leader, forwarding and
// retry rules of every write; a change is idempotent, so a write whose
// outcome is unknown is retried once).
func (c *Coordinator) changeCatalog(ctx context.Context, i int, req *shardpb.ChangeCatalogRequest) (*shardpb.ChangeCatalogResponse, error) {
	name := c.shards[i].Name
	// The group's identity only: catalog changes are not refused under
	// another shard list (shards are added that way), a group that is
	// another shard is.
	req.Placement = &shardpb.Placement{Fingerprint: placement.SlotsFingerprint, Shard: name}
	var resp *shardpb.ChangeCatalogResponse
	call := func(ctx context.Context, r *client.Conn) error {
		out, err := r.ChangeCatalog(ctx, req)
		if err == nil {
			resp = out
			c.acked(r, client.Ack{Index: out.GetIndex(), ForwardedTo: out.GetForwardedTo()})
		}
		return err
	}
	wr := fanout.Write(ctx, c.cluster, name, call)
	if wr.Outcome == fanout.WriteUnknown && ctx.Err() == nil {
		wr = fanout.Write(ctx, c.cluster, name, call)
	}
	if wr.Outcome != fanout.WriteOK {
		return nil, wr.Err
	}
	return resp, nil
}

// pushEverywhere commits the authority's decision req on every other
// group, at once.
func (c *Coordinator) pushEverywhere(ctx context.Context, req *shardpb.ChangeCatalogRequest) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range c.shards {
		if i == c.cat.authority {
			continue
		}
		wg.Go(func() {
			r := cloneChange(req)
			if _, err := c.changeCatalog(ctx, i, r); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("shard %s: %w", c.shards[i].Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func cloneChange(req *shardpb.ChangeCatalogRequest) *shardpb.ChangeCatalogRequest {
	out := &shardpb.ChangeCatalogRequest{Authority: req.GetAuthority()}
	switch op := req.GetOp().(type) {
	case *shardpb.ChangeCatalogRequest_Create:
		out.Op = &shardpb.ChangeCatalogRequest_Create{Create: op.Create}
	case *shardpb.ChangeCatalogRequest_Drop:
		out.Op = &shardpb.ChangeCatalogRequest_Drop{Drop: op.Drop}
	case *shardpb.ChangeCatalogRequest_Alias:
		out.Op = &shardpb.ChangeCatalogRequest_Alias{Alias: op.Alias}
	case *shardpb.ChangeCatalogRequest_PayloadIndex:
		out.Op = &shardpb.ChangeCatalogRequest_PayloadIndex{PayloadIndex: op.PayloadIndex}
	case *shardpb.ChangeCatalogRequest_UpdateSettings:
		out.Op = &shardpb.ChangeCatalogRequest_UpdateSettings{UpdateSettings: op.UpdateSettings}
	case *shardpb.ChangeCatalogRequest_Restored:
		out.Op = &shardpb.ChangeCatalogRequest_Restored{Restored: op.Restored}
	}
	return out
}

// RunCatalog reads the catalog every Config.CatalogRefresh until ctx ends,
// completing on every group the creates, drops and alias changes the
// authority committed that some group lacks (a create or drop whose
// router died halfway, a group that was down).
// Each reading is also surveyed for Config.Collections (SurveyCollections).
func (c *Coordinator) RunCatalog(ctx context.Context) {
	t := time.NewTicker(c.catalogRefresh)
	defer t.Stop()
	for {
		// The first reading is the caller's (a router's warm-up surveys
		// before it turns ready), so the loop waits a period first.
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.SurveyCollections(ctx); err != nil && ctx.Err() == nil {
			c.log.Debug("catalog not read", "err", err)
		}
	}
}

// refreshCatalog reads every group's catalog, rebuilds the view, and
// pushes to the groups that lag the authority what they lack.
func (c *Coordinator) refreshCatalog(ctx context.Context) (*catalogView, error) {
	c.cat.mu.Lock()
	defer c.cat.mu.Unlock()
	return c.refreshLocked(ctx)
}

// refreshCatalogSince is refreshCatalog unless a reading begun at or
// after since is already in: reads that meet a stale map together (every
// query of a busy router right after a move settles) wait for one
// catalog read between them, not one each.
func (c *Coordinator) refreshCatalogSince(ctx context.Context, since time.Time) (*catalogView, error) {
	c.cat.mu.Lock()
	defer c.cat.mu.Unlock()
	if v := c.cat.current(); !v.read.Before(since) {
		return v, nil
	}
	return c.refreshLocked(ctx)
}

// refreshLocked is refreshCatalog under c.cat.mu.
func (c *Coordinator) refreshLocked(ctx context.Context) (*catalogView, error) {
	begun := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogTimeout)
	defer cancel()
	answers := make([]*shardpb.CatalogResponse, len(c.shards))
	var wg sync.WaitGroup
	req := fanout.Request{Start: time.Now(), Budget: budget.Budget{Deadline: catalogTimeout, Shard: catalogTimeout}, Control: true}
	for i, s := range c.shards {
		wg.Go(func() {
			resp, err := fanout.Lookup(ctx, c.cluster, req, s.Name, func(ctx context.Context, r *client.Conn) (*shardpb.CatalogResponse, error) {
				return r.Catalog(ctx, c.minIndex(r))
			})
			if err == nil {
				answers[i] = resp
			}
		})
	}
	wg.Wait()
	heard := false
	for i, a := range answers {
		if a != nil {
			c.cat.groups[i] = groupOf(a)
			heard = true
		}
	}
	if !heard {
		return c.cat.current(), errorf(CodeUnavailable, nil, "no shard answered a catalog read")
	}
	v := c.buildView(answers[c.cat.authority])
	// A view is as new as the moment its reading began: a change made
	// while the groups were read may be missing from it.
	v.read = begun
	c.cat.view.Store(v)
	if auth := answers[c.cat.authority]; auth != nil {
		c.reconcile(ctx, auth, answers)
	}
	return v, nil
}

func groupOf(a *shardpb.CatalogResponse) *groupCatalog {
	g := &groupCatalog{colls: map[string]uint64{}, entries: map[string]*shardpb.CollectionEntry{}, schemas: map[string]map[string]string{}, aliases: map[string]*shardpb.AliasEntry{}, dropped: a.GetDropped(), version: a.GetVersion()}
	for _, e := range a.GetCollections() {
		g.colls[e.GetName()] = e.GetUid()
		g.entries[e.GetName()] = e
		g.schemas[e.GetName()] = e.GetPayloadSchema()
	}
	for _, al := range a.GetAliases() {
		g.aliases[al.GetAlias()] = al
	}
	return g
}

// buildView makes the view from the authority's answer, or, without one,
// from the union of the groups' last answers.
func (c *Coordinator) buildView(auth *shardpb.CatalogResponse) *catalogView {
	v := &catalogView{colls: map[string]Collection{}, aliases: map[string]string{}, lacking: map[string][]string{}, read: time.Now()}
	if auth != nil {
		v.fromAuthority, v.version = true, auth.GetVersion()
		for _, e := range auth.GetCollections() {
			v.colls[e.GetName()] = collectionOf(e)
		}
		for _, a := range auth.GetAliases() {
			v.aliases[a.GetAlias()] = a.GetCollection()
		}
	} else {
		// Without the authority, the newest incarnation any group holds:
		// every group's copy carries the settings the authority decided,
		// so queries on existing collections never wait for it. A drop is
		// final for its incarnation, so an entry that any group has
		// dropped is gone, however stale the answers still listing it
		// (the authority's last one, read before the drop: right after a
		// drop whose leader was killed, the collection would otherwise
		// come back as "still being created"). A drop no group that
		// answered has applied yet shows until the authority answers.
		dropped := map[string]uint64{}
		for _, g := range c.cat.groups {
			if g == nil {
				continue
			}
			for name, uid := range g.dropped {
				dropped[name] = max(dropped[name], uid)
			}
		}
		for _, g := range c.cat.groups {
			if g == nil {
				continue
			}
			for name, e := range g.entries {
				if e.GetUid() <= dropped[name] {
					continue
				}
				if cur, ok := v.colls[name]; !ok || e.GetUid() > cur.UID {
					v.colls[name] = collectionOf(e)
				}
			}
			for a, e := range g.aliases {
				v.aliases[a] = e.GetCollection()
			}
		}
	}
	v.held = map[string]*heldSlots{}
	for name, coll := range v.colls {
		if !coll.Slots.IsZero() {
			v.held[name] = c.heldOf(coll)
		}
		for i, g := range c.cat.groups {
			if g != nil && g.colls[name] != coll.UID {
				v.lacking[name] = append(v.lacking[name], c.shards[i].Name)
			}
		}
	}
	return v
}

// reconcile pushes to each group that answered what it lacks of the
// authority's catalog, and drops what the authority dropped.
func (c *Coordinator) reconcile(ctx context.Context, auth *shardpb.CatalogResponse, answers []*shardpb.CatalogResponse) {
	want := map[string]*shardpb.CollectionEntry{}
	for _, e := range auth.GetCollections() {
		want[e.GetName()] = e
	}
	wantAlias := map[string]*shardpb.AliasEntry{}
	for _, a := range auth.GetAliases() {
		wantAlias[a.GetAlias()] = a
	}
	var wg sync.WaitGroup
	for i, a := range answers {
		if a == nil || i == c.cat.authority {
			continue
		}
		g := groupOf(a)
		var todo []*shardpb.ChangeCatalogRequest
		for name, e := range want {
			held, ok := g.colls[name]
			stale := !ok || held < e.GetUid() || held == e.GetUid() && (!maps.Equal(g.schemas[name], e.GetPayloadSchema()) ||
				slotVersion(g.entries[name].GetSlotMap()) < slotVersion(e.GetSlotMap()) ||
				g.entries[name].GetSettingsVersion() < e.GetSettingsVersion())
			if stale && g.dropped[name] < e.GetUid() {
				todo = append(todo, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: e}})
			}
		}
		for name, uid := range g.colls {
			// Dropped on the authority: older than its version and not
			// (or no longer) what it holds. A newer uid was created after
			// the authority was read; it is left alone.
			if e, ok := want[name]; uid <= auth.GetVersion() && (!ok || e.GetUid() > uid) {
				todo = append(todo, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Drop{Drop: &shardpb.CollectionRef{Name: name, Uid: uid}}})
			}
		}
		for alias, w := range wantAlias {
			if held, ok := g.aliases[alias]; !ok || held.GetUid() < w.GetUid() {
				todo = append(todo, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Alias{Alias: w}})
			}
		}
		for alias, held := range g.aliases {
			if _, ok := wantAlias[alias]; !ok && held.GetUid() <= auth.GetVersion() {
				todo = append(todo, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Alias{
					Alias: &shardpb.AliasEntry{Alias: alias, Uid: auth.GetVersion()}}})
			}
		}
		if len(todo) == 0 {
			continue
		}
		wg.Go(func() {
			for _, req := range todo {
				if _, err := c.changeCatalog(ctx, i, req); err != nil {
					c.log.Warn("catalog change not yet on shard", "shard", c.shards[i].Name, "err", err)
					return
				}
			}
			c.log.Info("catalog completed on shard", "shard", c.shards[i].Name, "changes", len(todo))
		})
	}
	wg.Wait()
}

func collectionOf(e *shardpb.CollectionEntry) Collection {
	st := e.GetSettings()
	m, _ := vector.ParseMetric(st.GetMetric())
	out := Collection{Name: e.GetName(), UID: e.GetUid(), PayloadSchema: e.GetPayloadSchema(), Restoring: e.GetRestoring(), Settings: catalog.Settings{
		Dim: int(st.GetDim()), Metric: m, Quantization: st.GetQuantization(), Index: st.GetIndex(), Float32: st.GetFloat32Placement(),
		Sparse: shard.SparseFromPB(st.GetSparseVectors()), Named: shard.NamedFromPB(st.GetNamedVectors())}.Normalize()}
	if sm := e.GetSlotMap(); len(sm.GetOwners()) > 0 {
		out.Slots = placement.SlotMap{Epoch: sm.GetEpoch(), Owners: sm.GetOwners(), Since: sm.GetSince(), Version: sm.GetVersion()}
		for _, mv := range sm.GetMoves() {
			if out.Slots.Moves == nil {
				out.Slots.Moves = map[int]placement.SlotMove{}
			}
			out.Slots.Moves[int(mv.GetSlot())] = placement.SlotMove{To: mv.GetTo(), Prev: mv.GetPrev()}
		}
	}
	return out
}

func settingsPB(s catalog.Settings) *shardpb.CollectionSettings {
	return shard.SettingsToPB(s)
}

// collectionGone is the error a use case answers when a shard refused a
// request for coll as COLLECTION_NOT_FOUND: the cached catalog was stale.
// It re-reads the catalog and answers from it: not found (dropped), or
// unavailable (created, not yet on that shard; or created again).
func (c *Coordinator) collectionGone(ctx context.Context, coll Collection, shardName string) error {
	v, err := c.refreshCatalog(ctx)
	if err != nil {
		return errorf(CodeUnavailable, err, "collection `%s`: shard %s does not hold it and the catalog cannot be read", coll.Name, shardName)
	}
	now, ok := v.colls[coll.Name]
	if !ok {
		return errorf(CodeCollectionNotFound, nil, "collection `%s` does not exist", coll.Name)
	}
	if now.UID != coll.UID {
		return errorf(CodeUnavailable, nil, "collection `%s` was dropped and created again; retry", coll.Name)
	}
	return errorf(CodeUnavailable, nil, "collection `%s` is still being created: shard %s does not hold it yet; retry shortly", coll.Name, shardName)
}

// goneFrom finds a shard that refused as COLLECTION_NOT_FOUND among a
// fan-out's results.
func goneFrom[T any](results []fanout.Result[T]) (string, bool) {
	for _, r := range results {
		var nf *shard.CollectionNotFoundError
		if r.Reason != "" && errors.As(r.Err, &nf) {
			return r.Shard, true
		}
	}
	return "", false
}

// CollectionStatus is one collection as GET /v1/collections/{c} shows it.
type CollectionStatus struct {
	Collection
	// Ready is true once every group holds it; Lacking names the shards
	// that do not yet.
	Ready   bool
	Lacking []string
	// DocCount sums the shards that answered; Shards has one entry per
	// shard, in cluster order.
	DocCount uint64
	Bytes    uint64
	Shards   []CollectionShard
}

// CollectionShard is one shard's part of a collection.
type CollectionShard struct {
	Shard string
	// Answered is false when no replica of the shard answered within
	// StatusTimeout; the counts are then zero.
	Answered bool
	DocCount uint64
	Bytes    uint64
	Index    *IndexStatus
}

// CollectionStatus reports name's settings, whether it is ready, and each
// shard's documents and bytes (one serving replica of each asked, within
// StatusTimeout). An alias resolves to its collection.
func (c *Coordinator) CollectionStatus(ctx context.Context, name string) (CollectionStatus, error) {
	coll, err := c.Collection(ctx, name)
	out := CollectionStatus{Collection: coll, Ready: err == nil}
	if err != nil {
		if CodeOf(err) != CodeUnavailable {
			return CollectionStatus{}, err
		}
		if !coll.Restoring {
			out.Lacking = c.cat.current().lacking[coll.Name]
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StatusTimeout)
	defer cancel()
	req := fanout.Request{Start: time.Now(), Budget: budget.Budget{Deadline: StatusTimeout, Shard: StatusTimeout}, Control: true}
	out.Shards = make([]CollectionShard, len(c.shards))
	var wg sync.WaitGroup
	for i, s := range c.shards {
		out.Shards[i].Shard = s.Name
		wg.Go(func() {
			st, err := fanout.Lookup(ctx, c.cluster, req, s.Name, func(ctx context.Context, r *client.Conn) (*shardpb.StatsResponse, error) {
				return r.In(coll.ref()).Stats(ctx)
			})
			if err != nil || len(st.GetCollections()) != 1 {
				return
			}
			cs := st.GetCollections()[0]
			out.Shards[i] = CollectionShard{Shard: s.Name, Answered: true, DocCount: cs.GetDocCount(), Bytes: cs.GetBytes(), Index: indexStatusOf(cs.GetIndex())}
		})
	}
	wg.Wait()
	for _, sh := range out.Shards {
		out.DocCount += sh.DocCount
		out.Bytes += sh.Bytes
	}
	return out, nil
}

// Schema is what a request's vectors are checked against.
type Schema struct {
	Dim    int
	Metric vector.Metric
	// Sparse are the collection's named sparse vectors, nil for none.
	Sparse map[string]catalog.Sparse
	// Named are the collection's named dense vectors, nil for none; Dim
	// is 0 when it has only these.
	Named map[string]catalog.Dense
}

// Schema is the collection's dimension, metric, sparse and named vectors.
func (c Collection) Schema() Schema {
	return Schema{Dim: c.Settings.Dim, Metric: c.Settings.Metric, Sparse: c.Settings.Sparse, Named: c.Settings.Named}
}

// NamedList names the named dense vectors, ascending, for messages:
// "none" when there are none.
func (s Schema) NamedList() string {
	if len(s.Named) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(s.Named)), ", ")
}

// VectorNames lists every vector the schema has, for messages: the
// unnamed one as "", then the named dense and the sparse ones.
func (s Schema) VectorNames() string {
	var names []string
	if s.Dim > 0 {
		names = append(names, `"" (the unnamed dense vector)`)
	}
	for _, n := range slices.Sorted(maps.Keys(s.Named)) {
		names = append(names, fmt.Sprintf("%q", n))
	}
	for _, n := range slices.Sorted(maps.Keys(s.Sparse)) {
		names = append(names, fmt.Sprintf("%q (sparse)", n))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ForVector is the schema a vector named name is checked against: the
// collection's own (name "") or its named vector's; ok is false when the
// collection has no vector of that name.
func (s Schema) ForVector(name string) (Schema, bool) {
	if name == "" {
		return s, s.Dim > 0
	}
	d, ok := s.Named[name]
	if !ok {
		return Schema{}, false
	}
	return Schema{Dim: d.Dim, Metric: d.Metric}, true
}

// SetPayloadIndex declares a payload index of coll: field holds values of
// schema (Qdrant's keyword, integer, float, bool, ...). Every payload key
// is indexed already, so this changes no answer; the declaration is
// committed to the catalog so GET shows it.
func (c *Coordinator) SetPayloadIndex(ctx context.Context, coll Collection, field, schema string) error {
	return c.changePayloadIndex(ctx, coll, field, schema)
}

// DropPayloadIndex removes a payload index declaration; removing an absent
// one is not an error.
func (c *Coordinator) DropPayloadIndex(ctx context.Context, coll Collection, field string) error {
	return c.changePayloadIndex(ctx, coll, field, "")
}

func (c *Coordinator) changePayloadIndex(ctx context.Context, coll Collection, field, schema string) error {
	if field == "" {
		return errorf(CodeInvalid, nil, "a payload index needs a field name")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	resp, err := c.changeCatalog(ctx, c.cat.authority, &shardpb.ChangeCatalogRequest{Authority: true,
		Op: &shardpb.ChangeCatalogRequest_PayloadIndex{PayloadIndex: &shardpb.PayloadIndex{Collection: coll.Name, Field: field, Schema: schema}}})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return errorf(CodeCollectionNotFound, err, "collection `%s` does not exist", coll.Name)
		}
		return c.catalogWriteError("changing the payload index of", coll.Name, err)
	}
	if e := resp.GetEntry(); e.GetName() != "" {
		if perr := c.pushEverywhere(ctx, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: e}}); perr != nil {
			c.log.Warn("payload index changed; some shards learn it later", "collection", coll.Name, "err", perr)
		}
	}
	_, _ = c.refreshCatalog(ctx)
	return nil
}

// UpdateCollection changes the settings of coll that can change online
// to s (catalog.Changeable: the quantization of a flat collection),
// committed through the catalog like a create: the authority group
// decides and stamps the change, then every other group receives the
// changed entry, and each replica switches its store as it applies it.
// Settings that cannot change are CodeInvalid, naming each. Settings
// equal to those held change nothing.
func (c *Coordinator) UpdateCollection(ctx context.Context, coll Collection, s catalog.Settings) (changed bool, err error) {
	if err := catalog.Changeable(coll.Settings, s); err != nil {
		return false, errorf(CodeInvalid, err, "collection `%s`: %v", coll.Name, err)
	}
	s = s.Normalize()
	if err := s.Validate(); err != nil {
		return false, errorf(CodeInvalid, err, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	resp, err := c.changeCatalog(ctx, c.cat.authority, &shardpb.ChangeCatalogRequest{Authority: true,
		Op: &shardpb.ChangeCatalogRequest_UpdateSettings{UpdateSettings: &shardpb.UpdateSettings{Collection: coll.Name, Uid: coll.UID, Settings: settingsPB(s)}}})
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.NotFound {
			return false, errorf(CodeCollectionNotFound, err, "collection `%s` does not exist", coll.Name)
		}
		return false, c.catalogWriteError("changing the settings of", coll.Name, err)
	}
	if e := resp.GetEntry(); e.GetName() != "" {
		if perr := c.pushEverywhere(ctx, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: e}}); perr != nil {
			// The authority decided: RunCatalog completes the others.
			c.log.Warn("collection settings changed; some shards learn them later", "collection", coll.Name, "err", perr)
		}
	}
	_, _ = c.refreshCatalog(ctx)
	return resp.GetChanged(), nil
}

// markRestored clears the restoring flag of coll (RestoreFrom, once every
// row is in), committed through the catalog like a settings change: the
// authority group decides, then every other group receives the changed
// entry. The collection serves as soon as the authority committed it.
func (c *Coordinator) markRestored(ctx context.Context, coll Collection) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	resp, err := c.changeCatalog(ctx, c.cat.authority, &shardpb.ChangeCatalogRequest{Authority: true,
		Op: &shardpb.ChangeCatalogRequest_Restored{Restored: &shardpb.CollectionRef{Name: coll.Name, Uid: coll.UID}}})
	if err != nil {
		return c.catalogWriteError("finishing the restore of", coll.Name, err)
	}
	if e := resp.GetEntry(); e.GetName() != "" {
		if perr := c.pushEverywhere(ctx, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: e}}); perr != nil {
			c.log.Warn("collection restored; some shards learn it later", "collection", coll.Name, "err", perr)
		}
	}
	_, _ = c.refreshCatalog(ctx)
	return nil
}

// slotVersion is a wire slot map's version (its epoch for a map written
// before moves).
func slotVersion(m *shardpb.SlotMap) uint64 { return max(m.GetVersion(), m.GetEpoch()) }
