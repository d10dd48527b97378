//go:build !linux

package recovery

import "time"

// threadCPU has no per-thread CPU clock to read here; Do charges the work's
// wall time instead, which is at least its CPU time on one thread.
func threadCPU() time.Duration { return 0 }

// processCPU is not read here (ProcessPacer falls back to Do).
func processCPU() time.Duration { return 0 }

// measuresCPU says threadCPU reads a CPU clock (else Do charges wall time).
const measuresCPU = false
