package segment_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector/segment"
)

// TestPrepareChangesNoRow: Prepare before batches of writes (appends,
// overwrites, deletes; rows with codes and without; codes switched on
// and off between a Prepare and the writes it prepared, so a prepared
// segment keeps codes the set no longer wants, or lacks them) leaves the
// set holding exactly the rows and codes written, in as many segments as
// without it; a Reset or Close removes a segment prepared and never
// used.
func TestPrepareChangesNoRow(t *testing.T) {
	const dim, segRows = 3, 16
	for _, coded := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(7, 8))
		dir, plainDir := t.TempDir(), t.TempDir()
		s, err := segment.OpenRows(dir, dim, segRows)
		require.NoError(t, err)
		plain, err := segment.OpenRows(plainDir, dim, segRows)
		require.NoError(t, err)
		var m, pm model
		withCodes := func(set *segment.Set, rows model, on bool) {
			if !on {
				require.NoError(t, set.DisableCodes())
				return
			}
			require.NoError(t, set.EnableCodes([]byte("tag"), func(i int, dst []int8) float32 {
				c, n := codesOf(rows[i])
				copy(dst, c)
				return n
			}))
		}
		if coded {
			withCodes(s, m, true)
			withCodes(plain, pm, true)
		}
		for step := range 60 {
			n := rng.IntN(3 * segRows)
			s.Prepare(n)
			if step%20 == 19 {
				coded = !coded
				withCodes(s, m, coded)
				withCodes(plain, pm, coded)
			}
			seed := rng.Uint64()
			write := func(set *segment.Set, rows *model) {
				r := rand.New(rand.NewPCG(seed, 1))
				if coded {
					mutateCoded(t, r, set, rows, dim, n)
				} else {
					mutate(t, r, set, rows, dim, n)
				}
			}
			write(s, &m)
			write(plain, &pm)
			m.check(t, s)
			if coded {
				checkCodes(t, m, s)
			}
		}
		require.Equal(t, pm, m)
		require.Equal(t, plain.Segments(), s.Segments())
		before := files(t, dir)
		s.Prepare(2 * segRows) // a segment prepared, never used
		require.Greater(t, files(t, dir), before, "the next segment's file is made ahead")
		require.Equal(t, plain.Segments(), s.Segments(), "and is not one of the set's yet")
		require.NoError(t, s.Reset())
		require.Zero(t, files(t, dir), "a reset set leaves no file")
		s.Prepare(2 * segRows)
		require.NoError(t, s.Close())
		require.Zero(t, files(t, dir), "a closed set leaves no file")
		s.Prepare(1)
		require.Zero(t, files(t, dir), "a closed set prepares nothing")
		require.NoError(t, plain.Close())
	}
}
