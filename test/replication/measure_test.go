package replication

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// The measurements quoted in the replication note: they assert nothing
// about the figures and run only with TRAWL_REPLICATION_MEASURE=1 (on top
// of the test gate), since they write gigabytes and take minutes.
func measureGate(t *testing.T) {
	t.Helper()
	gate(t)
	if os.Getenv("TRAWL_REPLICATION_MEASURE") == "" {
		t.Skip("set TRAWL_REPLICATION_MEASURE=1 to measure")
	}
}

const measureDim = 1536

// writeNpy writes n random rows of d float32 as a NumPy .npy file (format
// 1.0), the input `router load` takes.
func writeNpy(t *testing.T, path string, n, d int, seed uint64) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", n, d)
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	_, err = w.WriteString("\x93NUMPY\x01\x00")
	require.NoError(t, err)
	require.NoError(t, binary.Write(w, binary.LittleEndian, uint16(len(hdr))))
	_, err = w.WriteString(hdr)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(seed, 1))
	row := make([]byte, 4*d)
	for range n {
		for j := range d {
			binary.LittleEndian.PutUint32(row[4*j:], math.Float32bits(rng.Float32()*2-1))
		}
		_, err = w.Write(row)
		require.NoError(t, err)
	}
	require.NoError(t, w.Flush())
}

func randomVec(rng *rand.Rand, d int) []float32 {
	v := make([]float32, d)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return v
}

// searchLatencies runs one client of k=10 searches until ctx ends and
// returns the latencies of its answers (and how many were degraded).
func searchLatencies(ctx context.Context, r *routerProc, d int) (lat []time.Duration, degraded int) {
	rng := rand.New(rand.NewPCG(5, 7))
	for ctx.Err() == nil {
		q := randomVec(rng, d)
		t0 := time.Now()
		qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a, err := r.search(qctx, q, 10)
		cancel()
		if err != nil {
			continue
		}
		lat = append(lat, time.Since(t0))
		if a.ScatterGather.Degraded {
			degraded++
		}
	}
	return lat, degraded
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// runLoad runs `router load` on file and returns its output and the
// vectors/s its summary reports.
func runLoad(t *testing.T, r *routerProc, file string) (string, float64) {
	t.Helper()
	out, err := exec.Command(routerPath(t), "load", "--router", r.base, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`\(([0-9.]+) vectors/s\)`).FindSubmatch(out)
	require.NotNil(t, m, "no rate in the summary: %s", out)
	rate, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return string(out), rate
}

// TestMeasureBulkLoad: acknowledged upserts/s through `router load` of
// 100 000 × 1536 .npy into 3 shards × 3 replicas, next to the raw commit
// rate of one group (a shard client writing to its leader directly, as
// many batches in flight as the loader keeps); and search latency while
// the load runs against idle.
func TestMeasureBulkLoad(t *testing.T) {
	measureGate(t)
	dir := t.TempDir()
	const rows = 100_000

	// The raw commit rate of one group of three, alone on the machine.
	raw := func() float64 {
		c := startClusterDim(t, 1, measureDim)
		defer func() {
			for _, r := range c.shards[0] {
				r.Kill()
			}
		}()
		var leader *client.Conn
		require.Eventually(t, func() bool {
			for _, r := range c.shards[0] {
				cn, err := client.Dial(r.GRPC, client.DialConfig{})
				if !assert.NoError(t, err) { // not require: this runs on Eventually's goroutine
					return false
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				st, err := cn.Stats(ctx)
				cancel()
				if err == nil && st.GetRole() == "leader" {
					leader = cn
					return true
				}
				cn.Close()
			}
			return false
		}, 30*time.Second, 100*time.Millisecond)
		defer leader.Close()
		p := shard.Placement{Fingerprint: "measure", Shard: "shard-0"}
		var n atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := range 4 { // the loader's default --concurrency
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 3))
				for i := 0; ctx.Err() == nil; i++ {
					vs := make([]*shardpb.Vector, 256)
					for j := range vs {
						vs[j] = &shardpb.Vector{Id: fmt.Sprintf("raw-%d-%d-%d", w, i, j), Vector: shard.EncodeVector(randomVec(rng, measureDim))}
					}
					wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err := leader.Upsert(wctx, p, vs)
					wcancel()
					if err == nil {
						n.Add(int64(len(vs)))
					}
				}
			})
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(t0).Seconds()
	}()
	t.Logf("MEASURED raw commit rate of one 3-replica group (4 batches of 256 in flight to its leader): %.0f vectors/s", raw)

	small, big := filepath.Join(dir, "small.npy"), filepath.Join(dir, "big.npy")
	writeNpy(t, small, 20_000, measureDim, 1)
	writeNpy(t, big, rows, measureDim, 2)
	c := startClusterDim(t, 3, measureDim)
	r := c.startRouter(t, "router", nil)
	_, _ = runLoad(t, r, small)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	idle, _ := searchLatencies(ctx, r, measureDim)
	cancel()

	ctx, cancel = context.WithCancel(context.Background())
	var during []time.Duration
	var degraded int
	done := make(chan struct{})
	go func() {
		defer close(done)
		during, degraded = searchLatencies(ctx, r, measureDim)
	}()
	out, rate := runLoad(t, r, big)
	cancel()
	<-done

	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
	after, _ := searchLatencies(ctx, r, measureDim)
	cancel()

	t.Logf("router load summary:\n%s", out)
	t.Logf("MEASURED router load of %d x %d into 3 shards x 3 replicas: %.0f vectors/s = %.2f x the raw commit rate of one group (%.0f/s)",
		rows, measureDim, rate, rate/raw, raw)
	t.Logf("MEASURED search p50/p99, one client, k=10: idle at 20 000 docs %v / %v (%d answers); during the load %v / %v (%d answers, %d degraded); idle at 100 000 docs %v / %v (%d answers); p99 during / idle after: %.2f",
		quantile(idle, 0.5), quantile(idle, 0.99), len(idle),
		quantile(during, 0.5), quantile(during, 0.99), len(during), degraded,
		quantile(after, 0.5), quantile(after, 0.99), len(after),
		float64(quantile(during, 0.99))/float64(quantile(after, 0.99)))
}

