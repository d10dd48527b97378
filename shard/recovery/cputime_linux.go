package recovery

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU is the CPU time the whole process has used.
func processCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// measuresCPU says this platform has CPU clocks (internal/threadclock for
// Do, processCPU for ProcessPacer); else both charge wall time.
const measuresCPU = true
