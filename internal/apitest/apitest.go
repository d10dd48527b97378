// Package apitest runs the router's HTTP API over a dev cluster, for the
// end-to-end tests of package api and of its dialects (api/qdrant): one
// test cluster, one way to send requests, and the probes tests use to
// show that bad input reached no shard and changed nothing.
//
// It is for tests only: production code must never import it.
package apitest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

// Dim is the test collection's dimension.
const Dim = 8

// Config shapes a test cluster and its router.
type Config struct {
	Metric vector.Metric
	// APIKey, when set, is the one (bare) key the router accepts; Keys,
	// when set, the keyring instead.
	APIKey      string
	Keys        *apikey.Keyring
	MaxInflight int
	Docs        int
	// Prober runs the background health prober. Off by default so that
	// replica health (and so shard_errors reasons) moves only with the
	// queries a test sends.
	Prober bool
	// ScanRateBytes is devcluster.Config.ScanRateBytes: 0, no scan-rate
	// measurement.
	ScanRateBytes int
	// BuiltinDeadline leaves the router's default deadline at the product's
	// 50 ms instead of Deadline: for tests of that default, which must
	// then assert only what a deadline guarantees on a loaded machine.
	BuiltinDeadline bool
	// BackupDir, when set, is the router's --backup-dir.
	BackupDir string
}

// Deadline is the routers' default deadline (--default-deadline-ms) in an
// Env: these tests check what the API answers, not how fast a machine
// shared with the rest of the suite scans, and at the product's 50 ms a
// loaded 2-core machine misses it now and then.
const Deadline = time.Second

// budgetFor is the router's deadline rules in an Env.
func budgetFor(builtin bool) budget.Config {
	if builtin {
		return budget.Config{}
	}
	return budget.Config{Fallback: Deadline}
}

func (c Config) keys() *apikey.Keyring {
	if c.APIKey != "" {
		return apikey.Single(c.APIKey)
	}
	return c.Keys
}

// Env is a dev cluster (3 shards × 2 replicas behind fault proxies), a
// router over it, and an HTTP server for the router's API.
type Env struct {
	T  testing.TB
	DC *devcluster.Cluster
	// Fakes are the fake shards of NewFake (DC is nil then).
	Fakes []*FakeShard
	R     *app.Router
	Srv   *httptest.Server
}

// New starts an Env, closed when the test ends, and waits until its
// router is ready.
func New(t testing.TB, cfg Config) *Env {
	t.Helper()
	if cfg.Docs == 0 {
		cfg.Docs = 300
	}
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 2, Dim: Dim, Metric: cfg.Metric, Docs: cfg.Docs, Seed: 1,
		ScanRateBytes: cfg.ScanRateBytes})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	r, err := app.New(app.Config{Shards: dc.Specs(), CatalogRefresh: time.Hour, Keys: cfg.keys(), MaxInflight: cfg.MaxInflight,
		WarmupTimeout: 5 * time.Second, DisableProber: !cfg.Prober, Budget: budgetFor(cfg.BuiltinDeadline), BackupDir: cfg.BackupDir})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	e := serve(t, r)
	e.DC = dc
	return e
}

// serve puts r's API on an HTTP server, closed when the test ends, and
// waits until r is ready.
func serve(t testing.TB, r *app.Router) *Env {
	t.Helper()
	srv := httptest.NewServer(r.API)
	t.Cleanup(srv.Close) // runs before r's Close: cleanups are LIFO
	e := &Env{T: t, R: r, Srv: srv}
	e.waitReady()
	return e
}

// waitReady polls /readyz until it answers 200: the router learns the
// dimension and metric from the shards during its warm-up.
func (e *Env) waitReady() {
	e.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := e.Do(http.MethodGet, "/readyz", "", nil)
		if res.Status == http.StatusOK {
			return
		}
		require.True(e.T, time.Now().Before(deadline), "router not ready after 10 s: %d %s", res.Status, res.Body)
		time.Sleep(20 * time.Millisecond)
	}
}

// Response is an answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r Response) String() string { return string(r.Body) }

// Do sends one request to the router's API over HTTP.
func (e *Env) Do(method, path, body string, header map[string]string) Response {
	e.T.Helper()
	return e.DoReader(method, path, strings.NewReader(body), header)
}

// DoReader is Do with the body read from body.
func (e *Env) DoReader(method, path string, body io.Reader, header map[string]string) Response {
	e.T.Helper()
	req, err := http.NewRequest(method, e.Srv.URL+path, body)
	require.NoError(e.T, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := e.Srv.Client().Do(req)
	require.NoError(e.T, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.T, err)
	return Response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// Post sends body (a string as it is, anything else as JSON) to path.
func (e *Env) Post(path string, body any) Response {
	e.T.Helper()
	s, ok := body.(string)
	if !ok {
		b, err := json.Marshal(body)
		require.NoError(e.T, err)
		s = string(b)
	}
	return e.Do(http.MethodPost, path, s, nil)
}

// Keys are a map's keys, sorted.
func Keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CompactJSON strips insignificant whitespace.
func CompactJSON(t testing.TB, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, b))
	return buf.String()
}
