package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// Record is one validated document to store.
type Record struct {
	ID     string
	Vector []float32
	// Payload is the document's validated payload JSON, nil for none.
	Payload []byte
	// Sparse are its validated named sparse vectors, nil for none.
	Sparse map[string]sparsevec.Vector
	// Named are its validated named dense vectors, nil for none.
	Named map[string][]float32
}

// WriteResult is one id's part of a write.
type WriteResult struct {
	ID string
	// Outcome is fanout.WriteOK, WriteFailed (not applied) or WriteUnknown
	// (may have been applied; never replayed).
	Outcome string
	// Err says why, when Outcome is not ok.
	Err *Error
}

// retryNote ends every write error: upserts are keyed, so a retry is safe.
const retryNote = " Upserts and deletes are keyed by id, so retrying the request is safe."

// acked notes a write r acknowledged: the index reads of its shard must
// see from now on, and the replica known to have applied it — r, or the
// leader r forwarded the write to, by the address its group gives it
// (the one discovery lists it under).
func (c *Coordinator) acked(r *client.Conn, ack client.Ack) {
	at, ok := c.shardOf(r)
	if !ok {
		return
	}
	rep := r.Addr()
	if ack.ForwardedTo != "" {
		rep = ack.ForwardedTo
	}
	c.progress.acked(at, rep, ack.Index)
}

// minIndex is the index a read of r's shard must see.
func (c *Coordinator) minIndex(r *client.Conn) uint64 {
	if at, ok := c.shardOf(r); ok {
		return c.progress.minIndex(at)
	}
	return 0
}

// served notes that r answered a read asking for minIndex: it has applied
// it, so later reads may ask it first too.
func (c *Coordinator) served(r *client.Conn, minIndex uint64) {
	if at, ok := c.shardOf(r); ok {
		c.progress.served(at, r.Addr(), minIndex)
	}
}

// prefer is fanout.Request.Prefer for reads that carry min_index: the
// replicas known to have applied it are asked first.
func (c *Coordinator) prefer(shard int, rep string) bool { return c.progress.prefer(shard, rep) }

