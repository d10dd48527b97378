package qdrant

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
)

// groupsRequest is a decoded search/groups or query/groups.
type groupsRequest struct {
	g       coordinator.GroupSearch
	exclude []string
}

// decodeGroups reads a groups request: Qdrant's SearchGroupsRequest or
// RecommendGroupsRequest (search: true; group_size and limit required)
// or QueryGroupsRequest
// (group_size 3 and limit 10 by default). The members it shares with
// search or query are decoded as those are (decode, with limit set aside:
// a group search has no offset).
func decodeGroups(b []byte, sch coordinator.Schema, search bool, decode func([]byte, coordinator.Schema) (query, error)) (groupsRequest, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil || members == nil {
		return groupsRequest{}, wire.Invalid("bad JSON: want an object")
	}
	var gb struct {
		GroupBy    *string         `json:"group_by"`
		GroupSize  *int            `json:"group_size"`
		Limit      *int            `json:"limit"`
		WithLookup json.RawMessage `json:"with_lookup"`
	}
	pick := map[string]json.RawMessage{}
	for _, k := range []string{"group_by", "group_size", "limit", "with_lookup"} {
		if v, ok := members[k]; ok {
			pick[k] = v
			delete(members, k)
		}
	}
	if _, ok := members["offset"]; ok {
		return groupsRequest{}, wire.Invalid(`bad JSON: json: unknown field "offset"`)
	}
	pb, _ := json.Marshal(pick)
	if err := wire.DecodeStrict(pb, &gb); err != nil {
		return groupsRequest{}, err
	}
	if err := refuseSet(gb.WithLookup, "with_lookup is not supported: trawl groups points of one collection"); err != nil {
		return groupsRequest{}, err
	}
	if gb.GroupBy == nil {
		return groupsRequest{}, wire.Invalid(`missing "group_by"`)
	}
	if err := qdrantx.CheckKey("group_by", *gb.GroupBy); err != nil {
		return groupsRequest{}, err
	}
	out := groupsRequest{g: coordinator.GroupSearch{GroupBy: *gb.GroupBy, GroupSize: 3, Limit: DefaultLimit}}
	switch {
	case gb.GroupSize != nil:
		out.g.GroupSize = *gb.GroupSize
	case search:
		return groupsRequest{}, wire.Invalid(`missing "group_size"`)
	}
	switch {
	case gb.Limit != nil:
		out.g.Limit = *gb.Limit
	case search:
		return groupsRequest{}, wire.Invalid(`missing "limit"`)
	}
	if out.g.GroupSize < 1 || out.g.GroupSize > coordinator.MaxGroupSize {
		return groupsRequest{}, wire.Invalid(fmt.Sprintf("group_size is %d, want 1..%d", out.g.GroupSize, coordinator.MaxGroupSize))
	}
	if out.g.Limit < 1 || out.g.Limit > coordinator.MaxGroups {
		return groupsRequest{}, wire.Invalid(fmt.Sprintf("limit is %d, want 1..%d", out.g.Limit, coordinator.MaxGroups))
	}
	members["limit"] = json.RawMessage("1") // decode's own limit, which groups do not use
	rest, _ := json.Marshal(members)
	q, err := decode(rest, sch)
	if err != nil {
		return groupsRequest{}, err
	}
	out.g.Query, out.g.Tree, out.exclude = q.q, q.tree, q.exclude
	return out, nil
}

// pointGroup is Qdrant's PointGroup.
type pointGroup struct {
	ID   any           `json:"id"`
	Hits []scoredPoint `json:"hits"`
}

func (h *Handler) searchGroups(w http.ResponseWriter, r *http.Request) {
	h.runGroups(w, r, func(b []byte, sch coordinator.Schema) (groupsRequest, error) {
		return decodeGroups(b, sch, true, decodeSearch)
	})
}

func (h *Handler) recommendGroups(w http.ResponseWriter, r *http.Request) {
	h.runGroups(w, r, func(b []byte, sch coordinator.Schema) (groupsRequest, error) {
		return decodeGroups(b, sch, true, decodeRecommend)
	})
}

func (h *Handler) queryGroups(w http.ResponseWriter, r *http.Request) {
	h.runGroups(w, r, func(b []byte, sch coordinator.Schema) (groupsRequest, error) {
		return decodeGroups(b, sch, false, decodeQuery)
	})
}

// runGroups is search/groups and query/groups: coordinator.SearchGroups,
// answered as Qdrant's {"groups": [{"id", "hits"}]}.
func (h *Handler) runGroups(w http.ResponseWriter, r *http.Request, decode func([]byte, coordinator.Schema) (groupsRequest, error)) {
	arrived := time.Now()
	gr, p, ok := decodeRequest(h, w, r, func(b []byte) (groupsRequest, error) { return decode(b, schema(r)) })
	if !ok {
		return
	}
	permit := h.http.Admit(w, r, gr.g.Limit, p.budget.Deadline)
	if permit == nil {
		return
	}
	gr.g.Collection, gr.g.Budget, gr.g.AllowPartial = coll(r), p.budget, p.allowPartial
	ans, err := h.cfg.Coordinator.SearchGroups(r.Context(), gr.g)
	permit.Done(time.Since(arrived), wire.Late(ans.Summary))
	if err != nil && ans.Summary.ShardsTotal == 0 {
		if coordinator.CodeOf(err) == coordinator.CodeNotFound {
			err = &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: err.Error()}
		}
		h.http.Fail(w, r, err, nil)
		return
	}
	sg := wire.NewScatterGather(coordinator.Answer{Summary: ans.Summary, Shards: ans.Shards, Exact: ans.Exact}, p.detail)
	if err != nil {
		h.http.Fail(w, r, err, &sg)
		return
	}
	groups := make([]pointGroup, len(ans.Groups))
	for i, g := range ans.Groups {
		groups[i] = pointGroup{ID: g.Value, Hits: make([]scoredPoint, len(g.Hits))}
		for j, hit := range g.Hits {
			pl, err := qdrantx.StripKeys(hit.Payload, gr.exclude)
			if err != nil {
				h.http.Fail(w, r, err, &sg)
				return
			}
			groups[i].Hits[j] = scoredPoint{ID: pointID(hit.ID), Score: wire.Score(hit.Score), Payload: pl, Vector: hitVectors(schema(r), hit)}
		}
	}
	answer(w, r, map[string][]pointGroup{"groups": groups}, &sg)
}
