package vector

import "syscall"

// adviseHugePages asks Linux to back the whole 2 MiB pages of b with
// transparent huge pages. It is advice: a kernel without them (or with
// them off) refuses, and b works the same, only slower to scan.
func adviseHugePages(b []byte) {
	b = b[:len(b)/hugePage*hugePage] // b starts on a huge page boundary
	if len(b) > 0 {
		_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
	}
}
