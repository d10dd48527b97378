package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

func TestParseQuantization(t *testing.T) {
	for s, want := range map[string]Quantization{"": QuantNone, "none": QuantNone, "int8": QuantInt8} {
		q, err := ParseQuantization(s)
		require.NoError(t, err)
		require.Equal(t, want, q)
	}
	_, err := ParseQuantization("int4")
	require.Error(t, err)
}

// TestInt8ScaleThatDoesNotDecode: a committed scale encodes every row; a
// scale that does not decode is refused with the reason and leaves the
// store without codes (it scans exactly, on every replica alike).
func TestInt8ScaleThatDoesNotDecode(t *testing.T) {
	const dim = 16
	m := NewMemory(dim, WithQuantization(QuantInt8))
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []Record
	for i := range 100 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		recs = append(recs, Record{ID: fmt.Sprint("v", i), Vector: v})
	}
	require.NoError(t, m.Upsert(context.Background(), place, recs))
	require.True(t, m.needsInt8Scale(100))
	require.False(t, m.needsInt8Scale(101), "fewer rows than asked for")
	b, err := m.trainInt8()
	require.NoError(t, err)
	require.NoError(t, m.SetTrained(TrainedInt8Scale, b, true))
	require.True(t, m.Int8Ready())
	require.False(t, m.needsInt8Scale(100), "a scale is committed")

	require.ErrorContains(t, m.SetTrained(TrainedInt8Scale, []byte("junk"), true), "int8 scale")
	require.False(t, m.Int8Ready())
}

// TestUpsertCodesEqualAFreshEncode checks the codes Upsert encodes before
// it takes the write lock (appends and overwrites, in memory and on disk)
// against the codes of every row encoded at once with the same scale.
func TestUpsertCodesEqualAFreshEncode(t *testing.T) {
	const dim = 24
	for _, disk := range []bool{false, true} {
		t.Run(fmt.Sprint("disk=", disk), func(t *testing.T) {
			m := NewMemory(dim, WithQuantization(QuantInt8))
			if disk {
				m = onDisk(t, dim, WithQuantization(QuantInt8))
			}
			rng := rand.New(rand.NewPCG(3, 4))
			batch := func(lo, n int) []Record {
				var recs []Record
				for i := lo; i < lo+n; i++ {
					v := make([]float32, dim)
					for j := range v {
						v[j] = float32(rng.NormFloat64())
					}
					recs = append(recs, Record{ID: fmt.Sprint("v", i), Vector: v})
				}
				return recs
			}
			ctx := context.Background()
			require.NoError(t, m.Upsert(ctx, place, batch(0, 300)))
			b, err := m.trainInt8()
			require.NoError(t, err)
			require.NoError(t, m.SetTrained(TrainedInt8Scale, b, true))
			require.NoError(t, m.Upsert(ctx, place, batch(200, 300))) // 100 overwrites, 200 appends
			_, err = m.Delete(ctx, place, "v7")
			require.NoError(t, err)
			require.NoError(t, m.ViewCodes(func(rows vector.Rows, c *quant.Codes) error {
				want, err := quant.Encode(c.Scale(), rows)
				require.NoError(t, err)
				require.Equal(t, want.Len(), c.Len())
				for i := range c.Len() {
					require.Equal(t, want.Row(i), c.Row(i), "row %d", i)
					require.Equal(t, want.Norm(i), c.Norm(i), "row %d", i)
				}
				return nil
			}))
		})
	}
}

// holdScan starts a scan of m and returns once it holds the read lock;
// closing the channel returned ends it.
func holdScan(m *Memory) chan<- struct{} {
	scanning, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = m.ViewScan(func(*ScanView) error {
			close(scanning)
			<-release
			return nil
		})
	}()
	<-scanning
	return release
}

// TestWriteWaitsOutALongScan checks a write held back by a scan longer
// than politeWrite still goes in once the scan ends.
func TestWriteWaitsOutALongScan(t *testing.T) {
	m := NewMemory(2)
	release := holdScan(m)
	done := make(chan error, 1)
	go func() { done <- m.Upsert(context.Background(), place, []Record{{ID: "a", Vector: []float32{1, 2}}}) }()
	time.Sleep(2 * politeWrite)
	select {
	case <-done:
		t.Fatal("the write went in during the scan")
	default:
	}
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, 1, m.Len())
}

// TestScansGoOnWhileAWriteWaits: while a write waits for a moment
// without scans, a scan that starts after it is not held behind it (a
// plain RWMutex.Lock would hold it until the first scan ended).
func TestScansGoOnWhileAWriteWaits(t *testing.T) {
	m := NewMemory(2)
	m.politeFor = time.Minute // polite for the whole test
	release := holdScan(m)
	done := make(chan error, 1)
	go func() { done <- m.Upsert(context.Background(), place, []Record{{ID: "a", Vector: []float32{1, 2}}}) }()
	time.Sleep(50 * time.Millisecond) // the write is waiting
	second := make(chan error, 1)
	go func() { second <- m.ViewScan(func(*ScanView) error { return nil }) }()
	select {
	case err := <-second:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(release) // let the goroutines end before failing
		t.Fatal("a scan that began while a write waited was held behind the write")
	}
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, 1, m.Len())
}
