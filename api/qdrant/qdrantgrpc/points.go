package qdrantgrpc

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
)

// pointsService is Qdrant's Points service: writes, reads and queries of
// a collection's points (REST's /collections/{name}/points routes).
type pointsService struct {
	pb.UnimplementedPointsServer
	s *server
}

// collection checks the key's need on name, then resolves it (a name or
// an alias): NotFound in Qdrant's words, Unavailable while it is being
// created.
func (p *pointsService) collection(ctx context.Context, name string, need apikey.Access) (coordinator.Collection, error) {
	if err := p.s.permit(ctx, name, need); err != nil {
		return coordinator.Collection{}, err
	}
	return qdrantx.Resolve(ctx, p.s.cfg.Coordinator, name)
}

// Search is the legacy single search.
func (p *pointsService) Search(ctx context.Context, r *pb.SearchPoints) (*pb.SearchResponse, error) {
	lists, err := p.search(ctx, r.GetCollectionName(), r.Timeout, fanout.PathSearch, func(sch coordinator.Schema) ([]query, error) {
		q, err := decodeSearch(r, sch)
		return []query{q}, err
	})
	if err != nil {
		return nil, err
	}
	return &pb.SearchResponse{Result: lists[0], Time: elapsed(ctx)}, nil
}

// SearchBatch is the legacy batch search: one fan-out.
func (p *pointsService) SearchBatch(ctx context.Context, r *pb.SearchBatchPoints) (*pb.SearchBatchResponse, error) {
	lists, err := p.search(ctx, r.GetCollectionName(), r.Timeout, fanout.PathSearchBatch, func(sch coordinator.Schema) ([]query, error) {
		return decodeBatch(r.GetSearchPoints(), r.GetCollectionName(), "search_points", func(s *pb.SearchPoints) (query, error) { return decodeSearch(s, sch) })
	})
	if err != nil {
		return nil, err
	}
	out := &pb.SearchBatchResponse{Result: make([]*pb.BatchResult, len(lists))}
	for i, l := range lists {
		out.Result[i] = &pb.BatchResult{Result: l}
	}
	out.Time = elapsed(ctx)
	return out, nil
}

// Query is a nearest-vector query, by a vector or by a stored point's id.
func (p *pointsService) Query(ctx context.Context, r *pb.QueryPoints) (*pb.QueryResponse, error) {
	lists, err := p.search(ctx, r.GetCollectionName(), r.Timeout, fanout.PathSearch, func(sch coordinator.Schema) ([]query, error) {
		q, err := decodeQuery(r, sch)
		return []query{q}, err
	})
	if err != nil {
		return nil, err
	}
	return &pb.QueryResponse{Result: lists[0], Time: elapsed(ctx)}, nil
}

// QueryBatch is Query's requests in one fan-out.
func (p *pointsService) QueryBatch(ctx context.Context, r *pb.QueryBatchPoints) (*pb.QueryBatchResponse, error) {
	lists, err := p.search(ctx, r.GetCollectionName(), r.Timeout, fanout.PathSearchBatch, func(sch coordinator.Schema) ([]query, error) {
		return decodeBatch(r.GetQueryPoints(), r.GetCollectionName(), "query_points", func(q *pb.QueryPoints) (query, error) { return decodeQuery(q, sch) })
	})
	if err != nil {
		return nil, err
	}
	out := &pb.QueryBatchResponse{Result: make([]*pb.BatchResult, len(lists))}
	for i, l := range lists {
		out.Result[i] = &pb.BatchResult{Result: l}
	}
	out.Time = elapsed(ctx)
	return out, nil
}

