package vector

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every row goes to exactly one worker, in whole blocks but for the last
// worker's tail, and the first error in worker order is returned.
func TestSplitRows(t *testing.T) {
	for _, tc := range []struct{ n, workers, block int }{
		{0, 1, 256}, {10, 1, 256}, {16384, 2, 256}, {16384 + 3*256 + 17, 2, 256}, {100, 3, 1}, {5, 4, 1},
	} {
		var mu sync.Mutex
		seen := make([]int, tc.n)
		err := SplitRows(tc.n, tc.workers, tc.block, func(w, lo, hi int) error {
			mu.Lock()
			defer mu.Unlock()
			if w < tc.workers-1 && hi < tc.n {
				require.Zero(t, (hi-lo)%tc.block, "%+v worker %d: [%d,%d) is not whole blocks", tc, w, lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i]++
			}
			return nil
		})
		require.NoError(t, err)
		for i, c := range seen {
			require.Equal(t, 1, c, "%+v: row %d", tc, i)
		}
	}
	first, second := errors.New("first"), errors.New("second")
	err := SplitRows(100, 2, 1, func(w, _, _ int) error {
		if w == 0 {
			return first
		}
		return second
	})
	require.ErrorIs(t, err, first)
	require.Equal(t, 1, ScanWorkers(16383, 8))
	require.Equal(t, 2, ScanWorkers(16384, 8))
	require.Equal(t, 2, ScanWorkers(1<<20, 2))
}
