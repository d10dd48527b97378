package shard

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadTime is the CPU time the calling OS thread has used, so a
// calibration on a busy machine counts the time its thread ran, not the
// time it waited for a core (nine replicas starting at once on two cores
// measured a third of the rate by the wall clock); memory bandwidth taken
// by others still counts.
func threadTime() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
