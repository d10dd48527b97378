package replication

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// growSlots is the grown collection's slot count: few, so that growing
// to four groups is 8 moves and draining one is 8 more, each waiting out
// its grace (the product's default is 256).
const growSlots = 32

// growGrace is the admin commands' --grace: shorter than the routers'
// 5 s catalog refresh, so a reading router meets settled slots with a
// stale map and must re-read it (SLOT_MOVED on a read).
const growGrace = time.Second

// generation is the routers the load goes through: a reader that only
// queries and a writer that acknowledges the writes. Growing the cluster
// replaces them (a router lists its shards at start); the lock lets the
// swap wait until no request is in flight on the old ones.
type generation struct {
	mu             sync.RWMutex
	reader, writer *routerProc
	tally          *tally // the reader's answers
}

// The growth check with real processes: a live cluster of three
// groups of three `router shard` processes grows to four under query and
// write load, then drains back to three.
//
// The new group is started as processes, and `router serve` learns of it
// the way an operator deploys it: new router processes with the longer
// --shard list take the load, then the old ones stop (a router's shard
// list is fixed at start; discovery finds a group's replicas, not new
// groups). `router admin rebalance` then moves slots onto the new group
// while one replica at a time of any group is SIGKILLed and restarted
// (the chaos run with a move in flight); a move cut short by a fault is
// finished by running the command again, as an operator would. `router
// admin drain` moves them back, the old router list takes over, and the
// drained group stops.
//
// Throughout: every answer the reading routers mark complete is the exact
// top-k of what was sent, each row once, holding every write acknowledged
// more than --max-leader-silence before; every partial one names what it
// lacks and is counted. At the end every acknowledged write is there,
// the shards hold each document once (the old owners dropped what they
// gave away), and the slots are balanced.
func TestGrowAndDrainLiveCluster(t *testing.T) {
	gate(t)
	rng := rand.New(rand.NewPCG(21, 22))
	c := startCluster(t, 3)
	g := &generation{}
	tl := &timeline{}
	t.Cleanup(func() {
		if t.Failed() {
			tl.log(t)
		}
	})
	g.reader, g.writer = c.startRouter(t, "reader-3", nil), c.startRouter(t, "writer-3", nil)
	g.tally = newTally(tl)
	createSlotted(t, g.writer, "grow", growSlots)
	g.reader.coll, g.writer.coll = "grow", "grow"
	l := newLedger()
	corpus := makeDocs(rng, "c-", 0, 2000)
	l.send(corpus)
	g.writer.upsertAll(t, corpus)
	ids := make([]string, len(corpus))
	for i, d := range corpus {
		ids[i] = d.id
	}
	l.ack(ids)

	// The load: two query clients and a writer, through the current
	// generation of routers.
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	for cl := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(cl), 5))
			for ctx.Err() == nil {
				g.mu.RLock()
				g.tally.query(g.reader, l, rng, queryDeadline, func(t time.Time) time.Time { return t.Add(-leaderSilence) })
				g.mu.RUnlock()
			}
		})
	}
	var written, refused atomic.Int64
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(99, 5))
		for i := 0; ctx.Err() == nil; i += 20 {
			docs := makeDocs(rng, "w-", i, 20)
			l.send(docs)
			g.mu.RLock()
			wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
			acked, _, _ := g.writer.upsert(wctx, docs)
			wcancel()
			g.mu.RUnlock()
			l.ack(acked)
			written.Add(int64(len(acked)))
			refused.Add(int64(len(docs) - len(acked)))
			time.Sleep(50 * time.Millisecond)
		}
	})
	var tallies []*tally
	swap := func(n int, suffix string) {
		reader, writer := c.startRouterOver(t, "reader-"+suffix, n, nil), c.startRouterOver(t, "writer-"+suffix, n, nil)
		reader.coll, writer.coll = "grow", "grow"
		g.mu.Lock()
		oldReader, oldWriter, oldTally := g.reader, g.writer, g.tally
		g.reader, g.writer, g.tally = reader, writer, newTally(tl)
		// No request is in flight on the old routers while the lock is
		// held: every answer their reader gave is in its /metrics.
		counted := oldReader.counter(t, "trawl_scatter_queries_total", `collection="grow",path="search"`)
		countedDegraded := oldReader.counter(t, "trawl_scatter_degraded_total", `collection="grow",path="search"`)
		g.mu.Unlock()
		require.Equal(t, float64(oldTally.answers.Load()), counted, "%s: every answer counted", oldReader.Name)
		require.Equal(t, float64(oldTally.degraded.Load()), countedDegraded, "%s: every partial answer counted", oldReader.Name)
		tallies = append(tallies, oldTally)
		oldTally.report(t, oldReader.Name)
		tl.add(fmt.Sprintf("routers over %d shards take the load", n))
		oldReader.Kill()
		oldWriter.Kill()
	}
	time.Sleep(3 * time.Second)

	// Grow: a fourth group, routers that list it, the collection completed
	// on it, then the slots moved under faults.
	c.addGroup(t)
	require.Eventually(t, func() bool {
		for _, r := range c.shards[3] {
			if !r.Ready() {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "the new group never served")
	swap(4, "4")
	createSlotted(t, g.writer, "grow", growSlots) // completes it on shard-3
	require.Eventually(t, func() bool { return collectionState(t, g.writer, "grow").State == "ready" },
		30*time.Second, 100*time.Millisecond, "grow never ready on four groups")
	faultCtx, stopFaults := context.WithCancel(ctx)
	var faults atomic.Int64
	var faulting sync.WaitGroup
	faulting.Go(func() { killOneAtATime(faultCtx, t, c, rand.New(rand.NewPCG(7, 7)), tl, &faults) })
	t0 := time.Now()
	// A slow copy (--rate 60: about 1.5 s a slot) keeps moves in flight
	// for the faults to land on.
	runs := moveSlots(t, c, 4, "rebalance", "--collection", "grow", "--rate", "60")
	grew := time.Since(t0)
	stopFaults()
	faulting.Wait()
	waitServing(t, c)
	st := collectionState(t, g.writer, "grow")
	for _, sh := range st.Shards {
		require.InDelta(t, growSlots/4, sh.Slots, 1, "after growing: %s holds %d slots", sh.Name, sh.Slots)
	}
	t.Logf("grown to 4 groups in %s (%d rebalance runs, %d replicas SIGKILLed meanwhile)", grew.Round(time.Millisecond), runs, faults.Load())
	require.GreaterOrEqual(t, faults.Load(), int64(5), "too few faults while the slots moved to mean anything")

	// Drain the fourth group, then routers without it, then stop it.
	time.Sleep(2 * time.Second)
	t0 = time.Now()
	runs = moveSlots(t, c, 4, "drain", "shard-3", "--collection", "grow")
	t.Logf("drained shard-3 in %s (%d runs)", time.Since(t0).Round(time.Millisecond), runs)
	st = collectionState(t, g.writer, "grow")
	for _, sh := range st.Shards {
		want := growSlots / 3.0
		if sh.Name == "shard-3" {
			want = 0
		}
		require.InDelta(t, want, sh.Slots, 1, "after draining: %s holds %d slots", sh.Name, sh.Slots)
	}
	swap(3, "3b")
	for _, r := range c.shards[3] {
		r.Kill()
	}
	time.Sleep(3 * time.Second)
	stopLoad()
	wg.Wait()
	g.mu.Lock()
	last := g.tally
	require.Equal(t, float64(last.answers.Load()), g.reader.counter(t, "trawl_scatter_queries_total", `collection="grow",path="search"`),
		"%s: every answer counted", g.reader.Name)
	g.mu.Unlock()
	last.report(t, g.reader.Name)
	tallies = append(tallies, last)
	var answers, complete, degraded int64
	for _, ta := range tallies {
		answers, complete, degraded = answers+ta.answers.Load(), complete+ta.complete.Load(), degraded+ta.degraded.Load()
	}
	t.Logf("%d answers, %d complete, %d degraded; %d writes acknowledged during the run, %d not",
		answers, complete, degraded, written.Load(), refused.Load())
	require.Positive(t, written.Load(), "no write was acknowledged during the run")
	require.Less(t, float64(degraded), 0.01*float64(answers), "under 1 %% degraded: every group keeps two live replicas, and a router whose map a move left behind reads again by the newer one")
	require.Greater(t, complete, int64(100), "too few complete answers to mean anything")

	// Afterwards: every acknowledged write there, each document once.
	time.Sleep(leaderSilence)
	acked := l.ackedBefore(time.Now())
	present := presentOf(t, g.reader, l)
	for _, d := range acked {
		require.True(t, present[d.id], "acknowledged %s is gone", d.id)
	}
	st = collectionState(t, g.reader, "grow")
	require.Len(t, st.Shards, 3)
	var sum uint64
	for _, sh := range st.Shards {
		sum += sh.DocCount
	}
	require.Equal(t, uint64(len(present)), sum, "the shards hold every document once")
	require.Equal(t, uint64(len(present)), st.DocCount)
	for i := range 20 {
		q := newDoc(rng, "").vec
		qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a, err := g.reader.search(qctx, q, 10)
		cancel()
		require.NoError(t, err)
		require.False(t, a.ScatterGather.Degraded, "query %d after the drain: %+v", i, a.ScatterGather)
		require.Empty(t, exactAgainst(q, 10, a.Items, l.lookup, acked), "query %d after the drain", i)
	}
}

// createSlotted creates (or completes) a 64-D cosine collection of n
// slots through r.
func createSlotted(t *testing.T, r *routerProc, name string, n int) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"dimension": dim, "metric": "cosine", "slots": n})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		req, err := http.NewRequest(http.MethodPut, r.base+"/v1/collections/"+name, bytes.NewReader(b))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := r.hc.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 200*time.Millisecond, "PUT /v1/collections/%s through %s", name, r.Name)
}