// search is every query call: the same coordinator.Search as REST's
// search and query routes and /v1/search, one fan-out, its verdict in the
// trailer.
func (p *pointsService) search(ctx context.Context, name string, timeout *uint64, path fanout.Path,
	decode func(coordinator.Schema) ([]query, error)) ([][]*pb.ScoredPoint, error) {
	arrived := time.Now()
	coll, err := p.collection(ctx, name, apikey.Read)
	if err != nil {
		return nil, err
	}
	qqs, err := decode(coll.Schema())
	if err != nil {
		return nil, err
	}
	b, err := p.s.resolveBudget(ctx, timeout)
	if err != nil {
		return nil, err
	}
	partial, err := allowPartial(ctx)
	if err != nil {
		return nil, err
	}
	permit, err := p.s.admit(ctx, len(qqs), b.Deadline)
	if err != nil {
		return nil, err
	}
	qs := make([]coordinator.Query, len(qqs))
	for i, q := range qqs {
		qs[i] = q.q
	}
	var ans coordinator.Answer
	if slices.ContainsFunc(qqs, func(q query) bool { return q.tree != nil }) {
		trees := make([]coordinator.Stage, len(qqs))
		for i, q := range qqs {
			trees[i] = coordinator.Stage{Query: q.q}
			if q.tree != nil {
				trees[i] = *q.tree
			}
		}
		ans, err = p.s.cfg.Coordinator.Query(ctx, coordinator.QuerySearch{Collection: coll, Path: path, Trees: trees, Budget: b, AllowPartial: partial})
	} else {
		ans, err = p.s.cfg.Coordinator.Search(ctx, coordinator.Search{Collection: coll, Path: path, Queries: qs, Budget: b, AllowPartial: partial})
	}
	permit.Done(time.Since(arrived), wire.Late(ans.Summary))
	if ans.Summary.ShardsTotal > 0 {
		setVerdict(ctx, ans.Summary)
	}
	if err != nil {
		if ans.Summary.ShardsTotal == 0 && coordinator.CodeOf(err) == coordinator.CodeNotFound {
			// a query by an id that is not stored
			return nil, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: err.Error()}
		}
		return nil, err
	}
	lists := make([][]*pb.ScoredPoint, len(ans.Hits))
	for i, hs := range ans.Hits {
		hs = hs[min(qqs[i].offset, len(hs)):]
		lists[i] = make([]*pb.ScoredPoint, len(hs))
		for j, h := range hs {
			sp := &pb.ScoredPoint{Id: encodeID(h.ID), Score: h.Score, Vectors: vectorsOutput(coll.Schema(), h.Vector, h.Sparse, h.Named)}
			if h.Payload != nil {
				if sp.Payload, err = projectedValues(h.Payload, qqs[i].exclude); err != nil {
					return nil, err
				}
			}
			lists[i][j] = sp
		}
	}
	return lists, nil
}

// projectedValues drops the excluded keys from a payload and reads it as
// Values.
func projectedValues(payload []byte, exclude []string) (map[string]*pb.Value, error) {
	pl, err := qdrantx.StripKeys(payload, exclude)
	if err != nil {
		return nil, err
	}
	return payloadValues(pl)
}

// Count counts the points a filter matches (all without one); always
// exact.
func (p *pointsService) Count(ctx context.Context, r *pb.CountPoints) (*pb.CountResponse, error) {
	coll, err := p.collection(ctx, r.GetCollectionName(), apikey.Read)
	if err != nil {
		return nil, err
	}
	f, err := decodeCount(r)
	if err != nil {
		return nil, err
	}
	var n uint64
	err = p.gather(ctx, r.Timeout, func(ctx context.Context, call callParams) (fanout.Summary, error) {
		ans, err := p.s.cfg.Coordinator.Count(ctx, coll, f, call.b, call.partial)
		n = ans.Count
		return ans.Summary, err
	})
	if err != nil {
		return nil, err
	}
	return &pb.CountResponse{Result: &pb.CountResult{Count: n}, Time: elapsed(ctx)}, nil
}

