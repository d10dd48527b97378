package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// Moving a slot between shard groups (DESIGN.md, "Growing"), in four
// steps, each a compare-and-set of the collection's slot map on the
// catalog's authority group, pushed to every other group:
//
//  1. begin: the slot is fenced — its owner refuses writes to it
//     (SLOT_MOVED, retryable: the router routes them again after the
//     flip) — and the receiver takes the copy's writes;
//  2. copy: the owner's rows of the slot, paged by a scroll that asks for
//     that slot only, are written to the receiver (migrate writes),
//     rate-limited;
//  3. flip: the receiver owns the slot at the next epoch; the old owner
//     keeps its rows, final since the fence, for readers still on the old
//     epoch;
//  4. settle: after a grace for routers to read the new map, the old owner
//     drops its rows as it applies the settled map.
//
// The fence comes before the copy, not after a first bulk pass: a slot is
// a 1/slots share of a collection (256 by default), so its copy is short,
// and a fence first needs no change tracking to find the writes a bulk
// pass missed. Reads name the slots they want of each shard, so before,
// during and after the flip every row is counted once: by the owner the
// reader's epoch names.

// MoveConfig tunes MoveSlot.
type MoveConfig struct {
	// RowsPerSecond caps the copy (0: DefaultMoveRate), so queries on the
	// two groups keep their tail.
	RowsPerSecond int
	// Grace is how long the old owner keeps the slot's rows after the
	// flip, for routers that have not re-read the catalog yet (0: twice
	// the catalog refresh period; a negative value: none).
	Grace time.Duration
	// Progress, when set, is told the rows copied so far after each page.
	Progress func(copied int)
}

// DefaultMoveRate is MoveConfig.RowsPerSecond's default: about 30 MB/s of
// 1536-D float32 rows, a fraction of a replica's write throughput.
const DefaultMoveRate = 5000

// movePage is the rows a copy reads and writes at once.
const movePage = 256

// MoveResult is what a move did.
type MoveResult struct {
	Collection string
	Slot       int
	From, To   string
	Rows       int
	// Copy is how long the slot was fenced: begin to flip.
	Copy  time.Duration
	Epoch uint64 // the map's epoch after the flip
}

// MoveSlot moves slot s of the collection name to shard to, online.
func (c *Coordinator) MoveSlot(ctx context.Context, name string, s int, to string, cfg MoveConfig) (MoveResult, error) {
	if !slices.ContainsFunc(c.shards, func(sh fanout.Shard[*client.Conn]) bool { return sh.Name == to }) {
		return MoveResult{}, errorf(CodeInvalid, nil, "shard %q is not one of this router's shards", to)
	}
	v, err := c.refreshCatalog(ctx)
	if err != nil {
		return MoveResult{}, err
	}
	coll, ok := v.colls[name]
	if !ok {
		return MoveResult{}, errorf(CodeCollectionNotFound, nil, "collection `%s` does not exist", name)
	}
	if coll.Slots.IsZero() {
		return MoveResult{}, errorf(CodeInvalid, nil, "collection `%s` predates slots: its documents are placed by the shard list", name)
	}
	for ms, mv := range coll.Slots.Moves {
		// A move a mover left unfinished (it died, or its deadline
		// passed): finished first, from the step it reached, so a slot
		// never stays fenced. Each step is idempotent.
		if coll, err = c.finishMove(ctx, coll, ms, mv, cfg); err != nil {
			return MoveResult{}, fmt.Errorf("finishing the move of slot %d of `%s` left under way: %w", ms, name, err)
		}
		if ms == s && coll.Slots.Owners[s] == to {
			return MoveResult{Collection: name, Slot: s, From: mv.Prev, To: to, Epoch: coll.Slots.Epoch}, nil
		}
	}
	begun, err := coll.Slots.Begin(s, to)
	if err != nil {
		return MoveResult{}, errorf(CodeConflict, err, "collection `%s`: %v", name, err)
	}
	res := MoveResult{Collection: name, Slot: s, From: coll.Slots.Owners[s], To: to}
	t0 := time.Now()
	if err := c.setSlots(ctx, coll, coll.Slots, begun); err != nil {
		return res, err
	}
	coll.Slots = begun
	res.Rows, err = c.copySlot(ctx, coll, s, res.From, to, cfg)
	if err != nil {
		// Abandoned: the owner takes writes again, the receiver drops
		// what it received.
		if aerr := c.setSlots(context.WithoutCancel(ctx), coll, begun, begun.Settle(s)); aerr != nil {
			err = errors.Join(err, fmt.Errorf("abandoning the move: %w", aerr))
		}
		return res, fmt.Errorf("copying slot %d of `%s` from %s to %s: %w", s, name, res.From, to, err)
	}
	flipped := begun.Flip(s)
	if err := c.setSlots(ctx, coll, begun, flipped); err != nil {
		return res, err
	}
	res.Copy, res.Epoch = time.Since(t0), flipped.Epoch
	grace := cfg.Grace
	if grace == 0 {
		grace = 2 * c.catalogRefresh
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, fmt.Errorf("slot %d flipped to %s; not settled: %w (moving another slot settles it)", s, to, ctx.Err())
		case <-t.C:
		}
	}
	return res, c.setSlots(ctx, coll, flipped, flipped.Settle(s))
}

