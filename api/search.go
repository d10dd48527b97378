package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/metrics"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
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

func newScatterGather[T any](sum fanout.Summary, results []fanout.Result[T], detail bool) scatterGather {
	sg := scatterGather{
		Degraded:          sum.Degraded(),
		ShardsTotal:       sum.ShardsTotal,
		ShardsQueried:     sum.ShardsQueried,
		UnavailableShards: sum.Unavailable,
		ShardErrors:       sum.ShardErrors,
		Coverage:          sum.Coverage,
		ElapsedMS:         sum.Elapsed.Milliseconds(),
		DeadlineMS:        sum.Deadline.Milliseconds(),
		ShardDeadlineMS:   sum.ShardDeadline.Milliseconds(),
	}
	if detail {
		sg.Shards = make([]shardDetail, len(results))
		for i, r := range results {
			st := fanout.StatusOK
			if r.Reason != "" {
				st = r.Reason
			}
			sg.Shards[i] = shardDetail{Shard: r.Shard, Status: st, Replica: r.Replica,
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

// fail writes err: a requestError as itself, anything else as a 500 that
// says no more than it must.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var re *requestError
	if errors.As(err, &re) {
		writeError(w, re.status, re.code, re.msg)
		return
	}
	s.cfg.Logger.ErrorContext(r.Context(), "internal error", "err", err)
	writeError(w, http.StatusInternalServerError, codeInternal, err.Error())
}

// fanoutQuery is a search request ready to fan out: decoded, validated,
// like_id vectors resolved, its clock started.
type fanoutQuery struct {
	params       fanoutParams
	metric       vector.Metric
	queries      []query
	allowPartial bool
	start        time.Time
	ctx          context.Context
}

// prepare does what both search paths do before the fan-out; on failure it
// has answered the request and returns false.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, decode func([]byte, schema) ([]query, bool, error)) (fanoutQuery, bool) {
	var fq fanoutQuery
	var err error
	fail := func(err error) (fanoutQuery, bool) {
		s.fail(w, r, err)
		return fq, false
	}
	if fq.params, err = s.params(r); err != nil {
		return fail(err)
	}
	body, err := readBody(w, r)
	if err != nil {
		return fail(err)
	}
	sch := *s.schema.Load()
	fq.metric = sch.Metric
	if fq.queries, fq.allowPartial, err = decode(body, sch); err != nil {
		return fail(err)
	}
	// The deadline starts once the query is decoded: it budgets the
	// router's work (lookup, fan-out, merge), not the client's upload.
	fq.start = time.Now()
	// The client leaving does not cut the fan-out short: it is bounded by
	// the deadline anyway, and a cancelled fan-out would count as degraded.
	fq.ctx = context.WithoutCancel(r.Context())
	if fq.queries, err = s.resolveLikes(fq.ctx, fq.start, fq.params.budget, fq.queries); err != nil {
		return fail(err)
	}
	return fq, true
}

func (fq fanoutQuery) request(path string) fanout.Request {
	return fanout.Request{Path: path, Start: fq.start, Deadline: fq.params.budget.Deadline, ShardDeadline: fq.params.budget.Shard}
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	fq, ok := s.prepare(w, r, func(b []byte, sch schema) ([]query, bool, error) {
		q, allowPartial, err := decodeSearch(b, sch)
		return []query{q}, allowPartial, err
	})
	if !ok {
		return
	}
	pq := toProto(fq.queries[0])
	results, sum := fanout.Gather(fq.ctx, s.cfg.Cluster, fq.request(metrics.PathSearch),
		func(ctx context.Context, c *shard.Conn) (*shardpb.SearchResponse, error) {
			return c.Search(ctx, pq, 0)
		})
	sg := newScatterGather(sum, results, fq.params.detail)
	if s.refuseDegraded(w, sg, sum, fq.allowPartial) {
		return
	}
	lists := make([][]vector.Hit, len(results))
	for i, res := range results {
		if res.Reason == "" {
			lists[i] = hitsOf(res.Value.GetHits())
		}
	}
	writeJSON(w, http.StatusOK, searchResponse{Items: s.merge(fq.metric, fq.queries[0].k, lists), ScatterGather: sg})
}

func (s *Server) searchBatch(w http.ResponseWriter, r *http.Request) {
	fq, ok := s.prepare(w, r, decodeBatch)
	if !ok {
		return
	}
	qs := fq.queries
	pqs := make([]*shardpb.Query, len(qs))
	for i, q := range qs {
		pqs[i] = toProto(q)
	}
	results, sum := fanout.Gather(fq.ctx, s.cfg.Cluster, fq.request(metrics.PathSearchBatch),
		func(ctx context.Context, c *shard.Conn) (*shardpb.SearchBatchResponse, error) {
			resp, err := c.SearchBatch(ctx, pqs, 0)
			if err == nil && len(resp.GetResults()) != len(pqs) {
				return nil, status.Errorf(codes.Internal, "replica answered %d results for %d queries", len(resp.GetResults()), len(pqs))
			}
			return resp, err
		})
	sg := newScatterGather(sum, results, fq.params.detail)
	if s.refuseDegraded(w, sg, sum, fq.allowPartial) {
		return
	}
	out := batchResponse{Results: make([]batchResult, len(qs)), ScatterGather: sg}
	for qi, q := range qs {
		lists := make([][]vector.Hit, len(results))
		for i, res := range results {
			if res.Reason == "" {
				lists[i] = hitsOf(res.Value.GetResults()[qi].GetHits())
			}
		}
		out.Results[qi] = batchResult{Items: s.merge(fq.metric, q.k, lists)}
	}
	writeJSON(w, http.StatusOK, out)
}

// refuseDegraded sets X-Trawl-Degraded and answers 503 when no shard
// answered, or when the caller refused partial answers and one is.
func (s *Server) refuseDegraded(w http.ResponseWriter, sg scatterGather, sum fanout.Summary, allowPartial bool) bool {
	w.Header().Set("X-Trawl-Degraded", strconv.FormatBool(sg.Degraded))
	var msg string
	switch {
	case sum.ShardsQueried == 0:
		msg = fmt.Sprintf("no shard answered (%d of %d unavailable)", len(sum.Unavailable), sum.ShardsTotal)
	case sg.Degraded && !allowPartial:
		msg = fmt.Sprintf("%d of %d shards unavailable and allow_partial is false", len(sum.Unavailable), sum.ShardsTotal)
	default:
		return false
	}
	writeJSON(w, http.StatusServiceUnavailable, errorResponse{
		Error: errorBody{Code: codeUnavailable, Message: msg}, ScatterGather: &sg,
	})
	return true
}

func (s *Server) merge(m vector.Metric, k int, lists [][]vector.Hit) []item {
	refs := m.Merge(k, lists)
	items := make([]item, len(refs))
	for i, ref := range refs {
		items[i] = item{ID: ref.ID, Score: score(ref.Score), Shard: s.cfg.Shards[ref.List].Name}
	}
	return items
}

func hitsOf(hs []*shardpb.Hit) []vector.Hit {
	out := make([]vector.Hit, len(hs))
	for i, h := range hs {
		out[i] = vector.Hit{ID: h.GetId(), Score: h.GetScore()}
	}
	return out
}

func toProto(q query) *shardpb.Query {
	return &shardpb.Query{Vector: shard.EncodeVector(q.vector), K: uint32(q.k), ExcludeId: q.likeID}
}

// resolveLikes fetches the stored vectors of like_id queries from their
// home shards, concurrently, within the query's shard deadline: the lookup
// spends the same budget as the fan-out that follows.
func (s *Server) resolveLikes(ctx context.Context, start time.Time, b budget.Budget, qs []query) ([]query, error) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(b.Shard))
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	for i := range qs {
		if qs[i].likeID == "" {
			continue
		}
		g.Go(func() error {
			id := qs[i].likeID
			v, err := s.lookup(gctx, id)
			if err != nil {
				return err
			}
			qs[i].vector = v
			return nil
		})
	}
	return qs, g.Wait()
}

// lookup reads one stored vector from its home shard, mapping the engine's
// answer to the API's errors.
func (s *Server) lookup(ctx context.Context, id string) ([]float32, error) {
	home := s.placement.Home(id)
	pv, err := fanout.Lookup(ctx, s.cfg.Cluster, home, func(ctx context.Context, c *shard.Conn) (*shardpb.Vector, error) {
		return c.Get(ctx, id, 0)
	})
	switch status.Code(err) {
	case codes.OK:
		return shard.DecodeVector(pv.GetVector())
	case codes.NotFound:
		return nil, &requestError{status: http.StatusNotFound, code: codeNotFound, msg: fmt.Sprintf("no vector with id %q", id)}
	case codes.Unavailable, codes.DeadlineExceeded:
		return nil, &requestError{status: http.StatusServiceUnavailable, code: codeUnavailable,
			msg: fmt.Sprintf("cannot read id %q: its home shard %s is unavailable: %v", id, home, status.Convert(err).Message())}
	}
	return nil, fmt.Errorf("reading id %q from shard %s: %w", id, home, err)
}
