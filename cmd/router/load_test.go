package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

func writeNpy(t *testing.T, path string, rows [][]float32) {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", len(rows), len(rows[0]))
	for (10+len(header)+1)%64 != 0 {
		header += " "
	}
	header += "\n"
	b := []byte("\x93NUMPY\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	b = append(b, header...)
	for _, r := range rows {
		for _, f := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

func writeFvecs(t *testing.T, path string, rows [][]float32) {
	var b []byte
	for _, r := range rows {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r)))
		for _, f := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

func writeJSONL(t *testing.T, path string, rows [][]float32) {
	var sb strings.Builder
	for i, r := range rows {
		b, err := json.Marshal(map[string]any{"id": fmt.Sprintf("j-%d", i), "vector": r})
		require.NoError(t, err)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	require.NoError(t, os.WriteFile(path, []byte(sb.String()), 0o600))
}

// startRouter is a real router over a dev cluster of dim-dimensional
// vectors, served by httptest; apiKey, when set, is required on /v1/*.
func startRouter(t *testing.T, dim int, apiKey string) (*devcluster.Cluster, *httptest.Server) {
	dc, err := devcluster.Start(devcluster.Config{Dim: dim, Docs: 1, Seed: 2, Kernel: vector.Generic()})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	cfg := app.Config{Shards: dc.Specs(), Kernel: vector.Generic()}
	if apiKey != "" {
		cfg.Keys = apikey.Single(apiKey)
	}
	r, err := app.New(cfg)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	srv := httptest.NewServer(r.API)
	t.Cleanup(srv.Close)
	waitReady(t, r)
	return dc, srv
}

func TestLoadEveryFormat(t *testing.T) {
	const dim, n = 8, 300 // more than one batch
	dc, srv := startRouter(t, dim, "")
	rows := devcluster.Corpus(n, dim, 3)
	vs := make([][]float32, n)
	for i, rec := range rows {
		vs[i] = rec.Vector
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		file  string
		write func(*testing.T, string, [][]float32)
		id    string
	}{
		{"v.npy", writeNpy, "299"},
		{"v.fvecs", writeFvecs, "150"},
		{"v.jsonl", writeJSONL, "j-299"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			tc.write(t, path, vs)
			var out bytes.Buffer
			require.NoError(t, load(context.Background(), []string{"--router", srv.URL, "--batch", "64", "--concurrency", "3", path}, &out, false))
			require.Contains(t, out.String(), "sent 300, acknowledged 300, failed 0 in ")
			require.NotContains(t, out.String(), "resume with")
			resp, err := http.Get(srv.URL + "/v1/vectors/" + tc.id)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
		})
	}
	// Every replica holds every write once its raft group applied it: the
	// leader at the acknowledgement, followers a moment later.
	total := func(replica int) int {
		n := 0
		for _, reps := range dc.Replicas {
			n += reps[replica].Store.Len()
		}
		return n
	}
	for i := range dc.Replicas[0] {
		require.Eventually(t, func() bool { return total(i) == 1+2*n }, 5*time.Second, 10*time.Millisecond,
			"replica %d: npy and fvecs share ids 0..299, jsonl adds j-*; plus the seed doc (have %d)", i, total(i))
	}
}

// The router's own 400 for a bad record stops the load, names the record,
// and says where to resume; the key goes as the router wants it.
func TestLoadAgainstARealRouter(t *testing.T) {
	const dim = 8
	_, srv := startRouter(t, dim, "s3cret")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(keyFile, []byte("s3cret\n"), 0o600))
	rows := make([][]float32, 40)
	for i := range rows {
		rows[i] = make([]float32, dim)
		rows[i][i%dim] = 1
	}
	rows[25] = make([]float32, dim) // a zero vector: refused under cosine
	path := filepath.Join(dir, "v.npy")
	writeNpy(t, path, rows)

	var out bytes.Buffer
	err := load(context.Background(), []string{"--router", srv.URL, path}, &out, false)
	require.ErrorContains(t, err, "router answered 401 Unauthorized: missing or wrong API key")

	out.Reset()
	err = load(context.Background(), []string{"--router", srv.URL, "--api-key-file", keyFile, "--batch", "10", "--concurrency", "1", path}, &out, false)
	require.ErrorContains(t, err, `records 20..29: router answered 400 Bad Request: vectors[5] (record 25, id "25"): `)
	require.Contains(t, out.String(), "resume with --resume-from 20\n")

	out.Reset()
	rows[25][0] = 1
	writeNpy(t, path, rows)
	require.NoError(t, load(context.Background(), []string{"--router", srv.URL, "--api-key-file", keyFile, "--resume-from", "20", path}, &out, false))
	require.Contains(t, out.String(), "sent 20, acknowledged 20, failed 0, skipped 20 (--resume-from) in ")
}

func TestLoadFlags(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.npy")
	writeNpy(t, path, [][]float32{{1, 2}})
	ca := filepath.Join(dir, "ca.pem")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no file", nil, []string{"--router", "http://127.0.0.1:1"}, "usage: router load"},
		{"two files", nil, []string{path, path}, "usage: router load"},
		{"unknown format", nil, []string{filepath.Join(dir, "v.csv")}, "unknown format"},
		{"batch bound", nil, []string{"--batch", "257", path}, "--batch 257: want 1..256"},
		{"batch from the environment", map[string]string{"TRAWL_BATCH": "0"}, []string{"--batch", "300", path}, "--batch 300"},
		{"concurrency from the environment", map[string]string{"TRAWL_CONCURRENCY": "99"}, []string{path}, "--concurrency 99: want 1..64"},
		{"tls-ca on http", nil, []string{"--tls-ca", ca, path}, "--tls-ca is for an https router"},
		{"missing tls-ca", nil, []string{"--router", "https://127.0.0.1:1", "--tls-ca", ca, path}, "--tls-ca: open"},
		{"missing key file", nil, []string{"--api-key-file", filepath.Join(dir, "nokey"), path}, "--api-key-file: open"},
		{"resume past the end", nil, []string{"--resume-from", "2", path}, "--resume-from 2: cannot skip 2 records"},
		{"bad collection", nil, []string{"--collection", "a/b", path}, `--collection: invalid collection: name "a/b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			require.ErrorContains(t, load(context.Background(), tc.args, &out, false), tc.want)
		})
	}
}

func TestLoadHelpNamesDefaultsAndBounds(t *testing.T) {
	var out bytes.Buffer
	err := load(context.Background(), []string{"--help"}, &out, false)
	require.ErrorIs(t, err, flag.ErrHelp)
	for _, want := range []string{"-batch int", "1..256", "(default 256)", "-concurrency int", "1..64", "(default 4)",
		"-resume-from int", "-collection string", "-api-key-file string", "-tls-ca string", "-router string", "TRAWL_<FLAG>"} {
		require.Contains(t, out.String(), want)
	}
}

// --collection loads into that collection, not the default one.
func TestLoadIntoACollection(t *testing.T) {
	const dim = 8
	_, srv := startRouter(t, dim, "")
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/v1/collections/notes", strings.NewReader(`{"dimension": 4, "metric": "dot"}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	path := filepath.Join(t.TempDir(), "v.jsonl")
	writeJSONL(t, path, [][]float32{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}})
	var out bytes.Buffer
	require.NoError(t, load(context.Background(), []string{"--router", srv.URL, "--collection", "notes", path}, &out, false))
	require.Contains(t, out.String(), "sent 3, acknowledged 3, failed 0 in ")
	status := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, status("/v1/collections/notes/vectors/j-2"))
	require.Equal(t, http.StatusNotFound, status("/v1/vectors/j-2"), "not in the default collection")
}
