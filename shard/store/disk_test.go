package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector/segment"
)

// onDisk returns a store of dim-D rows whose float32 rows are in small
// segment files under a test directory, so tests cross segment edges.
func onDisk(t *testing.T, dim int, opts ...MemoryOption) *Memory {
	t.Helper()
	set, err := segment.OpenRows(t.TempDir(), dim, 16)
	require.NoError(t, err)
	m := NewMemory(dim, append(opts, WithSegments(set))...)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

// TestOnDiskMatchesInMemory: the same writes (appends, overwrites,
// deletes that move the last row, deletes by filter) leave a store on
// disk and one in memory with the same rows in the same order, codes and
// payloads alike, and its Go heap holds no float32 row.
func TestOnDiskMatchesInMemory(t *testing.T) {
	const dim = 8
	bg := context.Background()
	for _, tc := range []struct {
		name string
		opts []MemoryOption
	}{
		{"float32", nil},
		{"int8", []MemoryOption{WithQuantization(QuantInt8)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, disk := NewMemory(dim, tc.opts...), onDisk(t, dim, tc.opts...)
			require.True(t, disk.OnDisk())
			require.False(t, mem.OnDisk())
			rng := rand.New(rand.NewPCG(5, 6))
			vec := func() []float32 {
				v := make([]float32, dim)
				for i := range v {
					v[i] = rng.Float32()*2 - 1
				}
				return v
			}
			both := func(fn func(m *Memory)) { fn(mem); fn(disk) }
			for step := range 400 {
				var recs []Record
				for range 1 + rng.IntN(8) {
					id := fmt.Sprint(rng.IntN(300))
					recs = append(recs, Record{ID: id, Vector: vec(), Payload: fmt.Appendf(nil, `{"k":%d}`, rng.IntN(4))})
				}
				both(func(m *Memory) { require.NoError(t, m.Upsert(bg, place, recs)) })
				if step%3 == 0 {
					id := fmt.Sprint(rng.IntN(300))
					both(func(m *Memory) { _, err := m.Delete(bg, place, id); require.NoError(t, err) })
				}
				if step == 100 && tc.opts != nil {
					scale, err := mem.trainInt8()
					require.NoError(t, err)
					both(func(m *Memory) { require.NoError(t, m.SetTrained(TrainedInt8Scale, scale, true)) })
				}
			}
			require.Equal(t, mem.Len(), disk.Len())
			require.NoError(t, mem.ViewScan(func(a *ScanView) error {
				return disk.ViewScan(func(b *ScanView) error {
					require.Equal(t, a.Rows.IDs, b.Rows.IDs)
					require.Equal(t, a.Rows.Clone(), b.Rows.Clone())
					if a.Codes != nil {
						require.NotNil(t, b.Codes)
						for i := range a.Rows.Len() {
							require.Equal(t, a.Codes.Row(i), b.Codes.Row(i), "codes of row %d", i)
						}
					}
					return nil
				})
			}))
			require.Less(t, disk.Bytes(), mem.Bytes()-mem.Len()*dim*4*9/10,
				"the store on disk holds no float32 rows in memory")
		})
	}
}

// TestOnDiskViewKeepsItsRows: a snapshot view of a store on disk reads
// the rows it was opened at while writes move on, and copies none.
func TestOnDiskViewKeepsItsRows(t *testing.T) {
	const dim = 4
	bg := context.Background()
	m := onDisk(t, dim)
	var want []Record
	for i := range 100 {
		want = append(want, Record{ID: fmt.Sprint(i), Vector: []float32{float32(i), 1, 2, 3}})
	}
	require.NoError(t, m.Upsert(bg, place, want))
	v, err := m.OpenView()
	require.NoError(t, err)
	// Overwrite every row twice and delete most: segments are compacted
	// and removed under the view.
	for gen := range 2 {
		var recs []Record
		for i := range 100 {
			recs = append(recs, Record{ID: fmt.Sprint(i), Vector: []float32{float32(i), float32(gen), 9, 9}})
		}
		require.NoError(t, m.Upsert(bg, place, recs))
	}
	for i := range 90 {
		_, err := m.Delete(bg, place, fmt.Sprint(i))
		require.NoError(t, err)
	}
	require.Empty(t, v.saved)
	var got []Record
	require.NoError(t, v.Read(0, v.Len(), func(id string, vec []float32, p []byte) error {
		got = append(got, Record{ID: id, Vector: append([]float32(nil), vec...), Payload: p})
		return nil
	}))
	require.Equal(t, want, got)
	v.Close()
	dir := m.disk.Dir()
	m.Reset(place, nil, 0)
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, es, "a reset store and a closed view leave no files")
}
