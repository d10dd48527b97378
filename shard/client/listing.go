package client

import (
	"context"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// Facet counts the values of a payload key over the documents req's
// filter matches on the replica (every value it holds, each with its
// count); req's min_index as in Search.
func (c Scoped) Facet(ctx context.Context, req *shardpb.FacetRequest) (*shardpb.FacetResponse, error) {
	req.Collection = c.ref()
	if c.slots != nil {
		req.Slots = c.slots
	}
	resp, err := c.conn.shard.Facet(ctx, req)
	return resp, shard.AsRead(shard.FromStatus(err))
}

// OrderedScroll lists a page of the replica's documents in the order of
// a payload key's numbers; req's min_index as in Search.
func (c Scoped) OrderedScroll(ctx context.Context, req *shardpb.OrderedScrollRequest) (*shardpb.OrderedScrollResponse, error) {
	req.Collection = c.ref()
	if c.slots != nil {
		req.Slots = c.slots
	}
	resp, err := c.conn.shard.OrderedScroll(ctx, req)
	return resp, shard.AsRead(shard.FromStatus(err))
}
