package qdrant

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
)

// facetHit is Qdrant's FacetValueHit.
type facetHit struct {
	Value any    `json:"value"`
	Count uint64 `json:"count"`
}

// decodeFacet reads Qdrant's FacetRequest: key, filter, limit (default
// 10), exact (accepted: trawl's counts are always exact).
func decodeFacet(b []byte) (coordinator.Facet, error) {
	var req struct {
		ShardKey json.RawMessage `json:"shard_key"`
		Key      *string         `json:"key"`
		Limit    *int            `json:"limit"`
		Filter   json.RawMessage `json:"filter"`
		Exact    *bool           `json:"exact"`
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return coordinator.Facet{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return coordinator.Facet{}, err
	}
	out := coordinator.Facet{Limit: DefaultLimit}
	if req.Key == nil {
		return coordinator.Facet{}, wire.Invalid(`missing "key"`)
	}
	if err := qdrantx.CheckKey("key", *req.Key); err != nil {
		return coordinator.Facet{}, err
	}
	out.Key = *req.Key
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > coordinator.MaxFacetLimit {
			return coordinator.Facet{}, wire.Invalid(fmt.Sprintf("limit is %d, want 1..%d", *req.Limit, coordinator.MaxFacetLimit))
		}
		out.Limit = *req.Limit
	}
	var err error
	if out.Filter, err = wire.ParseFilter(req.Filter); err != nil {
		return coordinator.Facet{}, err
	}
	return out, nil
}

// facet is POST /collections/{c}/facet: the exact counts of a payload
// key's values under a filter, merged across every shard.
func (h *Handler) facet(w http.ResponseWriter, r *http.Request) {
	f, p, ok := decodeRequest(h, w, r, decodeFacet)
	if !ok {
		return
	}
	f.Collection, f.Budget, f.AllowPartial = coll(r), p.budget, p.allowPartial
	var ans coordinator.FacetAnswer
	sg, ok := h.gather(w, r, p, func(ctx context.Context) (fanout.Summary, []coordinator.ShardReport, error) {
		var err error
		ans, err = h.cfg.Coordinator.Facet(ctx, f)
		return ans.Summary, ans.Shards, err
	})
	if !ok {
		return
	}
	hits := make([]facetHit, len(ans.Hits))
	for i, hit := range ans.Hits {
		hits[i] = facetHit{Value: hit.Value, Count: hit.Count}
	}
	answer(w, r, map[string][]facetHit{"hits": hits}, &sg)
}
