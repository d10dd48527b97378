package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/shardproc"
	"github.com/trawl-search/trawl/shard/client"
)

// membersRows is how many documents the group holds before a replica is
// replaced (TRAWL_MEMBERS_ROWS): the new replica catches up all of them.
func membersRows(t *testing.T) int {
	t.Helper()
	n := 5000
	if v := os.Getenv("TRAWL_MEMBERS_ROWS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "TRAWL_MEMBERS_ROWS")
	}
	return n
}

// admin runs `router admin` and returns its output.
func admin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(routerPath(t), append([]string{"admin"}, args...)...).CombinedOutput()
	return string(out), err
}

// TestReplaceAKilledReplicaUnderWrites: a replica of a three-replica group
// is SIGKILLed and replaced, through `router admin replace-replica`, by a
// fresh `router shard --join` on a new address while a writer keeps
// writing through the router. Throughout, a majority of the group's voters
// answers (polled every 100 ms); afterwards every acknowledged write is
// on the new replica, which, asked alone, answers every query exactly as
// the brute force over the acknowledged writes. Bad admin input is
// refused with its reason, and the group is unchanged by it.
func TestReplaceAKilledReplicaUnderWrites(t *testing.T) {
	gate(t)
	c := startCluster(t, 1)
	r := c.startRouter(t, "router", nil)
	rng := rand.New(rand.NewPCG(27, 1))
	l := newLedger()
	initial := makeDocs(rng, "init-", 0, membersRows(t))
	l.send(initial)
	r.upsertAll(t, initial)
	l.ack(idsOf(initial))
	group := c.shards[0]
	seed := fmt.Sprintf("shard-0=%s,%s,%s", group[0].GRPC, group[1].GRPC, group[2].GRPC)
	survivors := func(killed *replica) []*replica {
		var out []*replica
		for _, g := range group[:3] {
			if g != killed {
				out = append(out, g)
			}
		}
		return out
	}

	// Bad input: a clear error, nothing changed.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"replace-replica", "--shard", seed, "--old", group[2].GRPC, "--new", group[2].GRPC}, "old and new are both"},
		{[]string{"replace-replica", "--shard", seed, "--old", "127.0.0.1:1", "--new", "127.0.0.1:2"}, "127.0.0.1:1 is not a member of the group"},
		{[]string{"add-replica", "--shard", seed, "--replica", "127.0.0.1:1"}, "no replica answers at 127.0.0.1:1"},
		{[]string{"add-replica", "--shard", seed, "--replica", "nohost"}, `"nohost" is not HOST:PORT`},
		{[]string{"add-replica", "--shard", seed}, "--replica HOST:PORT is required"},
		{[]string{"remove-replica", "--shard", seed, "--shard", "shard-1=127.0.0.1:1", "--replica", group[2].GRPC}, "say which with --name"},
	} {
		out, err := admin(t, tc.args...)
		require.Error(t, err, "%v: %s", tc.args, out)
		require.Contains(t, out, tc.msg, "%v", tc.args)
	}

	// A writer through the router, all along, and a reader: every answer
	// complete and exact against what was acknowledged before it started.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writes atomic.Int64 // read while the writer runs
	reads := 0
	var wrong []string
	qrng := rand.New(rand.NewPCG(27, 2))
	wg.Go(func() {
		for ctx.Err() == nil {
			q := newDoc(qrng, "q").vec
			before := l.ackedBefore(time.Now())
			a, err := r.search(ctx, q, 10)
			if ctx.Err() != nil {
				return
			}
			reads++
			switch {
			case err != nil:
				wrong = append(wrong, err.Error())
			case a.ScatterGather.Degraded:
				wrong = append(wrong, fmt.Sprintf("degraded: %v", a.ScatterGather.ShardErrors))
			default:
				if msg := exactAgainst(q, 10, a.Items, l.lookup, before); msg != "" {
					wrong = append(wrong, msg)
				}
			}
		}
	})
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			ds := makeDocs(rng, "w-", i*50, 50)
			l.send(ds)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			acked, _, _ := r.upsert(wctx, ds)
			cancel()
			l.ack(acked)
			writes.Add(int64(len(acked)))
		}
	})
	// The group's majority, polled from the surviving replicas' view.
	polls, short := 0, []string{}
	pollConn, err := client.Dial(group[0].GRPC, client.DialConfig{})
	require.NoError(t, err)
	defer pollConn.Close()
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := pollConn.Members(pctx, true)
			cancel()
			if err == nil {
				voters, live := 0, 0
				for _, m := range st.GetMembers() {
					if m.GetVoter() {
						voters++
						if m.GetReachable() {
							live++
						}
					}
				}
				polls++
				if live < voters/2+1 {
					short = append(short, fmt.Sprintf("%d of %d voters live: %v", live, voters, st.GetMembers()))
				}
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})

	// The victim is a follower: a leader's death costs its group an
	// election and reads that must see its last acknowledged write wait
	// for the next leader (not_serving meanwhile), which is not what this
	// test is about; with a follower gone every read stays complete.
	time.Sleep(time.Second)
	lst, err := pollConn.Members(context.Background(), false)
	require.NoError(t, err)
	killed := group[2]
	if lst.GetLeader() == killed.GRPC {
		killed = group[1]
	}
	killed.Kill()
	live := survivors(killed)
	fresh := &replica{Shard: &shardproc.Shard{GRPC: freePort(t), HTTP: freePort(t), Dir: filepath.Join(c.dir, "shard-0-new")}, shard: 0, idx: 3}
	fresh.Proc = shardproc.Proc{Name: "shard-0/new", Bin: routerPath(t), Log: fresh.Dir + ".log",
		Args: []string{"shard", "--grpc-addr", fresh.GRPC, "--http-addr", fresh.HTTP, "--data-dir", fresh.Dir,
			"--dim", strconv.Itoa(c.dim), "--metric", "cosine",
			"--join", strings.Join([]string{group[0].GRPC, group[1].GRPC, group[2].GRPC}, ","), "--advertise-addr", fresh.GRPC,
			"--max-leader-silence", leaderSilence.String()}}
	c.shards[0] = append(c.shards[0], fresh) // the cluster's cleanup kills it
	t0 := time.Now()
	start(t, &fresh.Proc)
	waitListening(t, fresh.GRPC)
	out, err := admin(t, "replace-replica", "--shard", seed, "--old", killed.GRPC, "--new", fresh.GRPC, "--timeout", "5m")
	took := time.Since(t0)
	require.NoError(t, err, out)
	require.Contains(t, out, "replace-replica: done")
	t.Logf("replaced a killed replica by a fresh one holding %d rows in %s (start to voter, old removed):\n%s", int64(len(initial))+writes.Load(), took.Round(time.Millisecond), out)
	time.Sleep(time.Second) // writes go on with the new group
	stop()
	wg.Wait()
	require.Positive(t, polls)
	require.Empty(t, short, "the group lost its live majority")
	require.Positive(t, writes.Load(), "writes went on during the replace")
	require.Positive(t, reads)
	require.Empty(t, wrong, "every answer during the replace is complete and exact (%d reads)", reads)

	// The router, seeded with the old three, learns the group's members.
	want := []string{live[0].GRPC, live[1].GRPC, fresh.GRPC}
	slices.Sort(want)
	var seen []string
	require.Eventually(t, func() bool {
		seen = statusReplicas(t, r)
		return slices.Equal(seen, want)
	}, 30*time.Second, 200*time.Millisecond, "the router never learnt the new membership: %v", seen)

	// The group is the two survivors and the newcomer, all voters.
	st, err := admin(t, "status", "--shard", seed, "--json")
	require.NoError(t, err, st)
	for _, a := range []string{live[0].GRPC, live[1].GRPC, fresh.GRPC} {
		require.Contains(t, st, `"addr": "`+a+`",`+"\n"+`        "voter": true`)
	}
	require.NotContains(t, st, `"addr": "`+killed.GRPC+`"`)

	// Asked alone, the new replica answers completely and exactly.
	alone := c.startRouter(t, "router-new-only", map[int][]int{0: {3}})
	acked := l.ackedBefore(time.Now())
	for i := range 20 {
		q := newDoc(rng, fmt.Sprint("q", i)).vec
		var a answer
		require.Eventually(t, func() bool {
			a, err = alone.search(context.Background(), q, 10)
			return err == nil && !a.ScatterGather.Degraded
		}, 30*time.Second, 100*time.Millisecond, "the new replica never answered completely: %v", err)
		require.Empty(t, exactAgainst(q, 10, a.Items, l.lookup, acked), "query %d", i)
	}
}

