package vector

import (
	"syscall"
	"unsafe"
)

// adviseHugePages asks Linux to back the whole 2 MiB pages of v with
// transparent huge pages. It is advice: a kernel without them (or with
// them off) refuses, and v works the same, only slower to scan.
func adviseHugePages(v []float32) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*4)
	b = b[:len(b)/hugePage*hugePage] // v starts on a huge page boundary
	if len(b) > 0 {
		_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
	}
}
