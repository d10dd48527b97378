package coordinator

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// EditKind is what an Edit does.
type EditKind int

// The edits: Qdrant's update operations.
const (
	EditUpsert EditKind = iota + 1
	EditDelete
	EditSetPayload
	EditOverwritePayload
	EditDeletePayload
	EditClearPayload
	EditUpdateVectors
	// EditDeleteVectors removes the named and sparse vectors Keys names
	// from the selected points.
	EditDeleteVectors
)

// MaxEdits is how many edits one Edit may list (Qdrant's points/batch).
const MaxEdits = 256

// Edit is one validated edit of a collection's documents.
type Edit struct {
	Kind EditKind
	// IDs and Filter select the documents a delete or payload edit acts
	// on: every listed id (a payload edit's must exist) and every document
	// Filter matches when the edit applies (nil: none by filter).
	IDs    []string
	Filter *filter.Filter
	// Points are an upsert's documents, and a vector update's ids and
	// vectors (their payloads unused).
	Points []Record
	// Payload is a set or overwrite's validated JSON object.
	Payload []byte
	// Key is a set's dotted path into the payload, empty for the top level.
	Key string
	// Keys are a payload delete's top-level keys.
	Keys []string
}

// Edit applies edits, in order, through the consensus groups of the
// shards they concern — the home shards of the ids and points they name,
// and every shard when one has a filter — each shard's share of the list
// in one log entry, all shards at once, within shard.WriteTimeout. A shard
// applies its share all or nothing, evaluating filters as the entry
// applies, so every replica changes the same documents.
//
// A payload edit or vector update naming an id that is not stored is
// refused (CodeNotFound, Qdrant's "No point with id ... found") by its
// shard. When the edits span shards, their ids are read first, so that
// such a refusal comes before any shard applies anything; a point deleted
// between that read and the write is still refused by its own shard
// alone. Results are in cluster order, one per shard written.
func (c *Coordinator) Edit(ctx context.Context, coll Collection, edits []Edit) ([]ShardWrite, error) {
	var all []string
	for _, s := range c.shards {
		all = append(all, s.Name)
	}
	shares := c.splitEdits(coll, edits, all)
	if len(shares) > 1 {
		if err := c.mustExist(ctx, coll, edits); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	var names []string
	for _, n := range all {
		if _, ok := shares[n]; ok {
			names = append(names, n)
		}
	}
	out := make([]ShardWrite, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			out[i] = c.editAt(ctx, coll, name, shares[name])
		})
	}
	wg.Wait()
	return out, nil
}

// splitEdits is each shard's share of edits: every edit restricted to
// the ids and points the shard is home to, with its filter when the shard
// is one of filtered; edits with nothing for a shard are left out of its
// share, and the others keep their order.
func (c *Coordinator) splitEdits(coll Collection, edits []Edit, filtered []string) map[string][]Edit {
	out := map[string][]Edit{}
	for _, e := range edits {
		parts := map[string]*Edit{}
		part := func(name string) *Edit {
			if p, ok := parts[name]; ok {
				return p
			}
			p := &Edit{Kind: e.Kind, Payload: e.Payload, Key: e.Key, Keys: e.Keys}
			parts[name] = p
			return p
		}
		for _, id := range e.IDs {
			p := part(c.home(coll, id))
			p.IDs = append(p.IDs, id)
		}
		for _, r := range e.Points {
			p := part(c.home(coll, r.ID))
			p.Points = append(p.Points, r)
		}
		if !e.Filter.Empty() {
			for _, name := range filtered {
				part(name).Filter = e.Filter
			}
		}
		for name, p := range parts {
			out[name] = append(out[name], *p)
		}
	}
	return out
}

