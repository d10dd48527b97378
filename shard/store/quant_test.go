package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseQuantization(t *testing.T) {
	for s, want := range map[string]Quantization{"": QuantNone, "none": QuantNone, "int8": QuantInt8} {
		q, err := ParseQuantization(s)
		require.NoError(t, err)
		require.Equal(t, want, q)
	}
	_, err := ParseQuantization("int4")
	require.Error(t, err)
}

// TestInt8ScaleThatDoesNotDecode: a committed scale encodes every row; a
// scale that does not decode is refused with the reason and leaves the
// store without codes (it scans exactly, on every replica alike).
func TestInt8ScaleThatDoesNotDecode(t *testing.T) {
	const dim = 16
	m := NewMemory(dim, WithQuantization(QuantInt8))
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []Record
	for i := range 100 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		recs = append(recs, Record{ID: fmt.Sprint("v", i), Vector: v})
	}
	require.NoError(t, m.Upsert(context.Background(), place, recs))
	require.True(t, m.needsInt8Scale(100))
	require.False(t, m.needsInt8Scale(101), "fewer rows than asked for")
	b, err := m.trainInt8()
	require.NoError(t, err)
	require.NoError(t, m.SetTrained(TrainedInt8Scale, b, true))
	require.True(t, m.Int8Ready())
	require.False(t, m.needsInt8Scale(100), "a scale is committed")

	require.ErrorContains(t, m.SetTrained(TrainedInt8Scale, []byte("junk"), true), "int8 scale")
	require.False(t, m.Int8Ready())
}
