package devcluster

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/localport"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/vector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// answers asks every replica of every shard the same queries directly, in
// the cluster's collection.
func answers(t *testing.T, c *Cluster, qs [][]float32) [][]string {
	t.Helper()
	var out [][]string
	coll := client.Collection{Name: c.Collection.Name, UID: c.Collection.UID}
	for _, reps := range c.Replicas {
		for _, r := range reps {
			conn, err := client.Dial(r.Addr, client.DialConfig{})
			require.NoError(t, err)
			for _, q := range qs {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				resp, err := conn.SearchBatch(ctx, client.NewBatchIn(coll, []client.Query{{Vector: q, K: 10}}), 0)
				cancel()
				require.NoError(t, err)
				var ids []string
				for _, h := range resp.Hits[0] {
					ids = append(ids, h.ID)
				}
				out = append(out, ids)
			}
			conn.Close()
		}
	}
	return out
}

// docs is the replica's document count of the cluster's collection, as it
// answers Stats.
func docs(t *testing.T, c *Cluster, r *Replica) int {
	t.Helper()
	conn, err := client.Dial(r.Addr, client.DialConfig{})
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := conn.In(client.Collection{Name: c.Collection.Name, UID: c.Collection.UID}).Stats(ctx)
	require.NoError(t, err)
	return int(st.GetDocCount())
}

func TestRestartedOnItsDataDirKeepsItsCorpus(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Replicas: 3, Dim: 16, Docs: 300, Seed: 5, Kernel: vector.Generic(), DataDir: dir}
	c, err := Start(cfg)
	require.NoError(t, err)
	require.False(t, c.Loaded)
	require.Len(t, c.Replicas[0], 3, "three replicas per shard")
	total := 0
	for _, reps := range c.Replicas {
		leaders := 0
		for _, r := range reps {
			require.Equal(t, docs(t, c, reps[0]), docs(t, c, r), "replicas of a shard hold the same documents")
			if r.Node.IsLeader() {
				leaders++
			}
		}
		require.Equal(t, 1, leaders)
		total += docs(t, c, reps[0])
	}
	require.Equal(t, 300, total)
	requireRestartablePorts(t, c)
	first := c.Collection
	qs := [][]float32{c.Corpus[3].Vector, c.Corpus[42].Vector, c.Corpus[299].Vector}
	before := answers(t, c, qs)
	c.Close()

	c, err = Start(cfg)
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.Loaded, "a restarted dev cluster loads its data directory instead of seeding")
	require.Equal(t, first, c.Collection, "the collection it was seeded into, found again")
	require.Equal(t, before, answers(t, c, qs), "the restarted cluster answers identically")
	requireRestartablePorts(t, c)
}

// requireRestartablePorts: every replica and its proxy listen below the
// kernel's ephemeral range, where no outgoing connection on the machine
// can take the port while the cluster is down (CI once failed a restart
// on a port taken that way).
func requireRestartablePorts(t *testing.T, c *Cluster) {
	t.Helper()
	lo, hi := localport.Range()
	for _, reps := range c.Replicas {
		for _, r := range reps {
			for _, addr := range []string{r.Addr, r.Proxy.Addr()} {
				_, p, err := net.SplitHostPort(addr)
				require.NoError(t, err)
				port, err := strconv.Atoi(p)
				require.NoError(t, err)
				require.True(t, port >= lo && port < hi, "%s of %s replica %d is outside %d..%d", addr, r.Shard, r.Index, lo, hi)
			}
		}
	}
}

// TestCreatesItsCollection: the corpus goes into a collection created
// through the catalog with the cluster's settings (trawl by default),
// which every replica's catalog holds under the one uid the authority
// gave it.
func TestCreatesItsCollection(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want coordinator.Collection
	}{
		{Config{Dim: 8, Docs: 120, Seed: 3, Kernel: vector.Generic()},
			coordinator.Collection{Name: "trawl", Settings: catalog.Settings{Dim: 8, Metric: vector.Cosine, Quantization: "none", Index: "flat", Float32: "in_memory"}}},
		{Config{Dim: 4, Metric: vector.DotProduct, Docs: 50, Seed: 3, Kernel: vector.Generic(), Collection: "notes"},
			coordinator.Collection{Name: "notes", Settings: catalog.Settings{Dim: 4, Metric: vector.DotProduct, Quantization: "none", Index: "flat", Float32: "in_memory"}}},
	} {
		t.Run(tc.want.Name, func(t *testing.T) {
			c, err := Start(tc.cfg)
			require.NoError(t, err)
			defer c.Close()
			require.NotZero(t, c.Collection.UID, "a uid the authority assigned")
			tc.want.UID = c.Collection.UID
			tc.want.Slots = placement.Even(c.Names, placement.DefaultSlots)
			require.Equal(t, tc.want, c.Collection)
			total := 0
			for _, reps := range c.Replicas {
				for _, r := range reps {
					conn, err := client.Dial(r.Addr, client.DialConfig{})
					require.NoError(t, err)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					cat, err := conn.Catalog(ctx, 0)
					cancel()
					conn.Close()
					require.NoError(t, err)
					require.Len(t, cat.GetCollections(), 1, "%s replica %d", r.Shard, r.Index)
					e := cat.GetCollections()[0]
					require.Equal(t, tc.want.Name, e.GetName())
					require.Equal(t, c.Collection.UID, e.GetUid())
				}
				total += docs(t, c, reps[0])
			}
			require.Equal(t, tc.cfg.Docs, total)
		})
	}
}
