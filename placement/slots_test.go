package placement

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLegacyMapReproducesHome(t *testing.T) {
	for _, names := range [][]string{{"shard-0"}, {"shard-2", "shard-0", "shard-1"}, {"a", "b", "c", "d", "e"}} {
		table, m := New(names), Legacy(names)
		require.NoError(t, m.Validate())
		for i := range 20000 {
			id := fmt.Sprintf("doc-%d", i)
			require.Equal(t, table.Home(id), m.Home(id), "%v %s", names, id)
		}
	}
}

func TestEvenSpreadsSlots(t *testing.T) {
	tests := []struct {
		names    []string
		slots    int
		min, max int
	}{
		{[]string{"s0", "s1", "s2"}, 256, 85, 86},
		{[]string{"s3", "s1", "s0", "s2"}, 256, 64, 64},
		{[]string{"s0", "s1", "s2"}, 2, 0, 1},
	}
	for _, tt := range tests {
		m := Even(tt.names, tt.slots)
		require.NoError(t, m.Validate())
		require.Equal(t, tt.slots, m.Slots())
		for name, n := range m.Counts(tt.names) {
			require.True(t, n >= tt.min && n <= tt.max, "%s holds %d", name, n)
		}
	}
}

func TestSlotSpreadsIDs(t *testing.T) {
	counts := make([]int, 256)
	const n = 256 * 400
	for i := range n {
		counts[Slot(fmt.Sprintf("doc-%d", i), 256)]++
	}
	for s, c := range counts {
		require.InDelta(t, 400, c, 400*0.25, "slot %d", s)
	}
}

func TestMoveAndHeld(t *testing.T) {
	m := Even([]string{"a", "b"}, 8)
	moved := m.Move(3, "c")
	require.Equal(t, uint64(2), moved.Epoch)
	require.Equal(t, "c", moved.Owners[3])
	require.Equal(t, uint64(2), moved.Since[3])
	require.Equal(t, "b", m.Owners[3], "Move leaves the old map alone")
	require.NoError(t, moved.Validate())
	held := moved.Held("c")
	for s := range 8 {
		require.Equal(t, s == 3, HeldBit(held, s))
	}
	require.Equal(t, map[string]int{"a": 4, "b": 3, "c": 1}, moved.Counts([]string{"a", "b", "c"}))
}

func TestValidateRefuses(t *testing.T) {
	tests := []struct {
		name string
		m    SlotMap
	}{
		{"no slots", SlotMap{Epoch: 1}},
		{"too many", Even([]string{"a"}, MaxSlots+1)},
		{"unowned", SlotMap{Epoch: 1, Owners: []string{"a", ""}, Since: []uint64{1, 1}}},
		{"short since", SlotMap{Epoch: 1, Owners: []string{"a"}}},
		{"future since", SlotMap{Epoch: 1, Owners: []string{"a"}, Since: []uint64{2}}},
	}
	for _, tt := range tests {
		require.ErrorIs(t, tt.m.Validate(), ErrSlots, tt.name)
	}
}

func TestMoveSteps(t *testing.T) {
	m := Even([]string{"a", "b"}, 4) // a: 0, 2; b: 1, 3
	begun, err := m.Begin(0, "c")
	require.NoError(t, err)
	require.NoError(t, begun.Validate())
	require.True(t, begun.Fenced(0))
	require.Equal(t, m.Epoch, begun.Epoch, "a fence changes no owner")
	require.Greater(t, begun.Ver(), m.Ver())
	require.True(t, begun.HoldsRows("a", 0) && begun.HoldsRows("c", 0))
	_, err = begun.Begin(1, "c")
	require.ErrorIs(t, err, ErrMoving)
	_, err = m.Begin(1, "b")
	require.ErrorIs(t, err, ErrSlots)

	flipped := begun.Flip(0)
	require.NoError(t, flipped.Validate())
	require.Equal(t, "c", flipped.Owners[0])
	require.Equal(t, m.Epoch+1, flipped.Epoch)
	require.False(t, flipped.Fenced(0))
	require.True(t, flipped.HoldsRows("a", 0), "the old owner keeps its rows until the map settles")

	settled := flipped.Settle(0)
	require.NoError(t, settled.Validate())
	require.False(t, settled.HoldsRows("a", 0))
	require.True(t, settled.HoldsRows("c", 0))
	require.Greater(t, settled.Ver(), flipped.Ver())
	require.Empty(t, settled.Moves)

	// Abandoned before the flip: the receiver holds the rows no longer.
	abandoned := begun.Settle(0)
	require.False(t, abandoned.HoldsRows("c", 0))
	require.True(t, abandoned.HoldsRows("a", 0))
}

// A flipped slot awaiting its settle does not hold up the next move: only
// one slot is fenced at a time, and a flip or settle of one slot leaves
// the others' pending settles as they are.
func TestMovesOverlapTheirGrace(t *testing.T) {
	m := Even([]string{"a", "b"}, 4) // a: 0, 2; b: 1, 3
	begun, err := m.Begin(0, "c")
	require.NoError(t, err)
	first := begun.Flip(0)
	_, err = first.Begin(0, "b")
	require.ErrorIs(t, err, ErrMoving, "a slot awaiting its settle moves again only once settled")
	second, err := first.Begin(1, "c")
	require.NoError(t, err)
	require.NoError(t, second.Validate())
	_, err = second.Begin(2, "c")
	require.ErrorIs(t, err, ErrMoving, "one slot fenced at a time")
	require.True(t, second.HoldsRows("a", 0), "the first old owner still keeps its rows")
	flipped := second.Flip(1)
	require.Equal(t, map[int]SlotMove{0: {Prev: "a"}, 1: {Prev: "b"}}, flipped.Moves)
	require.Equal(t, m.Epoch+2, flipped.Epoch)
	settled := flipped.Settle(0)
	require.Equal(t, map[int]SlotMove{1: {Prev: "b"}}, settled.Moves)
	require.False(t, settled.HoldsRows("a", 0))
	require.True(t, settled.HoldsRows("b", 1))
}
