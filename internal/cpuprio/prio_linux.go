package cpuprio

import "syscall"

// lowerThread raises the calling thread's nice value by delta. On Linux
// a thread's nice is its own (PRIO_PROCESS on a thread id), which is what
// lets one goroutine's thread run below the rest of its process.
func lowerThread(delta int) error {
	tid := syscall.Gettid()
	// The raw getpriority call answers 20 - nice, never negative.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return err
	}
	return syscall.Setpriority(syscall.PRIO_PROCESS, tid, min(20-raw+delta, 19))
}

// threadNice is the calling thread's nice value.
func threadNice() (int, error) {
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	return 20 - raw, err
}
