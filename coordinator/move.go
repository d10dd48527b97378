package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

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

// MoveSlot moves slot s of the collection name to shard to, online, and
// returns once the old owner has dropped its rows (after cfg's grace).
func (c *Coordinator) MoveSlot(ctx context.Context, name string, s int, to string, cfg MoveConfig) (MoveResult, error) {
	var res MoveResult
	err := c.MoveSlots(ctx, name, []placement.Step{{Slot: s, To: to}}, cfg, func(r MoveResult) { res = r })
	return res, err
}

// MoveSlots moves the slots of steps, in order, online: one slot fenced
// at a time, each step of a move on every group before the next. done,
// when set, is told each move once its slot has flipped.
//
// An old owner keeps a moved slot's rows for cfg's grace after the flip,
// for routers still reading by the map before it. Its settle (the map
// change that drops them) is made in the same change as a later slot's
// fence once the grace has passed, so the grace runs while later slots
// copy instead of adding to every move; the last settles follow the last
// flip's grace. It returns once every slot it flipped has settled.
func (c *Coordinator) MoveSlots(ctx context.Context, name string, steps []placement.Step, cfg MoveConfig, done func(MoveResult)) error {
	for _, st := range steps {
		if !slices.ContainsFunc(c.shards, func(sh fanout.Shard[*client.Conn]) bool { return sh.Name == st.To }) {
			return errorf(CodeInvalid, nil, "shard %q is not one of this router's shards", st.To)
		}
	}
	v, err := c.refreshCatalog(ctx)
	if err != nil {
		return err
	}
	coll, ok := v.colls[name]
	if !ok {
		return errorf(CodeCollectionNotFound, nil, "collection `%s` does not exist", name)
	}
	if coll.Slots.IsZero() {
		return errorf(CodeInvalid, nil, "collection `%s` predates slots: its documents are placed by the shard list", name)
	}
	grace := cfg.Grace
	if grace == 0 {
		grace = 2 * c.catalogRefresh
	}
	// flipped is when each slot awaiting its settle flipped. A move a
	// mover left unfinished (it died, or its deadline passed) is finished
	// first, from the step it reached, so a slot never stays fenced; a
	// flip found in the map is treated as just made.
	flipped := map[int]time.Time{}
	for ms, mv := range coll.Slots.Moves {
		if mv.To != "" {
			if coll, err = c.finishFence(ctx, coll, ms, cfg); err != nil {
				return fmt.Errorf("finishing the move of slot %d of `%s` left under way: %w", ms, name, err)
			}
		}
		flipped[ms] = time.Now()
	}
	for _, st := range steps {
		s := st.Slot
		if s >= 0 && s < coll.Slots.Slots() && coll.Slots.Owners[s] == st.To {
			// Moved already (by the run this one finishes).
			if done != nil {
				done(MoveResult{Collection: name, Slot: s, From: coll.Slots.Moves[s].Prev, To: st.To, Epoch: coll.Slots.Epoch})
			}
			continue
		}
		if at, ok := flipped[s]; ok {
			// Moved here recently and moving on: its last owner's grace
			// first.
			if err := sleepCtx(ctx, time.Until(at.Add(grace))); err != nil {
				return err
			}
		}
		next, settled := settleDue(coll.Slots, flipped, grace)
		begun, err := next.Begin(s, st.To)
		if err != nil {
			return errorf(CodeConflict, err, "collection `%s`: %v", name, err)
		}
		res := MoveResult{Collection: name, Slot: s, From: coll.Slots.Owners[s], To: st.To}
		t0 := time.Now()
		if err := c.setSlots(ctx, coll, coll.Slots, begun); err != nil {
			return err
		}
		for _, d := range settled {
			delete(flipped, d)
		}
		coll.Slots = begun
		res.Rows, err = c.copySlot(ctx, coll, s, res.From, st.To, cfg)
		if err != nil {
			// Abandoned: the owner takes writes again, the receiver drops
			// what it received.
			if aerr := c.setSlots(context.WithoutCancel(ctx), coll, begun, begun.Settle(s)); aerr != nil {
				err = errors.Join(err, fmt.Errorf("abandoning the move: %w", aerr))
			}
			return fmt.Errorf("copying slot %d of `%s` from %s to %s: %w", s, name, res.From, st.To, err)
		}
		after := begun.Flip(s)
		if err := c.setSlots(ctx, coll, begun, after); err != nil {
			return err
		}
		coll.Slots, flipped[s] = after, time.Now()
		res.Copy, res.Epoch = time.Since(t0), after.Epoch
		if done != nil {
			done(res)
		}
	}
	for len(flipped) > 0 {
		var last time.Time
		for _, at := range flipped {
			if at.After(last) {
				last = at
			}
		}
		if err := sleepCtx(ctx, time.Until(last.Add(grace))); err != nil {
			return fmt.Errorf("%d slots of `%s` flipped, not settled: %w (moving another slot settles them)", len(flipped), name, err)
		}
		next, settled := settleDue(coll.Slots, flipped, grace)
		if err := c.setSlots(ctx, coll, coll.Slots, next); err != nil {
			return err
		}
		coll.Slots = next
		for _, d := range settled {
			delete(flipped, d)
		}
	}
	return nil
}

