package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/idorder"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// MaxScrollLimit is the largest page a Scroll returns (the shard's page
// limit less the id that says where the next page starts).
const MaxScrollLimit = shard.MaxScrollLimit - 1

// Scroll is one listing: the documents Filter matches (nil: all), in id
// order (package idorder), from the id From on (inclusive, when HasFrom),
// Limit of them (1..MaxScrollLimit).
type Scroll struct {
	Collection  Collection
	Filter      *filter.Filter
	From        string
	HasFrom     bool
	Limit       int
	WithPayload *PayloadSelection
	WithVector  bool
	Budget      budget.Budget
	// AllowPartial false refuses a degraded answer.
	AllowPartial bool
	// OrderBy, when set, lists in the order of a payload key's numbers
	// instead of by id (From must then be unset): see OrderBy.
	OrderBy *OrderBy
}

// OrderBy orders a listing by the numbers at a payload key (Qdrant's
// order_by): a document is listed once for each number it holds there
// (each element of an array of numbers), one holding none is left out;
// equal values are ordered by id, in the listing's direction. The page
// is the first Limit of these; there is no next page offset (as Qdrant:
// page on with StartFrom and a filter).
type OrderBy struct {
	// Key is a dotted payload path with no empty segment.
	Key        string
	Descending bool
	// StartFrom, when HasStart, keeps values at or after it in the
	// listing's direction (>= ascending, <= descending).
	StartFrom float64
	HasStart  bool
}

// Point is one listed document.
type Point struct {
	ID    string
	Shard string
	// Vector is set only when asked (WithVector); Payload only when asked
	// (WithPayload), "{}" for a document without one.
	Vector  []float32
	Payload []byte
	// Sparse are its sparse vectors, when asked (WithVector).
	Sparse map[string]sparsevec.Vector
	// Named are its named dense vectors, when asked (WithVector).
	Named map[string][]float32
	// OrderValue is the number it was listed by (Scroll.OrderBy);
	// OrderInt says the payload held it as an integer.
	OrderValue float64
	OrderInt   bool
}

// ScrollAnswer is a page: its points in id order, where the next page
// starts (HasNext false: this was the last page of the shards that
// answered), and the fan-out's summary. When a shard is missing the page
// is the answering shards' (Summary says which are missing).
type ScrollAnswer struct {
	Points  []Point
	Next    string
	HasNext bool
	Summary fanout.Summary
	Shards  []ShardReport
}

// Scroll asks every shard for its first Limit+1 matching ids from From on
// and merges them into the global page; the extra id is where the next
// page starts. Errors as Search's.
func (c *Coordinator) Scroll(ctx context.Context, s Scroll) (ScrollAnswer, error) {
	if s.Limit < 1 || s.Limit > MaxScrollLimit {
		return ScrollAnswer{}, fmt.Errorf("scroll limit %d outside 1..%d", s.Limit, MaxScrollLimit)
	}
	fb, err := filterBytes(s.Collection, s.Filter)
	if err != nil {
		return ScrollAnswer{}, err
	}
	if s.OrderBy != nil {
		return c.orderedScroll(ctx, s, fb)
	}
	req := &shardpb.ScrollRequest{Filter: fb, From: s.From, HasFrom: s.HasFrom, Limit: uint32(s.Limit + 1), WithVector: s.WithVector}
	if w := s.WithPayload; w != nil {
		req.WithPayload = &shardpb.PayloadSelector{All: w.All, Keys: w.Keys}
	}
	if err := c.unlistedError(s.Collection); err != nil {
		return ScrollAnswer{}, err
	}
	results, sum := c.scroll(ctx, s.Collection, fanout.PathScroll, s.Budget, req)
	if name, gone := goneFrom(results); gone {
		return ScrollAnswer{}, c.collectionGone(ctx, s.Collection, name)
	}
	ans := ScrollAnswer{Summary: sum, Shards: reports(results)}
	if err := refuse(sum, s.AllowPartial); err != nil {
		return ans, err
	}
	var all []Point
	for _, res := range results {
		if res.Reason != "" {
			continue
		}
		for _, pv := range res.Value.GetPoints() {
			p, err := listedPoint(res.Shard, pv, s.WithVector, s.WithPayload != nil)
			if err != nil {
				return ans, err
			}
			all = append(all, p)
		}
	}
	// Each shard's page is sorted and ids are unique across shards (each
	// has one home), so a sort of at most shards·(Limit+1) ids is the
	// merge.
	slices.SortFunc(all, func(a, b Point) int { return idorder.Compare(a.ID, b.ID) })
	if len(all) > s.Limit {
		ans.Next, ans.HasNext = all[s.Limit].ID, true
		all = all[:s.Limit]
	}
	ans.Points = all
	return ans, nil
}

