package vector

import "unsafe"

// Alignment is the byte alignment of arenas from Aligned: one cache line,
// and the width of an AVX-512 load, so rows whose size is a multiple of 64
// bytes (1536 float32 = 6 144 bytes) never straddle lines at their start.
const Alignment = 64

// Arenas of at least hugeArena bytes start on a hugePage boundary and ask
// the OS (where it has them) for transparent huge pages. A scan walks its
// arena once per batch; with 4 KiB pages every 64 cache lines cost a TLB
// miss and a page walk, and a one-core scan of a 384 MiB arena ran at
// about 22 GB/s where huge pages gave 30. The alignment wastes at most one
// huge page, under 1/8 of such an arena.
const (
	hugePage  = 2 << 20
	hugeArena = 16 << 20
)

// Aligned returns a zeroed slice of n float32 whose first element sits on a
// 64-byte boundary (a 2 MiB one for arenas of 16 MiB and more, which are
// also advised to use huge pages).
func Aligned(n int) []float32 { return aligned[float32](n) }

// AlignedInt8 is Aligned for int8 arenas (quantized codes), with the same
// alignment rules by size in bytes.
func AlignedInt8(n int) []int8 { return aligned[int8](n) }

// aligned allocates n zeroed elements of T (a 1-, 2-, 4- or 8-byte number)
// on the alignment the arena's size in bytes calls for.
func aligned[T float32 | int8](n int) []T {
	var zero T
	if n*int(unsafe.Sizeof(zero)) < hugeArena {
		return alignedTo[T](n, Alignment)
	}
	out := alignedTo[T](n, hugePage)
	adviseHugePages(asBytes(out))
	return out
}

// alignedChunk allocates an Arena chunk of n zeroed elements on a 64-byte
// boundary and advises the whole huge pages inside it to use transparent
// huge pages. Unlike Aligned's large arenas it does not start on a huge
// page: that would cost up to 2 MiB of slack a chunk, 8 % of a 24 MiB
// one, to win the partial page at each end.
func alignedChunk[T float32 | int8](n int) []T {
	out := alignedTo[T](n, Alignment)
	if b := asBytes(out); len(b) >= hugeArena {
		skip := (hugePage - int(uintptr(unsafe.Pointer(&b[0]))%hugePage)) % hugePage
		adviseHugePages(b[skip:])
	}
	return out
}

// alignedTo allocates n zeroed elements of T whose first sits on a
// multiple of align bytes.
func alignedTo[T float32 | int8](n, align int) []T {
	if n == 0 {
		return []T{}
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	buf := make([]T, n+align/size)
	off := 0
	if rem := uintptr(unsafe.Pointer(&buf[0])) % uintptr(align); rem != 0 {
		off = int((uintptr(align) - rem) / uintptr(size))
	}
	return buf[off : off+n : off+n]
}

// asBytes is the memory of s as bytes.
func asBytes[T float32 | int8](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
