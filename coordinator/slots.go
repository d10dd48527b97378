package coordinator

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// How a collection's documents are placed (DESIGN.md, "Growing"): by its
// slot map, whose epoch every write and read carries, or — a collection
// created before slots — by jump hash over the router's sorted shard
// names, under the shard list's fingerprint, exactly as before.

// home is the shard that holds id of coll.
func (c *Coordinator) home(coll Collection, id string) string {
	if coll.Slots.IsZero() {
		return c.placement.Home(id)
	}
	return coll.Slots.Home(id)
}

// writePlacement is what a write of coll to shardName is routed under.
func (c *Coordinator) writePlacement(coll Collection, shardName string) shard.Placement {
	if coll.Slots.IsZero() {
		return shard.Placement{Fingerprint: c.placement.Fingerprint(), Shard: shardName}
	}
	return shard.Placement{Fingerprint: placement.SlotsFingerprint, Shard: shardName, SlotEpoch: coll.Slots.Epoch}
}

// slotSelection is what a read of coll asks of shardName: the slots the
// collection's map gives it (nil for a collection without a map), from
// the bitmaps made when the catalog was read, or made now for a map that
// is not the catalog view's (a move's own copy).
func (c *Coordinator) slotSelection(coll Collection, shardName string) *shardpb.SlotSelection {
	if coll.Slots.IsZero() {
		return nil
	}
	h := c.cat.current().held[coll.Name]
	if !h.madeFrom(coll) {
		return &shardpb.SlotSelection{Epoch: coll.Slots.Epoch, Shard: shardName, Held: coll.Slots.Held(shardName)}
	}
	return &shardpb.SlotSelection{Epoch: coll.Slots.Epoch, Shard: shardName, Held: h.of(shardName)}
}

// heldSlots is every shard's slots under one collection's slot map, as
// bitmaps (placement.SlotMap.Held). They are shared by every read of the
// map and only ever read (a request encodes them), so they are never
// changed once made.
type heldSlots struct {
	uid, ver uint64
	owners   int
	by       map[string][]byte // by owner; every owner has an entry
	none     []byte            // a shard that owns no slot
	// unlisted is the first owner, by name, that this router does not
	// list, or "" (see Coordinator.unlisted).
	unlisted string
}

// heldOf makes coll's heldSlots, once per catalog reading (buildView):
// every read of the collection checks its unlisted owner and names its
// slots from them.
func (c *Coordinator) heldOf(coll Collection) *heldSlots {
	m := coll.Slots
	h := &heldSlots{uid: coll.UID, ver: m.Ver(), owners: m.Slots(), by: map[string][]byte{}, none: make([]byte, (m.Slots()+7)/8)}
	for s, o := range m.Owners {
		b, ok := h.by[o]
		if !ok {
			b = make([]byte, len(h.none))
			h.by[o] = b
			listed := slices.ContainsFunc(c.shards, func(sh fanout.Shard[*client.Conn]) bool { return sh.Name == o })
			if !listed && (h.unlisted == "" || o < h.unlisted) {
				h.unlisted = o
			}
		}
		b[s/8] |= 1 << (s % 8)
	}
	return h
}

// madeFrom reports whether h was made from coll's map (false: none made,
// another incarnation, or a map changed since).
func (h *heldSlots) madeFrom(coll Collection) bool {
	return h != nil && h.uid == coll.UID && h.ver == coll.Slots.Ver() && h.owners == coll.Slots.Slots()
}

// of is shardName's bitmap.
func (h *heldSlots) of(shardName string) []byte {
	if b, ok := h.by[shardName]; ok {
		return b
	}
	return h.none
}

// readSlots is slotSelection for the shard of replica r.
func (c *Coordinator) readSlots(coll Collection, r *client.Conn) *shardpb.SlotSelection {
	at, ok := c.shardOf(r)
	if !ok {
		return nil
	}
	return c.slotSelection(coll, c.shards[at].Name)
}

// slotMoved reports whether err is a shard's SLOT_MOVED refusal, and
// whether it asks for a pause first (the slot is fenced while it moves).
func slotMoved(err error) (moved, fenced bool) {
	var sm *shard.SlotMovedError
	if errors.As(err, &sm) {
		return true, sm.Retry
	}
	return false, false
}

// slotRetryPause is the first pause before a write refused SLOT_MOVED is
// routed again; it doubles up to slotRetryMax. A fenced slot stays fenced
// while its last rows are copied (a move's tail: one slot's rows written
// since its bulk copy), so the pauses are short and the write timeout
// bounds them all.
const (
	slotRetryPause = 20 * time.Millisecond
	slotRetryMax   = 320 * time.Millisecond
)

