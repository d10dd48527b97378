package app_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/longtest"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// upsert writes one vector through the router and returns the status and
// body.
func (h *harness) upsert(t *testing.T, id string, v []float32) (int, string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"vectors": []map[string]any{{"id": id, "vector": v}}})
	require.NoError(t, err)
	resp, err := http.Post(h.srv.URL+"/v1/vectors", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

func randomVector(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// A search sent straight after an acknowledged write, through the same
// router, sees the write and is complete: read-after-write never shows
// up as a missing shard (DESIGN.md, "Writes"), on groups of one and of
// three alike. The deadline is the 200 ms floor DESIGN.md sets for tests
// on a loaded 2-core machine under -race; TRAWL_RAW_DEADLINE_MS=50 runs it
// at the default, to measure.
func TestReadAfterWriteIsNeverDegraded(t *testing.T) {
	const dim, rounds = 16, 200
	rawDeadline := cmp.Or(os.Getenv("TRAWL_RAW_DEADLINE_MS"), "200")
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			if replicas == 1 {
				longtest.Mark(t) // make test runs the raft groups
			}
			h := start(t, devcluster.Config{Replicas: replicas, Dim: dim, Docs: 300, Seed: 7, Kernel: vector.Generic()})
			rng := rand.New(rand.NewPCG(uint64(replicas), 9))
			for i := range rounds {
				id := fmt.Sprintf("raw-%d", i)
				v := randomVector(rng, dim)
				code, body := h.upsert(t, id, v)
				require.Equal(t, http.StatusOK, code, body)
				// A replica that has not applied the write refuses the
				// read, never answers without it: any missing shard but
				// one out of time on a loaded machine fails here.
				a := completeOK[answer](t, h, "/v1/search?deadline_ms="+rawDeadline, map[string]any{"vector": v, "k": 1})
				require.Len(t, a.Items, 1)
				require.Equal(t, id, a.Items[0].ID, "round %d: the written vector is its own nearest", i)
			}
		})
	}
}

// With the router cut from every shard's leader (its proxy stopped), the
// groups are healthy: a write sent to a follower is forwarded to the
// leader over the shard port and acknowledged within the write timeout,
// and every replica ends up holding it once.
func TestWritesReachTheLeaderThroughAFollower(t *testing.T) {
	const dim = 16
	h := start(t, devcluster.Config{Replicas: 3, Dim: dim, Docs: 60, Seed: 3, Kernel: vector.Generic()})
	for _, reps := range h.dc.Replicas {
		for _, r := range reps {
			if r.Node.IsLeader() {
				r.Proxy.Stop()
			}
		}
	}
	// The proxy closes the router's connections at once, but the router's
	// transports read the close on their own goroutines: a write sent in
	// that window meets a dead socket after it left, a genuinely unknown
	// outcome (502), not the forwarding this test is about. Give them a
	// moment to see it; a write then finds the replica unreachable before
	// sending and goes to a follower.
	time.Sleep(200 * time.Millisecond)
	rng := rand.New(rand.NewPCG(5, 6))
	const writes = 30
	for i := range writes {
		t0 := time.Now()
		code, body := h.upsert(t, fmt.Sprintf("fwd-%d", i), randomVector(rng, dim))
		require.Equal(t, http.StatusOK, code, "write %d: %s", i, body)
		require.Less(t, time.Since(t0), 5*time.Second, "within the write timeout")
	}
	total := 60 + writes
	require.Eventually(t, func() bool {
		for _, reps := range h.dc.Replicas {
			n := reps[0].Store.Len()
			for _, r := range reps {
				if r.Store.Len() != n {
					return false
				}
			}
		}
		sum := 0
		for _, reps := range h.dc.Replicas {
			sum += reps[0].Store.Len()
		}
		return sum == total
	}, 10*time.Second, 20*time.Millisecond, "every replica of every shard holds each write once")
}

// shardLine is one shard's line of ?shard_detail=true.
type shardLine struct {
	Shard      string  `json:"shard"`
	Status     string  `json:"status"`
	Replica    string  `json:"replica"`
	LatencyMS  float64 `json:"latency_ms"`
	Hedged     bool    `json:"hedged"`
	FailedOver bool    `json:"failed_over"`
}

