package raftnode

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Defaults of Config's byte budgets. raft bounds its log by entry counts
// (SnapshotThreshold, TrailingLogs), but an entry here is one write
// request, a few bytes to ~1.5 MiB (256 vectors of 1536-D): 512 + 512 such
// entries are ~1.5 GiB of log, and raft.db (bbolt) keeps the file at its
// high-water mark for good, its freed pages reused but never returned. So
// the log is also bounded by bytes. A snapshot of a store whose rows are in
// files is cheap (the files are synced and hard-linked; only ids and
// payloads are written), and raft.db then stays near the two budgets plus
// what arrives while a snapshot is written.
const (
	// DefaultSnapshotLogBytes: a snapshot is taken once the commands
	// applied since the last one reach this many bytes. It is also what a
	// restart replays: 64 MiB is ~11 000 rows of 1536-D, about a second of
	// replay, and at a group's full commit rate (~25 MB/s) a snapshot every
	// few seconds.
	DefaultSnapshotLogBytes = 64 << 20
	// DefaultTrailingLogBytes is about how many bytes of entries a
	// snapshot leaves in the log, so a follower that far behind catches up
	// from the log instead of a snapshot (which streams every segment
	// file): a second or more of writes at a group's full commit rate,
	// minutes of a steady write stream.
	DefaultTrailingLogBytes = 32 << 20
	// minTrailingLogs is the fewest entries a snapshot taken by bytes
	// leaves, however large they are: a follower one or two replication
	// rounds behind (up to MaxAppendEntries entries each is possible, a
	// few is usual) still catches up from the log.
	minTrailingLogs = 16
	// snapshotRetry is how long the node waits after a snapshot by bytes
	// failed (a configuration change not yet applied, a disk error) before
	// it tries again, however far past the budget the log is.
	snapshotRetry = 5 * time.Second
)

// logMeter counts the bytes and entries of the commands applied since the
// last snapshot, which is what the log holds past it. Its counts are
// running totals, and a snapshot records the totals it was taken at, so a
// snapshot that fails changes nothing and writes applied while one is
// written count towards the next.
type logMeter struct {
	// budget is Config.SnapshotLogBytes.
	budget uint64

	mu sync.Mutex
	// bytes and entries are the totals applied since the node opened.
	bytes, entries uint64
	// snapBytes and snapEntries are the totals at the latest snapshot
	// taken or restored.
	snapBytes, snapEntries uint64
	// written is the bytes the latest snapshot taken wrote (its stream,
	// not the files it linked).
	written uint64
}

// meterMark is a snapshot's place in the meter's totals.
type meterMark struct{ bytes, entries uint64 }

// applied counts a command of size bytes and reports whether a snapshot
// is due: the log since the last one has reached the budget, or the bytes
// that snapshot wrote if more (a store whose snapshot copies its rows
// would otherwise spend most of its writes on snapshots; its log is then
// bounded by raft's entry count, as before).
func (m *logMeter) applied(size int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bytes += uint64(size)
	m.entries++
	return m.dueLocked()
}

func (m *logMeter) due() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dueLocked()
}

func (m *logMeter) dueLocked() bool {
	return m.bytes-m.snapBytes >= max(m.budget, m.written)
}

// mark is the totals now, for a snapshot of the state they describe
// (raft takes it between applies).
func (m *logMeter) mark() meterMark {
	m.mu.Lock()
	defer m.mu.Unlock()
	return meterMark{m.bytes, m.entries}
}

// taken records a snapshot persisted at mark, which wrote written bytes.
func (m *logMeter) taken(at meterMark, written uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if at.bytes >= m.snapBytes {
		m.snapBytes, m.snapEntries, m.written = at.bytes, at.entries, written
	}
}

// restored records that the state is a snapshot's: nothing applied before
// is in the log past it.
func (m *logMeter) restored() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snapBytes, m.snapEntries = m.bytes, m.entries
}

// trailing is how many entries a snapshot taken now should leave in the
// log: trailBytes' worth at the mean size of the entries since the last
// snapshot, at least minTrailingLogs and at most limit (raft's count,
// Config.TrailingLogs).
func (m *logMeter) trailing(trailBytes, limit uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, b := m.entries-m.snapEntries, m.bytes-m.snapBytes
	if n == 0 || b == 0 {
		return limit
	}
	return min(limit, max(minTrailingLogs, trailBytes*n/b))
}

// snapshotByBytes takes a snapshot each time the state machine reports
// the log since the last one past its byte budget (fsm.due), first setting
// raft's TrailingLogs so the snapshot leaves about TrailingLogBytes of
// entries. raft's own snapshots by entry count go on beside it and reset
// the budget too.
func (n *Node) snapshotByBytes() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case <-n.fsm.due:
		}
		// A signal sent before the last snapshot finished is stale.
		if !n.fsm.meter.due() {
			continue
		}
		rc := n.raft.ReloadableConfig()
		rc.TrailingLogs = n.fsm.meter.trailing(n.cfg.TrailingLogBytes, n.cfg.TrailingLogs)
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.log.Warn("setting the trailing logs of a snapshot by bytes", "err", err)
		}
		t0 := time.Now()
		err := n.raft.Snapshot().Error()
		switch {
		case err == nil:
			n.log.Debug("snapshot taken: the log since the last one passed its byte budget",
				"budget", n.cfg.SnapshotLogBytes, "trailing_logs", rc.TrailingLogs, "took", time.Since(t0).Round(time.Millisecond))
		case errors.Is(err, raft.ErrRaftShutdown):
			return
		case errors.Is(err, raft.ErrNothingNewToSnapshot):
		default:
			n.log.Warn("snapshot by bytes failed; retrying later", "err", err, "retry_in", snapshotRetry)
			select {
			case <-n.stop:
				return
			case <-time.After(snapshotRetry):
			}
			// Try again even if no write arrives to signal it.
			select {
			case n.fsm.due <- struct{}{}:
			default:
			}
		}
	}
}
