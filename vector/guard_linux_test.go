package vector

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestKernelsStopAtSliceEnd puts vectors so they end exactly where an
// unmapped page begins: a kernel that loads a whole vector register past
// the last element, instead of masking its tail, faults here.
func TestKernelsStopAtSliceEnd(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	defer syscall.Munmap(mem)
	require.NoError(t, syscall.Mprotect(mem[page:], syscall.PROT_NONE))
	floats := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), page/4)
	for i := range floats {
		floats[i] = 1
	}
	for _, k := range Available() {
		for n := 0; n <= 70; n++ {
			v := floats[len(floats)-n:]
			require.Equal(t, float32(n), k.Dot(v, v), "%s n=%d", k.Name, n)
			require.Zero(t, k.L2Squared(v, v), "%s n=%d", k.Name, n)
			if n > 0 {
				out := make([]float32, 1)
				k.ScoreRows(DotProduct, [][]float32{v}, v, n, out)
				require.Equal(t, float32(n), out[0], "%s n=%d", k.Name, n)
				out5 := make([]float32, 5)
				k.ScoreRows(Euclidean, [][]float32{v, v, v, v, v}, v, n, out5)
				require.Equal(t, make([]float32, 5), out5, "%s n=%d", k.Name, n)
			}
		}
	}
}
