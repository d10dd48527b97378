package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/backup"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// BenchmarkBackupRestore measures a backup of a seeded collection (3
// shards, one replica each, in this process) and its restore into
// another collection, in MB/s of backup files, beside the disk's
// sequential write rate measured in the same run (a file of the
// backup's size written and fsynced in the same directory); the backup
// includes the int8 codes (.npy), and the restore checks every file and
// every code before writing the rows through the write path. Size with
// TRAWL_BACKUP_BENCH_DOCS (default 100 000) and TRAWL_BACKUP_BENCH_DIM
// (default 256); the collection is int8 (float32 rows on disk).
//
//	go test -run '^$' -bench BenchmarkBackupRestore -benchtime 1x ./internal/app
func BenchmarkBackupRestore(b *testing.B) {
	docs, dim := envInt("TRAWL_BACKUP_BENCH_DOCS", 100_000), envInt("TRAWL_BACKUP_BENCH_DIM", 256)
	kernel, err := vector.FromEnv()
	require.NoError(b, err)
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 1, Dim: dim, Docs: docs, Kernel: kernel,
		Quantization: store.QuantInt8, Collection: "bench"})
	require.NoError(b, err)
	b.Cleanup(dc.Close)
	r, err := app.New(app.Config{Shards: dc.Specs(), Kernel: kernel, WarmupTimeout: 20 * time.Second})
	require.NoError(b, err)
	b.Cleanup(r.Close)
	ctx := context.Background()
	require.NoError(b, r.WaitReady(ctx))
	dir := b.TempDir()
	store := backup.Dir(dir)
	srv := httptest.NewServer(r.API)
	b.Cleanup(srv.Close)
	q, err := json.Marshal(map[string]any{"vector": dc.Corpus[0].Vector, "k": 10})
	require.NoError(b, err)
	search := func() time.Duration {
		t0 := time.Now()
		resp, err := http.Post(srv.URL+"/v1/collections/bench/search?deadline_ms=5000", "application/json", bytes.NewReader(q))
		require.NoError(b, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode)
		return time.Since(t0)
	}
	// Warm up first (connections, page cache, the shards' background
	// work after the load), then the idle figure: before every backup
	// and again after it, so a busy moment of a shared machine on one
	// side shows as the two disagreeing.
	for range 100 {
		search()
	}
	idleRun := func() []time.Duration {
		var out []time.Duration
		for range 200 {
			out = append(out, search())
		}
		return out
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at the start (1, 5, 15 min): %s", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	b.ResetTimer()
	for i := range b.N {
		idle := idleRun()
		var (
			during []time.Duration
			stop   = make(chan struct{})
			done   = make(chan struct{})
		)
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
					during = append(during, search())
				}
			}
		}()
		t0 := time.Now()
		m, err := r.Coordinator.Backup(ctx, "bench", fmt.Sprintf("b%d", i), coordinator.BackupConfig{Store: store})
		require.NoError(b, err)
		backupTook := time.Since(t0)
		close(stop)
		<-done
		after := idleRun()
		both := append(append([]time.Duration(nil), idle...), after...)
		b.ReportMetric(float64(p99(during))/float64(p99(both)), "p99-during/idle")
		b.Logf("search p99 idle %s before the backup, %s after (%d queries each); during the backup %s (%d queries)",
			p99(idle), p99(after), len(idle), p99(during), len(during))
		var bytes int64
		for _, f := range m.Files {
			bytes += f.Bytes
		}
		t0 = time.Now()
		res, err := r.Coordinator.Restore(ctx, "bench", m.ID, fmt.Sprintf("restored-%d", i), coordinator.BackupConfig{Store: store})
		require.NoError(b, err)
		restoreTook := time.Since(t0)
		require.EqualValues(b, docs, res.Rows)
		disk := sequentialWrite(b, filepath.Join(dir, "seq"), bytes)
		mb := float64(bytes) / 1e6
		b.ReportMetric(mb/backupTook.Seconds(), "backup-MB/s")
		b.ReportMetric(mb/restoreTook.Seconds(), "restore-MB/s")
		b.ReportMetric(disk, "disk-seq-MB/s")
		b.ReportMetric(mb, "MB")
		b.Logf("%d docs x %d (int8 collection): %.0f MB backed up in %s, restored in %s; disk writes %.0f MB/s sequentially",
			docs, dim, mb, backupTook.Round(time.Millisecond), restoreTook.Round(time.Millisecond), disk)
		// The machine may be shared: the load says how far to trust the
		// figures.
		if la, err := os.ReadFile("/proc/loadavg"); err == nil {
			b.Logf("load average (1, 5, 15 min): %s", strings.Join(strings.Fields(string(la))[:3], " "))
		}
		_, err = r.Coordinator.DropCollection(ctx, fmt.Sprintf("restored-%d", i))
		require.NoError(b, err)
	}
}

// sequentialWrite writes n bytes to path in 1 MiB blocks, fsyncs, and
// returns the rate in MB/s.
func sequentialWrite(b *testing.B, path string, n int64) float64 {
	f, err := os.Create(path)
	require.NoError(b, err)
	defer os.Remove(path)
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	t0 := time.Now()
	for w := int64(0); w < n; w += int64(len(buf)) {
		_, err := f.Write(buf)
		require.NoError(b, err)
	}
	require.NoError(b, f.Sync())
	took := time.Since(t0)
	require.NoError(b, f.Close())
	return float64(n) / 1e6 / took.Seconds()
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
