package replica

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// TestMeasureHeartbeatsUnderBulkLoad measures whether a bulk load starves
// raft's heartbeats: a 3-replica group on disk (replica.Open, fsync'd
// raft-boltdb logs in temporary directories) takes TRAWL_MEASURE_ROWS
// (20 000) 1536-D vectors in batches of 256 through its leader, from
// TRAWL_MEASURE_WRITERS (4) concurrent writers, as fast as it acknowledges
// them. Meanwhile it samples every replica's role and serving state every
// 5 ms, and records raft's own telemetry (go-metrics): the leader's
// heartbeat round trips and the age of its last contact with each follower
// at every lease check, the followers' heartbeat handling and log stores,
// and the election counters. TRAWL_MEASURE_HEARTBEAT sets the heartbeat and
// election timeouts (default: the production 1 s), to find the margin;
// TRAWL_MEASURE_INMEMORY=1 keeps raft's log in memory (no disk, no fsync),
// to tell the disk's share from the CPU's.
//
// It asserts nothing about the figures (quoted in the report); run with
// TRAWL_MEASURE=1, without -race:
//
//	TRAWL_MEASURE=1 go test -run TestMeasureHeartbeatsUnderBulkLoad -v ./shard/replica/
func TestMeasureHeartbeatsUnderBulkLoad(t *testing.T) {
	if os.Getenv("TRAWL_MEASURE") == "" {
		t.Skip("set TRAWL_MEASURE=1 to measure")
	}
	const dim, batch = 1536, 256
	rows := hbEnvInt(t, "TRAWL_MEASURE_ROWS", 20000)
	writers := hbEnvInt(t, "TRAWL_MEASURE_WRITERS", 4)
	timeout := time.Second
	if v := os.Getenv("TRAWL_MEASURE_HEARTBEAT"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		timeout = d
	}

	// The corpus, encoded before the clock starts.
	r := rand.New(rand.NewPCG(1, 2))
	var batches [][]*shardpb.Vector
	for i := 0; i < rows; i += batch {
		vs := make([]*shardpb.Vector, min(batch, rows-i))
		for j := range vs {
			v := make([]float32, dim)
			for k := range v {
				v[k] = float32(r.NormFloat64())
			}
			vs[j] = &shardpb.Vector{Id: "row-" + strconv.Itoa(i+j), Vector: shard.EncodeVector(v)}
		}
		batches = append(batches, vs)
	}

	sink := hbInstallSink(t)
	inMemory := os.Getenv("TRAWL_MEASURE_INMEMORY") != ""
	reps := hbGroup(t, 3, dim, timeout, inMemory)
	leader := hbWaitLeader(reps, 30*time.Second)
	require.NotNil(t, leader, "no serving leader")

	// Sample roles and serving every 5 ms from now until the load is in.
	type sample struct {
		at      time.Time
		leaders []int // indexes of the replicas whose role is leader
		roles   []string
		serving []bool
	}
	var (
		samples []sample
		stop    = make(chan struct{})
		sampled = make(chan struct{})
	)
	go func() {
		defer close(sampled)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			s := sample{at: time.Now()}
			for i, rp := range reps {
				role := rp.rep.Node.Role()
				s.roles = append(s.roles, role)
				s.serving = append(s.serving, rp.rep.Server.Serving())
				if role == "leader" {
					s.leaders = append(s.leaders, i)
				}
			}
			samples = append(samples, s)
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()

	sink.start()
	rt0 := hbReadRuntime()
	t0 := time.Now()
	var (
		next     atomic.Int64
		retries  atomic.Int64
		mu       sync.Mutex
		latency  []time.Duration
		errs     []string
		leaderMu sync.Mutex
		wg       sync.WaitGroup
	)
	current := func() *hbReplica {
		leaderMu.Lock()
		defer leaderMu.Unlock()
		return leader
	}
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(batches) {
					return
				}
				for attempt := 0; ; attempt++ {
					ld := current()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					start := time.Now()
					_, err := ld.conn.Upsert(ctx, hbPlace, batches[i])
					cancel()
					if err == nil {
						mu.Lock()
						latency = append(latency, time.Since(start))
						mu.Unlock()
						break
					}
					// A leader change: find the new leader and send the
					// batch again (an upsert is idempotent).
					retries.Add(1)
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					if attempt > 20 {
						t.Errorf("batch %d: %v", i, err)
						return
					}
					nl := hbWaitLeader(reps, 30*time.Second)
					if nl == nil {
						t.Errorf("batch %d: no serving leader after %v", i, err)
						return
					}
					leaderMu.Lock()
					leader = nl
					leaderMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	loaded := time.Since(t0)
	sink.stop()
	rt := hbReadRuntime().since(rt0)
	// Every replica applies everything.
	deadline := time.Now().Add(2 * time.Minute)
	for _, rp := range reps {
		for rp.rep.Store.Len() < rows && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		require.Equal(t, rows, rp.rep.Store.Len(), "replica %s did not apply every row", rp.addr)
	}
	applied := time.Since(t0)
	close(stop)
	<-sampled

	// Leadership as sampled: each change of the leader (or to no single
	// leader) between consecutive samples.
	var (
		changes      int
		leaderless   time.Duration
		notServing   = make([]time.Duration, len(reps))
		roleSeen     = map[string]int{}
		prevLeader   = -2
		lastSampleAt time.Time
	)
	for _, s := range samples {
		cur := -1
		if len(s.leaders) == 1 {
			cur = s.leaders[0]
		}
		if prevLeader != -2 && cur != prevLeader {
			changes++
		}
		if !lastSampleAt.IsZero() {
			gap := s.at.Sub(lastSampleAt)
			if cur == -1 {
				leaderless += gap
			}
			for i, ok := range s.serving {
				if !ok {
					notServing[i] += gap
				}
			}
		}
		for _, role := range s.roles {
			roleSeen[role]++
		}
		prevLeader, lastSampleAt = cur, s.at
	}

	mb := float64(rows*dim*4) / (1 << 20)
	store := "raft-boltdb on disk, fsync'd"
	if inMemory {
		store = "raft's in-memory stores, no fsync"
	}
	t.Logf("MEASURED: %d x %d-D vectors (%.0f MiB of float32) in %d batches of %d from %d writers, %s, raft heartbeat/election timeout %s (leader lease %s, heartbeats every %s-%s)",
		rows, dim, mb, len(batches), batch, writers, store, timeout, timeout/2, timeout/10, timeout/5)
	t.Logf("MEASURED: acknowledged in %s (%.0f vectors/s, %.1f MiB/s); every replica applied all in %s",
		loaded.Round(time.Millisecond), float64(rows)/loaded.Seconds(), mb/loaded.Seconds(), applied.Round(time.Millisecond))
	t.Logf("MEASURED: upsert latency %s; %d retried batches %v", hbDurations(latency), retries.Load(), hbFirst(errs, 3))
	t.Logf("MEASURED: leadership: %d changes in %d role samples (%v), %s without a single leader; not serving per replica %v",
		changes, len(samples), roleSeen, leaderless.Round(time.Millisecond), hbRound(notServing))
	for _, c := range []string{"raft.state.candidate", "raft.state.leader", "raft.transition.heartbeat_timeout", "raft.transition.leader_lease_timeout"} {
		t.Logf("MEASURED: counter %s = %g", c, sink.counter(c))
	}
	for _, name := range sink.sampleNames() {
		if !hbReported(name) {
			continue
		}
		t.Logf("MEASURED: %s ms: %s", name, hbSummary(sink.samplesOf(name)))
	}
	t.Logf("MEASURED: this process used %.2f of the machine's %d cores while loading (user+system); %d GCs, GC %.0f %% of its CPU, longest GC pause %s",
		rt.cpu.Seconds()/loaded.Seconds(), runtime.NumCPU(), rt.gcs, 100*rt.gcCPU.Seconds()/max(rt.cpu.Seconds(), 1e-9), rt.pauseMax)
	t.Logf("MEASURED: goroutines waited runnable for a CPU (scheduler latency): %s", rt.sched)
	for peer, gaps := range sink.heartbeatGaps() {
		t.Logf("MEASURED: heartbeat completions to %s: %d, longest gap between two %s", peer, len(gaps)+1, slices.Max(gaps).Round(time.Millisecond))
	}
}

// hbReported: the telemetry the report prints, by raft's names (with the
// follower's id in braces where raft labels it; raft also sends those
// unlabelled with the id in the name, which are left out).
func hbReported(name string) bool {
	base, _, labelled := strings.Cut(name, "{")
	switch base {
	case "raft.replication.heartbeat", // leader: a heartbeat's round trip
		"raft.replication.appendEntries.rpc": // leader: an AppendEntries round trip (entries stored and answered)
		return labelled
	case "raft.leader.lastContact", // leader: age of a follower's last answer at each lease check
		"raft.rpc.processHeartbeat",        // follower: handling one heartbeat
		"raft.rpc.appendEntries",           // follower: one AppendEntries on its main loop
		"raft.rpc.appendEntries.storeLogs", // follower: storing (fsync) its entries
		"raft.leader.dispatchLog",          // leader: storing its own batch
		"raft.commitTime",                  // leader: from dispatch to commit
		"raft.fsm.apply":                   // every replica: applying one entry to the store
		return true
	}
	return false
}

// hbPlace is the placement the measured writes carry.
var hbPlace = shard.Placement{Fingerprint: "hb", Shard: "shard-0"}

// hbReplica is one replica of the measured group, served on its own
// loopback port.
type hbReplica struct {
	addr string
	rep  *Replica
	g    *grpc.Server
	conn *client.Conn
}

// hbGroup opens n replicas of one shard through replica.Open, each on its
// own data directory (or in memory: no disk, no fsync) and gRPC server,
// with heartbeat and election timeouts of timeout.
func hbGroup(t *testing.T, n, dim int, timeout time.Duration, inMemory bool) []*hbReplica {
	t.Helper()
	kernel, err := vector.FromEnv()
	require.NoError(t, err)
	var (
		lns   []net.Listener
		peers []string
		reps  []*hbReplica
	)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		peers = append(peers, ln.Addr().String())
	}
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("TRAWL_MEASURE_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	for i, ln := range lns {
		rep, err := Open(Config{
			Legacy: catalog.Settings{Dim: dim, Metric: vector.Cosine}, Kernel: kernel,
			DataDir: filepath.Join(t.TempDir(), fmt.Sprint("r", i)), InMemory: inMemory, Advertise: peers[i], Peers: peers,
			HeartbeatTimeout: timeout, ElectionTimeout: timeout, MaxLeaderSilence: max(5*time.Second, 3*timeout),
			Logger: log.With("replica", i),
		})
		require.NoError(t, err)
		g := grpc.NewServer(shard.ServerOptions()...)
		rep.Register(g)
		go g.Serve(ln)
		conn, err := client.Dial(peers[i], client.DialConfig{})
		require.NoError(t, err)
		reps = append(reps, &hbReplica{addr: peers[i], rep: rep, g: g, conn: conn})
	}
	t.Cleanup(func() {
		for _, rp := range reps {
			rp.conn.Close()
			rp.g.Stop()
			require.NoError(t, rp.rep.Close())
		}
	})
	return reps
}

// hbWaitLeader waits for a replica that leads and serves; nil if none
// does within the time given.
func hbWaitLeader(reps []*hbReplica, within time.Duration) *hbReplica {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, rp := range reps {
			if rp.rep.Node.IsLeader() && rp.rep.Server.Serving() && rp.conn.Ready() {
				return rp
			}
		}
	}
	return nil
}

func hbEnvInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

// hbSink is a go-metrics sink that keeps raft's telemetry while it
// records: every sample and counter by name (a peer label appended in
// braces), and when each heartbeat to each follower completed.
type hbSink struct {
	mu        sync.Mutex
	on        bool
	samples   map[string][]float32
	counters  map[string]float32
	heartbeat map[string][]time.Time
}

// hbInstallSink makes a new hbSink the global go-metrics sink, which
// raft reports to, until the test ends.
func hbInstallSink(t *testing.T) *hbSink {
	s := &hbSink{}
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
	_, err := gometrics.NewGlobal(cfg, s)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = gometrics.NewGlobal(cfg, &gometrics.BlackholeSink{})
	})
	return s
}

func (s *hbSink) start() {
	s.mu.Lock()
	s.on = true
	s.samples, s.counters, s.heartbeat = map[string][]float32{}, map[string]float32{}, map[string][]time.Time{}
	s.mu.Unlock()
}

func (s *hbSink) stop() {
	s.mu.Lock()
	s.on = false
	s.mu.Unlock()
}

func hbKey(key []string, labels []gometrics.Label) string {
	k := strings.Join(key, ".")
	for _, l := range labels {
		k += "{" + l.Value + "}"
	}
	return k
}

func (s *hbSink) SetGauge([]string, float32)                              {}
func (s *hbSink) SetGaugeWithLabels([]string, float32, []gometrics.Label) {}
func (s *hbSink) EmitKey([]string, float32)                               {}
func (s *hbSink) IncrCounter(key []string, v float32)                     { s.IncrCounterWithLabels(key, v, nil) }
func (s *hbSink) AddSample(key []string, v float32)                       { s.AddSampleWithLabels(key, v, nil) }
func (s *hbSink) IncrCounterWithLabels(key []string, v float32, labels []gometrics.Label) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		s.counters[hbKey(key, labels)] += v
	}
}

