package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/segment"
)

// loadRows fills m with n random dim-D rows in batches of 256, as the
// state machine applies a bulk load, calling after (if set) after each
// batch.
func loadRows(tb testing.TB, m *Memory, n int, after func()) {
	tb.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	const batch = 256
	recs := make([]Record, 0, batch)
	for i := 0; i < n; i += batch {
		recs = recs[:0]
		for j := i; j < min(i+batch, n); j++ {
			v := make([]float32, m.Dim())
			for d := range v {
				v[d] = float32(r.NormFloat64())
			}
			recs = append(recs, Record{ID: fmt.Sprint("doc-", j), Vector: v})
		}
		require.NoError(tb, m.Upsert(context.Background(), place, recs))
		if after != nil {
			after()
		}
	}
}

// TestMeasureLoadHeap measures the Go heap a store of TRAWL_LOAD_ROWS
// (default 200 000) 1536-D rows holds once loaded, and the peak it
// reached on the way (sampled after every batch of 256 rows), against
// the rows' own float32 bytes, for each float32 placement, with int8
// codes too (TRAWL_LOAD_INT8=1). It asserts nothing about the figures
// (quoted in reports); run with TRAWL_MEASURE=1.
func TestMeasureLoadHeap(t *testing.T) {
	if os.Getenv("TRAWL_MEASURE") == "" {
		t.Skip("set TRAWL_MEASURE=1 to measure")
	}
	const dim = 1536
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("TRAWL_LOAD_ROWS")); err == nil && v > 0 {
		n = v
	}
	for _, onDisk := range []bool{false, true} {
		t.Run(fmt.Sprint("on_disk=", onDisk), func(t *testing.T) { measureLoadHeap(t, n, dim, onDisk) })
	}
}

func measureLoadHeap(t *testing.T, n, dim int, onDisk bool) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak uint64
	var opts []MemoryOption
	int8 := os.Getenv("TRAWL_LOAD_INT8") != ""
	if int8 {
		opts = append(opts, WithQuantization(QuantInt8))
	}
	if onDisk {
		set, err := segment.Open(t.TempDir(), dim)
		require.NoError(t, err)
		opts = append(opts, WithSegments(set))
	}
	m := NewMemory(dim, opts...)
	defer m.Close()
	if int8 {
		loadRows(t, m, 2000, nil)
		scale, err := m.trainInt8()
		require.NoError(t, err)
		require.NoError(t, m.SetTrained(TrainedInt8Scale, scale, true))
	}
	loadRows(t, m, n, func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse-base)
	})
	runtime.GC()
	runtime.ReadMemStats(&ms)
	held := ms.HeapInuse - base
	floats := float64(n * dim * 4)
	t.Logf("on_disk=%t int8=%t %d×%d rows (%.0f MB of float32): heap held %.0f MB (%.2f× the rows, %.0f B/row), peak %.0f MB (%.2f×); store.Bytes %.0f MB",
		onDisk, int8, n, dim, floats/1e6, float64(held)/1e6, float64(held)/floats, float64(held)/float64(n),
		float64(peak)/1e6, float64(peak)/floats, float64(m.Bytes())/1e6)
	runtime.KeepAlive(m)
}

// BenchmarkStoreScan reports an exact scan of a whole store (1536-D, the
// rows of BenchRows-style TRAWL_SCAN_ROWS, default 65 536) through the
// ScanView a shard's scan reads, for a single query and a batch of 8.
func BenchmarkStoreScan(b *testing.B) {
	const dim = 1536
	n := 65_536
	if v, err := strconv.Atoi(os.Getenv("TRAWL_SCAN_ROWS")); err == nil && v > 0 {
		n = v
	}
	m := NewMemory(dim)
	loadRows(b, m, n, nil)
	k, _ := vector.Select("")
	r := rand.New(rand.NewPCG(9, 10))
	for _, batch := range []int{1, 8} {
		qs := make([]vector.Query, batch)
		for i := range qs {
			v := make([]float32, dim)
			for d := range v {
				v[d] = float32(r.NormFloat64())
			}
			qs[i] = vector.Query{Vector: v, K: 10}
		}
		b.Run(fmt.Sprintf("%s/rows=%d/batch=%d", k.Name, n, batch), func(b *testing.B) {
			b.SetBytes(int64(n * dim * 4))
			for b.Loop() {
				err := m.ViewScan(func(v *ScanView) error {
					_, err := k.Scan(context.Background(), vector.DotProduct, v.Rows, qs)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