// CountAnswer is how many documents a filter matches on the shards that
// answered, and the fan-out's summary: a count missing a shard is
// degraded, and says so.
type CountAnswer struct {
	Count   uint64
	Summary fanout.Summary
	Shards  []ShardReport
}

// Count counts the documents f matches (nil: every document) on every
// shard. Errors as Search's.
func (c *Coordinator) Count(ctx context.Context, coll Collection, f *filter.Filter, b budget.Budget, allowPartial bool) (CountAnswer, error) {
	fb, err := filterBytes(coll, f)
	if err != nil {
		return CountAnswer{}, err
	}
	if err := c.unlistedError(coll); err != nil {
		return CountAnswer{}, err
	}
	results, sum := c.scroll(ctx, coll, fanout.PathCount, b, &shardpb.ScrollRequest{Filter: fb})
	if name, gone := goneFrom(results); gone {
		return CountAnswer{}, c.collectionGone(ctx, coll, name)
	}
	ans := CountAnswer{Summary: sum, Shards: reports(results)}
	if err := refuse(sum, allowPartial); err != nil {
		return ans, err
	}
	for _, res := range results {
		if res.Reason == "" {
			ans.Count += res.Value.GetCount()
		}
	}
	return ans, nil
}

// scroll fans req out to every shard, each replica asked with its shard's
// acknowledged index (read-after-write).
func (c *Coordinator) scroll(ctx context.Context, coll Collection, path fanout.Path, b budget.Budget, req *shardpb.ScrollRequest) ([]fanout.Result[*shardpb.ScrollResponse], fanout.Summary) {
	freq := fanout.Request{Path: path, Collection: coll.Name, Start: time.Now(), Budget: b, Prefer: c.prefer}
	// As Search: the client leaving does not cut the fan-out short.
	return gatherFresh(context.WithoutCancel(ctx), c, coll, freq, func(coll Collection) fanout.Call[*client.Conn, *shardpb.ScrollResponse] {
		return func(ctx context.Context, r *client.Conn) (*shardpb.ScrollResponse, error) {
			rq := proto.CloneOf(req) // each replica its own min_index
			rq.MinIndex = c.minIndex(r)
			resp, err := r.In(coll.ref()).Slots(c.readSlots(coll, r)).Scroll(ctx, rq)
			if err == nil {
				c.served(r, rq.MinIndex)
			}
			return resp, err
		}
	})
}

// filterBytes is a filter's canonical JSON as coll's shards evaluate it
// (its match conditions on keys declared uuid compare UUIDs, its text
// matches on keys declared text match tokens: Collection.shardFilter),
// nil for none: what shards parse.
func filterBytes(coll Collection, f *filter.Filter) ([]byte, error) {
	f = coll.shardFilter(f)
	if f.Empty() {
		return nil, nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encoding a filter: %w", err)
	}
	return b, nil
}

// listedPoint is a listed document as a shard returned it: its vector
// and payload ("{}" for none) when asked.
func listedPoint(shardName string, pv *shardpb.Vector, withVector, withPayload bool) (Point, error) {
	p := Point{ID: pv.GetId(), Shard: shardName}
	if withVector {
		var err error
		if p.Vector, err = vector.DecodeLE(pv.GetVector()); err != nil {
			return Point{}, errorf(CodeInternal, err, "shard %s returned a malformed vector for %q: %v", shardName, p.ID, err)
		}
		p.Sparse = client.SparseFromPB(pv.GetSparse())
		if p.Named, err = client.NamedFromPB(pv.GetNamed()); err != nil {
			return Point{}, errorf(CodeInternal, err, "shard %s returned a malformed named vector for %q: %v", shardName, p.ID, err)
		}
	}
	if withPayload {
		p.Payload = pv.GetPayload()
		if len(p.Payload) == 0 {
			p.Payload = []byte("{}")
		}
	}
	return p, nil
}
