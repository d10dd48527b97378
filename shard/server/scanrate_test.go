package server

import (
	"context"
	"math"
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

func TestCalibrationBytes(t *testing.T) {
	const noLimit = math.MaxInt64
	for _, tc := range []struct {
		name        string
		llc         int
		memLimit    int64
		want        int
		beyondCache bool
	}{
		{"cache unknown: the floor", 0, noLimit, MinCalibrationBytes, true},
		{"32 MiB cache: twice it", 32 << 20, noLimit, 64 << 20, true},
		{"48 MiB cache: twice it", 48 << 20, noLimit, 96 << 20, true},
		{"a cache past the ceiling: the ceiling, inside the cache", 300 << 20, noLimit, MaxCalibrationBytes, false},
		{"105 MiB cache under GOMEMLIMIT=120MiB: a quarter of the limit", 105 << 20, 120 << 20, 30 << 20, false},
		{"the limit's quarter beats the floor", 0, 128 << 20, 32 << 20, true},
		{"a generous limit changes nothing", 32 << 20, 8 << 30, 64 << 20, true},
		{"a tiny limit: one MiB at least", 0, 1 << 20, 1 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, beyond := calibrationBytes(tc.llc, tc.memLimit)
			require.Equal(t, tc.want, n)
			require.Equal(t, tc.beyondCache, beyond)
		})
	}
}
