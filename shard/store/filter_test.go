package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/filter/filtertest"
)

// matchingRows is the brute-force answer the payload index must give: the
// rows whose stored payloads match f, evaluated row by row.
func matchingRows(m *Memory, f *filter.Filter) []uint32 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rows := []uint32{}
	for i, p := range m.payloads {
		if f.Match(decodePayload(p)) {
			rows = append(rows, uint32(i))
		}
	}
	return rows
}

func selected(t *testing.T, m *Memory, f *filter.Filter) []uint32 {
	t.Helper()
	rows := []uint32{}
	require.NoError(t, m.ViewScan(func(v *ScanView) error {
		sel, err := v.Select(f)
		rows = append(rows, sel...)
		return err
	}))
	return rows
}

// TestPayloadIndexSelectsTheMatchingRows: through upserts, overwrites and
// deletes (which move the last row into the hole), and after a restore
// rebuilt the index from the rows (Reset, then the rows again), the
// payload index selects exactly the rows whose payloads match a filter.
func TestPayloadIndexSelectsTheMatchingRows(t *testing.T) {
	bg := context.Background()
	rng := rand.New(rand.NewPCG(3, 5))
	m := NewMemory(2)
	var ids []string
	for b := range 10 {
		var recs []Record
		for i := range 150 {
			id := fmt.Sprintf("doc-%d-%d", b, i)
			if len(ids) > 0 && rng.IntN(5) == 0 {
				id = ids[rng.IntN(len(ids))] // an overwrite
			} else {
				ids = append(ids, id)
			}
			r := Record{ID: id, Vector: []float32{1, float32(i)}}
			if rng.IntN(8) > 0 {
				r.Payload = []byte(filtertest.Payload(rng))
			}
			recs = append(recs, r)
		}
		require.NoError(t, m.Upsert(bg, place, recs))
		for range 20 {
			_, err := m.Delete(bg, place, ids[rng.IntN(len(ids))])
			require.NoError(t, err)
		}
	}
	check := func(m *Memory) {
		t.Helper()
		for range 40 {
			src := filtertest.Filter(rng, 3)
			f, err := filter.Parse([]byte(src))
			require.NoError(t, err)
			require.Equal(t, matchingRows(m, f), selected(t, m, f), "filter %s", src)
		}
	}
	check(m)

	// A restore reinserts the rows into a reset store: the index is
	// rebuilt from them, never stored.
	var recs []Record
	m.mu.RLock()
	for i, id := range m.ids {
		recs = append(recs, Record{ID: id, Vector: append([]float32(nil), m.rows.Row(i)...), Payload: m.payloads[i]})
	}
	m.mu.RUnlock()
	restored := NewMemory(2)
	restored.Reset(place, nil, len(recs))
	require.NoError(t, restored.Upsert(bg, place, recs))
	require.NoError(t, restored.FinishRestore(context.Background(), nil, nil))
	check(restored)
}
