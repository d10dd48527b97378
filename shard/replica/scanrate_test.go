package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// A replica reports 0 before it has measured anything and a positive
// calibrated rate once CalibrateScanRate (what router shard runs at start,
// on its full-size scratch buffer) is done.
func TestStatsReportCalibratedScanRate(t *testing.T) {
	const dim = 1536
	k, err := vector.FromEnv()
	require.NoError(t, err)
	rep, c := serve(t, Config{Legacy: catalog.Settings{Dim: dim, Metric: vector.Cosine}, Kernel: k}, nil, client.DialConfig{})

	st, err := c.Stats(ctx(t))
	require.NoError(t, err)
	require.Zero(t, st.GetScanRate(), "nothing measured yet")

	cctx, cancel := context.WithTimeout(context.Background(), time.Minute) // -race on a shared machine
	defer cancel()
	rate, err := rep.Server.CalibrateScanRate(cctx)
	require.NoError(t, err)
	require.Positive(t, rate)
	st, err = c.Stats(ctx(t))
	require.NoError(t, err)
	require.Equal(t, rate, st.GetScanRate())
}

// Real full scans of one query feed the live rate; the calibrated one is
// kept beside it.
func TestStatsReportLiveScanRate(t *testing.T) {
	// The server leaves scans of fewer bytes than this out of the live
	// rate (mostly fixed costs).
	const dim, liveScanBytes = 1536, 4 << 20
	rep, c := serve(t, memConfig(dim, vector.Cosine), nil, client.DialConfig{})
	rep.Server.SetScanRate(123)
	st, err := c.Stats(ctx(t))
	require.NoError(t, err)
	require.Zero(t, st.GetScanRateLive(), "no scan yet")

	recs := make([]*shardpb.Vector, 0, 64)
	for i := range liveScanBytes/(4*dim) + 64 {
		v := make([]float32, dim)
		v[i%dim], v[(i+1)%dim] = 1, float32(i%7)+1
		recs = append(recs, &shardpb.Vector{Id: fmt.Sprintf("doc-%d", i), Vector: shard.EncodeVector(v)})
		if len(recs) == cap(recs) {
			_, err := c.Upsert(ctx(t), place, recs)
			require.NoError(t, err)
			recs = recs[:0]
		}
	}
	q := make([]float32, dim)
	q[0] = 1
	_, err = c.Search(ctx(t), []client.Query{{Vector: q, K: 3}}, 0)
	require.NoError(t, err)
	st, err = c.Stats(ctx(t))
	require.NoError(t, err)
	require.Positive(t, st.GetScanRateLive())
	require.Equal(t, 123.0, st.GetScanRate())
}
