package qdrant

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
)

// Version is the Qdrant release whose REST API (its OpenAPI
// document) the /collections routes follow. GET / reports it, so the
// official clients' compatibility check (same major, minor within one)
// passes for the clients test-compat pins.
const Version = "1.18.0"

// DefaultCollection is --collection's default: the collection the
// collection-less /v1 paths act on.
const DefaultCollection = "trawl"

// Config wires a Handler.
type Config struct {
	// Coordinator runs the use cases, the same as /v1's.
	Coordinator *coordinator.Coordinator
	Budget      budget.Config
	// Collection is the default collection (--collection). The Qdrant
	// routes name their collection in the path and do not read it.
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
// REST") on r: the subset of Qdrant's REST API its clients use —
// collections, aliases, payload indexes and points — over the same use
// cases as /v1. Answers wear Qdrant's envelope plus trawl's
// scatter_gather; errors are Qdrant's {"status": {"error": ...}}.
func (h *Handler) Mount(r chi.Router) {
	// Open like /healthz: it is the clients' version probe and holds no
	// data (Qdrant does not ask for a key on it either).
	r.Get("/", h.root)
	r.Route("/aliases", func(r chi.Router) {
		r.MethodNotAllowed(h.methodNotAllowed)
		r.Use(stampStart, h.http.Auth, h.http.Admission)
		r.Get("/", h.listAliases)
	})
	r.Route("/collections", func(r chi.Router) {
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			h.http.Error(w, r, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: "no such endpoint " + r.URL.Path})
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			h.http.Error(w, r, &wire.Error{Status: http.StatusMethodNotAllowed, Code: wire.CodeMethod,
				Msg: r.Method + " is not allowed on " + r.URL.Path + " (trawl serves a subset of Qdrant's API)"})
		})
		r.Use(stampStart, h.http.Auth, h.http.Admission)
		r.Get("/", h.listCollections)
		r.Post("/aliases", h.updateAliases)
		r.Route("/{collection}", func(r chi.Router) {
			// The key's scope on {collection} first (httpx.Dialect.Scope).
			read, write := h.http.Scope(apikey.Read), h.http.Scope(apikey.Write)
			r.With(read).Get("/", h.getCollection)
			r.With(write).Put("/", h.createCollection)
			r.With(write).Patch("/", h.updateCollection)
			r.With(write).Delete("/", h.deleteCollection)
			r.With(read).Get("/exists", h.collectionExists)
			r.With(read).Get("/aliases", h.listAliases)
			r.With(read).Post("/snapshots", h.createSnapshot)
			r.With(read).Get("/snapshots", h.listSnapshots)
			r.With(write).Put("/snapshots/recover", h.recoverSnapshot)
			r.With(read).Get("/snapshots/{snapshot}", h.downloadSnapshot)
			r.With(write).Delete("/snapshots/{snapshot}", h.deleteSnapshot)
			r.Group(func(r chi.Router) {
				r.Use(write, h.knownCollection)
				r.Put("/index", h.createIndex)
				r.Delete("/index/{field}", h.deleteIndex)
				r.Put("/points", h.upsert)
				r.Post("/points/delete", h.deletePoints)
				r.Post("/points/payload", h.setPayload)
				r.Put("/points/payload", h.overwritePayload)
				r.Post("/points/payload/delete", h.deletePayload)
				r.Post("/points/payload/clear", h.clearPayload)
				r.Put("/points/vectors", h.updateVectors)
				r.Post("/points/vectors/delete", h.deleteVectors)
				r.Post("/points/batch", h.batchUpdate)
			})
			r.Group(func(r chi.Router) {
				r.Use(read, h.knownCollection)
				r.Post("/points", h.retrieve)
				r.Get("/points/{id}", h.getPoint)
				r.Post("/points/search", h.searchPoints)
				r.Post("/points/search/batch", h.searchBatch)
				r.Post("/points/query", h.queryPoints)
				r.Post("/points/recommend", h.recommendPoints)
				r.Post("/points/recommend/batch", h.recommendBatch)
				r.Post("/points/recommend/groups", h.recommendGroups)
				r.Post("/points/search/groups", h.searchGroups)
				r.Post("/points/query/groups", h.queryGroups)
				r.Post("/points/query/batch", h.queryBatch)
				r.Post("/points/scroll", h.scroll)
				r.Post("/points/count", h.count)
				r.Post("/facet", h.facet)
			})
		})
	})
}

// methodNotAllowed answers a method a Qdrant route does not serve.
func (h *Handler) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	h.http.Error(w, r, &wire.Error{Status: http.StatusMethodNotAllowed, Code: wire.CodeMethod,
		Msg: r.Method + " is not allowed on " + r.URL.Path + " (trawl serves a subset of Qdrant's API)"})
}

type ctxKey int

// startKey holds when a Qdrant route's request arrived: Qdrant's "time".
const startKey ctxKey = 0

// stampStart notes when the request arrived; it goes first, so the time
// counts auth and admission too.
func stampStart(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), startKey, time.Now())))
	})
}

// collKey holds the collection a points route acts on.
const collKey ctxKey = 1

// knownCollection resolves the route's {collection} (a name or an alias)
// for the handlers below it: 404 in Qdrant's words for an unknown one,
// 503 while it is still being created.
func (h *Handler) knownCollection(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "collection")
		coll, err := h.cfg.Coordinator.Collection(r.Context(), name)
		if coordinator.CodeOf(err) == coordinator.CodeCollectionNotFound {
			h.http.Error(w, r, qdrantx.NotFoundCollection(name))
			return
		}
		if err != nil {
			h.http.Fail(w, r, err, nil)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), collKey, coll)))
	})
}

// coll is the collection knownCollection resolved.
func coll(r *http.Request) coordinator.Collection {
	c, _ := r.Context().Value(collKey).(coordinator.Collection)
	return c
}