func idsOf(ds []doc) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.id
	}
	return out
}

// statusReplicas lists the replicas of the first shard /cluster/status
// shows, sorted.
func statusReplicas(t *testing.T, r *routerProc) []string {
	t.Helper()
	resp, err := r.hc.Get(r.base + "/cluster/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st struct {
		Shards []struct {
			Replicas []struct {
				Addr string `json:"addr"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	var out []string
	for _, rep := range st.Shards[0].Replicas {
		out = append(out, rep.Addr)
	}
	slices.Sort(out)
	return out
}

// TestAddAFourthReplicaThenRemoveIt: a fourth `router shard --join` is
// added to a loaded group with `router admin add-replica`, which returns
// once the leader has promoted it; the router, seeded with the first three
// only, discovers it and sends it reads (an untried replica is asked
// first), and it answers exactly. Removed again, the router stops asking
// it, and the group of three writes on. The time from the newcomer's
// start to its promotion and to serving is logged: the catch-up of
// TRAWL_MEMBERS_ROWS rows of TRAWL_MEMBERS_DIM dimensions.
func TestAddAFourthReplicaThenRemoveIt(t *testing.T) {
	gate(t)
	d := dim
	if v := os.Getenv("TRAWL_MEMBERS_DIM"); v != "" {
		var err error
		d, err = strconv.Atoi(v)
		require.NoError(t, err, "TRAWL_MEMBERS_DIM")
	}
	c := startClusterDim(t, 1, d)
	r := c.startRouter(t, "router", nil)
	rng := rand.New(rand.NewPCG(27, 3))
	l := newLedger()
	n := membersRows(t)
	docs := make([]doc, n)
	for i := range docs {
		docs[i] = doc{id: "d" + strconv.Itoa(i), vec: unit(rng, d)}
	}
	l.send(docs)
	t0 := time.Now()
	r.upsertAll(t, docs)
	l.ack(idsOf(docs))
	t.Logf("loaded %d rows of %d-D through the router in %s", n, d, time.Since(t0).Round(time.Millisecond))
	group := c.shards[0]
	seed := fmt.Sprintf("shard-0=%s,%s,%s", group[0].GRPC, group[1].GRPC, group[2].GRPC)

	fourth := &replica{Shard: &shardproc.Shard{GRPC: freePort(t), HTTP: freePort(t), Dir: filepath.Join(c.dir, "shard-0-fourth")}, shard: 0, idx: 3}
	fourth.Proc = shardproc.Proc{Name: "shard-0/fourth", Bin: routerPath(t), Log: fourth.Dir + ".log",
		Args: []string{"shard", "--grpc-addr", fourth.GRPC, "--http-addr", fourth.HTTP, "--data-dir", fourth.Dir,
			"--dim", strconv.Itoa(d), "--metric", "cosine",
			"--join", group[0].GRPC, "--advertise-addr", fourth.GRPC,
			"--max-leader-silence", leaderSilence.String()}}
	c.shards[0] = append(c.shards[0], fourth)
	t0 = time.Now()
	start(t, &fourth.Proc)
	waitListening(t, fourth.GRPC)
	out, err := admin(t, "add-replica", "--shard", seed, "--replica", fourth.GRPC, "--timeout", "10m")
	promoted := time.Since(t0)
	require.NoError(t, err, out)
	require.Eventually(t, fourth.Ready, 5*time.Minute, 50*time.Millisecond, "the fourth replica never served")
	serving := time.Since(t0)
	t.Logf("a fourth replica caught up %d rows of %d-D: a voter %s and serving %s after it started\n%s",
		n, d, promoted.Round(time.Millisecond), serving.Round(time.Millisecond), out)
	st, err := admin(t, "status", "--shard", seed, "--json")
	require.NoError(t, err, st)
	require.Equal(t, 4, strings.Count(st, `"voter": true`), st)

	// The router learns of it and sends it reads.
	var seen []string
	require.Eventually(t, func() bool {
		seen = statusReplicas(t, r)
		return slices.Contains(seen, fourth.GRPC)
	}, 30*time.Second, 200*time.Millisecond, "the router never learnt of the fourth replica: %v", seen)
	// Reads prefer the replicas known to have applied this router's last
	// write for 5 s after it (coordinator.PreferFor); past that an
	// untried replica is asked first.
	asked := false
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && !asked; {
		q := unit(rng, d)
		var a struct {
			Items         []item `json:"items"`
			ScatterGather struct {
				scatter
				Shards []struct {
					Replica string `json:"replica"`
				} `json:"shards"`
			} `json:"scatter_gather"`
		}
		_, err := r.post(context.Background(), fmt.Sprintf("/v1/search?deadline_ms=%d&shard_detail=true", queryDeadline.Milliseconds()),
			map[string]any{"vector": q, "k": 10}, &a)
		require.NoError(t, err)
		require.False(t, a.ScatterGather.Degraded)
		require.Empty(t, exactAgainst(q, 10, a.Items, l.lookup, docs))
		asked = len(a.ScatterGather.Shards) == 1 && a.ScatterGather.Shards[0].Replica == fourth.GRPC
	}
	require.True(t, asked, "the router never sent the fourth replica a read")

	// Removed: the router stops asking it; the three write on.
	out, err = admin(t, "remove-replica", "--shard", seed, "--replica", fourth.GRPC)
	require.NoError(t, err, out)
	require.Contains(t, out, "remove-replica: done")
	require.Eventually(t, func() bool {
		seen = statusReplicas(t, r)
		return !slices.Contains(seen, fourth.GRPC) && len(seen) == 3
	}, 30*time.Second, 200*time.Millisecond, "the router still lists the removed replica: %v", seen)
	extra := []doc{{id: "after", vec: unit(rng, d)}}
	l.send(extra)
	r.upsertAll(t, extra)
	out, err = admin(t, "remove-replica", "--shard", seed, "--replica", fourth.GRPC)
	require.NoError(t, err, out)
	require.Contains(t, out, "nothing to do")
}

// waitListening waits until a started process accepts connections on
// addr: the group's leader refuses to add a replica that does not answer.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}, time.Minute, 20*time.Millisecond, "nothing listens on %s", addr)
}