// rerouted re-reads the catalog after a SLOT_MOVED refusal, at most
// once a pause (which doubles, from slotRetryPause), and returns coll as
// the catalog now has it: the same incarnation with its newer slot map. ok
// is false when the pause would outlast ctx or the collection is gone.
func (c *Coordinator) rerouted(ctx context.Context, coll Collection, pause *time.Duration) (Collection, bool) {
	if *pause == 0 {
		*pause = slotRetryPause
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 2**pause {
		// Not enough time left to route it again: the refusal stands.
		return coll, false
	}
	t := time.NewTimer(*pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return coll, false
	case <-t.C:
	}
	*pause = min(2**pause, slotRetryMax)
	v, err := c.refreshCatalog(ctx)
	if err != nil {
		return coll, ctx.Err() == nil
	}
	now, ok := v.colls[coll.Name]
	if !ok || now.UID != coll.UID {
		return coll, false
	}
	return now, true
}

// maxRemaps bounds how often one read is sent again with a newer slot
// map: a move flips or settles one slot at a time, so a second change
// inside one query's deadline is already rare.
const maxRemaps = 2

// slotRefused reports whether a shard is missing from a fan-out because
// its replicas refused the read SLOT_MOVED: the slots the router's map
// asked of it are not the ones its group holds now.
func slotRefused[T any](results []fanout.Result[T]) bool {
	for _, r := range results {
		if moved, _ := slotMoved(r.Err); r.Reason != "" && moved {
			return true
		}
	}
	return false
}

// remapped re-reads the catalog after a read of coll was refused
// SLOT_MOVED, and returns coll with the newer slot map the catalog now
// holds. ok is false when it holds none (the group that refused is ahead
// of the authority's answer, or behind the router: the refusal stands), or
// when the reading does not end before until, the read's shard deadline:
// the reading then goes on for the next query, and this one keeps its
// answer. A move settles only after a grace for routers to read the new
// map, so a router that meets a settled slot has missed a refresh (its
// catalog period is longer, or the authority did not answer it): without
// this every read of it would be degraded until its next refresh.
func (c *Coordinator) remapped(coll Collection, until time.Time) (Collection, bool) {
	refused := time.Now()
	if !refused.Before(until) {
		return coll, false
	}
	done := make(chan *catalogView, 1) // buffered: a reading that ends late never blocks
	go func() {
		v, err := c.refreshCatalogSince(context.Background(), refused)
		if err != nil {
			v = nil
		}
		done <- v
	}()
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	var v *catalogView
	select {
	case v = <-done:
	case <-t.C:
		return coll, false
	}
	if v == nil || !time.Now().Before(until) {
		return coll, false
	}
	now, ok := v.colls[coll.Name]
	if !ok || now.UID != coll.UID || now.Slots.Ver() <= coll.Slots.Ver() {
		return coll, false
	}
	return now, true
}

// unlistedError is the refusal of a read of coll while its slot map
// gives slots to a shard this router does not list (unlisted).
func (c *Coordinator) unlistedError(coll Collection) error {
	if name := c.unlisted(coll); name != "" {
		return errorf(CodeUnavailable, nil, "collection `%s` has slots on shard %s, which this router does not list: restart it with every shard's --shard", coll.Name, name)
	}
	return nil
}

// unlisted is the first shard coll's slot map gives slots to that this
// router does not list (its --shard list predates a group the slots
// moved to), or "". Reading without it would leave its slots' rows out
// of an answer that looks complete.
func (c *Coordinator) unlisted(coll Collection) string {
	if coll.Slots.IsZero() {
		return ""
	}
	if h := c.cat.current().held[coll.Name]; h.madeFrom(coll) {
		return h.unlisted
	}
	return c.heldOf(coll).unlisted // a map newer than the view (remapped)
}

// gatherFresh is fanout.Gather of a read of coll (read builds the call
// for a map) that, when a shard refused it SLOT_MOVED, reads again with
// the catalog's newer map while the deadline allows (remapped). Only the
// answer given counts as a fan-out, once, as Gather counts its own.
func gatherFresh[T fanout.Answer](ctx context.Context, c *Coordinator, coll Collection, req fanout.Request,
	read func(Collection) fanout.Call[*client.Conn, T]) ([]fanout.Result[T], fanout.Summary) {
	counted := !req.DeferReport // a caller that defers the report counts the answer itself
	results, sum := gatherFreshUnreported(ctx, c, coll, req, read)
	if _, gone := goneFrom(results); !gone && counted {
		c.cluster.Report(req, sum)
	}
	return results, sum
}

// gatherFreshUnreported is gatherFresh without reporting the fan-out: the
// caller reports it, once, after adding what it knows of other rounds.
func gatherFreshUnreported[T fanout.Answer](ctx context.Context, c *Coordinator, coll Collection, req fanout.Request,
	read func(Collection) fanout.Call[*client.Conn, T]) ([]fanout.Result[T], fanout.Summary) {
	req.DeferReport = true
	results, sum := fanout.Gather(ctx, c.cluster, req, read(coll))
	for range maxRemaps {
		if coll.Slots.IsZero() || !slotRefused(results) {
			break
		}
		now, ok := c.remapped(coll, req.ShardDeadline())
		if !ok || c.unlisted(now) != "" {
			break
		}
		coll = now
		results, sum = fanout.Gather(ctx, c.cluster, req, read(coll))
	}
	return results, sum
}
