package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestViewSeesTheStateItWasOpenedAt: writes after OpenView (overwrites,
// deletes that move the last row, appends into freed rows, growth) never
// change what the view reads, and the store keeps only the rows it had
// to save.
func TestViewSeesTheStateItWasOpenedAt(t *testing.T) {
	bg := context.Background()
	for _, tc := range []struct {
		name  string
		write func(m *Memory)
	}{
		{"overwrite", func(m *Memory) {
			require.NoError(t, m.Upsert(bg, place, []Record{{ID: "r1", Vector: []float32{9, 9}, Payload: []byte("new")}}))
		}},
		{"delete moves the last row", func(m *Memory) {
			_, err := m.Delete(bg, place, "r0")
			require.NoError(t, err)
		}},
		{"delete then append into the freed row", func(m *Memory) {
			_, err := m.Delete(bg, place, "r4")
			require.NoError(t, err)
			require.NoError(t, m.Upsert(bg, place, []Record{{ID: "n", Vector: []float32{7, 7}}}))
		}},
		{"growth", func(m *Memory) {
			var recs []Record
			for i := range 5000 {
				recs = append(recs, Record{ID: "g" + string(rune('a'+i%26)) + string(rune(i)), Vector: []float32{1, 1}})
			}
			require.NoError(t, m.Upsert(bg, place, recs))
			require.NoError(t, m.Upsert(bg, place, []Record{{ID: "r2", Vector: []float32{5, 5}}}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory(2)
			var want []Record
			for i := range 5 {
				r := Record{ID: "r" + string(rune('0'+i)), Vector: []float32{float32(i), float32(-i)}, Payload: []byte{byte(i)}}
				want = append(want, r)
			}
			require.NoError(t, m.Upsert(bg, place, want))
			v, err := m.OpenView()
			require.NoError(t, err)
			_, err = m.OpenView()
			require.ErrorIs(t, err, errViewOpen)
			// Read the first row, then write, then read the rest.
			var got []Record
			collect := func(id string, vec []float32, p []byte) error {
				got = append(got, Record{ID: id, Vector: append([]float32(nil), vec...), Payload: p})
				return nil
			}
			require.NoError(t, v.Read(0, 1, collect))
			tc.write(m)
			require.LessOrEqual(t, len(v.saved), 2, "only overwritten rows are saved")
			require.NoError(t, v.Read(1, v.Len(), collect))
			require.Equal(t, want, got)
			v.Close()
			require.Nil(t, m.view)
			// The store itself moved on.
			tc.write(m)
		})
	}
}

// TestViewAcrossChunks: a view of a store of several chunks reads every
// row as it was opened while writes overwrite rows in full (shared)
// chunks, deletes move rows across chunks and free a chunk, and appends
// allocate new ones; the store reads its own new state, and grew without
// moving a full chunk.
func TestViewAcrossChunks(t *testing.T) {
	bg := context.Background()
	m := NewMemory(2)
	chunk := m.rows.ChunkRows()
	n := 2*chunk + chunk/2
	vec := func(i, gen int) []float32 { return []float32{float32(i), float32(gen)} }
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{ID: fmt.Sprint(i), Vector: vec(i, 0)}
	}
	require.NoError(t, m.Upsert(bg, place, recs))
	first := &m.rows.Row(0)[0]
	v, err := m.OpenView()
	require.NoError(t, err)
	require.NoError(t, v.Read(0, 10, func(string, []float32, []byte) error { return nil }))

	// Overwrite rows in every chunk, delete from the first chunk (the
	// last row moves into it), shrink below two chunks, grow past three.
	var writes []Record
	for _, i := range []int{5, 20, 2*chunk - 5, 2*chunk + 1} {
		writes = append(writes, Record{ID: fmt.Sprint(i), Vector: vec(i, 1)})
	}
	require.NoError(t, m.Upsert(bg, place, writes))
	var doomed []string
	for i := 11; i < 11+chunk; i++ {
		doomed = append(doomed, fmt.Sprint(i))
	}
	_, err = m.DeleteMatching(bg, place, doomed, nil)
	require.NoError(t, err)
	var more []Record
	for i := n; i < n+2*chunk; i++ {
		more = append(more, Record{ID: fmt.Sprint(i), Vector: vec(i, 2)})
	}
	require.NoError(t, m.Upsert(bg, place, more))
	require.Same(t, first, &m.rows.Row(0)[0], "a full chunk never moves")

	got := 0
	require.NoError(t, v.Read(10, v.Len(), func(id string, row []float32, _ []byte) error {
		require.Equal(t, fmt.Sprint(10+got), id)
		require.Equal(t, vec(10+got, 0), row, "row %d", 10+got)
		got++
		return nil
	}))
	require.Equal(t, n-10, got)
	v.Close()

	require.Equal(t, n-chunk+2*chunk, m.Len())
	for _, c := range []struct {
		id   int
		want []float32
	}{{5, vec(5, 1)}, {2*chunk - 5, vec(2*chunk-5, 1)}, {n + 7, vec(n+7, 2)}, {n - 1, vec(n-1, 0)}} {
		got, ok := m.Get(fmt.Sprint(c.id))
		require.True(t, ok, "id %d", c.id)
		require.Equal(t, c.want, got, "id %d", c.id)
	}
	_, ok := m.Get("20")
	require.False(t, ok)
}
