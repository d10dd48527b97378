package qdrant

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
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

// Config wires a Handler.
type Config struct {
	// Coordinator runs the use cases, the same as /v1's.
	Coordinator *coordinator.Coordinator
	Budget      budget.Config
	// Collection is the name the cluster's documents are served under
	// (DefaultCollection if empty).
	Collection string
	// HTTP is the router's shared request handling (its key, limiter,
	// metrics, logger and body timeout), as package api built it for
	// /v1; the Handler answers in Qdrant's envelope and also takes the key
	// in Qdrant's api-key header.
	HTTP httpx.Dialect
}

// Handler serves the Qdrant-compatible routes.
type Handler struct {
	cfg  Config
	http httpx.Dialect
}

// New builds the routes' handler; Mount puts them on a router.
func New(cfg Config) *Handler {
	h := &Handler{cfg: cfg, http: cfg.HTTP}
	h.http.Envelope, h.http.KeyHeader = envelope, "api-key"
	return h
}

// Mount puts the Qdrant-compatible routes (DESIGN.md, "Qdrant-compatible
// REST") on r: the subset of Qdrant's REST API its clients use for one
// collection, over the same use cases as /v1. Answers wear Qdrant's
// envelope plus trawl's scatter_gather; errors are Qdrant's {"status":
// {"error": ...}}.
func (h *Handler) Mount(r chi.Router) {
	// Open like /healthz: it is the clients' version probe and holds no
	// data (Qdrant does not ask for a key on it either).
	r.Get("/", h.qdrantRoot)
	r.Route("/collections", func(r chi.Router) {
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			h.http.Error(w, r, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: "no such endpoint " + r.URL.Path})
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			h.http.Error(w, r, &wire.Error{Status: http.StatusMethodNotAllowed, Code: wire.CodeMethod,
				Msg: r.Method + " is not allowed on " + r.URL.Path + " (trawl serves a subset of Qdrant's API)"})
		})
		r.Use(h.qdrantStart, h.http.Auth, h.http.Admission)
		r.Get("/", h.qdrantCollections)
		r.Route("/{collection}", func(r chi.Router) {
			r.Get("/", h.qdrantCollection)
			r.Put("/", h.qdrantCreate)
			r.Get("/exists", h.qdrantExists)
			r.Group(func(r chi.Router) {
				r.Use(h.qdrantKnownCollection)
				r.Put("/points", h.qdrantUpsert)
				r.Post("/points", h.qdrantRetrieve)
				r.Get("/points/{id}", h.qdrantGetPoint)
				r.Post("/points/delete", h.qdrantDelete)
				r.Post("/points/search", h.qdrantSearch)
				r.Post("/points/search/batch", h.qdrantSearchBatch)
				r.Post("/points/query", h.qdrantQuery)
				r.Post("/points/scroll", h.qdrantScroll)
				r.Post("/points/count", h.qdrantCount)
			})
		})
	})
}

type ctxKey int

// startKey holds when a Qdrant route's request arrived: Qdrant's "time".
const startKey ctxKey = 0

func (h *Handler) qdrantStart(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), startKey, time.Now())))
	})
}

