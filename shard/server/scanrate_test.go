package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/vector"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
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
			require.Equal(t, tc.want, shard.MaxRowsWithin(tc.rate, tc.dim, tc.budget))
		})
	}
}

func TestCalibrationBytesBounds(t *testing.T) {
	n, _ := CalibrationBytes()
	require.GreaterOrEqual(t, n, MinCalibrationBytes)
	require.LessOrEqual(t, n, MaxCalibrationBytes)
}
