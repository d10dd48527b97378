//go:build race

package racerange

import (
	"runtime"
	"unsafe"
)

// Read reports a read of every element of s to the race detector.
func Read[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	runtime.RaceReadRange(unsafe.Pointer(unsafe.SliceData(s)), len(s)*int(unsafe.Sizeof(zero)))
}
