package qdrant

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
)

// scoredPoint is Qdrant's ScoredPoint. trawl keeps no point versions, so
// version is 0.
type scoredPoint struct {
	ID      pointID         `json:"id"`
	Version uint64          `json:"version"`
	Score   wire.Score      `json:"score"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Vector is as record's, left out when not asked.
	Vector any `json:"vector,omitempty"`
}

func (h *Handler) searchPoints(w http.ResponseWriter, r *http.Request) {
	h.runSearch(w, r, fanout.PathSearch, func(b []byte, sch coordinator.Schema) ([]query, error) {
		q, err := decodeSearch(b, sch)
		return []query{q}, err
	}, func(lists [][]scoredPoint) any { return lists[0] })
}

func (h *Handler) searchBatch(w http.ResponseWriter, r *http.Request) {
	h.runSearch(w, r, fanout.PathSearchBatch, decodeSearchBatch, func(lists [][]scoredPoint) any { return lists })
}

// recommendPoints is the legacy points/recommend: a recommendation
// answered as search answers, a list of ScoredPoint.
func (h *Handler) recommendPoints(w http.ResponseWriter, r *http.Request) {
	h.runSearch(w, r, fanout.PathSearch, func(b []byte, sch coordinator.Schema) ([]query, error) {
		q, err := decodeRecommend(b, sch)
		return []query{q}, err
	}, func(lists [][]scoredPoint) any { return lists[0] })
}

// recommendBatch is the legacy points/recommend/batch: {"searches":
// [RecommendRequest, ...]} in one fan-out.
func (h *Handler) recommendBatch(w http.ResponseWriter, r *http.Request) {
	h.runSearch(w, r, fanout.PathSearchBatch, func(b []byte, sch coordinator.Schema) ([]query, error) {
		return decodeBatch(b, sch, decodeRecommend)
	}, func(lists [][]scoredPoint) any { return lists })
}

func (h *Handler) queryPoints(w http.ResponseWriter, r *http.Request) {
	h.runSearch(w, r, fanout.PathSearch, func(b []byte, sch coordinator.Schema) ([]query, error) {
		q, err := decodeQuery(b, sch)
		return []query{q}, err
	}, func(lists [][]scoredPoint) any { return map[string][]scoredPoint{"points": lists[0]} })
}

// queryBatch is points/query/batch: the queries of points/query in one
// fan-out, answered as Qdrant's list of QueryResponse.
func (h *Handler) queryBatch(w http.ResponseWriter, r *http.Request) {
	h.runSearch(w, r, fanout.PathSearchBatch, decodeQueryBatch, func(lists [][]scoredPoint) any {
		out := make([]map[string][]scoredPoint, len(lists))
		for i, l := range lists {
			out[i] = map[string][]scoredPoint{"points": l}
		}
		return out
	})
}

// runSearch is search, batch search, query and batch query: the same
// coordinator.Search as /v1/search and /v1/search/batch, answered in
// Qdrant's shapes.
func (h *Handler) runSearch(w http.ResponseWriter, r *http.Request, path fanout.Path,
	decode func([]byte, coordinator.Schema) ([]query, error), shape func([][]scoredPoint) any) {
	arrived := time.Now()
	qqs, p, ok := decodeRequest(h, w, r, func(b []byte) ([]query, error) { return decode(b, schema(r)) })
	if !ok {
		return
	}
	permit := h.http.Admit(w, r, len(qqs), p.budget.Deadline)
	if permit == nil {
		return
	}
	qs := make([]coordinator.Query, len(qqs))
	for i, q := range qqs {
		qs[i] = q.q
	}
	ans, err := h.search(r.Context(), coordinator.Search{Collection: coll(r), Path: path, Queries: qs, Budget: p.budget, AllowPartial: p.allowPartial}, qqs)
	permit.Done(time.Since(arrived), wire.Late(ans.Summary))
	if err != nil && ans.Summary.ShardsTotal == 0 {
		if coordinator.CodeOf(err) == coordinator.CodeNotFound {
			err = &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: err.Error()} // query by an id not stored
		}
		h.http.Fail(w, r, err, nil)
		return
	}
	sg := wire.NewScatterGather(ans, p.detail)
	if err != nil {
		h.http.Fail(w, r, err, &sg)
		return
	}
	lists := make([][]scoredPoint, len(ans.Hits))
	for i, hs := range ans.Hits {
		hs = hs[min(qqs[i].offset, len(hs)):]
		lists[i] = make([]scoredPoint, len(hs))
		for j, hit := range hs {
			pl, err := qdrantx.StripKeys(hit.Payload, qqs[i].exclude)
			if err != nil {
				h.http.Fail(w, r, err, &sg)
				return
			}
			lists[i][j] = scoredPoint{ID: pointID(hit.ID), Score: wire.Score(hit.Score), Payload: pl, Vector: hitVectors(schema(r), hit)}
		}
	}
	answer(w, r, shape(lists), &sg)
}

// search runs s, or, when a query has prefetches, the whole batch as
// query trees (a plain query a tree of one stage).
func (h *Handler) search(ctx context.Context, s coordinator.Search, qqs []query) (coordinator.Answer, error) {
	if !slices.ContainsFunc(qqs, func(q query) bool { return q.tree != nil }) {
		return h.cfg.Coordinator.Search(ctx, s)
	}
	trees := make([]coordinator.Stage, len(qqs))
	for i, q := range qqs {
		trees[i] = coordinator.Stage{Query: q.q}
		if q.tree != nil {
			trees[i] = *q.tree
		}
	}
	return h.cfg.Coordinator.Query(ctx, coordinator.QuerySearch{Collection: s.Collection, Path: s.Path, Trees: trees, Budget: s.Budget, AllowPartial: s.AllowPartial})
}

// gather is the fan-out step every Qdrant read of one unit of work
// shares: admission, the call, its scatter_gather. It reports false once
// it has answered (refused, or the call failed: the error with the
// scatter_gather of what was asked).
func (h *Handler) gather(w http.ResponseWriter, r *http.Request, p routeParams,
	call func(context.Context) (fanout.Summary, []coordinator.ShardReport, error)) (wire.ScatterGather, bool) {
	start := time.Now()
	permit := h.http.Admit(w, r, 1, p.budget.Deadline)
	if permit == nil {
		return wire.ScatterGather{}, false
	}
	sum, shards, err := call(r.Context())
	permit.Done(time.Since(start), wire.Late(sum))
	sg := wire.NewScatterGather(coordinator.Answer{Summary: sum, Shards: shards, Exact: true}, p.detail)
	if err != nil {
		h.http.Fail(w, r, err, &sg)
		return sg, false
	}
	return sg, true
}

// countPoints counts the points f matches (all when nil) through
// gather.
func (h *Handler) countPoints(w http.ResponseWriter, r *http.Request, p routeParams, f *filter.Filter) (uint64, wire.ScatterGather, bool) {
	var n uint64
	sg, ok := h.gather(w, r, p, func(ctx context.Context) (fanout.Summary, []coordinator.ShardReport, error) {
		ans, err := h.cfg.Coordinator.Count(ctx, coll(r), f, p.budget, p.allowPartial)
		n = ans.Count
		return ans.Summary, ans.Shards, err
	})
	return n, sg, ok
}

func (h *Handler) count(w http.ResponseWriter, r *http.Request) {
	f, p, ok := decodeRequest(h, w, r, decodeCount)
	if !ok {
		return
	}
	n, sg, ok := h.countPoints(w, r, p, f)
	if !ok {
		return
	}
	answer(w, r, map[string]uint64{"count": n}, &sg)
}

func (h *Handler) scroll(w http.ResponseWriter, r *http.Request) {
	qs, p, ok := decodeRequest(h, w, r, decodeScroll)
	if !ok {
		return
	}
	qs.s.Budget, qs.s.AllowPartial = p.budget, p.allowPartial
	var ans coordinator.ScrollAnswer
	sg, ok := h.gather(w, r, p, func(ctx context.Context) (fanout.Summary, []coordinator.ShardReport, error) {
		var err error
		qs.s.Collection = coll(r)
		ans, err = h.cfg.Coordinator.Scroll(ctx, qs.s)
		return ans.Summary, ans.Shards, err
	})
	if !ok {
		return
	}
	type scrollResult struct {
		Points         []record `json:"points"`
		NextPageOffset *pointID `json:"next_page_offset"`
	}
	out := scrollResult{Points: make([]record, len(ans.Points))}
	for i, pt := range ans.Points {
		var vec any
		if pt.Vector != nil {
			vec = vectorsOut(schema(r), pt.Vector, pt.Sparse, pt.Named)
		}
		rec, err := toRecord(pt.ID, pt.Payload, vec, qs.s.WithPayload != nil, qs.exclude)
		if err != nil {
			h.http.Fail(w, r, err, &sg)
			return
		}
		if qs.s.OrderBy != nil {
			rec.OrderValue = pt.OrderValue
			if pt.OrderInt {
				rec.OrderValue = int64(pt.OrderValue)
			}
		}
		out.Points[i] = rec
	}
	if ans.HasNext {
		next := pointID(ans.Next)
		out.NextPageOffset = &next
	}
	answer(w, r, out, &sg)
}
