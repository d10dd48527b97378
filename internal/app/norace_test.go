//go:build !race

package app_test

// raceEnabled is whether this test binary has the race detector, and with
// it the router processes the overload tests start.
const raceEnabled = false
