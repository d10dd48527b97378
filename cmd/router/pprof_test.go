package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// withPprof answers /debug/pprof/ itself and hands every other path to
// the handler it wraps, unchanged.
func TestWithPprof(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "next "+r.URL.Path)
	})
	t.Cleanup(func() { // withPprof turned them on for the process
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
	})
	srv := httptest.NewServer(withPprof(next))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine")
	code, body = get("/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine profile")
	for _, path := range []string{"/v1/vectors", "/metrics", "/debug/pprofx", "//v1/search"} {
		_, body = get(path)
		require.Equal(t, "next "+path, body, path)
	}
}
