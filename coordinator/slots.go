package coordinator

import (
	"context"
	"errors"
	"time"

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
// collection's map gives it (nil for a collection without a map).
func slotSelection(coll Collection, shardName string) *shardpb.SlotSelection {
	if coll.Slots.IsZero() {
		return nil
	}
	return &shardpb.SlotSelection{Epoch: coll.Slots.Epoch, Shard: shardName, Held: coll.Slots.Held(shardName)}
}

// readSlots is slotSelection for the shard of replica r.
func (c *Coordinator) readSlots(coll Collection, r *client.Conn) *shardpb.SlotSelection {
	at, ok := c.shardOf(r)
	if !ok {
		return nil
	}
	return slotSelection(coll, c.shards[at].Name)
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