func (s *hbSink) AddSampleWithLabels(key []string, v float32, labels []gometrics.Label) {
	now := time.Now()
	k := hbKey(key, labels)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return
	}
	s.samples[k] = append(s.samples[k], v)
	if p, ok := strings.CutPrefix(k, "raft.replication.heartbeat{"); ok {
		s.heartbeat[p] = append(s.heartbeat[p], now)
	}
}

func (s *hbSink) counter(name string) float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters[name]
}

func (s *hbSink) sampleNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for k := range s.samples {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func (s *hbSink) samplesOf(name string) []float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples[name])
}

// heartbeatGaps is, per follower, the time between consecutive completed
// heartbeats.
func (s *hbSink) heartbeatGaps() map[string][]time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]time.Duration{}
	for p, ts := range s.heartbeat {
		for i := 1; i < len(ts); i++ {
			out[strings.TrimSuffix(p, "}")] = append(out[strings.TrimSuffix(p, "}")], ts[i].Sub(ts[i-1]))
		}
	}
	return out
}

// hbSummary is n, p50, p99 and max of vs.
func hbSummary(vs []float32) string {
	if len(vs) == 0 {
		return "none"
	}
	slices.Sort(vs)
	q := func(p float64) float32 { return vs[min(len(vs)-1, int(p*float64(len(vs))))] }
	return fmt.Sprintf("n=%d p50=%.1f p99=%.1f max=%.1f", len(vs), q(0.5), q(0.99), vs[len(vs)-1])
}

