package raftnode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter is the smallest state machine: the sum of the committed
// entries, each a little-endian uint64.
type counter struct {
	mu  sync.Mutex
	sum uint64
}

func (c *counter) Apply(e Entry) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum += binary.LittleEndian.Uint64(e.Data)
	return c.sum
}

func (c *counter) Snapshot(applied uint64) (Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return counterSnap{sum: c.sum, applied: applied}, nil
}

func (c *counter) Restore(r io.Reader, _ SnapshotFiles) (uint64, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.sum = binary.LittleEndian.Uint64(b[:8])
	c.mu.Unlock()
	return binary.LittleEndian.Uint64(b[8:]), nil
}

func (c *counter) Ready() bool { return true }

type counterSnap struct{ sum, applied uint64 }

func (s counterSnap) Persist(w SnapshotSink) error {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, s.sum)
	_ = binary.Write(&b, binary.LittleEndian, s.applied)
	_, err := w.Write(b.Bytes())
	return err
}

func (counterSnap) Release() {}

func entry(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// single opens a group of one on in-memory stores and waits until it
// serves as its leader.
func single(t *testing.T) *Node {
	t.Helper()
	n, err := Open(Config{
		Advertise: "127.0.0.1:1", InMemory: true, StateMachine: &counter{},
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, MaxLeaderSilence: 300 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Close()) })
	require.Eventually(t, n.ServingLeader, 10*time.Second, 10*time.Millisecond, "a group of one elects itself and serves")
	return n
}

func TestProposeAppliesAndWaitAppliedReturns(t *testing.T) {
	n := single(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var idx uint64
	for i := range 5 {
		res, j, err := n.Propose(ctx, entry(uint64(i+1)))
		require.NoError(t, err)
		require.Greater(t, j, idx, "log indexes grow")
		idx = j
		require.EqualValues(t, (i+1)*(i+2)/2, res, "Propose hands back what Apply returned")
	}
	require.Equal(t, idx, n.AppliedIndex())
	require.NoError(t, n.WaitApplied(ctx, idx), "an applied index needs no wait")

	// An index not yet written: the wait ends with its context...
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, n.WaitApplied(short, idx+1), context.DeadlineExceeded)

	// ...or as soon as the write applies.
	done := make(chan error, 1)
	go func() { done <- n.WaitApplied(ctx, idx+1) }()
	_, _, err := n.Propose(ctx, entry(1))
	require.NoError(t, err)
	require.NoError(t, <-done)
}

func TestProposeOnAFollowerIsNotLeader(t *testing.T) {
	// A node whose only peer never answers never leads: its proposals
	// provably never enter the log.
	n, err := Open(Config{
		Advertise: "127.0.0.1:1", Peers: []string{"127.0.0.1:1", "127.0.0.1:2"}, InMemory: true, StateMachine: &counter{},
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, MaxLeaderSilence: 300 * time.Millisecond,
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, n.Close()) }()
	_, _, err = n.Propose(context.Background(), entry(1))
	var pe *ProposeError
	require.True(t, errors.As(err, &pe))
	require.True(t, pe.NotLeader)
	require.False(t, n.Serving())
}
