package replication

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/shardproc"
)

// TestConvergeAddsTheListedReplicas is what the Helm chart does when a
// zone is added: a replica started on an empty directory with --peers
// naming its group (as the chart renders them), which waits, unadded,
// because the group exists; then `router admin converge` over the
// chart's --shard list adds it, waits for its promotion, and says so. Run
// again, it changes nothing. A listed replica nobody runs is refused with
// its reason, and the group is unchanged.
func TestConvergeAddsTheListedReplicas(t *testing.T) {
	gate(t)
	c := startCluster(t, 1)
	r := c.startRouter(t, "router", nil)
	docs := makeDocs(rand.New(rand.NewPCG(31, 7)), "c", 0, 200)
	r.upsertAll(t, docs)
	group := c.shards[0]
	fourth := &replica{Shard: &shardproc.Shard{GRPC: freePort(t), HTTP: freePort(t), Dir: filepath.Join(c.dir, "shard-0-3")}, shard: 0, idx: 3}
	peers := []string{group[0].GRPC, group[1].GRPC, group[2].GRPC, fourth.GRPC}
	fourth.Proc = shardproc.Proc{Name: "shard-0/3", Bin: routerPath(t), Log: fourth.Dir + ".log",
		Args: []string{"shard", "--grpc-addr", fourth.GRPC, "--http-addr", fourth.HTTP, "--data-dir", fourth.Dir,
			"--dim", strconv.Itoa(c.dim), "--metric", "cosine",
			"--peers", strings.Join(peers, ","), "--advertise-addr", fourth.GRPC,
			"--max-leader-silence", leaderSilence.String()}}
	c.shards[0] = append(c.shards[0], fourth)
	start(t, &fourth.Proc)
	waitListening(t, fourth.GRPC)
	three := "shard-0=" + strings.Join(peers[:3], ",")
	st, err := admin(t, "status", "--shard", three, "--json")
	require.NoError(t, err, st)
	require.Equal(t, 3, strings.Count(st, `"voter": true`), "the fourth waits, unadded: %s", st)

	out, err := admin(t, "converge", "--shard", three+",127.0.0.1:1", "--timeout", "30s")
	require.Error(t, err, out)
	require.Contains(t, out, "shard-0: adding 127.0.0.1:1: no replica answers at 127.0.0.1:1")
	st, err = admin(t, "status", "--shard", three, "--json")
	require.NoError(t, err, st)
	require.Equal(t, 3, strings.Count(st, `"addr"`), st)

	all := "shard-0=" + strings.Join(peers, ",")
	out, err = admin(t, "converge", "--shard", all, "--timeout", "5m")
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("shard-0: %s is a voter (", fourth.GRPC))
	st, err = admin(t, "status", "--shard", all, "--json")
	require.NoError(t, err, st)
	require.Equal(t, 4, strings.Count(st, `"voter": true`), st)
	require.Eventually(t, fourth.Ready, time.Minute, 50*time.Millisecond, "the added replica never served")

	out, err = admin(t, "converge", "--shard", all)
	require.NoError(t, err, out)
	require.Contains(t, out, "shard-0: every listed replica is a voter\n")
}
