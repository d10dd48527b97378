package vector

import "unsafe"

// Alignment is the byte alignment of arenas from Aligned: one cache line,
// and the width of an AVX-512 load, so rows whose size is a multiple of 64
// bytes (1536 float32 = 6 144 bytes) never straddle lines at their start.
const Alignment = 64

// Aligned returns a zeroed slice of n float32 whose first element sits on a
// 64-byte boundary.
func Aligned(n int) []float32 {
	if n == 0 {
		return []float32{}
	}
	buf := make([]float32, n+Alignment/4)
	off := 0
	if rem := uintptr(unsafe.Pointer(&buf[0])) % Alignment; rem != 0 {
		off = int((Alignment - rem) / 4)
	}
	return buf[off : off+n : off+n]
}
