package replica

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/localport"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// BenchmarkRestart is a replica's restart-to-serving with its whole
// corpus in its latest snapshot (nothing to replay): a group of one on a
// data directory is loaded with TRAWL_RESTART_ROWS (default 20 000)
// 1536-D rows of an int8 collection (TRAWL_RESTART_INDEX=ivf for IVF,
// built before the snapshot), float32 TRAWL_RESTART_FLOAT32 (default
// on_disk), snapshotted, closed, and each iteration reopens it and waits
// until it serves. It uses only what every version of the replica has,
// so the same file times an older branch in the same run.
//
// TRAWL_RESTART_GROUP=3 times a follower instead, as production restarts
// one: three replicas in this process, each on its own data directory
// and port, are loaded and each snapshotted, and one follower is closed
// and reopened while the other two go on, until it serves again.
//
// TRAWL_RESTART_DIR keeps the loaded data directories (and the ports the
// group's configuration names) there instead of in a temporary
// directory, and a later run with the same rows and group restarts from
// them without loading: two branches then time the same corpus back to
// back.
//
// Besides the time to serving it reports the process's CPU time from Open
// to serving (on a shared machine steadier than the wall time), its
// anonymous RSS per row once serving and after a first int8 query (after
// a GC that returns freed memory to the OS: what the replica holds, plus
// the test binary's few MB; with three replicas, theirs together), the
// first query's latency, and the data directory's allocated bytes per
// row over the float32 rows' bytes. With TRAWL_RESTART_COLD=1 it also
// times a cold sequential read of the files and restarts with the page
// cache dropped (root only: /proc/sys/vm/drop_caches).
func BenchmarkRestart(b *testing.B) {
	rows := envInt("TRAWL_RESTART_ROWS", 20000)
	group := envInt("TRAWL_RESTART_GROUP", 1)
	require.Contains(b, []int{1, 3}, group, "TRAWL_RESTART_GROUP is 1 or 3")
	place32 := os.Getenv("TRAWL_RESTART_FLOAT32")
	if place32 == "" {
		place32 = catalog.Float32OnDisk
	}
	const dim, batch = 1536, 256
	top := os.Getenv("TRAWL_RESTART_DIR")
	if top == "" {
		top = b.TempDir()
	}
	addrs, dirs, loaded := restartLayout(b, top, group, rows)
	settings := catalog.Settings{Dim: dim, Metric: vector.DotProduct, Quantization: catalog.QuantInt8, Float32: place32}
	if os.Getenv("TRAWL_RESTART_INDEX") == "ivf" {
		settings.Index = catalog.IndexIVF
	}
	kernel, err := vector.FromEnv()
	require.NoError(b, err)
	reps, gs := make([]*Replica, group), make([]*grpc.Server, group)
	open := func(i int) {
		cfg := Config{Legacy: settings, Kernel: kernel, DataDir: dirs[i], Advertise: addrs[i],
			SnapshotThreshold: 1 << 30, Logger: testLogger(b)}
		if group > 1 {
			cfg.Peers = addrs
		}
		rep, err := Open(cfg)
		require.NoError(b, err)
		l, err := listenRetry(addrs[i])
		require.NoError(b, err)
		g := grpc.NewServer(shard.ServerOptions()...)
		rep.Register(g)
		go func() { _ = g.Serve(l) }()
		reps[i], gs[i] = rep, g
	}
	closeRep := func(i int) {
		gs[i].Stop()
		require.NoError(b, reps[i].Close())
		reps[i], gs[i] = nil, nil
	}
	defer func() {
		for i := range reps {
			if reps[i] != nil {
				closeRep(i)
			}
		}
	}()
	for i := range group {
		open(i)
	}
	leader := func() int {
		for i, r := range reps {
			if r != nil && r.Node.IsLeader() {
				return i
			}
		}
		return -1
	}
	require.Eventually(b, func() bool {
		for _, r := range reps {
			if !r.Server.Serving() {
				return false
			}
		}
		return leader() >= 0
	}, 10*time.Minute, 10*time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 2))
	if !loaded {
		c, err := client.Dial(addrs[leader()], client.DialConfig{})
		require.NoError(b, err)
		for lo := 0; lo < rows; lo += batch {
			vs := make([]*shardpb.Vector, 0, batch)
			for i := lo; i < min(lo+batch, rows); i++ {
				v := make([]float32, dim)
				for j := range v {
					v[j] = float32(rng.NormFloat64())
				}
				vs = append(vs, &shardpb.Vector{Id: fmt.Sprint("row-", i), Vector: shard.EncodeVector(v)})
			}
			wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err := c.Upsert(wctx, place, vs)
			cancel()
			require.NoError(b, err)
		}
		c.Close()
		// The trainer commits the int8 scale (and the IVF centroids, whose
		// index is then built) before the snapshot.
		require.Eventually(b, func() bool {
			for _, r := range reps {
				if r.Store.Len() != rows || !r.Store.Int8Ready() || (settings.Index == catalog.IndexIVF && !r.Store.IVFIndexed()) {
					return false
				}
			}
			return true
		}, 10*time.Minute, 50*time.Millisecond)
		for _, r := range reps {
			require.NoError(b, r.Node.Snapshot())
		}
		require.NoError(b, os.WriteFile(filepath.Join(top, restartLoaded), []byte(strconv.Itoa(rows)), 0o644))
	} else {
		for j := 0; j < rows; j++ {
			for range dim {
				rng.NormFloat64() // the query after the corpus, as when it loads
			}
		}
	}
	// The replica restarted: the group of one, or a follower of three
	// (the others go on serving).
	who := 0
	if group > 1 {
		who = (leader() + 1) % group
	}
	closeRep(who)
	dir := dirs[who]
	disk, parts := diskBytes(b, dir)
	b.ReportMetric(float64(disk)/float64(rows*dim*4), "disk/float32")
	b.Logf("data directory at rest: %d bytes, %.2fx the float32 rows %v", disk, float64(disk)/float64(rows*dim*4), parts)
	// Each iteration restarts TRAWL_RESTART_TIMES (default 3) times with
	// the data directory's files read into the page cache first, and as
	// many times with it dropped when TRAWL_RESTART_COLD=1, alternating;
	// medians are reported. One iteration (-benchtime=1x) loads the
	// corpus once.
	times := envInt("TRAWL_RESTART_TIMES", 3)
	var kinds []bool // cold or not, by restart
	for range times {
		kinds = append(kinds, false)
		if os.Getenv("TRAWL_RESTART_COLD") == "1" {
			kinds = append(kinds, true)
		}
	}
	if os.Getenv("TRAWL_RESTART_COLD") == "1" {
		// The disk's sequential read of the replica's files, from a cold
		// page cache: every file, and the codes files alone.
		for _, only := range []string{"", ".codes.npy"} {
			dropCaches(b)
			t0 := time.Now()
			n := readAllSuffix(b, dir, only)
			took := time.Since(t0)
			b.Logf("cold sequential read of the data directory's %q files: %d bytes in %.2fs (%.0f MB/s)",
				only, n, took.Seconds(), float64(n)/took.Seconds()/1e6)
		}
	}
	query := make([]float32, dim)
	for j := range query {
		query[j] = float32(rng.NormFloat64())
	}
	b.ResetTimer()
	for range b.N {
		serving, firstQ := map[bool][]float64{}, map[bool][]float64{}
		var anons, anonsQ, cpus []float64
		for _, cold := range kinds {
			b.StopTimer()
			if cold {
				dropCaches(b)
			} else {
				readAll(b, dir)
			}
			b.StartTimer()
			t0, cpu0 := time.Now(), cpuTime(b)
			open(who)
			rep := reps[who]
			require.Eventually(b, rep.Server.Serving, 10*time.Minute, 5*time.Millisecond)
			took, cpu := time.Since(t0), cpuTime(b)-cpu0
			b.StopTimer()
			require.Equal(b, rows, rep.Store.Len())
			anon := rssAnon(b)
			c, err := client.Dial(addrs[who], client.DialConfig{})
			require.NoError(b, err)
			q0 := time.Now()
			qctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err = c.Search(qctx, []client.Query{{Vector: query, K: 10}}, 0)
			cancel()
			first := time.Since(q0)
			require.NoError(b, err)
			c.Close()
			anonQ := rssAnon(b)
			serving[cold] = append(serving[cold], took.Seconds())
			cpus = append(cpus, cpu.Seconds())
			firstQ[cold] = append(firstQ[cold], first.Seconds()*1000)
			anons, anonsQ = append(anons, float64(anon)/float64(rows)), append(anonsQ, float64(anonQ)/float64(rows))
			b.Logf("%d rows %s cold=%v: serving %.2fs (%.2f CPU-s) after Open as a %s of %d; anon RSS %.0f B/row serving, %.0f B/row after a first query of %.1f ms",
				rows, place32, cold, took.Seconds(), cpu.Seconds(), rep.Node.Role(), group,
				float64(anon)/float64(rows), float64(anonQ)/float64(rows), first.Seconds()*1000)
			closeRep(who)
			b.StartTimer()
		}
		b.ReportMetric(median(serving[false]), "s-to-serving")
		b.ReportMetric(median(firstQ[false]), "ms-first-query")
		if len(serving[true]) > 0 {
			b.ReportMetric(median(serving[true]), "s-to-serving-cold")
			b.ReportMetric(median(firstQ[true]), "ms-first-query-cold")
		}
		b.ReportMetric(median(cpus), "cpu-s-to-serving")
		b.ReportMetric(median(anons), "anon-B/row")
		b.ReportMetric(median(anonsQ), "anon-B/row-queried")
	}
}