// collectionStatus is GET /v1/collections/{c}, the parts checked here.
type collectionStatus struct {
	State    string `json:"state"`
	DocCount uint64 `json:"doc_count"`
	Shards   []struct {
		Name     string `json:"name"`
		Slots    int    `json:"slots"`
		Answered bool   `json:"answered"`
		DocCount uint64 `json:"doc_count"`
	} `json:"shards"`
}

func collectionState(t *testing.T, r *routerProc, name string) collectionStatus {
	t.Helper()
	resp, err := r.hc.Get(r.base + "/v1/collections/" + name)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var st collectionStatus
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(raw, &st), "%s", raw)
	}
	return st
}

// moveSlots runs `router admin CMD ...` (rebalance, drain) over the first n shards until it
// succeeds (a move cut short by a fault is finished by the next run) and
// returns how many runs it took.
func moveSlots(t *testing.T, c *cluster, n int, args ...string) int {
	t.Helper()
	args = append([]string{"admin"}, args...)
	args = append(args, "--grace", growGrace.String(), "--timeout", "90s")
	args = append(args, c.shardFlagsOf(n, nil)...)
	var out []byte
	for run := 1; run <= 8; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var err error
		out, err = exec.CommandContext(ctx, routerPath(t), args...).CombinedOutput()
		cancel()
		if err == nil {
			t.Logf("router %s (run %d):\n%s", args[1], run, out)
			return run
		}
		t.Logf("router %s run %d failed: %v\n%s", args[1], run, err, out)
		time.Sleep(time.Second)
	}
	t.Fatalf("router %s never succeeded; last output:\n%s", args[1], out)
	return 0
}

