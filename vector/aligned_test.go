package vector

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestAligned(t *testing.T) {
	for _, c := range []struct{ n, align int }{
		{1, Alignment}, {3, Alignment}, {1536, Alignment}, {1536 * 100, Alignment},
		{hugeArena / 4, hugePage}, {hugeArena/4 + 7, hugePage},
	} {
		v := Aligned(c.n)
		require.Len(t, v, c.n)
		require.Equal(t, c.n, cap(v))
		require.Zero(t, uintptr(unsafe.Pointer(&v[0]))%uintptr(c.align), "n=%d", c.n)
		require.Zero(t, v[0])
		require.Zero(t, v[c.n-1])
		v[c.n-1] = 1 // writable to the end
	}
	require.Empty(t, Aligned(0))
}

func TestAlignedInt8(t *testing.T) {
	for _, c := range []struct{ n, align int }{
		{1, Alignment}, {63, Alignment}, {1536, Alignment}, {1536 * 100, Alignment},
		{hugeArena, hugePage}, {hugeArena + 7, hugePage},
	} {
		v := AlignedInt8(c.n)
		require.Len(t, v, c.n)
		require.Equal(t, c.n, cap(v))
		require.Zero(t, uintptr(unsafe.Pointer(&v[0]))%uintptr(c.align), "n=%d", c.n)
		require.Zero(t, v[c.n-1])
		v[c.n-1] = 1
	}
	require.Empty(t, AlignedInt8(0))
}

// TestPopulateWriteKeepsContents: populating the pages under a slice
// (which starts and ends inside pages it shares with other memory)
// changes none of its values, nor its neighbours'.
func TestPopulateWriteKeepsContents(t *testing.T) {
	buf := make([]float32, 10_000)
	for i := range buf {
		buf[i] = float32(i)
	}
	PopulateWrite(buf[1001:7003])
	PopulateWrite(buf[:0])
	for i := range buf {
		require.Equal(t, float32(i), buf[i], "element %d", i)
	}
	fresh := AlignedInt8(5 << 20)
	PopulateWrite(fresh[3:])
	for i, v := range fresh {
		if v != 0 {
			t.Fatalf("element %d of a fresh arena is %d after populating it", i, v)
		}
	}
}
