package segment_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector/segment"
)

// codesOf is the codes and norm the tests keep for a row: a function of
// the row alone, as vector/quant's encoding is.
func codesOf(v []float32) ([]int8, float32) {
	c := make([]int8, len(v))
	var n float32
	for i, x := range v {
		c[i] = int8(x*200 - 100)
		n += x * x
	}
	return c, n
}

// mutateCoded is mutate through the coded writes.
func mutateCoded(t *testing.T, rng *rand.Rand, s *segment.Set, m *model, dim, n int) {
	t.Helper()
	for range n {
		switch k := rng.IntN(6); {
		case k < 3 || len(*m) == 0:
			v := row(rng, dim)
			c, nn := codesOf(v)
			require.NoError(t, s.AppendCoded(v, c, nn))
			*m = append(*m, v)
		case k < 5:
			i, v := rng.IntN(len(*m)), row(rng, dim)
			c, nn := codesOf(v)
			require.NoError(t, s.SetCoded(i, v, c, nn))
			(*m)[i] = v
		default:
			i := rng.IntN(len(*m))
			require.NoError(t, s.Delete(i))
			(*m)[i] = (*m)[len(*m)-1]
			*m = (*m)[:len(*m)-1]
		}
	}
}

// checkCodes: every row's codes are the ones written with it.
func checkCodes(t *testing.T, m model, s *segment.Set) {
	t.Helper()
	require.Equal(t, len(m), s.Len())
	for i, v := range m {
		wc, wn := codesOf(v)
		c, n := s.Codes(i)
		require.Equal(t, wc, c, "codes of row %d", i)
		require.Equal(t, wn, n, "norm of row %d", i)
	}
}

// names lists dir's files with suffix.
func names(t *testing.T, dir, suffix string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCodesFollowRowsThroughASnapshot: codes enabled on a set that has
// rows follow every append, overwrite, delete and compaction slot for
// slot; a frozen view's codes files are linked with its rows, survive
// the set's later writes, compactions, a re-encoding (EnableCodes again)
// and its close, and a set restored from the links reads exactly the
// frozen codes and goes on keeping codes.
func TestCodesFollowRowsThroughASnapshot(t *testing.T) {
	const dim, segRows = 5, 8
	for _, seed := range []uint64{1, 2, 3} {
		live, snap := t.TempDir(), t.TempDir()
		s, err := segment.OpenRows(live, dim, segRows)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(seed, 11))
		var m model
		mutate(t, rng, s, &m, dim, 30+rng.IntN(40))
		require.Nil(t, s.CodesTag())
		require.NoError(t, s.EnableCodes([]byte("scale-1"), func(i int, dst []int8) float32 {
			c, n := codesOf(m[i])
			copy(dst, c)
			return n
		}))
		checkCodes(t, m, s)
		require.Error(t, s.Append(row(rng, dim)), "a set keeping codes takes no row without them")
		mutateCoded(t, rng, s, &m, dim, 100+rng.IntN(200))
		checkCodes(t, m, s)
		require.Len(t, names(t, live, segment.CodesExt), s.Segments(), "a codes file per segment")

		f := s.Freeze()
		frozen := append(model(nil), m...)
		require.NoError(t, f.Sync())
		man := f.Manifest()
		require.Equal(t, []byte("scale-1"), man.CodesTag)
		for _, file := range man.Files {
			require.NotNil(t, file.Codes)
			require.NoError(t, os.Link(file.Path, filepath.Join(snap, file.Name)))
			require.NoError(t, os.Link(file.Codes.Path, filepath.Join(snap, file.Codes.Name)))
			st, err := os.Stat(file.Codes.Path)
			require.NoError(t, err)
			require.Equal(t, st.Size(), file.Codes.Bytes)
		}
		mutateCoded(t, rng, s, &m, dim, 300)
		// A new scale: every codes file is written again, under new
		// names; the frozen ones stay as they were.
		require.NoError(t, s.EnableCodes([]byte("scale-2"), func(i int, dst []int8) float32 {
			c, n := codesOf(m[i])
			copy(dst, c)
			return n
		}))
		checkCodes(t, m, s)
		require.NoError(t, s.Reset())

		r, err := segment.Restore(live, man, func(f segment.File, path string) error {
			return os.Link(filepath.Join(snap, f.Name), path)
		})
		require.NoError(t, err, "seed %d", seed)
		require.NoError(t, f.Release())
		require.NoError(t, s.Close())
		require.Equal(t, []byte("scale-1"), r.CodesTag())
		frozen.check(t, r)
		checkCodes(t, frozen, r)
		require.Len(t, names(t, live, segment.CodesExt), r.Segments(), "the frozen set's files are gone, the restored ones in")
		mutateCoded(t, rng, r, &frozen, dim, 300)
		frozen.check(t, r)
		checkCodes(t, frozen, r)

		// Dropping the codes removes their files and takes rows without.
		require.NoError(t, r.DisableCodes())
		require.Empty(t, names(t, live, segment.CodesExt))
		require.NoError(t, r.Append(row(rng, dim)))
		require.NoError(t, r.Close())
		require.Zero(t, files(t, live))
	}
}