// Upsert writes recs through their home shards' consensus groups, each
// shard's share in one RPC to one replica (the leader when known), all
// shards at once, within shard.WriteTimeout. An id is ok only once its
// write is committed. Results are in recs' order.
//
// A shard that refuses a share SLOT_MOVED (the collection's slot map
// changed: a slot moved, or is fenced while it moves) applied none of it;
// the share is routed again by the catalog's newer map, after a short
// pause, until the write timeout.
func (c *Coordinator) Upsert(ctx context.Context, coll Collection, recs []Record) []WriteResult {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	results := make([]WriteResult, len(recs))
	pending := make([]int, len(recs))
	for i := range recs {
		pending[i] = i
	}
	var pause time.Duration
	for {
		byShard := map[string][]int{}
		for _, i := range pending {
			home := c.home(coll, recs[i].ID)
			byShard[home] = append(byShard[home], i)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			again []int
		)
		for name, idx := range byShard {
			wg.Go(func() {
				vs := make([]*shardpb.Vector, len(idx))
				for j, i := range idx {
					vs[j] = &shardpb.Vector{Id: recs[i].ID, Vector: vector.EncodeLE(recs[i].Vector), Payload: recs[i].Payload,
						Sparse: client.SparseToPB(recs[i].Sparse), Named: client.NamedToPB(recs[i].Named)}
				}
				p := c.writePlacement(coll, name)
				wr := fanout.Write(ctx, c.cluster, name, func(ctx context.Context, r *client.Conn) error {
					ack, err := r.In(coll.ref()).Upsert(ctx, p, vs)
					if err == nil {
						c.acked(r, ack)
					}
					return err
				})
				res := writeResult(name, wr)
				for _, i := range idx {
					res.ID = recs[i].ID
					results[i] = res
				}
				if moved, _ := slotMoved(wr.Err); moved {
					mu.Lock()
					again = append(again, idx...)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(again) == 0 {
			return results
		}
		var ok bool
		if coll, ok = c.rerouted(ctx, coll, &pause); !ok {
			return results
		}
		pending = again
	}
}

// Delete removes id through its home shard's consensus group and reports
// whether it was there. A SLOT_MOVED refusal is routed again as in Upsert.
func (c *Coordinator) Delete(ctx context.Context, coll Collection, id string) (bool, WriteResult) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	var pause time.Duration
	for {
		home := c.home(coll, id)
		p := c.writePlacement(coll, home)
		found := false
		wr := fanout.Write(ctx, c.cluster, home, func(ctx context.Context, r *client.Conn) error {
			f, ack, err := r.In(coll.ref()).Delete(ctx, p, id)
			if err == nil {
				found = f // only the accepting attempt answers; writes are never concurrent
				c.acked(r, ack)
			}
			return err
		})
		res := writeResult(home, wr)
		res.ID = id
		if moved, _ := slotMoved(wr.Err); moved {
			var ok bool
			if coll, ok = c.rerouted(ctx, coll, &pause); ok {
				continue
			}
		}
		return found, res
	}
}

// writeResult turns the engine's outcome of one shard's write into the
// result every id of that shard gets.
func writeResult(name string, wr fanout.WriteResult) WriteResult {
	msg := status.Convert(wr.Err).Message()
	switch wr.Outcome {
	case fanout.WriteOK:
		return WriteResult{Outcome: fanout.WriteOK}
	case fanout.WriteUnknown:
		return WriteResult{Outcome: fanout.WriteUnknown, Err: errorf(CodeOutcomeUnknown, wr.Err,
			"shard %s: the write may or may not have been committed (%s: %s).%s", name, wr.Replica, msg, retryNote)}
	}
	code := CodeUnavailable
	var nf *shard.CollectionNotFoundError
	switch {
	case errors.As(wr.Err, &nf):
		return WriteResult{Outcome: fanout.WriteFailed, Err: errorf(CodeCollectionNotFound, wr.Err,
			"shard %s does not hold collection `%s` (dropped, or still being created). It was not applied.", name, nf.Name)}
	case errors.Is(wr.Err, fanout.ErrNoLeader):
		return WriteResult{Outcome: fanout.WriteFailed, Err: errorf(CodeUnavailable, wr.Err,
			"shard %s: no replica could take the write (a leader election, or too few replicas reachable): %v. It was not applied.%s",
			name, wr.Err, retryNote)}
	case status.Code(wr.Err) == codes.FailedPrecondition:
		code = CodeConflict
	case status.Code(wr.Err) == codes.InvalidArgument, status.Code(wr.Err) == codes.Internal:
		code = CodeInternal
	}
	return WriteResult{Outcome: fanout.WriteFailed, Err: errorf(code, wr.Err,
		"shard %s: the write was refused by %s: %s. It was not applied.%s", name, wr.Replica, msg, retryNote)}
}

// Removal deletes many documents at once: every listed id, and every
// document Filter matches (nil: none by filter).
type Removal struct {
	Collection Collection
	IDs        []string
	Filter     *filter.Filter
}

// ShardWrite is one shard's part of a Removal.
type ShardWrite struct {
	Shard string
	// Deleted is how many documents the shard removed (when Err is nil).
	Deleted uint64
	Outcome string
	Err     *Error
}

// Remove deletes rm through the consensus groups of the shards it
// concerns — the ids' home shards, and every shard when there is a filter
// — each shard's share in one log entry, all shards at once, within
// shard.WriteTimeout. The filter is evaluated as each shard's entry
// applies, so every replica of a shard removes the same documents. Results
// are in cluster order, one per shard written.
func (c *Coordinator) Remove(ctx context.Context, rm Removal) ([]ShardWrite, error) {
	fb, err := filterBytes(rm.Collection, rm.Filter)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	coll := rm.Collection
	byShard := map[string][]string{}
	for _, id := range rm.IDs {
		home := c.home(coll, id)
		byShard[home] = append(byShard[home], id)
	}
	var names []string
	for _, s := range c.shards {
		if _, ok := byShard[s.Name]; ok || fb != nil {
			names = append(names, s.Name)
		}
	}
	out := make([]ShardWrite, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			out[i] = c.removeFrom(ctx, coll, name, byShard[name], fb)
		})
	}
	wg.Wait()
	return out, nil
}

// removeFrom is one shard's part of a Removal. A SLOT_MOVED refusal
// applied nothing: a delete by filter is sent again to the same shard
// (every shard gets it; a fenced slot refuses it until its move flips),
// and ids the shard no longer holds go to their new home, as in Upsert.
func (c *Coordinator) removeFrom(ctx context.Context, coll Collection, name string, ids []string, fb []byte) ShardWrite {
	var pause time.Duration
	var total ShardWrite
	for {
		p := c.writePlacement(coll, name)
		var deleted uint64
		wr := fanout.Write(ctx, c.cluster, name, func(ctx context.Context, r *client.Conn) error {
			n, ack, err := r.In(coll.ref()).DeleteMatching(ctx, p, ids, fb)
			if err == nil {
				deleted = n // only the accepting attempt answers
				c.acked(r, ack)
			}
			return err
		})
		res := writeResult(name, wr)
		total = ShardWrite{Shard: name, Deleted: total.Deleted + deleted, Outcome: res.Outcome, Err: res.Err}
		moved, _ := slotMoved(wr.Err)
		if !moved {
			return total
		}
		var ok bool
		if coll, ok = c.rerouted(ctx, coll, &pause); !ok {
			return total
		}
		if fb != nil {
			continue
		}
		// Ids only: those whose home moved are deleted there; a shard's
		// answer counts them with its own.
		var here []string
		moves := map[string][]string{}
		for _, id := range ids {
			if h := c.home(coll, id); h == name {
				here = append(here, id)
			} else {
				moves[h] = append(moves[h], id)
			}
		}
		for h, mv := range moves {
			w := c.removeFrom(ctx, coll, h, mv, nil)
			total.Deleted += w.Deleted
			if w.Err != nil {
				total.Outcome, total.Err = w.Outcome, w.Err
				return total
			}
		}
		if len(here) == 0 {
			return ShardWrite{Shard: name, Deleted: total.Deleted, Outcome: fanout.WriteOK}
		}
		ids = here
	}
}
