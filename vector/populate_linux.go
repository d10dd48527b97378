package vector

import (
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PopulateWrite faults in, writable, the memory pages under s
// (madvise MADV_POPULATE_WRITE, Linux 5.14 and later) without changing
// what they hold, so a later write to s does not stop to fault: a writer
// calls it before taking a lock that readers wait for. It is a hint: a
// kernel without it, or short of memory, leaves the pages to fault as
// before.
func PopulateWrite[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	end := start + uintptr(len(s))*unsafe.Sizeof(zero)
	// The range starts on a page boundary, so it may begin before s: a
	// page shared with s is populated whoever else uses it, and its
	// contents are not changed. uintptr arithmetic, not a slice, so the
	// pointer checker does not see a pointer outside s's allocation.
	start &^= uintptr(os.Getpagesize()) - 1
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_POPULATE_WRITE)
	runtime.KeepAlive(s)
}
