package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
)

type item struct {
	ID    string     `json:"id"`
	Score wire.Score `json:"score"`
	Shard string     `json:"shard"`
	// Payload is there only when the query asked with_payload.
	Payload json.RawMessage `json:"payload,omitempty"`
}

type searchResponse struct {
	Items         []item             `json:"items"`
	ScatterGather wire.ScatterGather `json:"scatter_gather"`
}

type batchResult struct {
	Items []item `json:"items"`
}

type batchResponse struct {
	Results       []batchResult      `json:"results"`
	ScatterGather wire.ScatterGather `json:"scatter_gather"`
}

// fanoutParams are the query-string parameters of both search paths.
type fanoutParams struct {
	budget budget.Budget
	detail bool
}

func (s *Server) params(r *http.Request) (fanoutParams, error) {
	q := r.URL.Query()
	b, err := budget.Resolve(s.cfg.Budget, q["deadline_ms"])
	if err != nil {
		return fanoutParams{}, wire.Invalid(err.Error())
	}
	detail, err := httpx.BoolParam(q, "shard_detail", false)
	return fanoutParams{budget: b, detail: detail}, err
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	s.runSearch(w, r, fanout.PathSearch, func(b []byte, sch schema) ([]query, bool, error) {
		q, allowPartial, err := decodeSearch(b, sch)
		return []query{q}, allowPartial, err
	})
}

func (s *Server) searchBatch(w http.ResponseWriter, r *http.Request) {
	s.runSearch(w, r, fanout.PathSearchBatch, decodeBatch)
}

// runSearch is both search paths: parameters, body, decode, the
// coordinator's search, and the answer in the path's shape.
func (s *Server) runSearch(w http.ResponseWriter, r *http.Request, path fanout.Path, decode func([]byte, schema) ([]query, bool, error)) {
	// The limiter learns from the whole time a query spent in the router,
	// body and decode included: under CPU pressure that part grows first.
	arrived := time.Now()
	p, err := s.params(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	body, err := s.http.ReadBody(w, r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	coll, err := s.collection(r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	qs, allowPartial, err := decode(body, coll.Schema())
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	permit := s.http.Admit(w, r, len(qs), p.budget.Deadline)
	if permit == nil {
		return
	}
	ans, err := s.cfg.Coordinator.Search(r.Context(), coordinator.Search{
		Collection: coll, Path: path, Queries: qs, Budget: p.budget, AllowPartial: allowPartial,
	})
	permit.Done(time.Since(arrived), wire.Late(ans.Summary))
	if err != nil && ans.Summary.ShardsTotal == 0 {
		s.http.Fail(w, r, err, nil) // failed before the fan-out: a like_id lookup
		return
	}
	sg := wire.NewScatterGather(ans, p.detail)
	if err != nil {
		s.http.Fail(w, r, err, &sg)
		return
	}
	wire.SetDegraded(w, sg)
	if path == fanout.PathSearch {
		wire.WriteJSON(w, http.StatusOK, searchResponse{Items: items(ans.Hits[0]), ScatterGather: sg})
		return
	}
	out := batchResponse{Results: make([]batchResult, len(ans.Hits)), ScatterGather: sg}
	for i, hs := range ans.Hits {
		out.Results[i] = batchResult{Items: items(hs)}
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

func items(hs []coordinator.Hit) []item {
	out := make([]item, len(hs))
	for i, h := range hs {
		out[i] = item{ID: h.ID, Score: wire.Score(h.Score), Shard: h.Shard, Payload: h.Payload}
	}
	return out
}
