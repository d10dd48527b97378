package threadclock

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now is the CPU time the calling OS thread has used; ok is false when the
// clock cannot be read.
func Now() (d time.Duration, ok bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
