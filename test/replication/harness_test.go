// Package replication tests replicated shards the way an operator runs
// them: real `router shard` processes in raft groups of three and real
// `router serve` processes in front, faults made with signals (SIGKILL,
// SIGSTOP/SIGCONT) and wiped data directories, answers checked over HTTP
// against a brute force over what was acknowledged.
//
// The tests start a dozen processes and take minutes, so they run under
// `make test-replication` (TRAWL_REPLICATION_TEST=1) and are skipped by a
// plain `go test ./...`.
package replication

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/internal/shardproc"
)

const (
	gateEnv = "TRAWL_REPLICATION_TEST"
	dim     = 64
	// queryDeadline is generous: a dozen processes share two cores, and
	// what these tests judge is which answers are complete and exact, not
	// latency (the fault tests in internal/app hold the deadline).
	queryDeadline = 1000 * time.Millisecond
	// leaderSilence is the shards' --max-leader-silence, its default. The
	// flag allows 3 s (3× the 1 s election timeout), but at 3 s one split
	// vote after a leader's death (a second election, 1-2 s more) outlasts
	// the silence and the whole shard stops serving for a moment: the
	// chaos test caught that at 3 s, which is why 5 s is the default.
	leaderSilence = 5 * time.Second
)

// router is cmd/router, built once for all the tests of a run (without
// the race detector: the processes are the product, the test's own code is
// what -race checks) and removed by TestMain.
var router shardproc.Binary

func routerPath(t *testing.T) string {
	t.Helper()
	p, err := router.Path()
	require.NoError(t, err)
	return p
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = router.Remove()
		os.Exit(code)
	}))
}

func gate(t *testing.T) {
	t.Helper()
	if os.Getenv(gateEnv) == "" {
		t.Skip("starts a dozen processes for minutes: run `make test-replication` (" + gateEnv + "=1)")
	}
}

// ports are the loopback ports this run has handed out, each once: a
// restarted replica and a router started while it was down must not be
// given the same one.
var ports shardproc.Ports

// freePort picks a loopback port no other process of the run was given.
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := ports.Free()
	require.NoError(t, err)
	return addr
}

// start starts p (again), failing the test if it cannot.
func start(t *testing.T, p *shardproc.Proc) {
	t.Helper()
	require.NoError(t, p.Start())
}

// keepLog copies p's log into $TRAWL_REPLICATION_LOGS, when set, for a
// failure to be read whole.
func keepLog(p *shardproc.Proc) {
	dir := os.Getenv("TRAWL_REPLICATION_LOGS")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(p.Log)
	if err != nil || os.MkdirAll(dir, 0o750) != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(p.Name, "/", "-")+".log"), b, 0o600)
}

// replica is one `router shard` process of a three-replica group.
type replica struct {
	*shardproc.Shard
	shard, idx int
}

// wipe deletes the replica's data directory (the process must be down).
func (r *replica) wipe(t *testing.T) {
	t.Helper()
	require.NoError(t, os.RemoveAll(r.Dir))
}

// cluster is shards × 3 replica processes.
type cluster struct {
	t      *testing.T
	dir    string
	shards [][]*replica
	dim    int // of the collection trawl, which every router ensures
}

func shardName(i int) string { return "shard-" + strconv.Itoa(i) }

func startCluster(t *testing.T, nShards int) *cluster {
	t.Helper()
	return startClusterDim(t, nShards, dim)
}

// startClusterDim is startCluster with vectors of d dimensions.
func startClusterDim(t *testing.T, nShards, d int) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), dim: d}
	for range nShards {
		c.addGroup(t)
	}
	t.Cleanup(func() {
		for _, reps := range c.shards {
			for _, r := range reps {
				r.Kill()
				if t.Failed() {
					keepLog(&r.Proc)
					t.Logf("--- %s log tail:\n%s", r.Name, r.Tail(15))
				}
			}
		}
	})
	return c
}

// addGroup starts one more shard group of three replica processes, named
// after its position (shard-N); the cluster's cleanup stops it too.
func (c *cluster) addGroup(t *testing.T) {
	t.Helper()
	s := len(c.shards)
	group, err := shardproc.Group{Bin: routerPath(t), Ports: &ports, Dir: c.dir, Name: shardName(s), Replicas: 3,
		Args: []string{"--dim", strconv.Itoa(c.dim), "--metric", "cosine", "--max-leader-silence", leaderSilence.String()}}.Start()
	require.NoError(t, err)
	reps := make([]*replica, len(group))
	for i, g := range group {
		reps[i] = &replica{Shard: g, shard: s, idx: i}
	}
	c.shards = append(c.shards, reps)
}

// shardFlags are `router serve` --shard flags naming every replica, or
// for shard only the replicas in only (the others as given).
func (c *cluster) shardFlags(only map[int][]int) []string {
	return c.shardFlagsOf(len(c.shards), only)
}

