//go:build !linux

package threadclock

import "time"

// Now is unavailable off Linux: ok is always false, and callers fall back
// to the wall clock.
func Now() (d time.Duration, ok bool) { return 0, false }
