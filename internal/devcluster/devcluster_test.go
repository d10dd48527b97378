package devcluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/vector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// answers asks every replica of every shard the same queries directly.
func answers(t *testing.T, c *Cluster, qs [][]float32) [][]string {
	t.Helper()
	var out [][]string
	for _, reps := range c.Replicas {
		for _, r := range reps {
			conn, err := client.Dial(r.Addr, client.DialConfig{})
			require.NoError(t, err)
			for _, q := range qs {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				resp, err := conn.Search(ctx, []client.Query{{Vector: q, K: 10}}, 0)
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
			require.Equal(t, reps[0].Store.Len(), r.Store.Len(), "replicas of a shard hold the same documents")
			if r.Node.IsLeader() {
				leaders++
			}
		}
		require.Equal(t, 1, leaders)
		total += reps[0].Store.Len()
	}
	require.Equal(t, 300, total)
	qs := [][]float32{c.Corpus[3].Vector, c.Corpus[42].Vector, c.Corpus[299].Vector}
	before := answers(t, c, qs)
	c.Close()

	c, err = Start(cfg)
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.Loaded, "a restarted dev cluster loads its data directory instead of seeding")
	require.Equal(t, before, answers(t, c, qs), "the restarted cluster answers identically")
}
