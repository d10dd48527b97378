package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
)

// QdrantVersion is the Qdrant release whose REST API (its OpenAPI
// document) the /collections routes follow. GET / reports it, so the
// official clients' compatibility check (same major, minor within one)
// passes for the clients test-compat pins.
const QdrantVersion = "1.18.0"

// DefaultCollection is --collection's default: the one collection's name.
const DefaultCollection = "trawl"

// The Qdrant-compatible routes (DESIGN.md, "Qdrant-compatible REST"): the
// subset of Qdrant's REST API its clients use for one collection, over
// the same use cases as /v1. Answers wear Qdrant's envelope plus trawl's
// scatter_gather; errors are Qdrant's {"status": {"error": ...}}.
func (s *Server) mountQdrant(r chi.Router) {
	// Open like /healthz: it is the clients' version probe and holds no
	// data (Qdrant does not ask for a key on it either).
	r.Get("/", s.qdrantRoot)
	r.Route("/collections", func(r chi.Router) {
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			qdrantError(w, r, http.StatusNotFound, "Not found: no such endpoint "+r.URL.Path)
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			qdrantError(w, r, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+" (trawl serves a subset of Qdrant's API)")
		})
		r.Use(s.qdrantStart, s.qdrantAuth, s.qdrantAdmission)
		r.Get("/", s.qdrantCollections)
		r.Route("/{collection}", func(r chi.Router) {
			r.Get("/", s.qdrantCollection)
			r.Put("/", s.qdrantCreate)
			r.Get("/exists", s.qdrantExists)
			r.Group(func(r chi.Router) {
				r.Use(s.qdrantKnownCollection)
				r.Put("/points", s.qdrantUpsert)
				r.Post("/points", s.qdrantRetrieve)
				r.Get("/points/{id}", s.qdrantGetPoint)
				r.Post("/points/delete", s.qdrantDelete)
				r.Post("/points/search", s.qdrantSearch)
				r.Post("/points/search/batch", s.qdrantSearchBatch)
				r.Post("/points/query", s.qdrantQuery)
				r.Post("/points/scroll", s.qdrantScroll)
				r.Post("/points/count", s.qdrantCount)
			})
		})
	})
}

// startKey holds when a Qdrant route's request arrived: Qdrant's "time".
const startKey ctxKey = 100

func (s *Server) qdrantStart(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(contextWith(r, startKey, time.Now())))
	})
}

