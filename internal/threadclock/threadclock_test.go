package threadclock

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// The clock moves with the thread's own work.
func TestNowCountsWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, ok := Now()
	if !ok {
		t.Skip("no thread CPU clock here")
	}
	x := 0
	for i := range 20_000_000 {
		x += i % 7
	}
	b, _ := Now()
	require.Greater(t, b, a, "work %d", x)
}
