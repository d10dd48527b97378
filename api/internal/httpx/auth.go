package httpx

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
)

// The API key (router serve --api-key-file) is checked in two steps: Auth
// finds the request's key in the keyring (401 when it is missing or
// unknown), then Scope, on each route, checks that the key covers the
// collection the route acts on, for reading or writing (403 when not).
// Without a keyring every request passes both.

// Auth requires, when the dialect has keys, a known key as a Bearer token
// or in the dialect's KeyHeader; a missing or unknown key is a 401 that
// says how to send it. The key's scope goes on in the request's context
// for Scope, Permit and Readable. Lookups take constant time, so the
// answer's timing does not leak the keys.
func (d Dialect) Auth(next http.Handler) http.Handler {
	if d.Keys == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := d.authenticate(r)
		if !ok {
			d.unauthenticated(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), scopeKey, s)))
	})
}

// Scope refuses a request whose API key does not grant need on the
// route's collection, with 403 forbidden naming the collection. The
// collection is chi's {collection} URL parameter, or DefaultCollection on
// a route without one (the native collection-less paths). Without keys it
// passes everything; a request Auth has not seen is authenticated here
// (401 as Auth answers it).
//
// It needs chi to have matched {collection}, so it goes on the route
// itself or in a group below the pattern that names {collection}, never
// in a Use above it; and before anything that resolves the collection
// (knownCollection), so a key learns nothing about names outside its
// scope, not even whether they exist:
//
//	read, write := h.http.Scope(apikey.Read), h.http.Scope(apikey.Write)
//	r.With(write).Put("/collections/{collection}", h.createCollection)
//	r.Group(func(r chi.Router) {
//		r.Use(read, h.knownCollection)
//		r.Post("/collections/{collection}/points/search", h.searchPoints)
//	})
//
// Reads (search, query, get, retrieve, scroll, count, collection info,
// exists) need apikey.Read; writes (upsert, delete, payload indexes,
// create and delete of a collection) need apikey.Write. A route that
// also names collections in its body (an alias change names the alias
// and its collection) checks each of them with Permit; a listing shows
// only the names Readable allows.
func (d Dialect) Scope(need apikey.Access) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d.Keys == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name := chi.URLParam(r, "collection")
			if name == "" {
				name = d.DefaultCollection
			}
			if e := d.permit(r, name, need); e != nil {
				d.refuseKey(w, r, e)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Global refuses, when the dialect has keys, a request whose key is not
// scoped to every collection (`*`), with 403: for operator endpoints that
// show the whole cluster (/cluster/status names every replica's address).
// what names the endpoint in the refusal.
func (d Dialect) Global(what string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d.Keys == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, ok := d.scope(r)
			if !ok {
				d.unauthenticated(w, r)
				return
			}
			if !s.Global() {
				d.refuseKey(w, r, &wire.Error{Status: http.StatusForbidden, Code: wire.CodeForbidden,
					Msg: what + " shows the whole cluster: it needs an API key scoped to every collection (*)"})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Permit reports whether the request's key grants need on collection: nil
// when it does (or the dialect has no keys), else a *wire.Error to answer
// with — 401 for a missing or unknown key, 403 forbidden naming the
// collection otherwise. For collections a request names outside its
// route's {collection}.
func (d Dialect) Permit(r *http.Request, collection string, need apikey.Access) error {
	if e := d.permit(r, collection, need); e != nil {
		return e
	}
	return nil
}

func (d Dialect) permit(r *http.Request, collection string, need apikey.Access) *wire.Error {
	if d.Keys == nil {
		return nil
	}
	s, ok := d.scope(r)
	if !ok {
		return d.unauthenticatedError()
	}
	if s.Allows(collection, need) {
		return nil
	}
	return &wire.Error{Status: http.StatusForbidden, Code: wire.CodeForbidden,
		Msg: fmt.Sprintf("this API key does not grant %s on collection `%s`", need, collection)}
}

// Readable reports whether the request's key may read collection (always,
// without keys): a listing of collections or aliases shows only those.
func (d Dialect) Readable(r *http.Request, collection string) bool {
	return d.permit(r, collection, apikey.Read) == nil
}

// scope is the request's key's scope: the one Auth found, else looked up
// now.
func (d Dialect) scope(r *http.Request) (apikey.Scope, bool) {
	if s, ok := r.Context().Value(scopeKey).(apikey.Scope); ok {
		return s, true
	}
	return d.authenticate(r)
}

// authenticate looks the request's key up: a Bearer token, or the
// dialect's KeyHeader.
func (d Dialect) authenticate(r *http.Request) (apikey.Scope, bool) {
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if s, ok := d.Keys.Lookup(token); ok {
			return s, true
		}
	}
	if d.KeyHeader != "" {
		return d.Keys.Lookup(r.Header.Get(d.KeyHeader))
	}
	return apikey.Scope{}, false
}

func (d Dialect) unauthenticatedError() *wire.Error {
	how := "Authorization: Bearer <key>"
	if d.KeyHeader != "" {
		how = "it in the " + d.KeyHeader + " header or as " + how
	}
	return &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated,
		Msg: "missing or wrong API key: send " + how}
}

func (d Dialect) unauthenticated(w http.ResponseWriter, r *http.Request) {
	d.refuseKey(w, r, d.unauthenticatedError())
}

// refuseKey answers a 401 or 403; a 401 says how to authenticate.
func (d Dialect) refuseKey(w http.ResponseWriter, r *http.Request, e *wire.Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
	}
	d.Error(w, r, e)
}
