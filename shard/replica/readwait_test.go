package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/raftnode"
)

// A follower a little behind its leader waits for the write a read asks
// for (min_index) instead of refusing at once, and refuses only once half
// the read's budget has gone by (DESIGN.md, "Writes": read-after-write).
func TestFollowerWaitsForTheReadsIndex(t *testing.T) {
	// The delayed link below holds each heartbeat 300 ms each way, so a
	// loaded machine can age the follower's last contact past the tests'
	// 1.2 s silence and it stops serving for that reason, not for the one
	// asserted here; the production 5 s silence keeps it serving.
	ms := group(t, 3, func(c *Config) { c.MaxLeaderSilence = raftnode.DefaultMaxLeaderSilence })
	leader := waitLeader(t, ms)
	write(t, ms, "warm")
	var slow *member
	for _, m := range ms {
		if m != leader {
			slow = m
			break
		}
	}
	// The leader reaches the follower through its proxy: delayed, the
	// follower learns of each write well after the other two commit it.
	require.NoError(t, slow.proxy.Slow(300*time.Millisecond))
	defer func() { require.NoError(t, slow.proxy.Restore()) }()

	idx := write(t, ms, "late")
	require.Less(t, slow.node.AppliedIndex(), idx, "the slowed follower has not applied the write when it is acknowledged")
	q := []client.Query{{Vector: testVec("late", 0), K: 1}}

	// A short budget: the follower waits half of it, then refuses as not
	// serving, in time for the router to try another replica.
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := slow.conn.Search(short, q, idx)
	var ns interface{ NotServing() bool }
	require.True(t, errors.As(err, &ns) && ns.NotServing(), "refused as not serving, got %v", err)
	require.Less(t, time.Since(t0), 100*time.Millisecond, "refused before the read's deadline")

	// A budget that covers the delay: the follower waits and answers with
	// the write.
	long, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := slow.conn.Search(long, q, idx)
	require.NoError(t, err)
	require.Equal(t, "late", res.Hits[0][0].ID)
}
