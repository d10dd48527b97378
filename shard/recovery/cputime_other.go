//go:build !linux

package recovery

import "time"

// processCPU is not read here (ProcessPacer falls back to Do).
func processCPU() time.Duration { return 0 }

// measuresCPU says this platform has CPU clocks (internal/threadclock for
// Do, processCPU for ProcessPacer); else both charge wall time.
const measuresCPU = false
