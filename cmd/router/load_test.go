package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
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

func TestLoadEveryFormat(t *testing.T) {
	const dim, n = 8, 300 // more than one 256-vector batch
	dc, err := devcluster.Start(devcluster.Config{Dim: dim, Docs: 1, Seed: 2, Kernel: vector.Generic()})
	require.NoError(t, err)
	defer dc.Close()
	specs := dc.Specs()
	r, err := app.New(app.Config{Shards: specs, Kernel: vector.Generic()})
	require.NoError(t, err)
	defer r.Close()
	srv := httptest.NewServer(r.API)
	defer srv.Close()
	waitReady(t, r)

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
			require.NoError(t, runLoad(context.Background(), []string{"--router", srv.URL, path}))
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

func TestLoadRefusesUnknownFormats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.csv")
	require.NoError(t, os.WriteFile(path, []byte("1,2\n"), 0o600))
	require.ErrorContains(t, runLoad(context.Background(), []string{path}), "unknown format")
}
