package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEnvironmentTwins(t *testing.T) {
	t.Setenv("TRAWL_HTTP_ADDR", ":9999")
	t.Setenv("TRAWL_MAX_INFLIGHT", "7")
	t.Setenv("TRAWL_SHARDS", "shard-0=a:1,b:2; shard-1=c:3")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("http-addr", ":8080", "")
	inflight := fs.Int("max-inflight", 256, "")
	var shards shardFlag
	fs.Var(&shards, "shard", "")
	require.NoError(t, parseFlags(fs, []string{"--max-inflight", "9"}))
	require.Equal(t, ":9999", *addr, "from the environment")
	require.Equal(t, 9, *inflight, "the command line wins over the environment")
	require.Equal(t, shardFlag{{Name: "shard-0", Addrs: []string{"a:1", "b:2"}}, {Name: "shard-1", Addrs: []string{"c:3"}}}, shards)
}

func TestShardFlagRejectsMalformed(t *testing.T) {
	for _, v := range []string{"noequals", "=a:1", "name="} {
		var s shardFlag
		require.Error(t, s.Set(v), v)
	}
	var s shardFlag
	require.NoError(t, s.Set("x=a:1"))
	require.NoError(t, s.Set("y=b:1,c:1"))
	require.Equal(t, "x=a:1;y=b:1,c:1", s.String())
}

func TestBadEnvironmentValueIsAnError(t *testing.T) {
	t.Setenv("TRAWL_MAX_INFLIGHT", "lots")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Int("max-inflight", 256, "")
	require.ErrorContains(t, parseFlags(fs, nil), "TRAWL_MAX_INFLIGHT")
}

// SIGTERM: readiness turns false at once, the in-flight query finishes,
// then serveHTTP returns.
func TestShutdownDrainsInflightQueries(t *testing.T) {
	dc, err := devcluster.Start(devcluster.Config{Dim: 8, Docs: 100, Seed: 1, Kernel: vector.Generic()})
	require.NoError(t, err)
	defer dc.Close()
	specs := dc.Specs()
	r, err := app.New(app.Config{Shards: specs, Kernel: vector.Generic()})
	require.NoError(t, err)
	defer r.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveHTTP(ctx, slog.New(slog.DiscardHandler), ln, "", "", r, r.API) }()
	base := "http://" + ln.Addr().String()
	waitReady(t, r)

	for _, n := range dc.Names { // every shard answers slowly
		for i := range 2 {
			rep, _ := dc.Replica(n, i)
			require.NoError(t, rep.Proxy.Slow(300*time.Millisecond))
		}
	}
	type result struct {
		code int
		body string
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := http.Post(base+"/v1/search?deadline_ms=3000", "application/json",
			bytes.NewReader([]byte(`{"like_id": "doc-1", "k": 3}`)))
		if err != nil {
			inflight <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		inflight <- result{resp.StatusCode, string(b)}
	}()
	time.Sleep(100 * time.Millisecond) // the query is now waiting on the slow shards
	cancel()                           // SIGTERM
	require.Eventually(t, func() bool {
		rec := httptest.NewRecorder()
		r.API.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code == http.StatusServiceUnavailable
	}, time.Second, time.Millisecond)
	res := <-inflight
	require.Equal(t, http.StatusOK, res.code, res.body)
	require.Contains(t, res.body, `"degraded":false`)
	require.NoError(t, <-served)
}

// waitReady waits, boundedly, for the router's warm-up to end.
func waitReady(t *testing.T, r *app.Router) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.WaitReady(ctx))
}

// TestIndexIVFImpliesInt8: --index ivf turns int8 on unless --quantization
// says otherwise, which is refused; flat leaves --quantization alone.
func TestIndexIVFImpliesInt8(t *testing.T) {
	parse := func(args ...string) (store.Quantization, store.IndexKind, error) {
		fs := flag.NewFlagSet("shard", flag.ContinueOnError)
		q := fs.String("quantization", "none", "")
		idx := fs.String("index", "flat", "")
		require.NoError(t, parseFlags(fs, args))
		return parseScan(fs, *q, *idx)
	}
	q, idx, err := parse("--index", "ivf")
	require.NoError(t, err)
	require.Equal(t, store.QuantInt8, q)
	require.Equal(t, store.IndexIVF, idx)
	q, _, err = parse("--index", "ivf", "--quantization", "int8")
	require.NoError(t, err)
	require.Equal(t, store.QuantInt8, q)
	_, _, err = parse("--index", "ivf", "--quantization", "none")
	require.ErrorContains(t, err, "needs --quantization int8")
	q, idx, err = parse()
	require.NoError(t, err)
	require.Equal(t, store.QuantNone, q)
	require.Equal(t, store.IndexFlat, idx)
	_, _, err = parse("--index", "hnsw")
	require.ErrorContains(t, err, "--index")
}

