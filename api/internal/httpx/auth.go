package httpx

import (
	"crypto/subtle"
	"net/http"

	"github.com/trawl-search/trawl/api/internal/wire"
)

// Auth requires the API key, when one is set, as a Bearer token or in
// the dialect's KeyHeader; a missing or wrong key is a 401 that says how
// to send it. The comparisons take constant time, so the answer's timing
// does not leak the key.
func (d Dialect) Auth(next http.Handler) http.Handler {
	if d.APIKey == "" {
		return next
	}
	key := []byte(d.APIKey)
	bearer := []byte("Bearer " + d.APIKey)
	how := "Authorization: Bearer <key>"
	if d.KeyHeader != "" {
		how = "it in the " + d.KeyHeader + " header or as " + how
	}
	refusal := &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated,
		Msg: "missing or wrong API key: send " + how}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), bearer) == 1
		if d.KeyHeader != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(d.KeyHeader)), key) == 1 {
			ok = true
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
			d.Error(w, r, refusal)
			return
		}
		next.ServeHTTP(w, r)
	})
}