// restartLoaded marks a BenchmarkRestart directory whose replicas hold
// their corpus, snapshotted; it holds the row count.
const restartLoaded = "loaded"

// restartLayout is the replicas' addresses and data directories under
// top, and whether they already hold rows rows (restartLoaded). The
// addresses are kept in top: the group's stored configuration names
// them, so a later run must listen on the same ports.
func restartLayout(b *testing.B, top string, group, rows int) (addrs, dirs []string, loaded bool) {
	if n, err := os.ReadFile(filepath.Join(top, restartLoaded)); err == nil {
		require.Equal(b, strconv.Itoa(rows), string(n), "%s holds another corpus", top)
		loaded = true
	}
	if a, err := os.ReadFile(filepath.Join(top, "addrs")); err == nil {
		addrs = strings.Fields(string(a))
	} else {
		require.False(b, loaded)
		for range group {
			ln, err := localport.Listen()
			require.NoError(b, err)
			addrs = append(addrs, ln.Addr().String())
			defer ln.Close() // held until all are chosen, so they differ
		}
		require.NoError(b, os.WriteFile(filepath.Join(top, "addrs"), []byte(strings.Join(addrs, "\n")), 0o644))
	}
	require.Len(b, addrs, group, "%s holds a group of another size", top)
	for i := range group {
		d := filepath.Join(top, "data")
		if group > 1 {
			d = filepath.Join(top, fmt.Sprint("replica-", i))
		}
		dirs = append(dirs, d)
	}
	return addrs, dirs, loaded
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// readAll reads every file under dir, so the restart after finds them in
// the page cache.
func readAll(b *testing.B, dir string) { readAllSuffix(b, dir, "") }

// readAllSuffix reads the files under dir whose names end in suffix, in
// 1 MiB reads, each inode once, and returns the bytes read.
func readAllSuffix(b *testing.B, dir, suffix string) int64 {
	seen := map[uint64]bool{}
	buf := make([]byte, 1<<20)
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, suffix) {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		ino := info.Sys().(*syscall.Stat_t).Ino
		if seen[ino] {
			return nil
		}
		seen[ino] = true
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.CopyBuffer(io.Discard, f, buf)
		total += n
		return err
	})
	require.NoError(b, err)
	return total
}

// rssAnon is the process's anonymous resident memory after a GC that
// returns what it freed to the OS.
func rssAnon(b *testing.B) int {
	runtime.GC()
	debug.FreeOSMemory()
	st, err := os.ReadFile("/proc/self/status")
	require.NoError(b, err)
	for line := range strings.Lines(string(st)) {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			require.NoError(b, err)
			return kb << 10
		}
	}
	b.Fatal("no RssAnon in /proc/self/status")
	return 0
}

// diskBytes is the blocks allocated to the files under dir, each inode
// (hard links) counted once, in all and by the directory's entries.
func diskBytes(b *testing.B, dir string) (int64, map[string]int64) {
	seen := map[uint64]bool{}
	parts := map[string]int64{}
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
			rel, _ := filepath.Rel(dir, path)
			parts[strings.SplitN(rel, string(filepath.Separator), 2)[0]] += st.Blocks * 512
		}
		return nil
	})
	require.NoError(b, err)
	return total, parts
}

// dropCaches writes the dirty pages back and empties the page cache.
func dropCaches(b *testing.B) {
	syscall.Sync()
	require.NoError(b, os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0), "dropping the page cache needs root")
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