// TestRaftTimingBounds: the shard's raft timings are refused at start
// outside 100ms..1m, with an election timeout under the heartbeat timeout,
// or a leader silence under 3x the election timeout; each error names the
// flag, and the environment twins are checked alike.
func TestRaftTimingBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // empty: accepted
	}{
		{name: "defaults"},
		{name: "both at the lower bound", args: []string{"--raft-heartbeat-timeout=100ms", "--raft-election-timeout=100ms"}},
		{name: "both at the upper bound", args: []string{"--raft-heartbeat-timeout=1m", "--raft-election-timeout=1m", "--max-leader-silence=3m"}},
		{name: "longer election timeout", args: []string{"--raft-heartbeat-timeout=500ms", "--raft-election-timeout=2s", "--max-leader-silence=6s"}},
		{name: "heartbeat too short", args: []string{"--raft-heartbeat-timeout=99ms"}, wantErr: "--raft-heartbeat-timeout 99ms: want 100ms..1m0s"},
		{name: "heartbeat zero", args: []string{"--raft-heartbeat-timeout=0"}, wantErr: "--raft-heartbeat-timeout 0s: want 100ms..1m0s"},
		{name: "heartbeat too long", args: []string{"--raft-heartbeat-timeout=61s", "--raft-election-timeout=61s", "--max-leader-silence=10m"}, wantErr: "--raft-heartbeat-timeout 1m1s: want"},
		{name: "election too short", args: []string{"--raft-election-timeout=50ms"}, wantErr: "--raft-election-timeout 50ms: want"},
		{name: "election too long", args: []string{"--raft-election-timeout=2m", "--max-leader-silence=10m"}, wantErr: "--raft-election-timeout 2m0s: want"},
		{name: "negative", args: []string{"--raft-election-timeout=-1s"}, wantErr: "--raft-election-timeout -1s: want"},
		{name: "election under heartbeat", args: []string{"--raft-heartbeat-timeout=2s", "--raft-election-timeout=1s"}, wantErr: "--raft-election-timeout 1s is under --raft-heartbeat-timeout 2s"},
		{name: "silence under 3x election", args: []string{"--raft-election-timeout=2s"}, wantErr: "--max-leader-silence 5s is under 3x --raft-election-timeout 2s"},
		{name: "silence exactly 3x election", args: []string{"--raft-election-timeout=2s", "--max-leader-silence=6s"}},
		{name: "no unit", args: []string{"--raft-heartbeat-timeout=1"}, wantErr: "invalid value"},
		{name: "from the environment", env: map[string]string{"TRAWL_RAFT_HEARTBEAT_TIMEOUT": "3s", "TRAWL_RAFT_ELECTION_TIMEOUT": "3s", "TRAWL_MAX_LEADER_SILENCE": "9s"}},
		{name: "bad value from the environment", env: map[string]string{"TRAWL_RAFT_ELECTION_TIMEOUT": "20ms"}, wantErr: "--raft-election-timeout 20ms: want"},
		{name: "command line wins", args: []string{"--raft-election-timeout=1s"}, env: map[string]string{"TRAWL_RAFT_ELECTION_TIMEOUT": "20ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("shard", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			timings := raftTimingFlags(fs)
			err := parseFlags(fs, tc.args)
			if err == nil {
				err = timings.check()
			}
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// TestCollectionFlags: serve's --collection, --ensure-collection (repeatable,
// and TRAWL_ENSURE_COLLECTIONS with ";") and --max-collections, parsed with
// catalog.ParseSpec and checked at start; each error names the flag or the
// value.
func TestCollectionFlags(t *testing.T) {
	spec := func(name string, dim int, m vector.Metric, q, idx string) catalog.Spec {
		return catalog.Spec{Name: name, Settings: catalog.Settings{Dim: dim, Metric: m, Quantization: q, Index: idx, Float32: catalog.DefaultFloat32(q)}}
	}
	notes := spec("notes", 384, vector.Cosine, catalog.QuantNone, catalog.IndexFlat)
	img := spec("img", 768, vector.DotProduct, catalog.QuantInt8, catalog.IndexIVF)
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		def     string
		ensure  []catalog.Spec
		max     int
		wantErr string // empty: accepted
	}{
		{name: "defaults", def: "trawl", max: coordinator.DefaultMaxCollections},
		{name: "repeated", args: []string{"--ensure-collection", "notes=384:cosine", "--ensure-collection=img=768:dot:int8:ivf"},
			def: "trawl", ensure: []catalog.Spec{notes, img}, max: 1000},
		{name: "ivf implies int8", args: []string{"--ensure-collection", "img=768:dot:none:ivf"}, def: "trawl", ensure: []catalog.Spec{img}, max: 1000},
		{name: "from the environment", env: map[string]string{"TRAWL_ENSURE_COLLECTIONS": "notes=384:cosine; img=768:dot:int8:ivf;", "TRAWL_MAX_COLLECTIONS": "5", "TRAWL_COLLECTION": "notes"},
			def: "notes", ensure: []catalog.Spec{notes, img}, max: 5},
		{name: "command line wins", args: []string{"--ensure-collection", "img=768:dot:int8:ivf"}, env: map[string]string{"TRAWL_ENSURE_COLLECTIONS": "notes=384:cosine"},
			def: "trawl", ensure: []catalog.Spec{img}, max: 1000},
		{name: "same twice is once", args: []string{"--ensure-collection", "notes=384:cosine", "--ensure-collection", "notes=384:cosine:none:flat"},
			def: "trawl", ensure: []catalog.Spec{notes}, max: 1000},
		{name: "twice, other settings", args: []string{"--ensure-collection", "notes=384:cosine", "--ensure-collection", "notes=384:dot"},
			wantErr: `collection "notes" given twice with different settings`},
		{name: "no settings", args: []string{"--ensure-collection", "notes"}, wantErr: "want NAME=DIM:METRIC"},
		{name: "bad dimension", args: []string{"--ensure-collection", "notes=0:cosine"}, wantErr: "dimension 0"},
		{name: "bad metric", args: []string{"--ensure-collection", "notes=3:hamming"}, wantErr: "unknown metric"},
		{name: "bad name", args: []string{"--ensure-collection", "no/tes=3:l2"}, wantErr: "only letters"},
		{name: "bad in the environment", env: map[string]string{"TRAWL_ENSURE_COLLECTIONS": "notes=384:cosine;img=768:cosine:int4"},
			wantErr: `TRAWL_ENSURE_COLLECTIONS="notes=384:cosine;img=768:cosine:int4"`},
		{name: "no max", args: []string{"--max-collections", "0"}, wantErr: "--max-collections 0: want at least 1"},
		{name: "more than max", args: []string{"--max-collections", "1", "--ensure-collection", "notes=384:cosine", "--ensure-collection", "img=768:dot"},
			wantErr: "--ensure-collection names 2 collections, more than --max-collections 1"},
		{name: "empty default", args: []string{"--collection", ""}, wantErr: "--collection"},
		{name: "bad default", args: []string{"--collection", "a b"}, wantErr: "--collection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c := addCollectionFlags(fs)
			err := parseFlags(fs, tc.args)
			if err == nil {
				err = c.check()
			}
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.def, *c.def)
			require.Equal(t, tc.max, *c.max)
			require.Equal(t, tc.ensure, []catalog.Spec(c.ensure))
		})
	}
	var e ensureFlag
	require.NoError(t, e.Set("notes=384:cosine;img=768:dot:int8:ivf"))
	require.Equal(t, "notes=384:cosine:none:flat:in_memory;img=768:dot:int8:ivf:on_disk", e.String(), "String reads back as Set takes it")
	var back ensureFlag
	require.NoError(t, back.Set(e.String()))
	require.Equal(t, e, back)
}