// killOneAtATime SIGKILLs a random replica of a random group every
// 0.4-1.2 s and restarts it after 0.5-3 s, never two of one group at once, so
// every group keeps a majority, until ctx ends.
func killOneAtATime(ctx context.Context, t *testing.T, c *cluster, rng *rand.Rand, tl *timeline, faults *atomic.Int64) {
	busy := make([]atomic.Bool, len(c.shards))
	var held sync.WaitGroup
	defer held.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(400+rng.IntN(800)) * time.Millisecond):
		}
		s := rng.IntN(len(busy))
		if !busy[s].CompareAndSwap(false, true) {
			continue
		}
		rep := c.shards[s][rng.IntN(3)]
		hold := time.Duration(500+rng.IntN(2500)) * time.Millisecond
		faults.Add(1)
		held.Go(func() {
			defer busy[s].Store(false)
			tl.add(fmt.Sprintf("SIGKILL %s for %v", rep.Name, hold))
			rep.Kill()
			select {
			case <-ctx.Done():
			case <-time.After(hold):
			}
			start(t, &rep.Proc)
			tl.add(rep.Name + " back")
			for end := time.Now().Add(30 * time.Second); !rep.Ready() && time.Now().Before(end); {
				time.Sleep(50 * time.Millisecond)
			}
			tl.add(rep.Name + " serving")
		})
	}
}

// waitServing waits until every replica of every running group serves.
func waitServing(t *testing.T, c *cluster) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, reps := range c.shards {
			for _, r := range reps {
				if !r.Ready() {
					return false
				}
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "some replica never served again")
}

// presentOf reads every id the test sent through r and returns those
// stored: the acknowledged ones, and any whose write outcome was unknown
// but applied.
func presentOf(t *testing.T, r *routerProc, l *ledger) map[string]bool {
	t.Helper()
	l.mu.Lock()
	ids := make([]string, 0, len(l.sent))
	for id := range l.sent {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	var (
		mu      sync.Mutex
		present = map[string]bool{}
		wrong   []string
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(ids); i = int(next.Add(1)) - 1 {
				id := ids[i]
				resp, err := r.hc.Get(r.base + "/v1/collections/grow/vectors/" + id + "?deadline_ms=" + strconv.Itoa(int(queryDeadline.Milliseconds())))
				if err != nil {
					mu.Lock()
					wrong = append(wrong, id+": "+err.Error())
					mu.Unlock()
					continue
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case http.StatusOK:
					var got struct {
						Vector []float32 `json:"vector"`
					}
					d, _ := l.lookup(id)
					if json.Unmarshal(raw, &got) != nil || len(got.Vector) != len(d.vec) || dot(got.Vector, d.vec) < 1-scoreTolerance {
						wrong = append(wrong, fmt.Sprintf("%s: stored vector is not the one sent: %.200s", id, raw))
					}
					present[id] = true
				case http.StatusNotFound:
				default:
					wrong = append(wrong, fmt.Sprintf("%s: %d %.200s", id, resp.StatusCode, raw))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, wrong, "every sent id reads back as stored or not found")
	t.Logf("%d of %d sent ids stored", len(present), len(ids))
	return present
}
