//go:build !linux

package main

import "time"

// threadTime is unavailable here; measurements fall back to wall time.
func threadTime() (time.Duration, bool) { return 0, false }