// qdrantKnownCollection answers 404 for any collection but the one.
func (h *Handler) qdrantKnownCollection(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := chi.URLParam(r, "collection"); name != h.collection() {
			h.http.Error(w, r, notFoundCollection(name))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func notFoundCollection(name string) *wire.Error {
	return &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: fmt.Sprintf("Collection `%s` doesn't exist!", name)}
}

func (h *Handler) collection() string {
	if h.cfg.Collection == "" {
		return DefaultCollection
	}
	return h.cfg.Collection
}

// qdrantOK is Qdrant's answer envelope, with trawl's scatter_gather beside
// result when the answer read documents from shards.
type qdrantOK struct {
	Result        any                 `json:"result"`
	Status        string              `json:"status"`
	Time          float64             `json:"time"`
	ScatterGather *wire.ScatterGather `json:"scatter_gather,omitempty"`
}

type qdrantStatus struct {
	Error string `json:"error"`
}

// qdrantErr is Qdrant's error envelope; scatter_gather is there when a
// fan-out ran (a refused degraded answer).
type qdrantErr struct {
	Status        qdrantStatus        `json:"status"`
	Time          float64             `json:"time"`
	ScatterGather *wire.ScatterGather `json:"scatter_gather,omitempty"`
}

// elapsed is Qdrant's "time": seconds since the request arrived.
func elapsed(r *http.Request) float64 {
	t, ok := r.Context().Value(startKey).(time.Time)
	if !ok {
		return 0
	}
	return time.Since(t).Seconds()
}

func qdrantResult(w http.ResponseWriter, r *http.Request, result any, sg *wire.ScatterGather) {
	if sg != nil {
		wire.SetDegraded(w, *sg)
	}
	wire.WriteJSON(w, http.StatusOK, qdrantOK{Result: result, Status: "ok", Time: elapsed(r), ScatterGather: sg})
}

// envelope is Qdrant's error shape, {"status": {"error": ...},
// "time": s}, its message led by Qdrant's wording for the kind of error
// ("Bad request: ..."). A 503 asks the client to come back in a second.
func envelope(w http.ResponseWriter, r *http.Request, e *wire.Error, sg *wire.ScatterGather) {
	wire.RetryAfter(w, e.Status)
	wire.WriteJSON(w, e.Status, qdrantErr{Status: qdrantStatus{Error: qdrantPrefix(e.Status) + e.Msg}, Time: elapsed(r), ScatterGather: sg})
}

// qdrantPrefix is how Qdrant's messages name an error's kind.
func qdrantPrefix(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "Bad request: "
	case http.StatusUnauthorized:
		return "Unauthorized: "
	case http.StatusNotFound:
		return "Not found: "
	case http.StatusServiceUnavailable:
		return "Service unavailable: "
	case http.StatusRequestEntityTooLarge:
		return "Payload too large: "
	case http.StatusRequestTimeout:
		return "Timeout: "
	case http.StatusTooManyRequests:
		return "Too many requests: "
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

func (h *Handler) qdrantParams(r *http.Request) (qdrantParams, error) {
	q := r.URL.Query()
	b, err := budget.ResolveTimeout(h.cfg.Budget, q["deadline_ms"], q["timeout"])
	if err != nil {
		return qdrantParams{}, wire.Invalid(err.Error())
	}
	p := qdrantParams{budget: b}
	if p.detail, err = httpx.BoolParam(q, "shard_detail", false); err != nil {
		return qdrantParams{}, err
	}
	if p.allowPartial, err = httpx.BoolParam(q, "allow_partial", true); err != nil {
		return qdrantParams{}, err
	}
	if _, err := httpx.BoolParam(q, "wait", true); err != nil {
		return qdrantParams{}, err
	}
	if v := q.Get("ordering"); v != "" && v != "weak" && v != "medium" && v != "strong" {
		return qdrantParams{}, wire.Invalid(fmt.Sprintf("ordering is %q, want weak, medium or strong", v))
	}
	return p, nil
}

func (h *Handler) qdrantRoot(w http.ResponseWriter, r *http.Request) {
	wire.WriteJSON(w, http.StatusOK, map[string]string{
		"title":   "trawl - scatter-gather vector search router (Qdrant-compatible REST subset)",
		"version": QdrantVersion,
	})
}

type collectionDescription struct {
	Name string `json:"name"`
}

func (h *Handler) qdrantCollections(w http.ResponseWriter, r *http.Request) {
	qdrantResult(w, r, map[string][]collectionDescription{"collections": {{Name: h.collection()}}}, nil)
}

func (h *Handler) qdrantExists(w http.ResponseWriter, r *http.Request) {
	qdrantResult(w, r, map[string]bool{"exists": chi.URLParam(r, "collection") == h.collection()}, nil)
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
func (h *Handler) qdrantGather(w http.ResponseWriter, r *http.Request, p qdrantParams,
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
// qdrantGather.
func (h *Handler) countPoints(w http.ResponseWriter, r *http.Request, p qdrantParams, f *filter.Filter) (uint64, wire.ScatterGather, bool) {
	var n uint64
	sg, ok := h.qdrantGather(w, r, p, func(ctx context.Context) (fanout.Summary, []coordinator.ShardReport, error) {
		ans, err := h.cfg.Coordinator.Count(ctx, f, p.budget, p.allowPartial)
		n = ans.Count
		return ans.Summary, ans.Shards, err
	})
	return n, sg, ok
}

// qdrantCollection is GET /collections/{name}: the schema and shape, and
// the points count from a count fan-out (so a count missing a shard is
// degraded: status yellow, and scatter_gather says which).
func (h *Handler) qdrantCollection(w http.ResponseWriter, r *http.Request) {
	if name := chi.URLParam(r, "collection"); name != h.collection() {
		h.http.Error(w, r, notFoundCollection(name))
		return
	}
	p, err := h.qdrantParams(r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	count, sg, ok := h.countPoints(w, r, p, nil)
	if !ok {
		return
	}
	sch := h.cfg.Coordinator.Schema()
	shards, replicas := h.cfg.Coordinator.Shape()
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
func (h *Handler) qdrantCreate(w http.ResponseWriter, r *http.Request) {
	body, err := h.http.ReadBody(w, r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	if _, err := h.qdrantParams(r); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	if name := chi.URLParam(r, "collection"); name != h.collection() {
		h.http.Fail(w, r, wire.Invalid(fmt.Sprintf(
			"trawl serves one collection, `%s` (router serve --collection), and cannot create `%s`; filter on a payload key to keep data sets apart",
			h.collection(), name)), nil)
		return
	}
	if err := checkCreate(body, h.cfg.Coordinator.Schema(), h.collection()); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	qdrantResult(w, r, true, nil)
}

// hasDot reports whether a payload key is a nested path.
func hasDot(k string) bool { return strings.Contains(k, ".") }
