package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadTime is the CPU time the calling OS thread has used. One-core
// measurements lock their goroutine to a thread and time it with this, so
// time the thread spends descheduled (other work on a busy machine) is not
// counted; memory bandwidth taken by others still is.
func threadTime() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