// Scroll lists the points a filter matches in id order, a page at a time.
func (p *pointsService) Scroll(ctx context.Context, r *pb.ScrollPoints) (*pb.ScrollResponse, error) {
	coll, err := p.collection(ctx, r.GetCollectionName(), apikey.Read)
	if err != nil {
		return nil, err
	}
	sr, err := decodeScroll(r)
	if err != nil {
		return nil, err
	}
	var ans coordinator.ScrollAnswer
	err = p.gather(ctx, r.Timeout, func(ctx context.Context, call callParams) (fanout.Summary, error) {
		sr.s.Collection, sr.s.Budget, sr.s.AllowPartial = coll, call.b, call.partial
		var err error
		ans, err = p.s.cfg.Coordinator.Scroll(ctx, sr.s)
		return ans.Summary, err
	})
	if err != nil {
		return nil, err
	}
	out := &pb.ScrollResponse{Result: make([]*pb.RetrievedPoint, len(ans.Points))}
	for i, pt := range ans.Points {
		rp := &pb.RetrievedPoint{Id: encodeID(pt.ID), Vectors: vectorsOutput(coll.Schema(), pt.Vector, pt.Sparse, pt.Named)}
		if sr.s.OrderBy != nil {
			rp.OrderValue = orderValue(pt)
		}
		if sr.s.WithPayload != nil {
			if rp.Payload, err = projectedValues(pt.Payload, sr.exclude); err != nil {
				return nil, err
			}
		}
		out.Result[i] = rp
	}
	if ans.HasNext {
		out.NextPageOffset = encodeID(ans.Next)
	}
	out.Time = elapsed(ctx)
	return out, nil
}

// callParams are a read's deadline and allow_partial.
type callParams struct {
	b       budget.Budget
	partial bool
}

// gather is the fan-out step Count and Scroll share: deadline, admission,
// the call, its verdict in the trailer.
func (p *pointsService) gather(ctx context.Context, timeout *uint64, call func(context.Context, callParams) (fanout.Summary, error)) error {
	start := time.Now()
	b, err := p.s.resolveBudget(ctx, timeout)
	if err != nil {
		return err
	}
	partial, err := allowPartial(ctx)
	if err != nil {
		return err
	}
	permit, err := p.s.admit(ctx, 1, b.Deadline)
	if err != nil {
		return err
	}
	sum, err := call(ctx, callParams{b: b, partial: partial})
	permit.Done(time.Since(start), wire.Late(sum))
	if sum.ShardsTotal > 0 {
		setVerdict(ctx, sum)
	}
	return err
}

// Get reads points by id from their home shards. A read that could not
// ask a home shard is Unavailable, never an answer missing the point.
func (p *pointsService) Get(ctx context.Context, r *pb.GetPoints) (*pb.GetResponse, error) {
	coll, err := p.collection(ctx, r.GetCollectionName(), apikey.Read)
	if err != nil {
		return nil, err
	}
	req, err := decodeGet(r)
	if err != nil {
		return nil, err
	}
	b, err := p.s.resolveBudget(ctx, r.Timeout)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	permit, err := p.s.admit(ctx, 1, b.Deadline)
	if err != nil {
		return nil, err
	}
	ans, err := p.s.cfg.Coordinator.Retrieve(ctx, coll, req.ids, b)
	permit.Done(time.Since(start), false)
	if err != nil {
		return nil, err
	}
	setVerdict(ctx, ans.Summary)
	out := &pb.GetResponse{Result: make([]*pb.RetrievedPoint, 0, len(ans.Docs))}
	for _, d := range ans.Docs {
		rp := &pb.RetrievedPoint{Id: encodeID(d.ID)}
		if req.withVector {
			rp.Vectors = vectorsOutput(coll.Schema(), d.Vector, d.Sparse, d.Named)
		}
		if req.payload != nil {
			pl, err := req.payload.Project(d.Payload)
			if err != nil {
				return nil, err
			}
			if rp.Payload, err = projectedValues(pl, req.exclude); err != nil {
				return nil, err
			}
		}
		out.Result = append(out.Result, rp)
	}
	out.Time = elapsed(ctx)
	return out, nil
}

