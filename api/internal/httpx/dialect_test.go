package httpx_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

// written is what an envelope was asked to write.
type written struct {
	err *wire.Error
	sg  *wire.ScatterGather
}

// recording is a Dialect whose envelope keeps what it was given, so the
// tests see the shared handling's decision apart from any JSON shape.
func recording(d httpx.Dialect) (httpx.Dialect, *written) {
	got := &written{}
	d.Envelope = func(w http.ResponseWriter, _ *http.Request, e *wire.Error, sg *wire.ScatterGather) {
		got.err, got.sg = e, sg
		w.WriteHeader(e.Status)
	}
	return d, got
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

func TestAuth(t *testing.T) {
	const native = "missing or wrong API key: send Authorization: Bearer <key>"
	const qdrant = "missing or wrong API key: send it in the api-key header or as Authorization: Bearer <key>"
	for _, tc := range []struct {
		name, key, keyHeader string
		header               map[string]string
		status               int
		msg                  string
	}{
		{name: "no key configured", header: nil, status: 200},
		{name: "bearer", key: "s3cret", header: map[string]string{"Authorization": "Bearer s3cret"}, status: 200},
		{name: "none", key: "s3cret", status: 401, msg: native},
		{name: "wrong bearer", key: "s3cret", header: map[string]string{"Authorization": "Bearer nope"}, status: 401, msg: native},
		{name: "api-key without a key header", key: "s3cret", header: map[string]string{"api-key": "s3cret"}, status: 401, msg: native},
		{name: "api-key", key: "s3cret", keyHeader: "api-key", header: map[string]string{"api-key": "s3cret"}, status: 200},
		{name: "bearer with a key header", key: "s3cret", keyHeader: "api-key", header: map[string]string{"Authorization": "Bearer s3cret"}, status: 200},
		{name: "wrong api-key", key: "s3cret", keyHeader: "api-key", header: map[string]string{"api-key": "nope"}, status: 401, msg: qdrant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keys *apikey.Keyring
			if tc.key != "" {
				keys = apikey.Single(tc.key)
			}
			d, got := recording(httpx.Dialect{Keys: keys, KeyHeader: tc.keyHeader})
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			d.Auth(ok).ServeHTTP(rec, req)
			require.Equal(t, tc.status, rec.Code)
			if tc.status == http.StatusUnauthorized {
				require.Equal(t, &wire.Error{Status: 401, Code: wire.CodeUnauthenticated, Msg: tc.msg}, got.err)
				require.Equal(t, `Bearer realm="trawl"`, rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// TestAdmission: past the hard cap, a request is refused on its headers
// and a body's slots are refused too, both as 429 overloaded with
// Retry-After; once a slot is free both pass.
func TestAdmission(t *testing.T) {
	d, got := recording(httpx.Dialect{Limiter: admission.NewLimiter(admission.LimiterConfig{Max: 1, Off: true})})
	held, err := d.Limiter.Acquire(1, 0)
	require.NoError(t, err)

	rec := httptest.NewRecorder()
	d.Admission(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Equal(t, wire.CodeOverloaded, got.err.Code)

	rec = httptest.NewRecorder()
	require.Nil(t, d.Admit(rec, httptest.NewRequest(http.MethodPost, "/", nil), 1, 0))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)

	held.Done(0, false)
	rec = httptest.NewRecorder()
	d.Admission(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	p := d.Admit(rec, httptest.NewRequest(http.MethodPost, "/", nil), 1, 0)
	require.NotNil(t, p)
	p.Done(0, false)
}

func TestFail(t *testing.T) {
	notFound := &coordinator.Error{Code: coordinator.CodeNotFound, Msg: "no document doc-7"}
	for _, tc := range []struct {
		name string
		err  error
		sg   *wire.ScatterGather
		want *wire.Error
	}{
		{"client mistake", wire.Invalid("k is 0, want 1..1000"), nil, wire.Invalid("k is 0, want 1..1000")},
		{"coordinator", notFound, nil, &wire.Error{Status: 404, Code: wire.CodeNotFound, Msg: "no document doc-7"}},
		{"wrapped coordinator", fmt.Errorf("lookup: %w", notFound), nil, &wire.Error{Status: 404, Code: wire.CodeNotFound, Msg: "no document doc-7"}},
		{"coordinator internal", &coordinator.Error{Code: coordinator.CodeInternal, Msg: "bad frame"}, nil,
			&wire.Error{Status: 500, Code: wire.CodeInternal, Msg: "bad frame"}},
		{"anything else", errors.New("boom"), nil, &wire.Error{Status: 500, Code: wire.CodeInternal, Msg: "boom"}},
		{"degraded", &coordinator.Error{Code: coordinator.CodeUnavailable, Msg: "1 of 3 shards unavailable"}, &wire.ScatterGather{Degraded: true},
			&wire.Error{Status: 503, Code: wire.CodeUnavailable, Msg: "1 of 3 shards unavailable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, got := recording(httpx.Dialect{})
			rec := httptest.NewRecorder()
			d.Fail(rec, httptest.NewRequest(http.MethodPost, "/", nil), tc.err, tc.sg)
			require.Equal(t, tc.want, got.err)
			require.Equal(t, tc.want.Status, rec.Code)
			require.Same(t, tc.sg, got.sg)
			if tc.sg != nil {
				require.Equal(t, "true", rec.Header().Get("X-Trawl-Degraded"))
			} else {
				require.Empty(t, rec.Header().Get("X-Trawl-Degraded"))
			}
		})
	}
}

func TestBoolParam(t *testing.T) {
	for _, tc := range []struct {
		query    string
		def, out bool
		err      string
	}{
		{query: "", def: true, out: true},
		{query: "", def: false, out: false},
		{query: "wait=true", out: true},
		{query: "wait=false", def: true, out: false},
		{query: "wait=yes", err: `wait is "yes", want true or false`},
		{query: "wait=1", err: `wait is "1", want true or false`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			require.NoError(t, err)
			got, err := httpx.BoolParam(q, "wait", tc.def)
			if tc.err != "" {
				require.Equal(t, wire.Invalid(tc.err), err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.out, got)
		})
	}
}
