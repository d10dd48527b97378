package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
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

// countingPacer runs work at once and counts the pieces.
type countingPacer struct{ pieces int }

func (p *countingPacer) Do(_ context.Context, work func()) error {
	p.pieces++
	work()
	return nil
}

// TestRestoredCodesAreTheEncodedOnes: an int8 store on disk keeps its
// codes in files beside the rows; a snapshot links them, and a store
// restored from it copies them instead of encoding (no paced work at
// all), yet holds exactly the codes and norms encoding the restored rows
// with the committed scale gives. A snapshot whose files keep no codes
// (an older version's), or codes of another scale, is encoded as before,
// and the restored store keeps codes files from then on.
func TestRestoredCodesAreTheEncodedOnes(t *testing.T) {
	const dim = 8
	bg := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	vec := func() []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		edit    func(m *segment.Manifest)
		encodes bool
	}{
		{"codes files", func(*segment.Manifest) {}, false},
		{"no codes files", func(m *segment.Manifest) {
			m.CodesTag = nil
			for i := range m.Files {
				m.Files[i].Codes = nil
			}
		}, true},
		{"codes of another scale", func(m *segment.Manifest) { m.CodesTag = []byte("another scale") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := onDisk(t, dim, WithQuantization(QuantInt8))
			write := func(n int) {
				for range n {
					recs := []Record{{ID: fmt.Sprint(rng.IntN(200)), Vector: vec()}}
					require.NoError(t, m.Upsert(bg, place, recs))
					if rng.IntN(4) == 0 {
						_, err := m.Delete(bg, place, fmt.Sprint(rng.IntN(200)))
						require.NoError(t, err)
					}
				}
			}
			write(150)
			scale, err := m.trainInt8()
			require.NoError(t, err)
			require.NoError(t, m.SetTrained(TrainedInt8Scale, scale, true))
			write(400)

			v, err := m.OpenView()
			require.NoError(t, err)
			man, ok := v.Segments()
			require.True(t, ok)
			require.Equal(t, scale, man.CodesTag, "the files keep codes of the committed scale")
			require.NoError(t, v.SyncSegments())
			snap := t.TempDir()
			for _, f := range man.Files {
				require.NotNil(t, f.Codes)
				require.NoError(t, os.Link(f.Path, filepath.Join(snap, f.Name)))
				require.NoError(t, os.Link(f.Codes.Path, filepath.Join(snap, f.Codes.Name)))
			}
			var recs []Record
			require.NoError(t, v.Records(func(id string, p []byte) error {
				recs = append(recs, Record{ID: id, Payload: p})
				return nil
			}))
			trained := v.Trained()
			v.Close()
			write(300) // compactions drop files the snapshot links

			tc.edit(&man)
			r := onDisk(t, dim, WithQuantization(QuantInt8))
			require.NoError(t, r.RestoreSegments(place, trained, recs, man, func(f segment.File, path string) error {
				return os.Link(filepath.Join(snap, f.Name), path)
			}))
			var pace countingPacer
			require.NoError(t, r.FinishRestore(bg, &pace, nil))
			require.Equal(t, tc.encodes, pace.pieces > 0, "paced encoding")
			require.True(t, r.Int8Ready())
			var s quant.Scale
			require.NoError(t, s.UnmarshalBinary(scale))
			require.NoError(t, r.ViewCodes(func(rows vector.Rows, c *quant.Codes) error {
				want, err := quant.Encode(s, rows)
				require.NoError(t, err)
				require.Equal(t, len(recs), c.Len())
				for i := range c.Len() {
					require.Equal(t, want.Row(i), c.Row(i), "codes of row %d", i)
					require.Equal(t, want.Norm(i), c.Norm(i), "norm of row %d", i)
				}
				return nil
			}))
			r.mu.RLock()
			require.Equal(t, scale, r.disk.CodesTag(), "the restored store keeps codes files")
			r.mu.RUnlock()
			// And they follow its writes: a snapshot of it restores again
			// without encoding.
			for range 50 {
				require.NoError(t, r.Upsert(bg, place, []Record{{ID: fmt.Sprint("new", rng.IntN(40)), Vector: vec()}}))
			}
			v2, err := r.OpenView()
			require.NoError(t, err)
			defer v2.Close()
			man2, _ := v2.Segments()
			r2 := onDisk(t, dim, WithQuantization(QuantInt8))
			var recs2 []Record
			require.NoError(t, v2.Records(func(id string, p []byte) error {
				recs2 = append(recs2, Record{ID: id, Payload: p})
				return nil
			}))
			require.NoError(t, r2.RestoreSegments(place, v2.Trained(), recs2, man2, func(f segment.File, path string) error {
				return os.Link(f.Path, path)
			}))
			pace.pieces = 0
			require.NoError(t, r2.FinishRestore(bg, &pace, nil))
			require.Zero(t, pace.pieces)
			require.NoError(t, r.ViewCodes(func(_ vector.Rows, want *quant.Codes) error {
				return r2.ViewCodes(func(_ vector.Rows, got *quant.Codes) error {
					require.Equal(t, want.Len(), got.Len())
					for i := range want.Len() {
						require.Equal(t, want.Row(i), got.Row(i))
						require.Equal(t, want.Norm(i), got.Norm(i))
					}
					return nil
				})
			}))
		})
	}
}
