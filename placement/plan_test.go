package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// apply runs a plan on m, one Move a step.
func apply(m SlotMap, steps []Step) SlotMap {
	for _, st := range steps {
		m = m.Move(st.Slot, st.To)
	}
	return m
}

func TestRebalanceAndDrain(t *testing.T) {
	three := []string{"s0", "s1", "s2"}
	four := append(three, "s3")
	tests := []struct {
		name     string
		m        SlotMap
		names    []string
		moves    int
		min, max int
		absent   string
	}{
		{name: "grow 3 to 4", m: Even(three, 256), names: four, moves: 64, min: 64, max: 64},
		{name: "balanced already", m: Even(three, 256), names: three, moves: 0, min: 85, max: 86},
		{name: "drain s3", m: Even(four, 256), names: three, moves: 64, min: 85, max: 86, absent: "s3"},
		{name: "grow 3 to 4, 16 slots", m: Even(three, 16), names: four, moves: 4, min: 4, max: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := Rebalance(tt.m, tt.names)
			require.Len(t, steps, tt.moves, "only the moves balance needs")
			after := apply(tt.m, steps)
			for n, c := range after.Counts(tt.names) {
				require.True(t, c >= tt.min && c <= tt.max, "%s holds %d", n, c)
			}
			if tt.absent != "" {
				require.Zero(t, after.Counts([]string{tt.absent})[tt.absent])
			}
			require.Equal(t, steps, Rebalance(tt.m, tt.names), "deterministic")
		})
	}
	drained := apply(Even(four, 256), Drain(Even(four, 256), four, "s1"))
	require.Zero(t, drained.Counts(four)["s1"])
	for _, n := range []string{"s0", "s2", "s3"} {
		require.InDelta(t, 85, drained.Counts(four)[n], 1)
	}
}
