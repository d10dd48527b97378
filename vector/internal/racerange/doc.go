// Package racerange tells the race detector about a whole slice read at
// once, for loops built with //go:norace.
//
// The portable kernels read every element of two vectors, and under the
// race detector each of those reads is a call into its runtime: they ran
// 5 to 10 times slower than the loop itself, which made scans the larger
// part of the race-enabled test suite. Built //go:norace, a kernel reports
// its arguments once per call with Read; a write racing with it is still
// caught, at the granularity of the slice.
//
// It must never be used to hide an access: call Read with every slice the
// norace function reads. Outside race builds Read does nothing.
package racerange