// TestCodesFileIsANumpyRecordArray: the codes file's header is the .npy
// of a structured array numpy.load reads: dim int8 codes and a float32
// norm a slot, as many slots as the file has room for.
func TestCodesFileIsANumpyRecordArray(t *testing.T) {
	const dim, segRows = 7, 1024
	dir := t.TempDir()
	s, err := segment.OpenRows(dir, dim, segRows)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.EnableCodes([]byte{1}, nil))
	v := []float32{0.5, 0.25, 0, 1, 0.75, 0.125, 0.0625}
	c, n := codesOf(v)
	require.NoError(t, s.AppendCoded(v, c, n))
	f := s.Freeze()
	defer f.Release()
	file := f.Manifest().Files[0].Codes
	b, err := os.ReadFile(file.Path)
	require.NoError(t, err)
	require.Equal(t, "\x93NUMPY\x01\x00", string(b[:8]))
	hlen := int(b[8]) | int(b[9])<<8
	require.Zero(t, (10+hlen)%64, "the records start 64-byte aligned")
	require.Equal(t, fmt.Sprintf("{'descr': [('codes', '|i1', (%d,)), ('norm', '<f4')], 'fortran_order': False, 'shape': (256,), }", dim),
		strings.TrimRight(string(b[10:10+hlen]), " \n"))
	require.Len(t, b, 10+hlen+256*(dim+4))
	rec := b[10+hlen:]
	for i, x := range c {
		require.Equal(t, x, int8(rec[i]))
	}
	require.Equal(t, n, float32frombytes(rec[dim:dim+4]))
}

// TestRestoreRefusesCodesOfSomeFiles: a manifest that keeps codes for some
// files only, or whose codes file does not fit its rows' file, is an
// error.
func TestRestoreRefusesCodesOfSomeFiles(t *testing.T) {
	const dim, segRows = 2, 4
	s, err := segment.OpenRows(t.TempDir(), dim, segRows)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.EnableCodes([]byte{1}, nil))
	for i := range 6 {
		require.NoError(t, s.AppendCoded([]float32{float32(i), 1}, []int8{int8(i), 1}, 1))
	}
	f := s.Freeze()
	defer f.Release()
	link := func(f segment.File, path string) error { return os.Link(f.Path, path) }
	for name, edit := range map[string]func(m *segment.Manifest){
		"codes of one file dropped": func(m *segment.Manifest) { m.Files[1].Codes = nil },
		"no tag":                    func(m *segment.Manifest) { m.CodesTag = nil },
		"rows file for codes": func(m *segment.Manifest) {
			c := *m.Files[0].Codes
			c.Name, c.Path = m.Files[1].Name, m.Files[1].Path
			m.Files[0].Codes = &c
		},
	} {
		m := f.Manifest()
		m.Files = append([]segment.File(nil), m.Files...)
		edit(&m)
		_, err := segment.Restore(t.TempDir(), m, link)
		require.Error(t, err, name)
	}
	r, err := segment.Restore(t.TempDir(), f.Manifest(), link)
	require.NoError(t, err)
	require.NoError(t, r.Close())
}

func float32frombytes(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// TestCodesFileCutShortByACrash: a crash between growing a segment's rows
// file and its codes file leaves the codes file shorter than the rows'
// room, its header's shape stale; a restore takes it (it holds the rows
// the manifest names), reads the same codes, and appends past its end
// without faulting.
func TestCodesFileCutShortByACrash(t *testing.T) {
	// 68-byte slots: the slots past the cut span pages of their own.
	const dim, segRows = 64, 1024
	live, snap := t.TempDir(), t.TempDir()
	s, err := segment.OpenRows(live, dim, segRows)
	require.NoError(t, err)
	require.NoError(t, s.EnableCodes([]byte{1}, nil))
	rng := rand.New(rand.NewPCG(3, 4))
	var m model
	for range 300 { // past the first 256 rows of room: the files grew once
		v := row(rng, dim)
		c, n := codesOf(v)
		require.NoError(t, s.AppendCoded(v, c, n))
		m = append(m, v)
	}
	f := s.Freeze()
	require.NoError(t, f.Sync())
	man := f.Manifest()
	require.Len(t, man.Files, 1)
	file := man.Files[0]
	require.NoError(t, os.Link(file.Path, filepath.Join(snap, file.Name)))
	require.NoError(t, os.Link(file.Codes.Path, filepath.Join(snap, file.Codes.Name)))
	require.NoError(t, f.Release())
	require.NoError(t, s.Close())

	codes := filepath.Join(snap, file.Codes.Name)
	b, err := os.ReadFile(codes)
	require.NoError(t, err)
	hlen := 10 + (int(b[8]) | int(b[9])<<8)
	require.Contains(t, string(b[:hlen]), "'shape': (512,)")
	require.NoError(t, os.Truncate(codes, int64(hlen+file.Rows*(dim+4))))
	hdr := strings.Replace(string(b[:hlen]), "(512,)", "(999,)", 1)
	fh, err := os.OpenFile(codes, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fh.WriteAt([]byte(hdr), 0)
	require.NoError(t, err)
	require.NoError(t, fh.Close())

	r, err := segment.Restore(live, man, func(f segment.File, path string) error {
		return os.Link(filepath.Join(snap, f.Name), path)
	})
	require.NoError(t, err)
	defer r.Close()
	checkCodes(t, m, r)
	for range 200 {
		v := row(rng, dim)
		c, n := codesOf(v)
		require.NoError(t, r.AppendCoded(v, c, n))
		m = append(m, v)
	}
	checkCodes(t, m, r)
	m.check(t, r)

	// A codes file shorter than the rows the manifest names is refused.
	require.NoError(t, os.Truncate(codes, int64(hlen+(file.Rows-1)*(dim+4))))
	_, err = segment.Restore(t.TempDir(), man, func(f segment.File, path string) error {
		return os.Link(filepath.Join(snap, f.Name), path)
	})
	require.ErrorContains(t, err, "holds")
}