// mustExist refuses edits naming ids that are not stored (when stored
// first by an upsert before them in the list, they need not be; when
// deleted by id before them, they are refused here, before any shard
// applies its share). A read that fails, or more than MaxRetrieve ids,
// leaves the check to the shards; so does a delete by filter before the
// edit, which only the shard can evaluate.
func (c *Coordinator) mustExist(ctx context.Context, coll Collection, edits []Edit) error {
	created, gone, seen := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var ids []string
	var missing string
	need := func(id string) {
		switch {
		case created[id]:
		case gone[id]:
			if missing == "" {
				missing = id
			}
		case !seen[id]:
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, e := range edits {
		switch e.Kind {
		case EditUpsert:
			for _, r := range e.Points {
				created[r.ID], gone[r.ID] = true, false
			}
		case EditDelete:
			for _, id := range e.IDs {
				created[id], gone[id] = false, true
			}
		case EditUpdateVectors:
			for _, r := range e.Points {
				need(r.ID)
			}
		default:
			for _, id := range e.IDs {
				need(id)
			}
		}
	}
	if missing != "" {
		return errorf(CodeNotFound, nil, "No point with id %s found", missing)
	}
	if len(ids) == 0 || len(ids) > MaxRetrieve {
		return nil
	}
	ans, err := c.Retrieve(ctx, coll, ids, budget.ForDeadline(2*time.Second))
	if err != nil {
		return nil
	}
	found := map[string]bool{}
	for _, d := range ans.Docs {
		found[d.ID] = true
	}
	for _, id := range ids {
		if !found[id] {
			return errorf(CodeNotFound, nil, "No point with id %s found", id)
		}
	}
	return nil
}

// editAt is one shard's share of an Edit. A SLOT_MOVED refusal applied
// nothing: the share's filters are sent again to the same shard, and its
// ids to their homes under the newer map, as in removeFrom.
func (c *Coordinator) editAt(ctx context.Context, coll Collection, name string, edits []Edit) ShardWrite {
	var pause time.Duration
	for {
		pb, err := editsPB(coll, edits)
		if err != nil {
			return ShardWrite{Shard: name, Outcome: fanout.WriteFailed, Err: errorf(CodeInternal, err, "%v", err)}
		}
		p := c.writePlacement(coll, name)
		wr := fanout.Write(ctx, c.cluster, name, func(ctx context.Context, r *client.Conn) error {
			ack, err := r.In(coll.ref()).Edit(ctx, p, pb)
			if err == nil {
				c.acked(r, ack)
			}
			return err
		})
		res := editResult(name, wr)
		if moved, _ := slotMoved(wr.Err); !moved {
			return ShardWrite{Shard: name, Outcome: res.Outcome, Err: res.Err}
		}
		var ok bool
		if coll, ok = c.rerouted(ctx, coll, &pause); !ok {
			return ShardWrite{Shard: name, Outcome: res.Outcome, Err: res.Err}
		}
		shares := c.splitEdits(coll, edits, []string{name})
		for h, share := range shares {
			if h == name {
				continue
			}
			if w := c.editAt(ctx, coll, h, share); w.Err != nil {
				return ShardWrite{Shard: name, Outcome: w.Outcome, Err: w.Err}
			}
		}
		if edits = shares[name]; len(edits) == 0 {
			return ShardWrite{Shard: name, Outcome: fanout.WriteOK}
		}
	}
}

// editResult is writeResult for an edit, whose shard refusals of the
// edits themselves are the client's to fix: an id that is not stored
// (404) or a payload an edit would leave over the limits (400).
func editResult(name string, wr fanout.WriteResult) WriteResult {
	if wr.Outcome == fanout.WriteFailed {
		msg := status.Convert(wr.Err).Message()
		switch status.Code(wr.Err) {
		case codes.NotFound:
			return WriteResult{Outcome: fanout.WriteFailed, Err: errorf(CodeNotFound, wr.Err, "%s", msg)}
		case codes.InvalidArgument:
			return WriteResult{Outcome: fanout.WriteFailed, Err: errorf(CodeInvalid, wr.Err, "shard %s refused the edit: %s. It was not applied.", name, msg)}
		}
	}
	return writeResult(name, wr)
}

// editsPB is the wire form of a shard's share.
func editsPB(coll Collection, edits []Edit) ([]*shardpb.Edit, error) {
	out := make([]*shardpb.Edit, len(edits))
	for i, e := range edits {
		fb, err := filterBytes(coll, e.Filter)
		if err != nil {
			return nil, err
		}
		pe := &shardpb.Edit{Kind: editKindPB(e.Kind), Ids: e.IDs, Filter: fb, Payload: e.Payload, Key: e.Key, Keys: e.Keys}
		for _, r := range e.Points {
			pe.Vectors = append(pe.Vectors, &shardpb.Vector{Id: r.ID, Vector: vector.EncodeLE(r.Vector), Payload: r.Payload,
				Sparse: client.SparseToPB(r.Sparse), Named: client.NamedToPB(r.Named)})
		}
		out[i] = pe
	}
	return out, nil
}

func editKindPB(k EditKind) shardpb.EditKind {
	switch k {
	case EditUpsert:
		return shardpb.EditKind_EDIT_KIND_UPSERT
	case EditDelete:
		return shardpb.EditKind_EDIT_KIND_DELETE
	case EditSetPayload:
		return shardpb.EditKind_EDIT_KIND_SET_PAYLOAD
	case EditOverwritePayload:
		return shardpb.EditKind_EDIT_KIND_OVERWRITE_PAYLOAD
	case EditDeletePayload:
		return shardpb.EditKind_EDIT_KIND_DELETE_PAYLOAD
	case EditClearPayload:
		return shardpb.EditKind_EDIT_KIND_CLEAR_PAYLOAD
	case EditUpdateVectors:
		return shardpb.EditKind_EDIT_KIND_UPDATE_VECTORS
	case EditDeleteVectors:
		return shardpb.EditKind_EDIT_KIND_DELETE_VECTORS
	}
	return shardpb.EditKind_EDIT_KIND_UNSPECIFIED
}
