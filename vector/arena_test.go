package vector

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// rechunk lays rows out again in an arena of chunkRows-row chunks (any
// power of two, smaller than a scan block too), so scans can be checked
// across chunk edges without a large corpus.
func rechunk(rows Rows, chunkRows int) Rows {
	a := NewArena[float32](rows.Dim, chunkRows)
	for i := range rows.Len() {
		copy(a.Append(), rows.Row(i))
	}
	return ArenaRows(a, rows.IDs)
}

func TestChunkRows(t *testing.T) {
	for _, c := range []struct{ rowBytes, want int }{
		{1536 * 4, 4096}, {1536, 16384}, {8192 * 4, 1024}, {8192 * 4 * 4, MinChunkRows},
		{32, MaxChunkRows}, {1, MaxChunkRows}, {768 * 4, 8192},
	} {
		got := ChunkRows(c.rowBytes)
		require.Equal(t, c.want, got, "row of %d bytes", c.rowBytes)
		require.Zero(t, got%BlockRows)
	}
}

// TestArenaGrowsWithoutCopyingChunks: rows written stay where they were
// once the first chunk is full (no chunk is ever copied or replaced),
// every row reads back, and truncating frees all but one spare chunk.
func TestArenaGrowsWithoutCopyingChunks(t *testing.T) {
	const dim, chunk = 3, 128
	a := NewArena[float32](dim, chunk)
	var first *float32
	for i := range 5*chunk + 7 {
		row := a.Append()
		for d := range row {
			row[d] = float32(i*dim + d)
		}
		if i == chunk-1 {
			first = &a.Row(0)[0]
		}
		if i >= chunk {
			require.Same(t, first, &a.Row(0)[0], "row 0 moved at row %d", i)
		}
	}
	require.Equal(t, 5*chunk+7, a.Len())
	require.Len(t, a.chunks, 6)
	for i := range a.Len() {
		require.Equal(t, []float32{float32(i * dim), float32(i*dim + 1), float32(i*dim + 2)}, a.Row(i))
	}
	require.Equal(t, 6*chunk*dim*4, a.Bytes())
	for _, c := range a.chunks {
		require.Zero(t, uintptr(unsafe.Pointer(&c[0]))%Alignment)
	}

	a.Truncate(2*chunk + 1) // three chunks in use, one spare
	require.Len(t, a.chunks, 4)
	a.Truncate(2 * chunk)
	require.Len(t, a.chunks, 3)
	a.Truncate(0)
	require.Len(t, a.chunks, 1)
	require.Equal(t, 0, a.Len())
	require.Panics(t, func() { a.Row(0) })
}

// TestArenaRun: a run never crosses a chunk's end and covers exactly the
// rows asked for, in order.
func TestArenaRun(t *testing.T) {
	a := NewArena[int8](2, 4)
	for i := range 10 {
		row := a.Append()
		row[0], row[1] = int8(i), int8(-i)
	}
	for lo := range 10 {
		for hi := lo + 1; hi <= 10; hi++ {
			var got []int8
			for r := lo; r < hi; {
				run := a.Run(r, hi)
				require.LessOrEqual(t, r%4+len(run)/2, 4, "run from %d crosses a chunk", r)
				got = append(got, run...)
				r += len(run) / 2
			}
			var want []int8
			for i := lo; i < hi; i++ {
				want = append(want, int8(i), int8(-i))
			}
			require.Equal(t, want, got, "[%d, %d)", lo, hi)
		}
	}
}

// TestFlatArenaGrowsByAQuarter is the inverted lists' growth: one chunk,
// a quarter more each time.
func TestFlatArenaGrowsByAQuarter(t *testing.T) {
	a := NewFlatArena[int8](48, 20)
	require.Equal(t, 20*48, a.Bytes())
	for range 100 {
		a.Append()
	}
	require.Len(t, a.chunks, 1)
	require.Less(t, a.Bytes(), 48*130, "grew by a quarter, not doubling")
	require.Equal(t, a.Run(0, 100), a.chunks[0][:100*48])
}

// TestScanChunkedEqualsFlat: a scan (whole, parallel, selected) and a
// rescore of rows laid out in chunks return exactly what they return for
// the same rows in one array, with chunks smaller than, equal to and
// larger than a scan block.
func TestScanChunkedEqualsFlat(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	n := parallelMinRows + 333
	flat := FlatRows(unaligned(r, n*5, 0), 5, make([]string, n))
	for i := range flat.IDs {
		flat.IDs[i] = fmt.Sprint("doc-", i)
	}
	qs := []Query{{Vector: unaligned(r, 5, 1), K: 10}, {Vector: unaligned(r, 5, 2), K: 3, Exclude: "doc-5"}}
	var sel []uint32
	for i := 0; i < n; i += 1 + r.IntN(20) {
		for j := i; j < min(i+r.IntN(30), n); j++ {
			sel = append(sel, uint32(j))
		}
		i += r.IntN(30)
	}
	cands := []int32{0, 15, 16, 17, 511, 512, 4095, 4096, int32(n - 1)}
	for _, k := range Available() {
		for _, m := range metrics {
			want, err := k.scan(t.Context(), m, flat, qs, nil, 2)
			require.NoError(t, err)
			wantSel, err := k.scan(t.Context(), m, flat, qs, sel, 2)
			require.NoError(t, err)
			wantRe, err := k.Rescore(m, flat, qs[0], cands)
			require.NoError(t, err)
			for _, chunk := range []int{16, BlockRows, 4096} {
				rows := rechunk(flat, chunk)
				require.NoError(t, rows.Check())
				for _, procs := range []int{1, 2} {
					got, err := k.scan(t.Context(), m, rows, qs, nil, procs)
					require.NoError(t, err)
					require.Equal(t, want, got, "%s %v chunk=%d procs=%d", k.Name, m, chunk, procs)
					got, err = k.scan(t.Context(), m, rows, qs, sel, procs)
					require.NoError(t, err)
					require.Equal(t, wantSel, got, "%s %v chunk=%d procs=%d selected", k.Name, m, chunk, procs)
				}
				got, err := k.Rescore(m, rows, qs[0], cands)
				require.NoError(t, err)
				require.Equal(t, wantRe, got, "%s %v chunk=%d rescore", k.Name, m, chunk)
			}
		}
	}
}

