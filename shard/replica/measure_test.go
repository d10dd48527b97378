package replica

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// TestMeasureRejoin1536 measures, at 1536 dimensions over a 20 000-row
// shard, how long a replica 200 writes behind and a wiped one take to
// serve again after they start. It asserts nothing about the figures
// (quoted in the report); run with TRAWL_MEASURE=1.
func TestMeasureRejoin1536(t *testing.T) {
	if os.Getenv("TRAWL_MEASURE") == "" {
		t.Skip("set TRAWL_MEASURE=1 to measure")
	}
	const dim, rows = 1536, 20000
	vec := func(r *rand.Rand) []byte {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return shard.EncodeVector(v)
	}
	for _, wipe := range []bool{false, true} {
		t.Run(fmt.Sprint("wipe=", wipe), func(t *testing.T) {
			ms := groupDim(t, 3, dim)
			leader := waitLeader(t, ms)
			r := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < rows; i += 250 {
				vs := make([]*shardpb.Vector, 250)
				for j := range vs {
					vs[j] = &shardpb.Vector{Id: fmt.Sprint("row-", i+j), Vector: vec(r)}
				}
				_, err := leader.conn.Upsert(ctx(t), place, vs)
				require.NoError(t, err)
			}
			away := ms[0]
			if away == leader {
				away = ms[1]
			}
			away.stop()
			if wipe {
				require.NoError(t, os.RemoveAll(away.dir))
			}
			t0 := time.Now()
			for i := range 200 {
				_, err := leader.conn.Upsert(ctx(t), place, []*shardpb.Vector{{Id: fmt.Sprint("late-", i), Vector: vec(r)}})
				require.NoError(t, err)
			}
			t.Logf("200 single writes to a 3-replica group with one down: %s", time.Since(t0).Round(time.Millisecond))
			if wipe {
				t0 = time.Now()
				require.NoError(t, leader.node.Snapshot())
				t.Logf("leader snapshot of %d rows: %s", rows+200, time.Since(t0).Round(time.Millisecond))
			}
			t0 = time.Now()
			require.NoError(t, away.start())
			require.Eventually(t, func() bool {
				st, err := away.conn.Stats(ctx(t))
				return err == nil && st.GetServing() && st.GetDocCount() == rows+200
			}, 120*time.Second, 10*time.Millisecond)
			t.Logf("MEASURED: replica %s, 200 writes behind, serving all %d rows %s after it started",
				map[bool]string{false: "restarted on its directory", true: "on a wiped directory"}[wipe], rows+200, time.Since(t0).Round(time.Millisecond))
		})
	}
}
