package segment_test

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector/segment"
)

// linkInto hard-links a manifest's files into dir, as a snapshot does.
func linkInto(t *testing.T, dir string, m segment.Manifest) {
	t.Helper()
	for _, f := range m.Files {
		require.NoError(t, os.Link(f.Path, filepath.Join(dir, f.Name)))
	}
}

// mutate applies n random appends, overwrites and deletes to s and m.
func mutate(t *testing.T, rng *rand.Rand, s *segment.Set, m *model, dim, n int) {
	t.Helper()
	for range n {
		switch k := rng.IntN(6); {
		case k < 3 || len(*m) == 0:
			v := row(rng, dim)
			require.NoError(t, s.Append(v))
			*m = append(*m, v)
		case k < 5:
			i, v := rng.IntN(len(*m)), row(rng, dim)
			require.NoError(t, s.Set(i, v))
			(*m)[i] = v
		default:
			i := rng.IntN(len(*m))
			require.NoError(t, s.Delete(i))
			(*m)[i] = (*m)[len(*m)-1]
			*m = (*m)[:len(*m)-1]
		}
	}
}

// TestRestoreFromLinkedFiles is a snapshot and a restart: the frozen
// files are synced and hard-linked aside, the set goes on writing,
// compacting and finally closes (removing its own files), and a set
// restored from the links holds exactly the frozen rows, then appends,
// overwrites and deletes after them as the original would.
func TestRestoreFromLinkedFiles(t *testing.T) {
	const dim, segRows = 3, 8
	for _, seed := range []uint64{1, 2, 3, 4} {
		live, snap := t.TempDir(), t.TempDir()
		s, err := segment.OpenRows(live, dim, segRows)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(seed, 9))
		var m model
		mutate(t, rng, s, &m, dim, 100+rng.IntN(200))
		f := s.Freeze()
		frozen := append(model(nil), m...)
		require.NoError(t, f.Sync())
		man := f.Manifest()
		linkInto(t, snap, man)
		// Writes after the snapshot: compactions drop files the snapshot
		// links, and the active file gets rows past its recorded prefix.
		mutate(t, rng, s, &m, dim, 300)
		// The set is reset for the restore while the snapshot's view
		// still holds its files: the restored files must not be taken
		// for them when the view lets go.
		require.NoError(t, s.Reset())

		r, err := segment.Restore(live, man, func(f segment.File, path string) error {
			return os.Link(filepath.Join(snap, f.Name), path)
		})
		require.NoError(t, err, "seed %d", seed)
		require.NoError(t, f.Release())
		require.NoError(t, s.Close())
		require.Equal(t, r.Segments(), files(t, live))
		frozen.check(t, r)
		// The restored set goes on like any other.
		mutate(t, rng, r, &frozen, dim, 400)
		frozen.check(t, r)
		require.Equal(t, r.Segments(), files(t, live))
		require.NoError(t, r.Close())
		require.Zero(t, files(t, live))
		require.Equal(t, len(man.Files), files(t, snap), "the snapshot's links outlive the set")
	}
}

// TestRestoreFromCopiedFiles is a wiped replica: the files arrive as
// bytes (their recorded size), not as links.
func TestRestoreFromCopiedFiles(t *testing.T) {
	const dim, segRows = 4, 16
	live, other := t.TempDir(), t.TempDir()
	s, err := segment.OpenRows(other, dim, segRows)
	require.NoError(t, err)
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	var m model
	mutate(t, rng, s, &m, dim, 500)
	f := s.Freeze()
	defer f.Release()
	man := f.Manifest()
	r, err := segment.Restore(live, man, func(f segment.File, path string) error {
		src, err := os.Open(f.Path)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := os.Create(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(dst, io.LimitReader(src, f.Bytes))
		return errorsJoin(err, dst.Close())
	})
	require.NoError(t, err)
	defer r.Close()
	m.check(t, r)
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// TestRestoreRefusesABadManifest: a manifest whose slots point past a
// file's rows, or a file that is not a segment, is an error, not a set
// that reads garbage.
func TestRestoreRefusesABadManifest(t *testing.T) {
	const dim, segRows = 2, 4
	src := t.TempDir()
	s, err := segment.OpenRows(src, dim, segRows)
	require.NoError(t, err)
	defer s.Close()
	for i := range 6 {
		require.NoError(t, s.Append([]float32{float32(i), 1}))
	}
	f := s.Freeze()
	defer f.Release()
	link := func(f segment.File, path string) error { return os.Link(f.Path, path) }
	for name, edit := range map[string]func(m *segment.Manifest){
		"slot past rows": func(m *segment.Manifest) { m.Slots = append(m.Slots, uint32(m.Files[1].Number<<2|3)) },
		"missing file":   func(m *segment.Manifest) { m.Files = m.Files[:1] },
		"path in name":   func(m *segment.Manifest) { m.Files[0].Name = "../x.npy" },
		"wrong dim":      func(m *segment.Manifest) { m.Dim = 3 },
	} {
		m := f.Manifest()
		m.Slots = append([]uint32(nil), m.Slots...)
		m.Files = append([]segment.File(nil), m.Files...)
		edit(&m)
		_, err := segment.Restore(t.TempDir(), m, link)
		require.Error(t, err, name)
	}
	_, err = segment.Restore(t.TempDir(), f.Manifest(), link)
	require.NoError(t, err)
}
