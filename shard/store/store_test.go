package store

import (
	"context"
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
