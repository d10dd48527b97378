package replication

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
)

const batchMax = 256 // api.MaxBatch: queries per /v1/search/batch

// selfQueries asks, for every doc, the batch query "nearest to your own
// vector" (k=1) through r. It returns how many chunks came back complete,
// and fails the test if a complete chunk's answer lacks its doc.
func selfQueries(t *testing.T, r *routerProc, docs []doc) (complete, degraded int) {
	t.Helper()
	for from := 0; from < len(docs); from += batchMax {
		chunk := docs[from:min(from+batchMax, len(docs))]
		qs := make([][]float32, len(chunk))
		for i, d := range chunk {
			qs[i] = d.vec
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a, err := r.searchBatch(ctx, qs, 1)
		cancel()
		if err != nil || a.ScatterGather.Degraded {
			degraded++
			continue
		}
		require.Len(t, a.Results, len(chunk))
		for i, d := range chunk {
			require.NotEmpty(t, a.Results[i].Items, "a complete answer without %s, acknowledged before the query", d.id)
			got := a.Results[i].Items[0]
			require.Equal(t, d.id, got.ID, "a complete answer whose nearest to %s is %s (score %.4f): an acknowledged write is missing", d.id, got.ID, got.Score)
		}
		complete++
	}
	return complete, degraded
}

// untilComplete polls selfQueries until every chunk is complete and
// returns how long that took.
func untilComplete(t *testing.T, r *routerProc, docs []doc, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		c, _ := selfQueries(t, r, docs)
		if c*batchMax >= len(docs) {
			return time.Since(start)
		}
		require.Less(t, time.Since(start), bound, "the returning replicas never answered completely")
		time.Sleep(100 * time.Millisecond)
	}
}

// A replica away (killed) or wiped while writes are acknowledged: a router
// that can only ask those replicas never gets a complete answer missing one
// of those writes, and gets complete answers again within the bounds users
// rely on (30 s for 200 writes behind, 60 s for a wiped directory).
func TestReturningReplicaNeverAnswersWithoutAcknowledgedWrites(t *testing.T) {
	gate(t)
	for _, tc := range []struct {
		name  string
		wipe  bool
		bound time.Duration
	}{
		{"killed", false, 30 * time.Second},
		{"wiped", true, 60 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(tc.name))))
			c := startCluster(t, 3)
			writer := c.startRouter(t, "writer", nil)
			base := makeDocs(rng, "base-", 0, 600)
			writer.upsertAll(t, base)

			// Replica 2 of every shard goes away; ~200 writes per shard are
			// acknowledged while it is gone (two replicas are a majority).
			for _, reps := range c.shards {
				reps[2].Kill()
				if tc.wipe {
					reps[2].wipe(t)
				}
			}
			away := makeDocs(rng, "away-", 0, 600)
			writer.upsertAll(t, away)

			lonely := c.startRouter(t, "lonely", map[int][]int{0: {2}, 1: {2}, 2: {2}})
			must := away
			if tc.wipe {
				must = append(append([]doc{}, base...), away...)
			}
			complete, _ := selfQueries(t, lonely, must)
			require.Zero(t, complete, "complete answers from replicas that are down")

			for _, reps := range c.shards {
				start(t, &reps[2].Proc)
			}
			took := untilComplete(t, lonely, must, tc.bound)
			t.Logf("%s: replicas missing %d acknowledged writes (about a third per shard) answered completely %v after restart",
				tc.name, len(must), took.Round(time.Millisecond))
		})
	}
}

