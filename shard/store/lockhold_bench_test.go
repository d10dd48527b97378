package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector/segment"
)

// BenchmarkUpsertLockHold reports how long each Upsert batch of 256
// 1536-D rows holds an int8 store's write lock (every scan arriving
// meanwhile waits that long) while lockHoldRows rows load into an empty
// store, its scale already committed: the codes arena grows through its
// doublings into later chunks, and on disk the segment files through
// their growth into new segments. Placements are the two a replica
// gives an int8 collection: float32 rows on disk (the default, segment
// files keeping the codes too) or in memory. The metrics are the
// longest hold, the 99th percentile and the median, in milliseconds;
// prepare=false is the store without prepareWrite (everything under the
// lock), for comparison in the same run.
func BenchmarkUpsertLockHold(b *testing.B) {
	const dim = 1536
	scale := benchScale(b, dim)
	pool := randomRows(dim, 1024)
	for _, onDisk := range []bool{true, false} {
		for _, prepare := range []bool{false, true} {
			b.Run(fmt.Sprintf("on_disk=%t/prepare=%t", onDisk, prepare), func(b *testing.B) {
				var holds []time.Duration
				for b.Loop() {
					holds = append(holds, lockHolds(b, dim, onDisk, !prepare, scale, pool)...)
				}
				slices.Sort(holds)
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(holds[len(holds)-1]), "max-hold-ms")
				b.ReportMetric(ms(holds[len(holds)*99/100]), "p99-hold-ms")
				b.ReportMetric(ms(holds[len(holds)/2]), "p50-hold-ms")
			})
		}
	}
}

// lockHoldRows is how many rows BenchmarkUpsertLockHold loads: past the
// first full chunk of 1536-D codes (16 384 rows) and into the third, and
// through five segment files of 8 192 rows.
const lockHoldRows = 40_000

// lockHolds loads lockHoldRows rows (cycling through pool, under new
// ids) into a new int8 store in batches of 256 and returns each batch's
// write-lock hold.
func lockHolds(b *testing.B, dim int, onDisk, noPrepare bool, scale []byte, pool [][]float32) []time.Duration {
	opts := []MemoryOption{WithQuantization(QuantInt8)}
	if onDisk {
		set, err := segment.Open(b.TempDir(), dim)
		require.NoError(b, err)
		opts = append(opts, WithSegments(set))
	}
	m := NewMemory(dim, opts...)
	defer m.Close()
	m.noPrepare = noPrepare
	require.NoError(b, m.SetTrained(TrainedInt8Scale, scale, true))
	var holds []time.Duration
	m.holdHook = func(d time.Duration) { holds = append(holds, d) }
	const batch = 256
	recs := make([]Record, 0, batch)
	for i := 0; i < lockHoldRows; i += batch {
		recs = recs[:0]
		for j := i; j < min(i+batch, lockHoldRows); j++ {
			recs = append(recs, Record{ID: fmt.Sprint("doc-", j), Vector: pool[j%len(pool)]})
		}
		require.NoError(b, m.Upsert(context.Background(), place, recs))
	}
	require.Equal(b, lockHoldRows, m.Len())
	return holds
}

// benchScale is an int8 scale trained on random dim-D rows.
func benchScale(tb testing.TB, dim int) []byte {
	m := NewMemory(dim, WithQuantization(QuantInt8))
	require.NoError(tb, m.Upsert(context.Background(), place, recordsOf(randomRows(dim, 1000))))
	scale, err := m.trainInt8()
	require.NoError(tb, err)
	return scale
}

// randomRows returns n normally distributed dim-D rows.
func randomRows(dim, n int) [][]float32 {
	r := rand.New(rand.NewPCG(11, 12))
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, dim)
		for d := range out[i] {
			out[i][d] = float32(r.NormFloat64())
		}
	}
	return out
}

// recordsOf makes records "r-0", "r-1", ... of vs.
func recordsOf(vs [][]float32) []Record {
	recs := make([]Record, len(vs))
	for i, v := range vs {
		recs[i] = Record{ID: fmt.Sprint("r-", i), Vector: v}
	}
	return recs
}
