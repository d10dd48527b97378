package qdrant

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
)

// scoredPoint is Qdrant's ScoredPoint. trawl keeps no point versions, so
// version is 0.
type scoredPoint struct {
	ID      qdrantID        `json:"id"`
	Version uint64          `json:"version"`
	Score   wire.Score      `json:"score"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Vector  []float32       `json:"vector,omitempty"`
}

// qdrantRecord is Qdrant's Record: payload and vector are null unless
// asked for, as Qdrant answers.
type qdrantRecord struct {
	ID      qdrantID        `json:"id"`
	Payload json.RawMessage `json:"payload"`
	Vector  []float32       `json:"vector"`
}

type updateResult struct {
	// OperationID is null: a write spans shards, each with its own log,
	// so there is no one operation number to give.
	OperationID *uint64 `json:"operation_id"`
	Status      string  `json:"status"`
}

// body reads, checks the query parameters, and returns both.
func (h *Handler) qdrantBody(w http.ResponseWriter, r *http.Request) ([]byte, qdrantParams, bool) {
	p, err := h.qdrantParams(r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return nil, p, false
	}
	b, err := h.http.ReadBody(w, r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return nil, p, false
	}
	return b, p, true
}

func (h *Handler) qdrantSearch(w http.ResponseWriter, r *http.Request) {
	h.qdrantRunSearch(w, r, fanout.PathSearch, func(b []byte, sch coordinator.Schema) ([]qQuery, error) {
		q, err := decodeQSearch(b, sch)
		return []qQuery{q}, err
	}, func(lists [][]scoredPoint) any { return lists[0] })
}

func (h *Handler) qdrantSearchBatch(w http.ResponseWriter, r *http.Request) {
	h.qdrantRunSearch(w, r, fanout.PathSearchBatch, decodeQSearchBatch, func(lists [][]scoredPoint) any { return lists })
}

func (h *Handler) qdrantQuery(w http.ResponseWriter, r *http.Request) {
	h.qdrantRunSearch(w, r, fanout.PathSearch, func(b []byte, sch coordinator.Schema) ([]qQuery, error) {
		q, err := decodeQQuery(b, sch)
		return []qQuery{q}, err
	}, func(lists [][]scoredPoint) any { return map[string][]scoredPoint{"points": lists[0]} })
}

// qdrantRunSearch is search, batch search and query: the same
// coordinator.Search as /v1/search and /v1/search/batch, answered in
// Qdrant's shapes.
func (h *Handler) qdrantRunSearch(w http.ResponseWriter, r *http.Request, path fanout.Path,
	decode func([]byte, coordinator.Schema) ([]qQuery, error), shape func([][]scoredPoint) any) {
	arrived := time.Now()
	body, p, ok := h.qdrantBody(w, r)
	if !ok {
		return
	}
	qqs, err := decode(body, h.cfg.Coordinator.Schema())
	if err != nil {
		h.http.Fail(w, r, err, nil)
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
	ans, err := h.cfg.Coordinator.Search(r.Context(), coordinator.Search{Path: path, Queries: qs, Budget: p.budget, AllowPartial: p.allowPartial})
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
			pl, err := stripKeys(hit.Payload, qqs[i].exclude)
			if err != nil {
				h.http.Fail(w, r, err, &sg)
				return
			}
			lists[i][j] = scoredPoint{ID: qdrantID(hit.ID), Score: wire.Score(hit.Score), Payload: pl, Vector: hit.Vector}
		}
	}
	qdrantResult(w, r, shape(lists), &sg)
}

func (h *Handler) qdrantScroll(w http.ResponseWriter, r *http.Request) {
	body, p, ok := h.qdrantBody(w, r)
	if !ok {
		return
	}
	qs, err := decodeQScroll(body)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	qs.s.Budget, qs.s.AllowPartial = p.budget, p.allowPartial
	var ans coordinator.ScrollAnswer
	sg, ok := h.qdrantGather(w, r, p, func(ctx context.Context) (fanout.Summary, []coordinator.ShardReport, error) {
		var err error
		ans, err = h.cfg.Coordinator.Scroll(ctx, qs.s)
		return ans.Summary, ans.Shards, err
	})
	if !ok {
		return
	}
	type scrollResult struct {
		Points         []qdrantRecord `json:"points"`
		NextPageOffset *qdrantID      `json:"next_page_offset"`
	}
	out := scrollResult{Points: make([]qdrantRecord, len(ans.Points))}
	for i, pt := range ans.Points {
		rec, err := toRecord(pt.ID, pt.Payload, pt.Vector, qs.s.WithPayload != nil, qs.exclude)
		if err != nil {
			h.http.Fail(w, r, err, &sg)
			return
		}
		out.Points[i] = rec
	}
	if ans.HasNext {
		next := qdrantID(ans.Next)
		out.NextPageOffset = &next
	}
	qdrantResult(w, r, out, &sg)
}

// toRecord builds a Record: payload (minus excluded keys) when asked, the
// vector when there is one.
func toRecord(id string, payload []byte, vec []float32, withPayload bool, exclude []string) (qdrantRecord, error) {
	rec := qdrantRecord{ID: qdrantID(id), Vector: vec}
	if withPayload {
		pl, err := stripKeys(payload, exclude)
		if err != nil {
			return qdrantRecord{}, err
		}
		rec.Payload = pl
	}
	return rec, nil
}

func (h *Handler) qdrantCount(w http.ResponseWriter, r *http.Request) {
	body, p, ok := h.qdrantBody(w, r)
	if !ok {
		return
	}
	f, err := decodeQCount(body)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	n, sg, ok := h.countPoints(w, r, p, f)
	if !ok {
		return
	}
	qdrantResult(w, r, map[string]uint64{"count": n}, &sg)
}

func (h *Handler) qdrantRetrieve(w http.ResponseWriter, r *http.Request) {
	body, p, ok := h.qdrantBody(w, r)
	if !ok {
		return
	}
	req, err := decodeQRetrieve(body)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	h.qdrantReadPoints(w, r, p, req, func(recs []qdrantRecord) any { return recs })
}

func (h *Handler) qdrantGetPoint(w http.ResponseWriter, r *http.Request) {
	raw := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(raw); err == nil {
			raw = u
		}
	}
	id, err := parsePathID(raw)
	if err != nil {
		h.http.Fail(w, r, wire.Invalid(err.Error()), nil)
		return
	}
	p, err := h.qdrantParams(r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	req := qRetrieve{ids: []string{id}, payload: &coordinator.PayloadSelection{All: true}, withVector: true}
	h.qdrantReadPoints(w, r, p, req, func(recs []qdrantRecord) any {
		if len(recs) == 0 {
			return nil
		}
		return recs[0]
	})
}

// qdrantReadPoints reads points by id from their home shards. Its
// scatter_gather counts the shards asked: a read that could not ask one
// is an error (503), never an answer missing the point.
func (h *Handler) qdrantReadPoints(w http.ResponseWriter, r *http.Request, p qdrantParams, req qRetrieve, shape func([]qdrantRecord) any) {
	start := time.Now()
	permit := h.http.Admit(w, r, 1, p.budget.Deadline)
	if permit == nil {
		return
	}
	ans, err := h.cfg.Coordinator.Retrieve(r.Context(), req.ids, p.budget)
	permit.Done(time.Since(start), false)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	recs := make([]qdrantRecord, 0, len(ans.Docs))
	for _, d := range ans.Docs {
		var pl []byte
		if req.payload != nil {
			if pl, err = req.payload.Project(d.Payload); err != nil {
				h.http.Fail(w, r, err, nil)
				return
			}
		}
		var vec []float32
		if req.withVector {
			vec = d.Vector
		}
		rec, err := toRecord(d.ID, pl, vec, req.payload != nil, req.exclude)
		if err != nil {
			h.http.Fail(w, r, err, nil)
			return
		}
		recs = append(recs, rec)
	}
	sg := wire.NewScatterGather(coordinator.Answer{Summary: ans.Summary, Exact: true}, false)
	out := shape(recs)
	if out == nil {
		h.http.Fail(w, r, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound,
			Msg: fmt.Sprintf("Point with id %s does not exists!", req.ids[0])}, &sg)
		return
	}
	qdrantResult(w, r, out, &sg)
}

func (h *Handler) qdrantUpsert(w http.ResponseWriter, r *http.Request) {
	body, _, ok := h.qdrantBody(w, r)
	if !ok {
		return
	}
	recs, err := decodeQUpsert(body, h.cfg.Coordinator.Schema())
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	start := time.Now()
	permit := h.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	results := h.cfg.Coordinator.Upsert(r.Context(), recs)
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
		h.qdrantWriteFailed(w, r, errs, fmt.Sprintf("%d of %d points were not written: %s",
			len(errs), len(results), strings.Join(dedupe(failed), " ")))
		return
	}
	// trawl acknowledges a write once it is committed and applied, so
	// even wait=false is answered completed: the weaker promise is kept
	// by the stronger one.
	qdrantResult(w, r, updateResult{Status: "completed"}, nil)
}

func (h *Handler) qdrantDelete(w http.ResponseWriter, r *http.Request) {
	body, _, ok := h.qdrantBody(w, r)
	if !ok {
		return
	}
	rm, err := decodeQDelete(body)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	start := time.Now()
	permit := h.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	results, err := h.cfg.Coordinator.Remove(r.Context(), rm)
	permit.Done(time.Since(start), false)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	var errs []*coordinator.Error
	var failed, applied []string
	for _, res := range results {
		if res.Err != nil {
			errs = append(errs, res.Err)
			failed = append(failed, res.Err.Msg)
		} else {
			applied = append(applied, res.Shard)
		}
	}
	if len(errs) > 0 {
		msg := strings.Join(failed, " ")
		if len(applied) > 0 {
			msg += fmt.Sprintf(" The delete was applied on %s.", strings.Join(applied, ", "))
		}
		h.qdrantWriteFailed(w, r, errs, msg)
		return
	}
	qdrantResult(w, r, updateResult{Status: "completed"}, nil)
}

// qdrantWriteFailed answers a write that some ids or shards failed with
// the status their errors add up to (wire.WriteStatus) and msg.
func (h *Handler) qdrantWriteFailed(w http.ResponseWriter, r *http.Request, errs []*coordinator.Error, msg string) {
	h.http.Error(w, r, &wire.Error{Status: wire.WriteStatus(errs), Msg: msg})
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
