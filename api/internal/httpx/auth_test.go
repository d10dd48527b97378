package httpx_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
)

const scopedKeys = `
admin
ops * read
tenant a,a-*
reader a read
`

// scopedRouter is the shape the dialects give their routes: Auth on the
// group, Scope per route below the {collection} pattern, a route without
// {collection} on the default collection, and a Global one.
func scopedRouter(t *testing.T, keys *apikey.Keyring) (http.Handler, *written) {
	t.Helper()
	d, got := recording(httpx.Dialect{Keys: keys, KeyHeader: "api-key", DefaultCollection: "trawl"})
	r := chi.NewRouter()
	r.With(d.Global("/status")).Get("/status", ok)
	r.Group(func(r chi.Router) {
		r.Use(d.Auth)
		read, write := d.Scope(apikey.Read), d.Scope(apikey.Write)
		r.With(read).Get("/search", ok)
		r.Route("/c/{collection}", func(r chi.Router) {
			r.With(read).Get("/", ok)
			r.With(write).Put("/", ok)
			r.Group(func(r chi.Router) {
				r.Use(write)
				r.Post("/points", ok)
			})
		})
	})
	// Scope alone, without Auth before it, authenticates by itself.
	r.With(d.Scope(apikey.Write)).Delete("/bare/{collection}", ok)
	return r, got
}

// TestScope is the 401/403/200 matrix of scoped keys.
func TestScope(t *testing.T) {
	keys, err := apikey.Parse(strings.NewReader(scopedKeys))
	require.NoError(t, err)
	h, got := scopedRouter(t, keys)
	type req struct{ method, path string }
	var (
		readA    = req{http.MethodGet, "/c/a"}
		writeA   = req{http.MethodPut, "/c/a"}
		pointsA1 = req{http.MethodPost, "/c/a-1/points"}
		readB    = req{http.MethodGet, "/c/b"}
		search   = req{http.MethodGet, "/search"} // the default collection, trawl
		status   = req{http.MethodGet, "/status"}
		bareA    = req{http.MethodDelete, "/bare/a"}
	)
	for _, tc := range []struct {
		key  string
		want map[req]int
	}{
		{"", map[req]int{readA: 401, writeA: 401, pointsA1: 401, readB: 401, search: 401, status: 401, bareA: 401}},
		{"unknown", map[req]int{readA: 401, writeA: 401, pointsA1: 401, readB: 401, search: 401, status: 401, bareA: 401}},
		{"admin", map[req]int{readA: 200, writeA: 200, pointsA1: 200, readB: 200, search: 200, status: 200, bareA: 200}},
		{"ops", map[req]int{readA: 200, writeA: 403, pointsA1: 403, readB: 200, search: 200, status: 200, bareA: 403}},
		{"tenant", map[req]int{readA: 200, writeA: 200, pointsA1: 200, readB: 403, search: 403, status: 403, bareA: 200}},
		{"reader", map[req]int{readA: 200, writeA: 403, pointsA1: 403, readB: 403, search: 403, status: 403, bareA: 403}},
	} {
		for rq, want := range tc.want {
			for _, header := range []string{"Authorization", "api-key"} {
				t.Run(tc.key+" "+rq.method+" "+rq.path+" "+header, func(t *testing.T) {
					r := httptest.NewRequest(rq.method, rq.path, nil)
					if tc.key != "" {
						v := tc.key
						if header == "Authorization" {
							v = "Bearer " + v
						}
						r.Header.Set(header, v)
					}
					got.err = nil
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					require.Equal(t, want, rec.Code)
					switch want {
					case 401:
						require.Equal(t, wire.CodeUnauthenticated, got.err.Code)
						require.Equal(t, `Bearer realm="trawl"`, rec.Header().Get("WWW-Authenticate"))
					case 403:
						require.Equal(t, wire.CodeForbidden, got.err.Code)
						require.Empty(t, rec.Header().Get("WWW-Authenticate"))
					}
				})
			}
		}
	}
}

// TestScopeRefusals: a 403 names the collection and the access missing.
func TestScopeRefusals(t *testing.T) {
	keys, err := apikey.Parse(strings.NewReader(scopedKeys))
	require.NoError(t, err)
	h, got := scopedRouter(t, keys)
	for _, tc := range []struct{ key, method, path, msg string }{
		{"reader", http.MethodPut, "/c/a", "this API key does not grant write on collection `a`"},
		{"tenant", http.MethodGet, "/c/b", "this API key does not grant read on collection `b`"},
		{"tenant", http.MethodGet, "/search", "this API key does not grant read on collection `trawl`"},
		{"tenant", http.MethodGet, "/status", "/status shows the whole cluster: it needs an API key scoped to every collection (*)"},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.Header.Set("Authorization", "Bearer "+tc.key)
		h.ServeHTTP(httptest.NewRecorder(), r)
		require.Equal(t, &wire.Error{Status: 403, Code: wire.CodeForbidden, Msg: tc.msg}, got.err)
	}
}

// TestNoKeysIsOpen: without a keyring every middleware passes everything.
func TestNoKeysIsOpen(t *testing.T) {
	h, _ := scopedRouter(t, nil)
	for _, p := range []string{"/c/a", "/c/b", "/search", "/status"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		require.Equal(t, http.StatusOK, rec.Code, p)
	}
}

// TestPermitAndReadable are the checks for names a request carries
// outside its route (a body's alias target, a listing).
func TestPermitAndReadable(t *testing.T) {
	keys, err := apikey.Parse(strings.NewReader(scopedKeys))
	require.NoError(t, err)
	d := httpx.Dialect{Keys: keys}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer reader")
	require.True(t, d.Readable(r, "a"))
	require.False(t, d.Readable(r, "b"))
	require.NoError(t, d.Permit(r, "a", apikey.Read))
	require.Equal(t, &wire.Error{Status: 403, Code: wire.CodeForbidden, Msg: "this API key does not grant write on collection `a`"},
		d.Permit(r, "a", apikey.Write))
	anon := httptest.NewRequest(http.MethodGet, "/", nil)
	require.False(t, d.Readable(anon, "a"))
	var e *wire.Error
	require.ErrorAs(t, d.Permit(anon, "a", apikey.Read), &e)
	require.Equal(t, http.StatusUnauthorized, e.Status)
	open := httpx.Dialect{}
	require.True(t, open.Readable(anon, "anything"))
	require.NoError(t, open.Permit(anon, "anything", apikey.Write))
}