func hbDurations(ds []time.Duration) string {
	vs := make([]float32, len(ds))
	for i, d := range ds {
		vs[i] = float32(d.Seconds() * 1000)
	}
	return hbSummary(vs) + " ms"
}

func hbRound(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func hbFirst(s []string, n int) []string { return s[:min(n, len(s))] }

// hbRuntime is what the Go runtime and the kernel report of this process:
// CPU used, GC work, and how long runnable goroutines waited for a CPU.
type hbRuntime struct {
	cpu, gcCPU time.Duration
	gcs        uint64
	sched      *metrics.Float64Histogram
	pauses     *metrics.Float64Histogram
}

func hbReadRuntime() hbRuntime {
	ms := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/sched/latencies:seconds"},
		{Name: "/sched/pauses/total/gc:seconds"},
	}
	metrics.Read(ms)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return hbRuntime{
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		gcCPU:  time.Duration(ms[0].Value.Float64() * float64(time.Second)),
		gcs:    ms[1].Value.Uint64(),
		sched:  ms[2].Value.Float64Histogram(),
		pauses: ms[3].Value.Float64Histogram(),
	}
}

// since is the difference from an earlier reading, with the scheduler
// latencies summarised and the longest GC pause found.
func (r hbRuntime) since(from hbRuntime) hbRuntimeDelta {
	d := hbRuntimeDelta{cpu: r.cpu - from.cpu, gcCPU: r.gcCPU - from.gcCPU, gcs: r.gcs - from.gcs}
	sched := hbHistDelta(r.sched, from.sched)
	d.sched = fmt.Sprintf("n=%d p50<=%s p99<=%s p99.9<=%s max<=%s", sched.n(), sched.q(0.5), sched.q(0.99), sched.q(0.999), sched.q(1))
	d.pauseMax = hbHistDelta(r.pauses, from.pauses).q(1)
	return d
}

type hbRuntimeDelta struct {
	cpu, gcCPU time.Duration
	gcs        uint64
	sched      string
	pauseMax   time.Duration
}

// hbHist is a runtime/metrics histogram's counts between two readings.
type hbHist struct {
	counts  []uint64
	buckets []float64
}

func hbHistDelta(a, b *metrics.Float64Histogram) hbHist {
	h := hbHist{counts: slices.Clone(a.Counts), buckets: a.Buckets}
	for i := range h.counts {
		h.counts[i] -= b.Counts[i]
	}
	return h
}

func (h hbHist) n() uint64 {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// q is the upper bound of the bucket holding quantile p (1: the largest
// value seen).
func (h hbHist) q(p float64) time.Duration {
	n := h.n()
	if n == 0 {
		return 0
	}
	want := uint64(math.Ceil(p * float64(n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if c > 0 && seen >= want {
			up := h.buckets[i+1]
			if math.IsInf(up, 1) {
				up = h.buckets[i]
			}
			return time.Duration(up * float64(time.Second)).Round(time.Microsecond)
		}
	}
	return 0
}
