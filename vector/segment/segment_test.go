package segment_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/internal/loader"
	"github.com/trawl-search/trawl/vector/segment"
)

// model is the rows a Set must hold, kept in plain slices.
type model [][]float32

func (m *model) check(t *testing.T, s *segment.Set) {
	t.Helper()
	require.Equal(t, len(*m), s.Len())
	ids := make([]string, len(*m))
	rows := s.Rows(ids)
	require.NoError(t, rows.Check())
	for i, want := range *m {
		require.Equal(t, want, s.Row(i), "row %d", i)
		require.Equal(t, want, rows.Row(i), "rows view row %d", i)
	}
	// Walking the view by runs visits every row once, in order.
	var got []float32
	for lo := 0; lo < rows.Len(); {
		run := rows.Run(lo, rows.Len())
		got = append(got, run...)
		lo += len(run) / rows.Dim
	}
	var want []float32
	for _, r := range *m {
		want = append(want, r...)
	}
	require.Equal(t, want, got)
}

func row(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = rng.Float32()
	}
	return v
}

func files(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	return len(es)
}

func TestSetMatchesModel(t *testing.T) {
	const dim, segRows = 3, 8
	for _, tc := range []struct {
		name             string
		append, set, del int // weights of each operation
	}{
		{"appends", 1, 0, 0},
		{"overwrites", 1, 3, 0},
		{"deletes", 3, 0, 2},
		{"mixed", 2, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := segment.OpenRows(dir, dim, segRows)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(1, 2))
			var m model
			for op := range 2000 {
				k := rng.IntN(tc.append + tc.set + tc.del)
				switch {
				case k < tc.append || len(m) == 0:
					v := row(rng, dim)
					require.NoError(t, s.Append(v))
					m = append(m, v)
				case k < tc.append+tc.set:
					i, v := rng.IntN(len(m)), row(rng, dim)
					require.NoError(t, s.Set(i, v))
					m[i] = v
				default:
					i := rng.IntN(len(m))
					require.NoError(t, s.Delete(i))
					m[i] = m[len(m)-1]
					m = m[:len(m)-1]
				}
				if op%97 == 0 {
					m.check(t, s)
				}
				// Compaction keeps every segment but the two last filled
				// at least half alive: the files stay bounded by the rows.
				require.LessOrEqual(t, s.Segments(), 2*len(m)/segRows+3, "op %d", op)
				require.Equal(t, s.Segments(), files(t, dir))
			}
			m.check(t, s)
			require.NoError(t, s.Close())
			require.Zero(t, files(t, dir))
		})
	}
}

func TestFrozenKeepsItsRows(t *testing.T) {
	const dim, segRows = 4, 8
	dir := t.TempDir()
	s, err := segment.OpenRows(dir, dim, segRows)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	var m model
	for range 50 {
		v := row(rng, dim)
		require.NoError(t, s.Append(v))
		m = append(m, v)
	}
	f := s.Freeze()
	frozen := append(model(nil), m...)
	// Overwrite and delete most rows: segments compact and go, but the
	// frozen view still reads what it froze.
	for i := range 40 {
		require.NoError(t, s.Set(i%s.Len(), row(rng, dim)))
		require.NoError(t, s.Delete(0))
	}
	require.NoError(t, s.Reset())
	require.Equal(t, len(frozen), f.Len())
	for i, want := range frozen {
		require.Equal(t, want, f.Row(i), "row %d", i)
	}
	require.NotZero(t, files(t, dir), "files a frozen view holds stay until it is released")
	require.NoError(t, f.Release())
	require.Zero(t, files(t, dir))
}

func TestOpenRemovesStaleFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := segment.OpenRows(dir, 2, 4)
	require.NoError(t, err)
	require.NoError(t, s.Append([]float32{1, 2}))
	require.Equal(t, 1, files(t, dir))
	// A new process opens the directory a killed one left.
	s2, err := segment.OpenRows(dir, 2, 4)
	require.NoError(t, err)
	require.Zero(t, files(t, dir))
	require.Zero(t, s2.Len())
}

func TestSegmentIsNpy(t *testing.T) {
	const dim = 5
	dir := t.TempDir()
	s, err := segment.Open(dir, dim)
	require.NoError(t, err)
	defer s.Close()
	// 300 rows: past the file's first room (256 rows), so it grew.
	var rows [][]float32
	for i := range 300 {
		rows = append(rows, []float32{float32(i), 2, 3, 4, -float32(i)})
	}
	for _, r := range rows {
		require.NoError(t, s.Append(r))
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"+segment.Ext))
	require.NoError(t, err)
	require.Len(t, names, 1)
	f, err := os.Open(names[0])
	require.NoError(t, err)
	defer f.Close()
	// router load reads a segment as it reads any .npy file.
	src, err := loader.NewNpy(f)
	require.NoError(t, err)
	require.Equal(t, int64(512), src.Total(), "the header's shape is the rows the file holds")
	st, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(128+512*dim*4), st.Size(), "a file grows by doubling, not to a whole segment at once")
	for _, want := range rows {
		rec, err := src.Next()
		require.NoError(t, err)
		got := make([]float32, dim)
		for i := range got {
			got[i] = math.Float32frombits(binary.LittleEndian.Uint32(rec.Vector[4*i:]))
		}
		require.Equal(t, want, got)
	}
}

func TestSegmentRows(t *testing.T) {
	for _, tc := range []struct{ dim, want int }{
		{1536, 8192},
		{768, 16384},
		{1 << 16, segment.MinSegmentRows},
		{1, segment.MaxSegmentRows},
	} {
		require.Equal(t, tc.want, segment.SegmentRows(tc.dim), "dim %d", tc.dim)
	}
}