// shardFlagsOf is shardFlags for the first n shards only.
func (c *cluster) shardFlagsOf(n int, only map[int][]int) []string {
	var out []string
	for s, reps := range c.shards[:n] {
		idx := only[s]
		if idx == nil {
			idx = []int{0, 1, 2}
		}
		addrs := make([]string, 0, len(idx))
		for _, i := range idx {
			addrs = append(addrs, reps[i].GRPC)
		}
		out = append(out, "--shard", shardName(s)+"="+strings.Join(addrs, ","))
	}
	return out
}

// routerProc is a `router serve` process.
type routerProc struct {
	shardproc.Proc
	base string
	hc   *http.Client
	// coll is the collection upsert and search act on; "" is the
	// default collection (the collection-less paths).
	coll string
}

// v1 is the path prefix of the native API for r.coll.
func (r *routerProc) v1() string {
	if r.coll == "" {
		return "/v1"
	}
	return "/v1/collections/" + r.coll
}

// startRouter runs `router serve` over the cluster; only restricts a
// shard to some of its replicas, and then turns discovery off, which
// would otherwise add the others back from the group's membership.
func (c *cluster) startRouter(t *testing.T, name string, only map[int][]int) *routerProc {
	t.Helper()
	return c.startRouterOver(t, name, len(c.shards), only)
}

// startRouterOver is startRouter over the first n shards only (a router
// started before a group was added, or after one was drained).
func (c *cluster) startRouterOver(t *testing.T, name string, n int, only map[int][]int) *routerProc {
	t.Helper()
	addr := freePort(t)
	r := &routerProc{base: "http://" + addr, hc: &http.Client{Timeout: 30 * time.Second}}
	args := []string{"serve", "--http-addr", addr, "--qdrant-grpc-addr", "", "--max-deadline-ms", "10000",
		"--ensure-collection", fmt.Sprintf("trawl=%d:cosine", c.dim)}
	if only != nil {
		args = append(args, "--discover=false")
	}
	r.Proc = shardproc.Proc{Name: name, Bin: routerPath(t), Log: filepath.Join(c.dir, name+".log"),
		Args: append(args, c.shardFlagsOf(n, only)...)}
	start(t, &r.Proc)
	t.Cleanup(func() {
		r.Kill()
		if t.Failed() {
			keepLog(&r.Proc)
			t.Logf("--- %s log tail:\n%s", name, r.Tail(15))
		}
	})
	require.Eventually(t, func() bool {
		resp, err := r.hc.Get(r.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "%s never became ready", name)
	return r
}

type doc struct {
	id  string
	vec []float32 // normalised, as the shards store it for cosine
}

func newDoc(rng *rand.Rand, id string) doc {
	v := make([]float32, dim)
	var n float64
	for i := range v {
		v[i] = float32(rng.NormFloat64())
		n += float64(v[i]) * float64(v[i])
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) / n)
	}
	return doc{id: id, vec: v}
}

type writeResult struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Outcome string `json:"outcome"`
}

