package idorder

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"007", 0, false},
		{"+7", 0, false},
		{"-7", 0, false},
		{"", 0, false},
		{"7a", 0, false},
		{"doc-7", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			n, ok := Uint(tc.in)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, n)
		})
	}
}

func TestCompareSortsIntegersFirstThenBytes(t *testing.T) {
	ids := []string{"doc-2", "10", "7f1e0c4a-0000-4000-8000-000000000000", "2", "007",
		"18446744073709551615", "0", "0a1e0c4a-0000-4000-8000-000000000000", "doc-10"}
	slices.SortFunc(ids, Compare)
	require.Equal(t, []string{"0", "2", "10", "18446744073709551615", "007",
		"0a1e0c4a-0000-4000-8000-000000000000", "7f1e0c4a-0000-4000-8000-000000000000", "doc-10", "doc-2"}, ids)
}

// Compare is a total order: antisymmetric and transitive over a mix.
func FuzzCompare(f *testing.F) {
	f.Add("1", "01", "a")
	f.Add("18446744073709551615", "18446744073709551616", "9")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		require.Equal(t, Compare(a, b), -Compare(b, a))
		require.Equal(t, a == b, Compare(a, b) == 0)
		if Compare(a, b) <= 0 && Compare(b, c) <= 0 {
			require.LessOrEqual(t, Compare(a, c), 0)
		}
	})
}
