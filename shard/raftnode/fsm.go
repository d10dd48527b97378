package raftnode

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// StateMachine is what a Node's committed log entries are applied to. The
// node owns the log, the serving rule and snapshots' storage; the state
// machine owns what an entry means and how its state is written out.
type StateMachine interface {
	// Apply applies one committed entry and returns what Propose hands
	// back to the proposer on the leader. Every replica applies the same
	// entries in the same order and must end in the same state.
	Apply(e Entry) any
	// Snapshot freezes the state for a snapshot taken at index applied;
	// raft calls it between applies, so it is exactly that state.
	Snapshot(applied uint64) (Snapshot, error)
	// Restore replaces the state with a snapshot's and returns the index
	// the snapshot was taken at. files places the files the snapshot's
	// Persist linked; nil when it linked none.
	Restore(r io.Reader, files SnapshotFiles) (applied uint64, err error)
	// Ready reports whether the state can serve reads once caught up (an
	// index still being built cannot).
	Ready() bool
}

// Entry is one committed log entry as the state machine sees it.
type Entry struct {
	Index uint64
	Data  []byte
	// Serving says whether the replica was serving reads when the entry
	// applied: what the entry changes is then visible to reads at once.
	Serving bool
}

// Snapshot is a frozen state being written out.
type Snapshot interface {
	// Persist writes the state to w, and links into it the files that
	// hold the rest (w.Links).
	Persist(w SnapshotSink) error
	// Release frees the frozen state.
	Release()
}

// fsm adapts a StateMachine to raft.FSM and keeps the applied index.
type fsm struct {
	sm      StateMachine
	serving func() bool
	// store finds this replica's own snapshots' files on a restore; nil
	// InMemory.
	store *fileStore
	// applied is the index of the last command applied (raft's own
	// AppliedIndex counts entries handed to the FSM goroutine, which may
	// not have applied them yet, and entries that never reach it).
	applied atomic.Uint64
	// meter counts the log applied since the last snapshot; due gets a
	// signal (never blocking Apply) when it passes its byte budget.
	meter *logMeter
	due   chan struct{}

	// advanced is closed, and replaced, each time applied moves: a
	// broadcast to waitApplied's waiters.
	mu       sync.Mutex
	advanced chan struct{}
}

// setApplied records index as applied and wakes the waiters.
func (f *fsm) setApplied(index uint64) {
	f.applied.Store(index)
	f.mu.Lock()
	if f.advanced != nil {
		close(f.advanced)
		f.advanced = nil
	}
	f.mu.Unlock()
}

// waitApplied blocks until index is applied or ctx ends.
func (f *fsm) waitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.Lock()
		if f.applied.Load() >= index {
			f.mu.Unlock()
			return nil
		}
		if f.advanced == nil {
			f.advanced = make(chan struct{})
		}
		ch := f.advanced
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	res := f.sm.Apply(Entry{Index: l.Index, Data: l.Data, Serving: f.serving()})
	f.setApplied(l.Index)
	if f.meter.applied(len(l.Data)) {
		select {
		case f.due <- struct{}{}:
		default:
		}
	}
	return res
}

// Snapshot implements raft.FSM.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	// raft calls this between applies: the meter's totals now are the
	// state's.
	at := f.meter.mark()
	s, err := f.sm.Snapshot(f.applied.Load())
	if err != nil {
		return nil, err
	}
	return fsmSnapshot{s: s, meter: f.meter, at: at}, nil
}

// Restore implements raft.FSM, on start-up (the latest local snapshot) and
// when a leader installs one. The replica is NOT_SERVING meanwhile.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	state, files, err := restoreFiles(rc, f.store)
	if err != nil {
		return err
	}
	var placed SnapshotFiles
	if files != nil {
		placed = files
	}
	applied, err := f.sm.Restore(state, placed)
	if err != nil {
		return err
	}
	f.setApplied(applied)
	f.meter.restored()
	return nil
}

type fsmSnapshot struct {
	s     Snapshot
	meter *logMeter
	at    meterMark
}

// Persist implements raft.FSMSnapshot.
func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	var w SnapshotSink = Writer(sink)
	if fs, ok := sink.(*fileSink); ok {
		w = fs
	}
	cw := &countingSink{SnapshotSink: w}
	if err := s.s.Persist(cw); err != nil {
		_ = sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	s.meter.taken(s.at, cw.n)
	return nil
}

// countingSink counts the bytes written to a snapshot's stream (what it
// costs to take, its linked files aside).
type countingSink struct {
	SnapshotSink
	n uint64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += uint64(n)
	return n, err
}

// Release implements raft.FSMSnapshot.
func (s fsmSnapshot) Release() { s.s.Release() }