// router dev refuses a collection it could not create before starting
// anything.
func TestDevRefusesWhatTheCatalogWould(t *testing.T) {
	for args, want := range map[string]string{
		"--collection=a/b": `--collection: invalid collection: name "a/b"`,
		"--dim=8193":       "--dim 8193: want 1..8192",
	} {
		require.ErrorContains(t, runDev(context.Background(), []string{args}), want)
	}
}

// TestBadKeyFileStopsServe: a key file with a bad line is a start-up
// error naming the file and the line, before anything is dialled.
func TestBadKeyFileStopsServe(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, err string }{
		{"admin\ntenant a,b admin\n", "line 2: access \"admin\", want read or write"},
		{"# no keys\n", "no key in it"},
	} {
		path := filepath.Join(dir, "keys")
		require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
		err := runServe(context.Background(), []string{"--shard", "s=127.0.0.1:1", "--api-key-file", path})
		require.ErrorContains(t, err, "--api-key-file: "+path+": bad API key file: "+tc.err)
	}
}

// A default deadline outside 0..--max-deadline-ms stops serve before it
// listens, naming both flags.
func TestDefaultDeadlineFlagBounds(t *testing.T) {
	for _, args := range [][]string{
		{"--default-deadline-ms", "-1"},
		{"--default-deadline-ms", "10001"},
		{"--max-deadline-ms", "500", "--default-deadline-ms", "600"},
	} {
		err := runServe(context.Background(), append([]string{"--shard", "s=127.0.0.1:1"}, args...))
		require.ErrorContains(t, err, "--default-deadline-ms must be 0 (the built-in default) or 1..", args)
		require.ErrorContains(t, err, "(--max-deadline-ms)", args)
	}
}

// --pprof answers without a key, so a keyed router refuses it.
func TestPprofRefusedWithAPIKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte("admin\n"), 0o600))
	err := runServe(context.Background(), []string{"--shard", "s=127.0.0.1:1", "--api-key-file", path, "--pprof"})
	require.ErrorContains(t, err, "--pprof serves profiles without an API key: it cannot be combined with --api-key-file")
}