// finishMove completes the move of slot s found under way in coll's map:
// a fenced slot is copied again (the copy's writes are keyed upserts) and
// flipped, a flipped one settled. It returns coll with the map after.
func (c *Coordinator) finishMove(ctx context.Context, coll Collection, s int, mv placement.SlotMove, cfg MoveConfig) (Collection, error) {
	m := coll.Slots
	if mv.To != "" {
		if _, err := c.copySlot(ctx, coll, s, m.Owners[s], mv.To, cfg); err != nil {
			return coll, err
		}
		flipped := m.Flip(s)
		if err := c.setSlots(ctx, coll, m, flipped); err != nil {
			return coll, err
		}
		m = flipped
	}
	settled := m.Settle(s)
	if err := c.setSlots(ctx, coll, m, settled); err != nil {
		return coll, err
	}
	coll.Slots = settled
	return coll, nil
}

// setSlots commits next as coll's slot map if it is still at was, on the
// authority, then on every other group, and refreshes the cached catalog.
func (c *Coordinator) setSlots(ctx context.Context, coll Collection, was, next placement.SlotMap) error {
	ctx, cancel := context.WithTimeout(ctx, shard.WriteTimeout)
	defer cancel()
	resp, err := c.changeCatalog(ctx, c.cat.authority, &shardpb.ChangeCatalogRequest{Authority: true,
		Op: &shardpb.ChangeCatalogRequest_SetSlots{SetSlots: &shardpb.SetSlots{Collection: coll.Name, Uid: coll.UID,
			ExpectVersion: was.Ver(), SlotMap: slotMapPB(next)}}})
	if err != nil {
		return c.catalogWriteError("changing the slot map of", coll.Name, err)
	}
	if perr := c.pushEverywhere(ctx, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: resp.GetEntry()}}); perr != nil {
		return errorf(CodeUnavailable, perr, "collection `%s`: the slot map changed but has not reached every shard: %v", coll.Name, perr)
	}
	_, _ = c.refreshCatalog(ctx)
	return nil
}

// copySlot writes every row of slot s on shard from to shard to, a page
// at a time, at most cfg.RowsPerSecond.
func (c *Coordinator) copySlot(ctx context.Context, coll Collection, s int, from, to string, cfg MoveConfig) (int, error) {
	rate := cfg.RowsPerSecond
	if rate <= 0 {
		rate = DefaultMoveRate
	}
	held := make([]byte, (coll.Slots.Slots()+7)/8)
	held[s/8] |= 1 << (s % 8)
	sel := &shardpb.SlotSelection{Epoch: coll.Slots.Epoch, Shard: from, Held: held}
	p := shard.Placement{Fingerprint: placement.SlotsFingerprint, Shard: to, SlotEpoch: coll.Slots.Epoch, Migrate: true}
	var (
		cursor  string
		hasFrom bool
		copied  int
	)
	start := time.Now()
	for {
		req := fanout.Request{Start: time.Now(), Budget: budget.Budget{Deadline: shard.WriteTimeout, Shard: shard.WriteTimeout}, Control: true}
		page, err := fanout.Lookup(ctx, c.cluster, req, from, func(ctx context.Context, r *client.Conn) (*shardpb.ScrollResponse, error) {
			return r.In(coll.ref()).Slots(sel).Scroll(ctx, &shardpb.ScrollRequest{From: cursor, HasFrom: hasFrom, Limit: movePage + 1,
				WithVector: true, WithPayload: &shardpb.PayloadSelector{All: true}, MinIndex: c.minIndex(r)})
		})
		if err != nil {
			return copied, fmt.Errorf("reading %s: %w", from, err)
		}
		pts := page.GetPoints()
		next := len(pts) > movePage
		if next {
			cursor, hasFrom, pts = pts[movePage].GetId(), true, pts[:movePage]
		}
		if len(pts) > 0 {
			vs := make([]*shardpb.Vector, len(pts))
			for i, pt := range pts {
				vs[i] = &shardpb.Vector{Id: pt.GetId(), Vector: pt.GetVector(), Payload: payloadOf(pt.GetPayload())}
			}
			wctx, cancel := context.WithTimeout(ctx, shard.WriteTimeout)
			wr := fanout.Write(wctx, c.cluster, to, func(ctx context.Context, r *client.Conn) error {
				ack, err := r.In(coll.ref()).Upsert(ctx, p, vs)
				if err == nil {
					c.acked(r, ack)
				}
				return err
			})
			cancel()
			if wr.Outcome != fanout.WriteOK {
				return copied, fmt.Errorf("writing %s: %w", to, wr.Err)
			}
			copied += len(pts)
			if cfg.Progress != nil {
				cfg.Progress(copied)
			}
		}
		if !next {
			return copied, nil
		}
		// The rate cap: the copy so far may not run ahead of rate rows a
		// second.
		if ahead := time.Duration(copied)*time.Second/time.Duration(rate) - time.Since(start); ahead > 0 {
			t := time.NewTimer(ahead)
			select {
			case <-ctx.Done():
				t.Stop()
				return copied, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// payloadOf is a scrolled payload as a write carries it: "{}" (a document
// without one, as the scroll answers it) is none.
func payloadOf(b []byte) []byte {
	if string(b) == "{}" {
		return nil
	}
	return b
}

// slotMapPB is m on the wire.
func slotMapPB(m placement.SlotMap) *shardpb.SlotMap {
	out := &shardpb.SlotMap{Epoch: m.Epoch, Owners: m.Owners, Since: m.Since, Version: m.Version}
	for _, s := range slices.Sorted(func(yield func(int) bool) {
		for s := range m.Moves {
			if !yield(s) {
				return
			}
		}
	}) {
		mv := m.Moves[s]
		out.Moves = append(out.Moves, &shardpb.SlotMove{Slot: uint32(s), To: mv.To, Prev: mv.Prev})
	}
	return out
}
