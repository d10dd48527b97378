package cpuprio

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWorkerRunsAtALowerPriority(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread priorities are Linux's")
	}
	base, err := threadNice()
	require.NoError(t, err)
	if base >= 19 {
		t.Skipf("the process already runs at nice %d", base)
	}
	w, err := Start(5)
	require.NoError(t, err)
	defer w.Close()
	var got int
	w.Do(func() { got, err = threadNice() })
	require.NoError(t, err)
	require.Equal(t, min(base+5, 19), got)

	// The caller's thread keeps its priority.
	runtime.LockOSThread()
	mine, err := threadNice()
	runtime.UnlockOSThread()
	require.NoError(t, err)
	require.Equal(t, base, mine)
}

func TestWorkerRunsCallsOneAtATime(t *testing.T) {
	w, err := Start(1)
	require.NoError(t, err)
	var (
		wg      sync.WaitGroup
		running int // written only on the worker: a second at once is a race
		most    int
	)
	for range 20 {
		wg.Go(func() {
			w.Do(func() {
				running++
				most = max(most, running)
				running--
			})
		})
	}
	wg.Wait()
	w.Close()
	w.Close()
	require.Equal(t, 1, most)
}

func TestNoDeltaRunsInPlace(t *testing.T) {
	w, err := Start(0)
	require.NoError(t, err)
	require.Nil(t, w)
	ran := false
	w.Do(func() { ran = true })
	require.True(t, ran)
	w.Close()

	_, err = Start(-1)
	require.ErrorContains(t, err, "only lower")
}
