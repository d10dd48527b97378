package coordinator

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/idorder"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// orderedScroll is Scroll with OrderBy: every shard lists its first Limit
// (value, id) pairs in the order asked and the router merges them. A
// page's pairs are the first Limit of the union, and each shard's first
// Limit hold every pair of its own among them, so the merge is exact.
func (c *Coordinator) orderedScroll(ctx context.Context, s Scroll, fb []byte) (ScrollAnswer, error) {
	ob := s.OrderBy
	if s.HasFrom {
		return ScrollAnswer{}, errorf(CodeInvalid, nil, "an ordered scroll has no offset: page with start_from")
	}
	if ob.Key == "" || slices.Contains(strings.Split(ob.Key, "."), "") {
		return ScrollAnswer{}, errorf(CodeInvalid, nil, "order_by key %q is not a dotted payload path", ob.Key)
	}
	if err := c.unlistedError(s.Collection); err != nil {
		return ScrollAnswer{}, err
	}
	req := &shardpb.OrderedScrollRequest{Filter: fb, Key: ob.Key, Descending: ob.Descending, StartFrom: ob.StartFrom,
		HasStartFrom: ob.HasStart, Limit: uint32(s.Limit), WithVector: s.WithVector}
	if w := s.WithPayload; w != nil {
		req.WithPayload = &shardpb.PayloadSelector{All: w.All, Keys: w.Keys}
	}
	freq := fanout.Request{Path: fanout.PathScroll, Collection: s.Collection.Name, Start: time.Now(), Budget: s.Budget, Prefer: c.prefer}
	results, sum := gatherFresh(context.WithoutCancel(ctx), c, s.Collection, freq, func(coll Collection) fanout.Call[*client.Conn, *shardpb.OrderedScrollResponse] {
		return func(ctx context.Context, r *client.Conn) (*shardpb.OrderedScrollResponse, error) {
			rq := proto.CloneOf(req)
			rq.MinIndex = c.minIndex(r)
			resp, err := r.In(coll.ref()).Slots(c.readSlots(coll, r)).OrderedScroll(ctx, rq)
			if err == nil {
				c.served(r, rq.MinIndex)
			}
			return resp, err
		}
	})
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
		for _, op := range res.Value.GetPoints() {
			p, err := listedPoint(res.Shard, op.GetPoint(), s.WithVector, s.WithPayload != nil)
			if err != nil {
				return ans, err
			}
			p.OrderValue, p.OrderInt = op.GetValue(), op.GetInteger()
			all = append(all, p)
		}
	}
	slices.SortFunc(all, func(a, b Point) int {
		c := cmp.Compare(a.OrderValue, b.OrderValue)
		if c == 0 {
			c = idorder.Compare(a.ID, b.ID)
		}
		if ob.Descending {
			return -c
		}
		return c
	})
	ans.Points = all[:min(len(all), s.Limit)]
	return ans, nil
}
