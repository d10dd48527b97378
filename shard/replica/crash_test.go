package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// The crash test re-executes the test binary as a shard process: with
// childEnv set, TestMain runs runChild instead of the tests.
const (
	childEnv    = "TRAWL_SHARD_CRASH_CHILD"
	childDirEnv = "TRAWL_SHARD_CRASH_DIR"
	// childFloat32Env is the legacy collection's float32 placement.
	childFloat32Env = "TRAWL_SHARD_CRASH_FLOAT32"
	childAddrEnv    = "TRAWL_SHARD_CRASH_ADDR"
	// childSegRowsEnv is the rows of a segment file (0: the default).
	childSegRowsEnv = "TRAWL_SHARD_CRASH_SEGROWS"
	// childQuantEnv is the legacy collection's quantization (none when
	// unset); an int8 child trains its scale at childInt8MinRows rows.
	childQuantEnv = "TRAWL_SHARD_CRASH_QUANT"
	// childLog is the children's log, beside their data directory.
	childLog = "child.log"
	// crashTestEnv gates the crash tests: each SIGKILLs a shard process
	// a few dozen times (about 3 minutes under -race on 2 cores), so they
	// run under `make test-crash`, which .ci/run runs, not `make test`.
	crashTestEnv = "TRAWL_CRASH_TEST"
)

func skipUnlessCrashTest(t *testing.T, what string) {
	t.Helper()
	if os.Getenv(crashTestEnv) == "" {
		t.Skipf("%s: set %s=1 (make test-crash)", what, crashTestEnv)
	}
}

// runChild serves one replica (a group of one) on childAddrEnv with its
// data in childDirEnv until it is killed. Snapshots are frequent, so kills
// land before, during and after them.
func runChild() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fail := func(err error) {
		log.Error("crash child", "err", err)
		os.Exit(2)
	}
	// The replica's log goes to a file beside its data, which the test
	// prints only when it fails: raft's warnings (unfinished snapshots
	// found after a kill, the election after every start) are expected
	// here, and the snapshots taken and restored are what a lost write
	// needs explained.
	lf, err := os.OpenFile(filepath.Join(os.Getenv(childDirEnv), "..", childLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(lf, "=== child started, pid %d\n", os.Getpid())
	quiet := slog.New(slog.NewTextHandler(lf, nil))
	addr := os.Getenv(childAddrEnv)
	// The pid, for a parent that runs us under a tracer.
	if err := os.WriteFile(filepath.Join(os.Getenv(childDirEnv), "..", "child.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		fail(err)
	}
	ln, err := listenRetry(addr)
	if err != nil {
		fail(err)
	}
	segRows, _ := strconv.Atoi(os.Getenv(childSegRowsEnv))
	rep, err := Open(Config{
		SegmentRows: segRows, Int8MinRows: childInt8MinRows,
		Legacy: catalog.Settings{Dim: testDim, Metric: vector.Euclidean, Float32: os.Getenv(childFloat32Env),
			Quantization: os.Getenv(childQuantEnv)}, Kernel: vector.Generic(),
		DataDir: os.Getenv(childDirEnv), Advertise: addr, Logger: quiet,
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		BackgroundNice: DefaultBackgroundNice, // as `router shard` runs
	})
	if err != nil {
		fail(err)
	}
	g := grpc.NewServer(shard.ServerOptions()...)
	rep.Register(g)
	go func() { _ = g.Serve(ln) }()
	// A snapshot every 100 ms while there are new writes (raft's own
	// threshold is 512 entries), so kills land before, during and after
	// them.
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			_ = rep.Node.Snapshot()
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	g.Stop()
	_ = rep.Close()
	os.Exit(0)
}

// childInt8MinRows is the rows an int8 crash child trains its scale at:
// few, so the codes files are written through most of the test.
const childInt8MinRows = 50

// sentRecord is what the test sent for one id.
type sentRecord struct {
	vec     []byte
	payload []byte
}

// TestCrashKeepsEveryAcknowledgedWrite kills a shard process 25 times
// mid-write, with its float32 rows in memory and on disk (segment files,
// rebuilt at each start from the snapshot and log).
func TestCrashKeepsEveryAcknowledgedWrite(t *testing.T) {
	skipUnlessCrashTest(t, "kills a shard process 25 times")
	for _, place := range []string{catalog.Float32InMemory, catalog.Float32OnDisk} {
		t.Run(place, func(t *testing.T) { crashRounds(t, place) })
	}
}

func crashRounds(t *testing.T, placement string) {
	proc := newCrashingShard(t)
	dir := proc.dir

	var (
		mu    sync.Mutex
		sent  = map[string]sentRecord{}
		acked = map[string]bool{}
		ackIx = map[string]string{} // when each acknowledged write committed
	)
	rng := rand.New(rand.NewPCG(7, 11))
	const kills = 25
	next := 0
	for round := 0; round <= kills; round++ {
		cmd, c := proc.start(t, childFloat32Env+"="+placement)

		// Every acknowledged write is back, byte for byte; an
		// unacknowledged one is absent or exactly what was sent.
		st, err := c.Stats(ctx(t))
		require.NoError(t, err)
		mu.Lock()
		for id, want := range sent {
			v, err := c.Get(ctx(t), id, 0)
			if status.Code(err) == codes.NotFound {
				require.False(t, acked[id], "round %d: acknowledged write %s (%s) lost", round, id, ackIx[id])
				continue
			}
			require.NoError(t, err)
			require.Equal(t, want.vec, v.GetVector(), "round %d: %s has bytes nobody sent", round, id)
			require.Equal(t, want.payload, v.GetPayload(), "round %d: %s has a payload nobody sent", round, id)
		}
		t.Logf("round %d: %d sent, %d acknowledged, %d stored, applied index %d", round, len(sent), len(acked), st.GetDocCount(), st.GetAppliedIndex())
		if placement == catalog.Float32OnDisk && st.GetDocCount() > 0 {
			segs, err := filepath.Glob(filepath.Join(dir, SegmentDir, "*", "*.npy"))
			require.NoError(t, err)
			require.NotEmpty(t, segs, "round %d: the rows are in segment files", round)
			// Files of earlier processes are removed at start: they do not
			// pile up with the kills.
			require.LessOrEqual(t, len(segs), int(2*st.GetDocCount()/512+3), "round %d: segment files", round)
		}
		mu.Unlock()
		if round == kills {
			stopCrashingShard(t, cmd, c)
			break
		}

		// Two writers stream upserts of fresh ids; the process is killed
		// at a random moment among them.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 2 {
			mu.Lock()
			seed := uint64(round*2 + w)
			mu.Unlock()
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, 3))
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					batch := make([]*shardpb.Vector, 1+r.IntN(3))
					for i := range batch {
						id := fmt.Sprintf("doc-%d", next)
						next++
						v := make([]float32, testDim)
						for j := range v {
							v[j] = float32(r.NormFloat64())
						}
						rec := sentRecord{vec: shard.EncodeVector(v), payload: fmt.Appendf(nil, `{"n":%d}`, r.Uint64())}
						sent[id] = rec
						batch[i] = &shardpb.Vector{Id: id, Vector: rec.vec, Payload: rec.payload}
					}
					mu.Unlock()
					wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					ix, err := c.Upsert(wctx, place, batch)
					cancel()
					if err != nil {
						var nl *shard.NotLeaderError
						if errors.As(err, &nl) {
							continue
						}
						return // killed: the rest of this round is unacknowledged
					}
					mu.Lock()
					for _, v := range batch {
						acked[v.GetId()] = true
						ackIx[v.GetId()] = fmt.Sprintf("index %d in round %d", ix, round)
					}
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(30+rng.IntN(250)) * time.Millisecond)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		close(stop)
		wg.Wait()
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(acked), 100, "the test acknowledged too few writes to mean anything")
}