// detailed is a search answer with ?shard_detail=true.
type detailed struct {
	Items []item `json:"items"`
	SG    struct {
		Degraded    bool              `json:"degraded"`
		ShardErrors map[string]string `json:"shard_errors"`
		Shards      []shardLine       `json:"shards"`
	} `json:"scatter_gather"`
}

// A read that must see a write asks first the replica known to have
// applied it — the leader that acknowledged it — so it never waits on a
// follower still applying the write (DESIGN.md, "Writes":
// read-after-write). One shard's followers are slowed on their peers' way
// in (raft traffic to them delayed 200 ms each way), so each applies a
// write some hundreds of milliseconds after the leader acknowledged it.
// Hedging is off, so the replica that answers is the one asked first:
// without the preference most reads would go to a follower, wait half
// their budget, and fail over.
func TestReadAfterWriteAsksTheLeaderFirst(t *testing.T) {
	longtest.Mark(t)
	const dim, rounds, home = 16, 8, "shard-1"
	h := startWith(t, devcluster.Config{Replicas: 3, Dim: dim, Docs: 60, Seed: 11, Kernel: vector.Generic(), PeerProxies: true},
		app.Config{NoHedge: true})
	table := h.dc
	si := slices.Index(h.dc.Names, home)
	var leader *devcluster.Replica
	var followers []*devcluster.Replica
	for _, r := range h.dc.Replicas[si] {
		if r.Node.IsLeader() {
			leader = r
		} else {
			followers = append(followers, r)
		}
	}
	require.NotNil(t, leader)
	// The router learns the leader from a write it accepts. In a dev
	// cluster the leader a follower forwards to is named by its raft
	// address, which the router (reaching replicas through their proxies)
	// does not know, so one write with the followers out of its reach
	// teaches it.
	c := faultClient(t)
	for _, f := range followers {
		f.Proxy.Stop()
		require.Eventually(t, func() bool { return connState(t, c, h.srv.URL, f.Proxy.Addr()) != "READY" }, 5*time.Second, 10*time.Millisecond)
	}
	code, body := h.upsert(t, idOn(table, home, "warm"), randomVector(rand.New(rand.NewPCG(1, 2)), dim))
	require.Equal(t, http.StatusOK, code, body)
	for _, f := range followers {
		require.NoError(t, f.Proxy.Restore())
		require.Eventually(t, func() bool { return connState(t, c, h.srv.URL, f.Proxy.Addr()) == "READY" }, 5*time.Second, 10*time.Millisecond)
	}
	for _, f := range followers {
		require.NoError(t, f.PeerProxy.Slow(200*time.Millisecond))
	}
	defer func() {
		for _, f := range followers {
			require.NoError(t, f.PeerProxy.Restore())
		}
	}()
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range rounds {
		id := idOn(table, home, fmt.Sprintf("lead-%d", i))
		v := randomVector(rng, dim)
		code, body := h.upsert(t, id, v)
		require.Equal(t, http.StatusOK, code, body)
		require.True(t, leader.Node.IsLeader(), "round %d: the leader stayed (the slowed followers kept up with its heartbeats)", i)
		for _, f := range followers {
			require.Less(t, f.Node.AppliedIndex(), leader.Node.AppliedIndex(), "round %d: the followers have not applied the write yet", i)
		}
		a := completeOK[detailed](t, h, "/v1/search?deadline_ms=200&shard_detail=true", map[string]any{"vector": v, "k": 1})
		require.Equal(t, id, a.Items[0].ID, "round %d: the write is seen", i)
		j := slices.IndexFunc(a.SG.Shards, func(s shardLine) bool { return s.Shard == home })
		require.GreaterOrEqual(t, j, 0, "round %d: %s's line", i, home)
		require.Equal(t, leader.Proxy.Addr(), a.SG.Shards[j].Replica, "round %d: answered by the leader", i)
		require.False(t, a.SG.Shards[j].FailedOver, "round %d: asked first", i)
	}
}

// idOn is the first id prefix-N whose home is the named shard.
func idOn(t interface{ Home(string) string }, shardName, prefix string) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); t.Home(id) == shardName {
			return id
		}
	}
}

