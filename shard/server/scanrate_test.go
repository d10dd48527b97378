package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	srv, c := serve(t, Config{Dim: dim, Metric: vector.Cosine, Kernel: k, Store: NewMemory(dim)}, nil, DialConfig{})

	st, err := c.Stats(ctx(t))
	require.NoError(t, err)
	require.Zero(t, st.GetScanRate(), "nothing measured yet")

	cctx, cancel := context.WithTimeout(context.Background(), time.Minute) // -race on a shared machine
	defer cancel()
	rate, err := srv.CalibrateScanRate(cctx)
	require.NoError(t, err)
	require.Positive(t, rate)
	st, err = c.Stats(ctx(t))
	require.NoError(t, err)
	require.Equal(t, rate, st.GetScanRate())
}

// Real full scans of one query feed the live rate; the calibrated one is
// kept beside it.
func TestStatsReportLiveScanRate(t *testing.T) {
	const dim = 1536
	srv, c := serve(t, memConfig(dim, vector.Cosine), nil, DialConfig{})
	srv.SetScanRate(123)
	st, err := c.Stats(ctx(t))
	require.NoError(t, err)
	require.Zero(t, st.GetScanRateLive(), "no scan yet")

	recs := make([]*shardpb.Vector, 0, 64)
	for i := range minLiveBytes/(4*dim) + 64 {
		v := make([]float32, dim)
		v[i%dim], v[(i+1)%dim] = 1, float32(i%7)+1
		recs = append(recs, &shardpb.Vector{Id: fmt.Sprintf("doc-%d", i), Vector: EncodeVector(v)})
		if len(recs) == cap(recs) {
			_, err := c.Upsert(ctx(t), place, recs)
			require.NoError(t, err)
			recs = recs[:0]
		}
	}
	q := make([]float32, dim)
	q[0] = 1
	_, err = c.Search(ctx(t), &shardpb.Query{Vector: EncodeVector(q), K: 3}, 0)
	require.NoError(t, err)
	st, err = c.Stats(ctx(t))
	require.NoError(t, err)
	require.Positive(t, st.GetScanRateLive())
	require.Equal(t, 123.0, st.GetScanRate())
}

func TestMeasureScanRate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		metric vector.Metric
		dim    int
		bytes  int
	}{
		{"cosine 1536-D, a few rows", vector.Cosine, 1536, 1 << 20},
		{"l2 8-D, more rows than one chunk", vector.Euclidean, 8, 4 * 8 * (calibrationChunk + 100)},
		{"dot, smaller than one row", vector.DotProduct, 64, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate, err := MeasureScanRate(ctx(t), vector.Generic(), tc.metric, tc.dim, tc.bytes)
			require.NoError(t, err)
			require.Positive(t, rate)
		})
	}
	_, err := MeasureScanRate(ctx(t), vector.Generic(), vector.Cosine, 0, 1<<20)
	require.ErrorContains(t, err, "dimension 0")
}

func TestMaxRowsWithin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rate   float64
		dim    int
		budget time.Duration
		want   uint64
	}{
		{"1536-D at the plaintext shard budget", 4_000_000, 1536, 45 * time.Millisecond, 180_000},
		{"768-D rows: twice as many", 4_000_000, 768, 45 * time.Millisecond, 360_000},
		{"not measured", 0, 1536, 45 * time.Millisecond, 0},
		{"no dimension known", 4_000_000, 0, 45 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, MaxRowsWithin(tc.rate, tc.dim, tc.budget))
		})
	}
}

func TestCalibrationBytesBounds(t *testing.T) {
	n, _ := CalibrationBytes()
	require.GreaterOrEqual(t, n, MinCalibrationBytes)
	require.LessOrEqual(t, n, MaxCalibrationBytes)
}