func TestRowsCheck(t *testing.T) {
	require.ErrorContains(t, FlatRows([]float32{1, 2, 3}, 2, []string{"a", "b"}).Check(), "2 ids but only 1 rows")
	require.ErrorContains(t, FlatRows(nil, 0, nil).Check(), "dimension 0")
	require.NoError(t, FlatRows(nil, 3, nil).Check())
	empty := NewArena[float32](3, 0)
	require.NoError(t, ArenaRows(empty, nil).Check(), "an empty store scans")
	_, err := Generic().Scan(t.Context(), Cosine, ArenaRows(empty, nil), []Query{{Vector: []float32{1, 0, 0}, K: 3}})
	require.NoError(t, err)
	rows := rechunk(FlatRows(make([]float32, 40), 2, make([]string, 20)), 8)
	require.NoError(t, rows.Check())
	rows.IDs = make([]string, 25)
	require.ErrorContains(t, rows.Check(), "25 ids but only 24 rows")
	require.Equal(t, 3, rows.Prefix(3).Len())
}

// TestArenaPrepareAdopt: room prepared before a batch of appends (the
// first chunk grown and its rows copied, chunks added) and adopted gives
// the same rows as appending without it, whatever the batch size and
// chunk edges, for flat arenas too; the adopted room is what the appends
// use (they allocate nothing more), and the arena is unchanged until
// Adopt.
func TestArenaPrepareAdopt(t *testing.T) {
	const dim = 3
	for _, tc := range []struct {
		name string
		make func() *Arena[int8]
	}{
		{"chunks of 128", func() *Arena[int8] { return NewArena[int8](dim, 128) }},
		{"chunks of 4", func() *Arena[int8] { return NewArena[int8](dim, 4) }},
		{"flat", func() *Arena[int8] { return NewFlatArena[int8](dim, 5) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			plain, prepared := tc.make(), tc.make()
			next := int8(0)
			for range 60 {
				n := rng.IntN(40)
				before := prepared.Clone()
				s := prepared.Prepare(n)
				require.Equal(t, before.n, prepared.n, "Prepare changes nothing")
				require.Len(t, prepared.chunks, len(before.chunks), "Prepare changes nothing")
				for c := range before.chunks {
					require.True(t, prepared.SameChunk(before, c*prepared.ChunkRows()), "Prepare changes nothing")
				}
				if s != nil {
					require.True(t, prepared.Adopt(s))
				}
				room := prepared.capRows()
				require.GreaterOrEqual(t, room, prepared.Len()+n)
				for range n {
					next++
					for _, a := range []*Arena[int8]{plain, prepared} {
						row := a.Append()
						for d := range row {
							row[d] = next + int8(d)
						}
					}
				}
				require.Equal(t, room, prepared.capRows(), "the appends used the prepared room")
				if rng.IntN(4) == 0 {
					cut := rng.IntN(plain.Len() + 1)
					plain.Truncate(cut)
					prepared.Truncate(cut)
				}
			}
			require.Equal(t, plain.Len(), prepared.Len())
			for i := range plain.Len() {
				require.Equal(t, plain.Row(i), prepared.Row(i), "row %d", i)
			}
		})
	}
}

// TestArenaAdoptRefusesStaleRoom: room prepared for an arena is refused
// once the arena's rows or chunks changed (an append, a truncate that
// freed a chunk), or by another arena, and a refused Adopt changes
// nothing.
func TestArenaAdoptRefusesStaleRoom(t *testing.T) {
	const dim = 2
	fill := func(n int) *Arena[float32] {
		a := NewArena[float32](dim, 4)
		for i := range n {
			a.Append()[0] = float32(i)
		}
		return a
	}
	for _, tc := range []struct {
		name   string
		rows   int
		change func(a *Arena[float32])
	}{
		{"appended", 3, func(a *Arena[float32]) { a.Append() }},
		{"first chunk grown", 2, func(a *Arena[float32]) { a.Append(); a.Append(); a.Append() }},
		{"truncated", 9, func(a *Arena[float32]) { a.Truncate(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := fill(tc.rows)
			s := a.Prepare(8)
			require.NotNil(t, s)
			tc.change(a)
			was := a.Clone()
			require.False(t, a.Adopt(s))
			require.Equal(t, was.chunks, a.chunks)
			require.Equal(t, was.n, a.n)
		})
	}
	a, b := fill(3), fill(3)
	s := a.Prepare(8)
	require.False(t, b.Adopt(s), "room of another arena")
	require.False(t, a.Adopt(nil))
	require.True(t, a.Adopt(s))
	require.False(t, a.Adopt(s), "room already installed")
}