// A write a follower forwards to its leader, whose answer is lost on the
// way back after the leader received and applied it, has an outcome
// nobody can know: the router answers 502 outcome_unknown, and neither
// the follower nor the router sends it again (field report 001). The
// router is cut from the leader (its proxy stopped), so the write goes to
// a follower; the leader's peer proxy delivers the forward and drops the
// answer until the test has seen the leader apply the write, then cuts
// the connection. Every replica's raft log then holds the write's entry
// exactly once.
func TestForwardWithLostAnswerIsUnknownAndAppliedOnce(t *testing.T) {
	const dim, home = 16, "shard-0"
	dir := t.TempDir()
	h := start(t, devcluster.Config{Replicas: 3, Dim: dim, Docs: 60, Seed: 3, Kernel: vector.Generic(),
		PeerProxies: true, DataDir: dir})
	table := h.dc
	si := slices.Index(h.dc.Names, home)
	var leader *devcluster.Replica
	for _, r := range h.dc.Replicas[si] {
		if r.Node.IsLeader() {
			leader = r
		}
	}
	require.NotNil(t, leader)
	c := faultClient(t)
	leader.Proxy.Stop()
	require.Eventually(t, func() bool { return connState(t, c, h.srv.URL, leader.Proxy.Addr()) != "READY" },
		5*time.Second, 10*time.Millisecond)
	rng := rand.New(rand.NewPCG(21, 22))

	// A first write through a follower opens its forwarding connection to
	// the leader.
	code, body := h.upsert(t, idOn(table, home, "warm"), randomVector(rng, dim))
	require.Equal(t, http.StatusOK, code, body)

	require.NoError(t, leader.PeerProxy.Mute())
	id := idOn(table, home, "lost")
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		b, err := json.Marshal(map[string]any{"vectors": []map[string]any{{"id": id, "vector": randomVector(rng, dim)}}})
		if err != nil {
			done <- result{body: err.Error()}
			return
		}
		resp, err := c.Post(h.srv.URL+"/v1/vectors", "application/json", bytes.NewReader(b))
		if err != nil {
			done <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		done <- result{resp.StatusCode, string(raw)}
	}()
	require.Eventually(t, func() bool { _, ok := leader.Store.Get(id); return ok }, 5*time.Second, time.Millisecond,
		"the leader received the forward and applied it")
	require.NoError(t, leader.PeerProxy.Restore()) // cuts the connection the answer was to come back on
	res := <-done
	require.Equal(t, http.StatusBadGateway, res.code, res.body)
	var a writeAnswer
	require.NoError(t, json.Unmarshal([]byte(res.body), &a), res.body)
	require.Len(t, a.Results, 1)
	require.Equal(t, id, a.Results[0].ID)
	require.Equal(t, "unknown", a.Results[0].Outcome)
	require.Equal(t, "outcome_unknown", a.Results[0].Error.Code)
	require.Contains(t, a.Results[0].Error.Message, "retrying the request is safe")

	// Every replica applies the one entry; then a later write is in every
	// log behind it, so a replay still in flight would have landed first.
	later := idOn(table, home, "later")
	code, body = h.upsert(t, later, randomVector(rng, dim))
	require.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool {
		for _, r := range h.dc.Replicas[si] {
			if _, ok := r.Store.Get(later); !ok {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	h.dc.Close()
	for j := range h.dc.Replicas[si] {
		path := filepath.Join(dir, home, fmt.Sprintf("replica-%d", j), "raft.db")
		require.Equal(t, 1, upsertsOf(t, path, id), "replica %d applied the write once", j)
		require.Equal(t, 1, upsertsOf(t, path, later), "replica %d", j)
	}
}

// upsertsOf counts the upsert entries for id in the raft log at path (a
// replica's raft.db, its process closed).
func upsertsOf(t *testing.T, path, id string) int {
	t.Helper()
	st, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: time.Second}})
	require.NoError(t, err)
	defer st.Close()
	first, err := st.FirstIndex()
	require.NoError(t, err)
	last, err := st.LastIndex()
	require.NoError(t, err)
	n := 0
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		require.NoError(t, st.GetLog(i, &l))
		if l.Type != raft.LogCommand {
			continue
		}
		var cmd shardpb.Command
		require.NoError(t, proto.Unmarshal(l.Data, &cmd), "entry %d", i)
		for _, v := range cmd.GetUpsert().GetVectors() {
			if v.GetId() == id {
				n++
			}
		}
	}
	return n
}