// upsert posts docs once and returns the ids the router acknowledged (some
// may be, beside an error for the others).
func (r *routerProc) upsert(ctx context.Context, docs []doc) ([]string, int, error) {
	type vj struct {
		ID     string    `json:"id"`
		Vector []float32 `json:"vector"`
	}
	body := struct {
		Vectors []vj `json:"vectors"`
	}{}
	for _, d := range docs {
		body.Vectors = append(body.Vectors, vj{d.id, d.vec})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+r.v1()+"/vectors", bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, err
	}
	var out struct {
		Results []writeResult `json:"results"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%d %s: %w", resp.StatusCode, raw, err)
	}
	var acked []string
	for _, res := range out.Results {
		if res.Status == "ok" {
			acked = append(acked, res.ID)
		}
	}
	if resp.StatusCode != http.StatusOK {
		return acked, resp.StatusCode, fmt.Errorf("%d %.300s", resp.StatusCode, raw)
	}
	return acked, resp.StatusCode, nil
}

// writeBatch is how many vectors one POST /v1/vectors carries here (the
// router takes up to 256).
const writeBatch = 200

// upsertAll retries docs until every one is acknowledged (keyed upserts of
// the same bytes are safe to resend).
func (r *routerProc) upsertAll(t *testing.T, docs []doc) {
	t.Helper()
	for len(docs) > writeBatch {
		r.upsertAll(t, docs[:writeBatch])
		docs = docs[writeBatch:]
	}
	deadline := time.Now().Add(60 * time.Second)
	left := docs
	var last string
	for len(left) > 0 {
		require.True(t, time.Now().Before(deadline), "%d writes never acknowledged; last answer: %s", len(left), last)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		acked, code, err := r.upsert(ctx, left)
		cancel()
		last = fmt.Sprintf("%d %v", code, err)
		ok := map[string]bool{}
		for _, id := range acked {
			ok[id] = true
		}
		left = slices.DeleteFunc(slices.Clone(left), func(d doc) bool { return ok[d.id] })
		if len(left) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
}

type item struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

type scatter struct {
	Degraded          bool              `json:"degraded"`
	UnavailableShards []string          `json:"unavailable_shards"`
	ShardErrors       map[string]string `json:"shard_errors"`
	Coverage          float64           `json:"coverage"`
}

type answer struct {
	Items         []item  `json:"items"`
	ScatterGather scatter `json:"scatter_gather"`
}

type batchAnswer struct {
	Results       []struct{ Items []item } `json:"results"`
	ScatterGather scatter                  `json:"scatter_gather"`
}

func (r *routerProc) post(ctx context.Context, path string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s: %d %s", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, json.Unmarshal(raw, out)
}

func (r *routerProc) search(ctx context.Context, q []float32, k int) (answer, error) {
	return r.searchWithin(ctx, q, k, queryDeadline)
}

// searchWithin is search under deadline instead of queryDeadline.
func (r *routerProc) searchWithin(ctx context.Context, q []float32, k int, deadline time.Duration) (answer, error) {
	var a answer
	_, err := r.post(ctx, fmt.Sprintf("%s/search?deadline_ms=%d", r.v1(), deadline.Milliseconds()),
		map[string]any{"vector": q, "k": k}, &a)
	return a, err
}

func (r *routerProc) searchBatch(ctx context.Context, qs [][]float32, k int) (batchAnswer, error) {
	type qj struct {
		Vector []float32 `json:"vector"`
		K      int       `json:"k"`
	}
	body := struct {
		Queries []qj `json:"queries"`
	}{}
	for _, q := range qs {
		body.Queries = append(body.Queries, qj{q, k})
	}
	var a batchAnswer
	_, err := r.post(ctx, fmt.Sprintf("%s/search/batch?deadline_ms=%d", r.v1(), queryDeadline.Milliseconds()), body, &a)
	return a, err
}

// counter reads one sample of a counter from the router's /metrics.
func (r *routerProc) counter(t *testing.T, name, labels string) float64 {
	t.Helper()
	resp, err := r.hc.Get(r.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	want := name + "{" + labels + "}"
	if labels == "" {
		want = name
	}
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, want+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return f
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("%s not found in /metrics", want)
	return 0
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// scoreTolerance covers float32 accumulation in the kernels against the
// float64 brute force here.
const scoreTolerance = 1e-4

// exactAgainst checks a complete answer of k items for q: every item is a
// document that was sent, scored right, in order, without duplicates, and
// no document of mustHave that scores above the last item is missing. It
// returns "" or what is wrong.
func exactAgainst(q []float32, k int, items []item, sent func(id string) (doc, bool), mustHave []doc) string {
	seen := map[string]bool{}
	for i, it := range items {
		d, ok := sent(it.ID)
		if !ok {
			return fmt.Sprintf("item %d: %s was never sent", i, it.ID)
		}
		if seen[it.ID] {
			return fmt.Sprintf("item %d: %s twice", i, it.ID)
		}
		seen[it.ID] = true
		if want := dot(q, d.vec); math.Abs(want-it.Score) > scoreTolerance {
			return fmt.Sprintf("item %d: %s scored %.6f, brute force %.6f", i, it.ID, it.Score, want)
		}
		if i > 0 && it.Score > items[i-1].Score+scoreTolerance {
			return fmt.Sprintf("item %d: out of order", i)
		}
	}
	if len(items) > k {
		return fmt.Sprintf("%d items for k=%d", len(items), k)
	}
	floor := math.Inf(-1)
	if len(items) == k {
		floor = items[k-1].Score
	}
	for _, d := range mustHave {
		if seen[d.id] {
			continue
		}
		if s := dot(q, d.vec); s > floor+scoreTolerance {
			return fmt.Sprintf("acknowledged %s (score %.6f) missing; last item scores %.6f", d.id, s, floor)
		}
	}
	return ""
}

// ledger is what the test sent and what was acknowledged, in order.
type ledger struct {
	mu    sync.Mutex
	sent  map[string]doc
	acked []doc
	at    []time.Time // when each of acked was acknowledged, in order
}

func newLedger() *ledger { return &ledger{sent: map[string]doc{}} }

func (l *ledger) send(ds []doc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		l.sent[d.id] = d
	}
}

func (l *ledger) ack(ids []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for _, id := range ids {
		l.acked = append(l.acked, l.sent[id])
		l.at = append(l.at, now)
	}
}

// ackedBefore is a stable view of the documents acknowledged before t
// (appends never touch the elements it holds).
func (l *ledger) ackedBefore(t time.Time) []doc {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, _ := slices.BinarySearchFunc(l.at, t, func(a, t time.Time) int { return a.Compare(t) })
	return l.acked[:n:n]
}

func (l *ledger) lookup(id string) (doc, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.sent[id]
	return d, ok
}

func makeDocs(rng *rand.Rand, prefix string, from, n int) []doc {
	out := make([]doc, n)
	for i := range out {
		out[i] = newDoc(rng, prefix+strconv.Itoa(from+i))
	}
	return out
}