// qdrantAuth takes the key as Qdrant clients send it (api-key) or as a
// Bearer token, as /v1 does.
func (s *Server) qdrantAuth(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	key := []byte(s.cfg.APIKey)
	bearer := []byte("Bearer " + s.cfg.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		okKey := subtle.ConstantTimeCompare([]byte(r.Header.Get("api-key")), key) == 1
		okBearer := subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), bearer) == 1
		if !okKey && !okBearer {
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
			qdrantError(w, r, http.StatusUnauthorized, "Unauthorized: missing or wrong API key: send it in the api-key header or as Authorization: Bearer <key>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// qdrantAdmission is checkAdmission answering in Qdrant's envelope.
func (s *Server) qdrantAdmission(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Limiter.Check(); err != nil {
			s.qdrantRefuse(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// qdrantAdmit is admit answering in Qdrant's envelope.
// The limiter learns from the time since `since` (for searches, the
// request's arrival, as /v1's do).
func (s *Server) qdrantAdmit(w http.ResponseWriter, r *http.Request, weight int, deadline time.Duration, since time.Time) func(late bool) {
	p, err := s.cfg.Limiter.Acquire(weight, deadline)
	if err != nil {
		s.qdrantRefuse(w, r, err)
		return nil
	}
	return func(late bool) { p.Done(time.Since(since), late) }
}

func (s *Server) qdrantRefuse(w http.ResponseWriter, r *http.Request, err error) {
	s.noteRefusal(err)
	w.Header().Set("Retry-After", "1")
	qdrantError(w, r, http.StatusTooManyRequests, "Too many requests: "+err.Error())
}

// qdrantKnownCollection answers 404 for any collection but the one.
func (s *Server) qdrantKnownCollection(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := chi.URLParam(r, "collection"); name != s.collection() {
			qdrantError(w, r, http.StatusNotFound, notFoundCollection(name))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func notFoundCollection(name string) string {
	return fmt.Sprintf("Not found: Collection `%s` doesn't exist!", name)
}

func (s *Server) collection() string {
	if s.cfg.Collection == "" {
		return DefaultCollection
	}
	return s.cfg.Collection
}

// qdrantOK is Qdrant's answer envelope, with trawl's scatter_gather beside
// result when the answer read documents from shards.
type qdrantOK struct {
	Result        any            `json:"result"`
	Status        string         `json:"status"`
	Time          float64        `json:"time"`
	ScatterGather *scatterGather `json:"scatter_gather,omitempty"`
}

type qdrantStatus struct {
	Error string `json:"error"`
}

// qdrantErr is Qdrant's error envelope; scatter_gather is there when a
// fan-out ran (a refused degraded answer).
type qdrantErr struct {
	Status        qdrantStatus   `json:"status"`
	Time          float64        `json:"time"`
	ScatterGather *scatterGather `json:"scatter_gather,omitempty"`
}

// elapsed is Qdrant's "time": seconds since the request arrived.
func elapsed(r *http.Request) float64 {
	t, ok := r.Context().Value(startKey).(time.Time)
	if !ok {
		return 0
	}
	return time.Since(t).Seconds()
}

func qdrantResult(w http.ResponseWriter, r *http.Request, result any, sg *scatterGather) {
	if sg != nil {
		w.Header().Set("X-Trawl-Degraded", strconv.FormatBool(sg.Degraded))
	}
	writeJSON(w, http.StatusOK, qdrantOK{Result: result, Status: "ok", Time: elapsed(r), ScatterGather: sg})
}

func qdrantError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, qdrantErr{Status: qdrantStatus{Error: msg}, Time: elapsed(r)})
}

// qdrantFail writes err as failNative would, in Qdrant's envelope, with
// Qdrant's wording for the kind of error in front ("Bad request: ...").
func (s *Server) qdrantFail(w http.ResponseWriter, r *http.Request, err error, sg *scatterGather) {
	status, msg := http.StatusInternalServerError, ""
	var re *requestError
	var ce *coordinator.Error
	switch {
	case errors.As(err, &re):
		status, msg = re.status, re.msg
	case errors.As(err, &ce) && ce.Code != coordinator.CodeInternal:
		status, _ = statusOf(ce.Code)
		msg = ce.Msg
	default:
		s.cfg.Logger.ErrorContext(r.Context(), "internal error", "err", err)
		msg = err.Error()
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if sg != nil {
		w.Header().Set("X-Trawl-Degraded", strconv.FormatBool(sg.Degraded))
	}
	writeJSON(w, status, qdrantErr{Status: qdrantStatus{Error: qdrantPrefix(status) + msg}, Time: elapsed(r), ScatterGather: sg})
}

// qdrantPrefix is how Qdrant's messages name an error's kind.
func qdrantPrefix(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "Bad request: "
	case http.StatusNotFound:
		return "Not found: "
	case http.StatusServiceUnavailable:
		return "Service unavailable: "
	case http.StatusRequestEntityTooLarge:
		return "Payload too large: "
	case http.StatusRequestTimeout:
		return "Timeout: "
	}
	return ""
}

// qdrantParams are a Qdrant route's query parameters: trawl's deadline_ms,
// shard_detail and allow_partial, and Qdrant's timeout (seconds, onto
// the deadline), wait, ordering and consistency (accepted; see README).
type qdrantParams struct {
	budget       budget.Budget
	detail       bool
	allowPartial bool
}

func (s *Server) qdrantParams(r *http.Request) (qdrantParams, error) {
	q := r.URL.Query()
	b, err := budget.ResolveTimeout(s.cfg.Budget, q["deadline_ms"], q["timeout"])
	if err != nil {
		return qdrantParams{}, invalid(err.Error())
	}
	p := qdrantParams{budget: b, allowPartial: true}
	for name, dst := range map[string]*bool{"shard_detail": &p.detail, "allow_partial": &p.allowPartial} {
		switch v := q.Get(name); v {
		case "":
		case "true":
			*dst = true
		case "false":
			*dst = false
		default:
			return qdrantParams{}, invalid(fmt.Sprintf("%s is %q, want true or false", name, v))
		}
	}
	if v := q.Get("wait"); v != "" && v != "true" && v != "false" {
		return qdrantParams{}, invalid(fmt.Sprintf("wait is %q, want true or false", v))
	}
	if v := q.Get("ordering"); v != "" && v != "weak" && v != "medium" && v != "strong" {
		return qdrantParams{}, invalid(fmt.Sprintf("ordering is %q, want weak, medium or strong", v))
	}
	return p, nil
}

func (s *Server) qdrantRoot(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{
		"title":   "trawl - scatter-gather vector search router (Qdrant-compatible REST subset)",
		"version": QdrantVersion,
	})
}

type collectionDescription struct {
	Name string `json:"name"`
}

func (s *Server) qdrantCollections(w http.ResponseWriter, r *http.Request) {
	qdrantResult(w, r, map[string][]collectionDescription{"collections": {{Name: s.collection()}}}, nil)
}

func (s *Server) qdrantExists(w http.ResponseWriter, r *http.Request) {
	qdrantResult(w, r, map[string]bool{"exists": chi.URLParam(r, "collection") == s.collection()}, nil)
}

// distanceOf names a metric as Qdrant does.
func distanceOf(m vector.Metric) string {
	switch m {
	case vector.DotProduct:
		return "Dot"
	case vector.Euclidean:
		return "Euclid"
	}
	return "Cosine"
}

// Collection info, in the shape of Qdrant's CollectionInfo. trawl has no
// HNSW graph, segments or optimizer; the required fields say so as
// Qdrant's own values would: m 0 is Qdrant's "no graph" (every search an
// exact scan), segments are the shards.
type collectionInfo struct {
	Status              string           `json:"status"`
	OptimizerStatus     string           `json:"optimizer_status"`
	IndexedVectorsCount uint64           `json:"indexed_vectors_count"`
	PointsCount         uint64           `json:"points_count"`
	SegmentsCount       int              `json:"segments_count"`
	Config              collectionConfig `json:"config"`
	PayloadSchema       struct{}         `json:"payload_schema"`
}

type collectionConfig struct {
	Params struct {
		Vectors struct {
			Size     int    `json:"size"`
			Distance string `json:"distance"`
		} `json:"vectors"`
		ShardNumber            int  `json:"shard_number"`
		ReplicationFactor      int  `json:"replication_factor"`
		WriteConsistencyFactor int  `json:"write_consistency_factor"`
		OnDiskPayload          bool `json:"on_disk_payload"`
	} `json:"params"`
	HNSWConfig struct {
		M                 int `json:"m"`
		EfConstruct       int `json:"ef_construct"`
		FullScanThreshold int `json:"full_scan_threshold"`
	} `json:"hnsw_config"`
	OptimizerConfig struct {
		DefaultSegmentNumber int `json:"default_segment_number"`
		FlushIntervalSec     int `json:"flush_interval_sec"`
	} `json:"optimizer_config"`
	QuantizationConfig *struct{} `json:"quantization_config"`
}

// qdrantGather is the fan-out step every Qdrant read of one unit of work
// shares: admission, the call, its scatter_gather. It reports false once
// it has answered (refused, or the call failed: the error with the
// scatter_gather of what was asked).
func (s *Server) qdrantGather(w http.ResponseWriter, r *http.Request, p qdrantParams,
	call func(context.Context) (fanout.Summary, []coordinator.ShardReport, error)) (scatterGather, bool) {
	done := s.qdrantAdmit(w, r, 1, p.budget.Deadline, time.Now())
	if done == nil {
		return scatterGather{}, false
	}
	sum, shards, err := call(r.Context())
	done(late(sum))
	sg := newScatterGather(coordinator.Answer{Summary: sum, Shards: shards, Exact: true}, p.detail)
	if err != nil {
		s.qdrantFail(w, r, err, &sg)
		return sg, false
	}
	return sg, true
}

// countPoints counts the points f matches (all when nil) through
// qdrantGather.
func (s *Server) countPoints(w http.ResponseWriter, r *http.Request, p qdrantParams, f *filter.Filter) (uint64, scatterGather, bool) {
	var n uint64
	sg, ok := s.qdrantGather(w, r, p, func(ctx context.Context) (fanout.Summary, []coordinator.ShardReport, error) {
		ans, err := s.cfg.Coordinator.Count(ctx, f, p.budget, p.allowPartial)
		n = ans.Count
		return ans.Summary, ans.Shards, err
	})
	return n, sg, ok
}

// qdrantCollection is GET /collections/{name}: the schema and shape, and
// the points count from a count fan-out (so a count missing a shard is
// degraded: status yellow, and scatter_gather says which).
func (s *Server) qdrantCollection(w http.ResponseWriter, r *http.Request) {
	if name := chi.URLParam(r, "collection"); name != s.collection() {
		qdrantError(w, r, http.StatusNotFound, notFoundCollection(name))
		return
	}
	p, err := s.qdrantParams(r)
	if err != nil {
		s.qdrantFail(w, r, err, nil)
		return
	}
	count, sg, ok := s.countPoints(w, r, p, nil)
	if !ok {
		return
	}
	sch := s.cfg.Coordinator.Schema()
	shards, replicas := s.cfg.Coordinator.Shape()
	info := collectionInfo{Status: "green", OptimizerStatus: "ok", PointsCount: count, SegmentsCount: shards}
	if sg.Degraded {
		info.Status = "yellow"
	}
	info.Config.Params.Vectors.Size, info.Config.Params.Vectors.Distance = sch.Dim, distanceOf(sch.Metric)
	info.Config.Params.ShardNumber, info.Config.Params.ReplicationFactor = shards, replicas
	info.Config.Params.WriteConsistencyFactor = 1
	qdrantResult(w, r, info, &sg)
}

// qdrantCreate is PUT /collections/{name}: the one collection exists
// already, so a create that asks for what it is succeeds (idempotently,
// storing nothing) and anything else is refused, naming the difference.
func (s *Server) qdrantCreate(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.qdrantFail(w, r, err, nil)
		return
	}
	if _, err := s.qdrantParams(r); err != nil {
		s.qdrantFail(w, r, err, nil)
		return
	}
	if name := chi.URLParam(r, "collection"); name != s.collection() {
		s.qdrantFail(w, r, invalid(fmt.Sprintf(
			"trawl serves one collection, `%s` (router serve --collection), and cannot create `%s`; filter on a payload key to keep data sets apart",
			s.collection(), name)), nil)
		return
	}
	if err := checkCreate(body, s.cfg.Coordinator.Schema(), s.collection()); err != nil {
		s.qdrantFail(w, r, err, nil)
		return
	}
	qdrantResult(w, r, true, nil)
}

// contextWith is context.WithValue on r's context.
func contextWith(r *http.Request, k ctxKey, v any) context.Context {
	return context.WithValue(r.Context(), k, v)
}

// hasDot reports whether a payload key is a nested path.
func hasDot(k string) bool { return strings.Contains(k, ".") }
