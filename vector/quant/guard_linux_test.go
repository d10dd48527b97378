package quant

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestKernelsStopAtSliceEnd puts codes so they end exactly where an
// unmapped page begins: a kernel that loads past the last element faults.
func TestKernelsStopAtSliceEnd(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	defer syscall.Munmap(mem)
	require.NoError(t, syscall.Mprotect(mem[page:], syscall.PROT_NONE))
	codes := unsafe.Slice((*int8)(unsafe.Pointer(&mem[0])), page)
	for i := range codes {
		codes[i] = 1
	}
	for _, k := range Available() {
		for n := 0; n <= 200; n++ {
			v := codes[len(codes)-n:]
			require.Equal(t, int32(n), k.Dot(v, v), "%s n=%d", k.Name, n)
			if n > 0 {
				out := make([]int32, 1)
				k.ScoreRows([][]int8{v}, v, n, out)
				require.Equal(t, int32(n), out[0], "%s n=%d", k.Name, n)
				out3 := make([]int32, 3)
				k.ScoreRows([][]int8{v, v, v}, v, n, out3)
				require.Equal(t, []int32{int32(n), int32(n), int32(n)}, out3, "%s n=%d", k.Name, n)
			}
		}
	}
}