// Upsert writes points, all or nothing on validation, answered once
// committed (so wait false is answered Completed too).
func (p *pointsService) Upsert(ctx context.Context, r *pb.UpsertPoints) (*pb.PointsOperationResponse, error) {
	coll, err := p.collection(ctx, r.GetCollectionName(), apikey.Write)
	if err != nil {
		return nil, err
	}
	recs, err := decodeUpsert(r, coll.Schema())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	permit, err := p.s.admit(ctx, 1, 0)
	if err != nil {
		return nil, err
	}
	results := p.s.cfg.Coordinator.Upsert(ctx, coll, recs)
	permit.Done(time.Since(start), false)
	var errs []*coordinator.Error
	var failed []string
	for _, res := range results {
		if res.Err != nil {
			errs = append(errs, res.Err)
			if len(failed) == 0 || failed[len(failed)-1] != res.Err.Msg {
				failed = append(failed, res.Err.Msg)
			}
		}
	}
	if len(errs) > 0 {
		return nil, &wire.Error{Status: wire.WriteStatus(errs), Msg: fmt.Sprintf("%d of %d points were not written: %s",
			len(errs), len(results), strings.Join(dedupe(failed), " "))}
	}
	return completed(ctx), nil
}

// Delete deletes points by ids or by a filter.
func (p *pointsService) Delete(ctx context.Context, r *pb.DeletePoints) (*pb.PointsOperationResponse, error) {
	coll, err := p.collection(ctx, r.GetCollectionName(), apikey.Write)
	if err != nil {
		return nil, err
	}
	rm, err := decodeDelete(r)
	if err != nil {
		return nil, err
	}
	rm.Collection = coll
	start := time.Now()
	permit, err := p.s.admit(ctx, 1, 0)
	if err != nil {
		return nil, err
	}
	results, err := p.s.cfg.Coordinator.Remove(ctx, rm)
	permit.Done(time.Since(start), false)
	if err != nil {
		return nil, err
	}
	if werr := qdrantx.RemoveFailure(results); werr != nil {
		return nil, werr
	}
	return completed(ctx), nil
}

// CreateFieldIndex declares a payload index: recorded, changing no answer
// (the shards index every payload key).
func (p *pointsService) CreateFieldIndex(ctx context.Context, r *pb.CreateFieldIndexCollection) (*pb.PointsOperationResponse, error) {
	coll, err := p.collection(ctx, r.GetCollectionName(), apikey.Write)
	if err != nil {
		return nil, err
	}
	field, schema, err := decodeFieldIndex(r)
	if err != nil {
		return nil, err
	}
	if err := p.s.cfg.Coordinator.SetPayloadIndex(ctx, coll, field, schema); err != nil {
		return nil, err
	}
	return completed(ctx), nil
}

// DeleteFieldIndex removes a declaration (one never made too).
func (p *pointsService) DeleteFieldIndex(ctx context.Context, r *pb.DeleteFieldIndexCollection) (*pb.PointsOperationResponse, error) {
	coll, err := p.collection(ctx, r.GetCollectionName(), apikey.Write)
	if err != nil {
		return nil, err
	}
	if err := p.s.cfg.Coordinator.DropPayloadIndex(ctx, coll, r.GetFieldName()); err != nil {
		return nil, err
	}
	return completed(ctx), nil
}

// completed is a write's answer. operation_id is unset: a write spans
// shards, each with its own log, so there is no one operation number.
func completed(ctx context.Context) *pb.PointsOperationResponse {
	return &pb.PointsOperationResponse{Result: &pb.UpdateResult{Status: pb.UpdateStatus_Completed}, Time: elapsed(ctx)}
}

// dedupe drops repeated messages, keeping the first of each.
func dedupe(msgs []string) []string {
	seen := map[string]bool{}
	out := msgs[:0]
	for _, m := range msgs {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}
