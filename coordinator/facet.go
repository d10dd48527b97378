package coordinator

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// MaxFacetLimit is the most values a Facet returns.
const MaxFacetLimit = 10000

// Facet asks for the Limit values of payload key Key held by the most
// documents Filter matches (nil: all).
type Facet struct {
	Collection Collection
	Filter     *filter.Filter
	// Key is a dotted payload path with no empty segment.
	Key   string
	Limit int
	// Budget and AllowPartial as in Search.
	Budget       budget.Budget
	AllowPartial bool
}

// FacetHit is one value and how many matching documents hold it. Value
// is a string, an int64 or a bool.
type FacetHit struct {
	Value any
	Count uint64
}

// FacetAnswer is a facet's hits, by count descending then value
// ascending (strings before integers before booleans, as Qdrant orders
// its value kinds), and the fan-out's summary.
type FacetAnswer struct {
	Hits    []FacetHit
	Summary fanout.Summary
	Shards  []ShardReport
}

// Facet asks every shard for the count of every value under f.Key (each
// shard returns them all, not a top list) and sums them: each document has
// one home shard, so the sums are the exact global counts and the top
// Limit of them the exact answer, whatever the values' spread over
// shards. Errors as Search's.
func (c *Coordinator) Facet(ctx context.Context, f Facet) (FacetAnswer, error) {
	if f.Limit < 1 || f.Limit > MaxFacetLimit {
		return FacetAnswer{}, errorf(CodeInvalid, nil, "facet limit %d outside 1..%d", f.Limit, MaxFacetLimit)
	}
	if f.Key == "" || slices.Contains(strings.Split(f.Key, "."), "") {
		return FacetAnswer{}, errorf(CodeInvalid, nil, "facet key %q is not a dotted payload path", f.Key)
	}
	if f.Collection.UUIDKeys()[f.Key] {
		// Qdrant's facet over a uuid index counts each UUID once however
		// it is written; the shards count values as written.
		return FacetAnswer{}, errorf(CodeInvalid, nil,
			"facet on `%s` is not supported: it has a uuid index, whose facet counts UUIDs written differently as one value, where trawl counts values as written; declare it \"keyword\"", f.Key)
	}
	fb, err := filterBytes(f.Collection, f.Filter)
	if err != nil {
		return FacetAnswer{}, err
	}
	if err := c.unlistedError(f.Collection); err != nil {
		return FacetAnswer{}, err
	}
	req := &shardpb.FacetRequest{Filter: fb, Key: f.Key}
	// A facet counts documents: it is counted on the count path.
	freq := fanout.Request{Path: fanout.PathCount, Collection: f.Collection.Name, Start: time.Now(), Budget: f.Budget, Prefer: c.prefer}
	results, sum := gatherFresh(context.WithoutCancel(ctx), c, f.Collection, freq, func(coll Collection) fanout.Call[*client.Conn, *shardpb.FacetResponse] {
		return func(ctx context.Context, r *client.Conn) (*shardpb.FacetResponse, error) {
			rq := proto.CloneOf(req)
			rq.MinIndex = c.minIndex(r)
			resp, err := r.In(coll.ref()).Slots(c.readSlots(coll, r)).Facet(ctx, rq)
			if err == nil {
				c.served(r, rq.MinIndex)
			}
			return resp, err
		}
	})
	if name, gone := goneFrom(results); gone {
		return FacetAnswer{}, c.collectionGone(ctx, f.Collection, name)
	}
	ans := FacetAnswer{Summary: sum, Shards: reports(results)}
	for _, res := range results {
		// A shard refuses a key of too many values
		// (shard.MaxFacetValues): the request's fault, not the shard's.
		if status.Code(res.Err) == codes.InvalidArgument {
			return ans, errorf(CodeInvalid, res.Err, "%s", status.Convert(res.Err).Message())
		}
	}
	if err := refuse(sum, f.AllowPartial); err != nil {
		return ans, err
	}
	counts := map[any]uint64{}
	for _, res := range results {
		if res.Reason != "" {
			continue
		}
		for _, fc := range res.Value.GetCounts() {
			v, ok := facetValue(fc.GetValue())
			if !ok {
				return ans, errorf(CodeInternal, nil, "shard %s returned a facet value of no known kind", res.Shard)
			}
			counts[v] += fc.GetCount()
		}
	}
	hits := make([]FacetHit, 0, len(counts))
	for v, n := range counts {
		hits = append(hits, FacetHit{Value: v, Count: n})
	}
	slices.SortFunc(hits, func(a, b FacetHit) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return compareFacetValues(a.Value, b.Value)
	})
	ans.Hits = hits[:min(len(hits), f.Limit)]
	return ans, nil
}

func facetValue(v *shardpb.FacetValue) (any, bool) {
	switch x := v.GetValue().(type) {
	case *shardpb.FacetValue_Keyword:
		return x.Keyword, true
	case *shardpb.FacetValue_Integer:
		return x.Integer, true
	case *shardpb.FacetValue_Boolean:
		return x.Boolean, true
	}
	return nil, false
}

// compareFacetValues orders values as Qdrant's FacetValue does: by kind
// (string, integer, boolean), then by value (false before true).
func compareFacetValues(a, b any) int {
	kind := func(v any) int {
		switch v.(type) {
		case string:
			return 0
		case int64:
			return 1
		}
		return 2
	}
	if c := cmp.Compare(kind(a), kind(b)); c != 0 {
		return c
	}
	switch x := a.(type) {
	case string:
		return strings.Compare(x, b.(string))
	case int64:
		return cmp.Compare(x, b.(int64))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	}
	return 0
}
