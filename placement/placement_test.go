package placement

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHomeIgnoresFlagOrder(t *testing.T) {
	a := New([]string{"shard-0", "shard-1", "shard-2"})
	b := New([]string{"shard-2", "shard-0", "shard-1"})
	require.Equal(t, a.Fingerprint(), b.Fingerprint())
	for i := range 1000 {
		id := fmt.Sprintf("doc-%d", i)
		require.Equal(t, a.Home(id), b.Home(id))
	}
}

func TestFingerprintChangesWithShardList(t *testing.T) {
	base := New([]string{"a", "b", "c"}).Fingerprint()
	require.NotEqual(t, base, New([]string{"a", "b"}).Fingerprint())
	require.NotEqual(t, base, New([]string{"a", "b", "c", "d"}).Fingerprint())
	require.NotEqual(t, base, New([]string{"a", "b", "x"}).Fingerprint())
}

func TestHomeSpreadsAndMovesLittle(t *testing.T) {
	three := New([]string{"s0", "s1", "s2"})
	four := New([]string{"s0", "s1", "s2", "s3"})
	counts := map[string]int{}
	moved := 0
	const n = 30000
	for i := range n {
		id := fmt.Sprintf("doc-%d", i)
		counts[three.Home(id)]++
		if h := four.Home(id); h != three.Home(id) {
			require.Equal(t, "s3", h, "jump hash only moves keys to the new bucket")
			moved++
		}
	}
	for name, c := range counts {
		require.InDelta(t, n/3, c, n/3*0.05, name)
	}
	require.InDelta(t, n/4, moved, n/4*0.05)
}

func TestJumpStaysInRange(t *testing.T) {
	for key := uint64(0); key < 100; key++ {
		for n := 1; n < 20; n++ {
			b := Jump(key, n)
			require.True(t, b >= 0 && b < n)
		}
	}
}