// crashingShard is a shard process the crash tests start, SIGKILL and
// start again: one data directory, one address, its log beside the
// directory (printed when the test fails).
type crashingShard struct {
	base, dir, addr string
	exe             string
}

func newCrashingShard(t *testing.T) *crashingShard {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	base := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			printChildLog(t, filepath.Join(base, childLog))
		}
	})
	return &crashingShard{base: base, dir: filepath.Join(base, "data"), addr: restartablePort(t), exe: exe}
}

// start runs the shard process (env adds to the child's settings) and
// waits until it serves.
func (s *crashingShard) start(t *testing.T, env ...string) (*exec.Cmd, *client.Conn) {
	t.Helper()
	cmd := exec.Command(s.exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childDirEnv+"="+s.dir, childAddrEnv+"="+s.addr)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	// A test that fails mid-round leaves its shard running: end it, or it
	// outlives the test binary and takes CPU from whatever runs next.
	// Rounds that killed or stopped it make both calls no-ops.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c, err := client.Dial(s.addr, client.DialConfig{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		return c.Probe(pctx) == nil
	}, 60*time.Second, 20*time.Millisecond, "the restarted shard never served")
	return cmd, c
}

// stop ends the last round: a clean shutdown this time.
func stopCrashingShard(t *testing.T, cmd *exec.Cmd, c *client.Conn) {
	t.Helper()
	c.Close()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
}

// printChildLog logs the children's restores, snapshots and elections, the
// story of a lost write.
func printChildLog(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("no child log: %v", err)
		return
	}
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "===") || strings.Contains(line, "snapshot") ||
			strings.Contains(line, "restor") || strings.Contains(line, "leader state") || strings.Contains(line, "level=ERROR") {
			t.Log(strings.TrimSpace(line))
		}
	}
}