// Two routers writing the same ids at the same time leave every replica of
// a shard with the same bytes for each id, one of the versions sent.
func TestTwoRoutersWritingTheSameIdsLeaveReplicasIdentical(t *testing.T) {
	gate(t)
	c := startCluster(t, 3)
	routers := []*routerProc{c.startRouter(t, "router-a", nil), c.startRouter(t, "router-b", nil)}
	const ids, rounds = 120, 20
	versions := make([]map[string][]doc, 2) // router → id → every version it sent
	var wg sync.WaitGroup
	for w, r := range routers {
		versions[w] = map[string][]doc{}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for range rounds {
				var docs []doc
				for i := range ids {
					d := newDoc(rng, fmt.Sprintf("same-%d", i))
					docs = append(docs, d)
					versions[w][d.id] = append(versions[w][d.id], d)
				}
				for from := 0; from < len(docs); from += 40 {
					r.upsertAll(t, docs[from:min(from+40, len(docs))])
				}
			}
		})
	}
	wg.Wait()

	conns := make([][]*client.Conn, len(c.shards))
	for s, reps := range c.shards {
		for _, r := range reps {
			cn, err := client.Dial(r.GRPC, client.DialConfig{})
			require.NoError(t, err)
			t.Cleanup(func() { cn.Close() })
			conns[s] = append(conns[s], cn)
		}
	}
	for i := range ids {
		id := fmt.Sprintf("same-%d", i)
		// Followers apply within milliseconds; give them a moment.
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			holders := 0
			for s := range conns {
				var first []byte
				for r, cn := range conns[s] {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					v, err := cn.Get(ctx, id, 0)
					cancel()
					if status.Code(err) == codes.NotFound {
						require.Nil(ct, first, "%s: on replica 0 of %s but not on replica %d", id, shardName(s), r)
						continue
					}
					require.NoError(ct, err)
					if r == 0 {
						first = v.GetVector()
						holders++
						continue
					}
					require.Equal(ct, first, v.GetVector(), "%s: replicas of %s hold different bytes", id, shardName(s))
				}
				if first != nil {
					require.True(ct, sentVersion(versions, id, first), "%s holds a vector neither router sent", id)
				}
			}
			require.Equal(ct, 1, holders, "%s is on exactly one shard", id)
		}, 10*time.Second, 100*time.Millisecond)
	}
}

// sentVersion reports whether stored (an encoded vector) is, to float32
// rounding, one of the versions sent for id.
func sentVersion(versions []map[string][]doc, id string, stored []byte) bool {
	got, err := shard.DecodeVector(stored)
	if err != nil {
		return false
	}
	for _, byID := range versions {
		for _, d := range byID[id] {
			if len(d.vec) != len(got) {
				continue
			}
			close := true
			for i := range got {
				if math.Abs(float64(got[i]-d.vec[i])) > 1e-6 {
					close = false
					break
				}
			}
			if close {
				return true
			}
		}
	}
	return false
}

// A replica restarted while both its peers are frozen (SIGSTOP) cannot
// learn what was committed, so it answers nothing as complete; once its
// peers resume it serves again.
func TestReplicaRestartedWhilePeersAreFrozenAnswersNothingComplete(t *testing.T) {
	gate(t)
	rng := rand.New(rand.NewPCG(5, 5))
	c := startCluster(t, 3)
	writer := c.startRouter(t, "writer", nil)
	docs := makeDocs(rng, "d-", 0, 300)
	writer.upsertAll(t, docs)
	lonely := c.startRouter(t, "lonely", map[int][]int{0: {2}})

	reps := c.shards[0]
	reps[0].Signal(syscall.SIGSTOP)
	reps[1].Signal(syscall.SIGSTOP)
	reps[2].Kill()
	start(t, &reps[2].Proc)
	// Past the point where it would have caught up had it a leader, and
	// past --max-leader-silence.
	until := time.Now().Add(leaderSilence + 3*time.Second)
	asked := 0
	for time.Now().Before(until) {
		complete, _ := selfQueries(t, lonely, docs)
		require.Zero(t, complete, "a complete answer from a replica that cannot know the commit index")
		asked++
		time.Sleep(100 * time.Millisecond)
	}
	require.Positive(t, asked)
	reps[0].Signal(syscall.SIGCONT)
	reps[1].Signal(syscall.SIGCONT)
	took := untilComplete(t, lonely, docs, 30*time.Second)
	t.Logf("asked %d times while its peers were frozen, never complete; complete %v after they resumed", asked, took.Round(time.Millisecond))
}
