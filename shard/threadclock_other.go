//go:build !linux

package shard

import "time"

// threadTime is unavailable here: calibrations fall back to the wall clock.
func threadTime() (time.Duration, bool) { return 0, false }
