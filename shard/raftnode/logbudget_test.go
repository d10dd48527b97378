package raftnode

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLogMeter(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		run  func(m *logMeter) bool // the due it reports last
		want bool
	}{
		{"below the budget", func(m *logMeter) bool { return m.applied(mib - 1) }, false},
		{"at the budget", func(m *logMeter) bool { m.applied(mib - 1); return m.applied(1) }, true},
		{"a snapshot resets it", func(m *logMeter) bool {
			m.applied(mib)
			m.taken(m.mark(), 0)
			return m.applied(mib - 1)
		}, false},
		{"writes during a snapshot count towards the next", func(m *logMeter) bool {
			m.applied(mib)
			at := m.mark()
			m.applied(mib / 2)
			m.taken(at, 0)
			return m.applied(mib / 2)
		}, true},
		{"a snapshot that wrote more than the budget raises it", func(m *logMeter) bool {
			m.applied(mib)
			m.taken(m.mark(), 3*mib)
			return m.applied(2 * mib)
		}, false},
		{"an older snapshot finishing late changes nothing", func(m *logMeter) bool {
			m.applied(mib)
			old := m.mark()
			m.applied(mib)
			m.taken(m.mark(), 0)
			m.taken(old, 0)
			return m.applied(mib - 1)
		}, false},
		{"a restore resets it", func(m *logMeter) bool {
			m.applied(2 * mib)
			m.restored()
			return m.due()
		}, false},
		{"a failed snapshot (never taken) does not reset it", func(m *logMeter) bool {
			m.applied(mib)
			_ = m.mark()
			return m.due()
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.run(&logMeter{budget: mib}))
		})
	}
}

func TestLogMeterTrailing(t *testing.T) {
	tests := []struct {
		name         string
		sizes        []int
		bytes, limit uint64
		want         uint64
	}{
		{"nothing applied: raft's count", nil, 1 << 20, 512, 512},
		{"large entries: their share of the bytes", []int{64 << 10, 64 << 10}, 2 << 20, 512, 32},
		{"the mean size decides", []int{32 << 10, 96 << 10}, 2 << 20, 512, 32},
		{"huge entries: at least the minimum", []int{8 << 20}, 2 << 20, 512, minTrailingLogs},
		{"small entries: at most raft's count", []int{100}, 2 << 20, 512, 512},
		{"raft's count below the minimum wins", []int{8 << 20}, 2 << 20, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &logMeter{budget: 1 << 30}
			for _, s := range tt.sizes {
				m.applied(s)
			}
			require.Equal(t, tt.want, m.trailing(tt.bytes, tt.limit))
		})
	}
}

// TestLogBoundedByBytes: a group of one taking entries well past its
// byte budget snapshots by bytes, leaves the trailing entries its bytes
// allow, and its log stays near the two budgets; under the budget it
// takes no snapshot.
func TestLogBoundedByBytes(t *testing.T) {
	tests := []struct {
		name                  string
		onDisk                bool
		entries, size         int
		budget, trail, limit  uint64
		wantTrailing, wantMax uint64 // raft's TrailingLogs, and the most entries the log may hold at rest
	}{
		// Besides the commands the log holds up to three entries: the
		// bootstrap configuration, the leader's no-op and the monitor's
		// barrier. A snapshot every 1 MiB of 64 KiB entries is one every
		// 16 of them.
		{"large entries in memory", false, 200, 64 << 10, 1 << 20, 2 << 20, 512, 32, 32 + 16 + 3},
		{"large entries on disk", true, 100, 64 << 10, 1 << 20, 2 << 20, 512, 32, 32 + 16 + 3},
		{"raft's count caps the trailing entries", false, 200, 64 << 10, 1 << 20, 2 << 20, 8, 8, 8 + 16 + 3},
		{"under the budget", false, 100, 1 << 10, 1 << 20, 2 << 20, 512, 512, 100 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{
				Advertise: "127.0.0.1:1", InMemory: !tt.onDisk, StateMachine: &counter{},
				HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, MaxLeaderSilence: 300 * time.Millisecond,
				// raft's own snapshots by count never come.
				SnapshotThreshold: 1 << 30, TrailingLogs: tt.limit,
				SnapshotLogBytes: tt.budget, TrailingLogBytes: tt.trail,
			}
			if tt.onDisk {
				cfg.DataDir = t.TempDir()
			}
			n, err := Open(cfg)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, n.Close()) })
			require.Eventually(t, n.ServingLeader, 10*time.Second, 10*time.Millisecond)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			data := binary.LittleEndian.AppendUint64(make([]byte, 0, tt.size), 1)
			data = data[:tt.size]
			for range tt.entries {
				_, _, err := n.Propose(ctx, data)
				require.NoError(t, err)
			}
			held := func() (first, last uint64) {
				first, err := n.logs.FirstIndex()
				require.NoError(t, err)
				last, err = n.logs.LastIndex()
				require.NoError(t, err)
				return first, last
			}
			require.Eventually(t, func() bool {
				first, last := held()
				return last-first+1 <= tt.wantMax
			}, 10*time.Second, 10*time.Millisecond, "the log holds at most %d entries", tt.wantMax)
			first, _ := held()
			snaps, err := n.snaps.List()
			require.NoError(t, err)
			if uint64(tt.entries*tt.size) < tt.budget {
				require.Empty(t, snaps, "no snapshot under the budget")
				require.EqualValues(t, 1, first, "nothing compacted under the budget")
			} else {
				require.NotEmpty(t, snaps, "snapshots by bytes")
				require.Greater(t, first, uint64(1), "the log was compacted")
			}
			require.Equal(t, tt.wantTrailing, n.raft.ReloadableConfig().TrailingLogs)
			c := n.fsm.sm.(*counter)
			c.mu.Lock()
			defer c.mu.Unlock()
			require.EqualValues(t, tt.entries, c.sum, "every entry applied")
		})
	}
}