// TestMeasureRestart: a replica holding 200 000 × 1536 vectors, SIGKILLed
// and restarted on its directory: time to serving, next to reading its
// data directory sequentially in the same run.
func TestMeasureRestart(t *testing.T) {
	measureGate(t)
	const rows = 200_000
	file := filepath.Join(t.TempDir(), "rows.npy")
	writeNpy(t, file, rows, measureDim, 3)
	c := startClusterDim(t, 1, measureDim)
	r := c.startRouter(t, "router", nil)
	out, rate := runLoad(t, r, file)
	t.Logf("loaded %d rows at %.0f vectors/s:\n%s", rows, rate, out)

	// A follower, so the group keeps its leader, once it holds every row:
	// the load's last acknowledgement came from the leader, and followers
	// apply a moment later.
	var rep *replica
	require.Eventually(t, func() bool {
		for _, x := range c.shards[0] {
			cn, err := client.Dial(x.GRPC, client.DialConfig{})
			if !assert.NoError(t, err) { // not require: this runs on Eventually's goroutine
				return false
			}
			st, err := cn.Stats(context.Background())
			cn.Close()
			if err == nil && st.GetRole() == "follower" && st.GetDocCount() == rows {
				rep = x
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "no follower holding every row")
	rep.Kill()
	var size int64
	t0 := time.Now()
	require.NoError(t, filepath.Walk(rep.Dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		size += info.Size()
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		for {
			if _, err := f.Read(buf); err != nil {
				return nil
			}
		}
	}))
	read := time.Since(t0)
	t0 = time.Now()
	start(t, &rep.Proc)
	require.Eventually(t, rep.Ready, 120*time.Second, 20*time.Millisecond, "the restarted replica never served")
	took := time.Since(t0)
	// Where the time went: the replica logs its restore and when it
	// began serving.
	b, err := os.ReadFile(rep.Log)
	require.NoError(t, err)
	for _, line := range regexp.MustCompile(`(?m)^.*(snapshot restored|loading replica|serving changed|caught up).*$`).FindAll(b, -1) {
		t.Logf("replica log: %.260s", line)
	}
	t.Logf("MEASURED a replica of %d x %d (%.2f GB on disk) serves %v after it starts; reading its directory sequentially took %v (%.0f MB/s, page cache warm for both)",
		rows, measureDim, float64(size)/1e9, took.Round(time.Millisecond), read.Round(time.Millisecond), float64(size)/1e6/read.Seconds())
}