// settleDue is m with every slot of flipped whose grace has passed
// settled, and those slots.
func settleDue(m placement.SlotMap, flipped map[int]time.Time, grace time.Duration) (placement.SlotMap, []int) {
	var due []int
	for s, at := range flipped {
		if time.Since(at) >= grace {
			m = m.Settle(s)
			due = append(due, s)
		}
	}
	return m, due
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// finishFence completes the move of fenced slot s found under way in
// coll's map: it is copied again (the copy's writes are keyed upserts)
// and flipped. It returns coll with the map after.
func (c *Coordinator) finishFence(ctx context.Context, coll Collection, s int, cfg MoveConfig) (Collection, error) {
	m := coll.Slots
	if _, err := c.copySlot(ctx, coll, s, m.Owners[s], m.Moves[s].To, cfg); err != nil {
		return coll, err
	}
	flipped := m.Flip(s)
	if err := c.setSlots(ctx, coll, m, flipped); err != nil {
		return coll, err
	}
	coll.Slots = flipped
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
// at a time, at most cfg.RowsPerSecond. The next page is read while one
// is written, so a copy takes the longer of the two, not their sum.
func (c *Coordinator) copySlot(ctx context.Context, coll Collection, s int, from, to string, cfg MoveConfig) (int, error) {
	rate := cfg.RowsPerSecond
	if rate <= 0 {
		rate = DefaultMoveRate
	}
	held := make([]byte, (coll.Slots.Slots()+7)/8)
	held[s/8] |= 1 << (s % 8)
	sel := &shardpb.SlotSelection{Epoch: coll.Slots.Epoch, Shard: from, Held: held}
	p := shard.Placement{Fingerprint: placement.SlotsFingerprint, Shard: to, SlotEpoch: coll.Slots.Epoch, Migrate: true}
	limit := movePageRows(coll.Settings.Dim)
	pages := make(chan []*shardpb.Vector, 1) // one page read ahead
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(pages)
		var (
			cursor  string
			hasFrom bool
		)
		for {
			req := fanout.Request{Start: time.Now(), Budget: budget.Budget{Deadline: shard.WriteTimeout, Shard: shard.WriteTimeout}, Control: true}
			page, err := fanout.Lookup(gctx, c.cluster, req, from, func(ctx context.Context, r *client.Conn) (*shardpb.ScrollResponse, error) {
				return r.In(coll.ref()).Slots(sel).Scroll(ctx, &shardpb.ScrollRequest{From: cursor, HasFrom: hasFrom, Limit: uint32(limit + 1),
					WithVector: true, WithPayload: &shardpb.PayloadSelector{All: true}, MinIndex: c.minIndex(r)})
			})
			if err != nil {
				return fmt.Errorf("reading %s: %w", from, err)
			}
			pts := page.GetPoints()
			next := len(pts) > limit
			if next {
				cursor, hasFrom, pts = pts[limit].GetId(), true, pts[:limit]
			}
			if len(pts) > 0 {
				vs := make([]*shardpb.Vector, len(pts))
				for i, pt := range pts {
					vs[i] = &shardpb.Vector{Id: pt.GetId(), Vector: pt.GetVector(), Payload: payloadOf(pt.GetPayload()), Sparse: pt.GetSparse()}
				}
				select {
				case pages <- vs:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			if !next {
				return nil
			}
		}
	})
	copied := 0
	g.Go(func() error {
		start := time.Now()
		for vs := range pages {
			wctx, cancel := context.WithTimeout(gctx, shard.WriteTimeout)
			wr := fanout.Write(wctx, c.cluster, to, func(ctx context.Context, r *client.Conn) error {
				ack, err := r.In(coll.ref()).Upsert(ctx, p, vs)
				if err == nil {
					c.acked(r, ack)
				}
				return err
			})
			cancel()
			if wr.Outcome != fanout.WriteOK {
				return fmt.Errorf("writing %s: %w", to, wr.Err)
			}
			copied += len(vs)
			if cfg.Progress != nil {
				cfg.Progress(copied)
			}
			// The rate cap: the copy so far may not run ahead of rate
			// rows a second.
			if err := sleepCtx(gctx, time.Duration(copied)*time.Second/time.Duration(rate)-time.Since(start)); err != nil {
				return err
			}
		}
		return nil
	})
	err := g.Wait()
	return copied, err
}

// movePageBytes is about how many bytes of rows a copy reads and writes
// at once: one scroll answer and one write (one raft entry) each, well
// under the shards' 64 MiB message limit even with payloads.
const movePageBytes = 4 << 20

// movePageRows is how many rows of dim dimensions make a copy's page:
// movePageBytes of float32 rows and ids, 256 to 4096 rows.
func movePageRows(dim int) int {
	return min(max(movePageBytes/(4*dim+64), 256), 4096)
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
