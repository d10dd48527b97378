package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
)

// score encodes a float32 with the fewest digits that round-trip, instead
// of the float64 expansion encoding/json would print.
type score float32

// A dot product of large finite vectors can overflow float32; JSON has no
// Infinity, so such a score saturates at ±MaxFloat32 (it still ranks first
// or last, which is what it means). NaN scores never reach here: top-k drops
// them.
func (s score) MarshalJSON() ([]byte, error) {
	f := float64(s)
	if math.IsInf(f, 0) {
		f = math.Copysign(math.MaxFloat32, f)
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 32), nil
}

type item struct {
	ID    string `json:"id"`
	Score score  `json:"score"`
	Shard string `json:"shard"`
	// Payload is there only when the query asked with_payload.
	Payload json.RawMessage `json:"payload,omitempty"`
}

type shardDetail struct {
	Shard      string  `json:"shard"`
	Status     string  `json:"status"`
	Replica    string  `json:"replica"`
	LatencyMS  float64 `json:"latency_ms"`
	Hedged     bool    `json:"hedged"`
	FailedOver bool    `json:"failed_over"`
}

type scatterGather struct {
	Degraded          bool              `json:"degraded"`
	ShardsTotal       int               `json:"shards_total"`
	ShardsQueried     int               `json:"shards_queried"`
	UnavailableShards []string          `json:"unavailable_shards"`
	ShardErrors       map[string]string `json:"shard_errors"`
	Coverage          float64           `json:"coverage"`
	Exact             bool              `json:"exact"`
	ElapsedMS         int64             `json:"elapsed_ms"`
	DeadlineMS        int64             `json:"deadline_ms"`
	ShardDeadlineMS   int64             `json:"shard_deadline_ms"`
	Shards            []shardDetail     `json:"shards,omitempty"`
}

type searchResponse struct {
	Items         []item        `json:"items"`
	ScatterGather scatterGather `json:"scatter_gather"`
}

type batchResult struct {
	Items []item `json:"items"`
}

type batchResponse struct {
	Results       []batchResult `json:"results"`
	ScatterGather scatterGather `json:"scatter_gather"`
}

func newScatterGather(ans coordinator.Answer, detail bool) scatterGather {
	sum := ans.Summary
	sg := scatterGather{
		Degraded:          sum.Degraded(),
		ShardsTotal:       sum.ShardsTotal,
		ShardsQueried:     sum.ShardsQueried,
		UnavailableShards: sum.Unavailable,
		ShardErrors:       make(map[string]string, len(sum.ShardErrors)),
		Coverage:          sum.Coverage,
		Exact:             ans.Exact,
		ElapsedMS:         sum.Elapsed.Milliseconds(),
		DeadlineMS:        sum.Deadline.Milliseconds(),
		ShardDeadlineMS:   sum.ShardDeadline.Milliseconds(),
	}
	for name, reason := range sum.ShardErrors {
		sg.ShardErrors[name] = string(reason)
	}
	if detail {
		sg.Shards = make([]shardDetail, len(ans.Shards))
		for i, r := range ans.Shards {
			sg.Shards[i] = shardDetail{Shard: r.Shard, Status: r.Status, Replica: r.Replica,
				LatencyMS: float64(r.Latency.Microseconds()) / 1000, Hedged: r.Hedged, FailedOver: r.FailedOver}
		}
	}
	return sg
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
		return fanoutParams{}, invalid(err.Error())
	}
	p := fanoutParams{budget: b}
	switch v := q.Get("shard_detail"); v {
	case "", "false":
	case "true":
		p.detail = true
	default:
		return fanoutParams{}, invalid(fmt.Sprintf("shard_detail is %q, want true or false", v))
	}
	return p, nil
}

// fail writes err: a requestError as itself, a coordinator error with the
// status its code maps to, anything else as a 500 that says no more than it
// must.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var re *requestError
	if errors.As(err, &re) {
		writeError(w, re.status, re.code, re.msg)
		return
	}
	var ce *coordinator.Error
	if errors.As(err, &ce) && ce.Code != coordinator.CodeInternal {
		st, code := statusOf(ce.Code)
		writeError(w, st, code, ce.Msg)
		return
	}
	s.cfg.Logger.ErrorContext(r.Context(), "internal error", "err", err)
	writeError(w, http.StatusInternalServerError, codeInternal, err.Error())
}

// statusOf maps a coordinator error code to the HTTP status and error code
// of the contract.
func statusOf(c coordinator.Code) (int, string) {
	switch c {
	case coordinator.CodeNotFound:
		return http.StatusNotFound, codeNotFound
	case coordinator.CodeUnavailable:
		return http.StatusServiceUnavailable, codeUnavailable
	case coordinator.CodeConflict:
		return http.StatusConflict, codeConflict
	case coordinator.CodeOutcomeUnknown:
		return http.StatusBadGateway, codeUnknown
	}
	return http.StatusInternalServerError, codeInternal
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
		s.fail(w, r, err)
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	qs, allowPartial, err := decode(body, schema(s.cfg.Coordinator.Schema()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	permit := s.admit(w, len(qs), p.budget.Deadline)
	if permit == nil {
		return
	}
	ans, err := s.cfg.Coordinator.Search(r.Context(), coordinator.Search{
		Path: path, Queries: qs, Budget: p.budget, AllowPartial: allowPartial,
	})
	permit.Done(time.Since(arrived), late(ans.Summary))
	if err != nil && ans.Summary.ShardsTotal == 0 {
		s.fail(w, r, err) // failed before the fan-out: a like_id lookup
		return
	}
	sg := newScatterGather(ans, p.detail)
	w.Header().Set("X-Trawl-Degraded", strconv.FormatBool(sg.Degraded))
	if err != nil {
		st, code := statusOf(coordinator.CodeOf(err))
		writeJSON(w, st, errorResponse{Error: errorBody{Code: code, Message: err.Error()}, ScatterGather: &sg})
		return
	}
	if path == fanout.PathSearch {
		writeJSON(w, http.StatusOK, searchResponse{Items: items(ans.Hits[0]), ScatterGather: sg})
		return
	}
	out := batchResponse{Results: make([]batchResult, len(ans.Hits)), ScatterGather: sg}
	for i, hs := range ans.Hits {
		out.Results[i] = batchResult{Items: items(hs)}
	}
	writeJSON(w, http.StatusOK, out)
}

// late reports whether a fan-out ran out of time: a shard missed its
// deadline, or the whole answer took longer than the deadline.
func late(sum fanout.Summary) bool {
	for _, reason := range sum.ShardErrors {
		if reason == fanout.ReasonDeadline {
			return true
		}
	}
	return sum.Deadline > 0 && sum.Elapsed > sum.Deadline
}

func items(hs []coordinator.Hit) []item {
	out := make([]item, len(hs))
	for i, h := range hs {
		out[i] = item{ID: h.ID, Score: score(h.Score), Shard: h.Shard, Payload: h.Payload}
	}
	return out
}
