package cpuprio

import (
	"fmt"
	"runtime"
	"sync"
)

// Worker runs functions, one at a time, on a goroutine locked to an OS
// thread whose nice value is its process's plus the delta it was started
// with. The zero Worker and a nil *Worker run functions on the caller's
// goroutine.
type Worker struct {
	work chan func()
	stop sync.Once
	done chan struct{}
}

// Start starts a worker whose thread runs at the process's nice value plus
// delta (clamped to 19, the lowest priority). delta 0 returns nil, a
// worker that runs functions in place. Where threads cannot be given their
// own priority (not Linux), the worker runs at the process's.
func Start(delta int) (*Worker, error) {
	if delta == 0 {
		return nil, nil
	}
	if delta < 0 {
		return nil, fmt.Errorf("cpuprio: delta %d: a worker may only lower its priority", delta)
	}
	w := &Worker{work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(w.done)
		// Never unlocked: when the goroutine returns its thread exits,
		// and the priority with it, instead of going back to the pool.
		runtime.LockOSThread()
		if err := lowerThread(delta); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for f := range w.work {
			f()
		}
	}()
	if err := <-ready; err != nil {
		<-w.done
		return nil, fmt.Errorf("cpuprio: lower a thread's priority: %w", err)
	}
	return w, nil
}

// Do runs f on the worker's thread and returns when it has. Calls from
// several goroutines run one after another.
func (w *Worker) Do(f func()) {
	if w == nil || w.work == nil {
		f()
		return
	}
	ran := make(chan struct{})
	w.work <- func() {
		defer close(ran)
		f()
	}
	<-ran
}

// Close stops the worker once the call in progress returns; Do must not be
// called after it. It is safe to call more than once, and on nil.
func (w *Worker) Close() {
	if w == nil || w.work == nil {
		return
	}
	w.stop.Do(func() { close(w.work) })
	<-w.done
}
