package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard/store"
)

// TestFacetTooLargeIsRefusedNamingTheKey: a facet answer over the value
// or byte bound is refused InvalidArgument naming the key (the router
// answers it 400), one at the bounds is answered.
func TestFacetTooLargeIsRefusedNamingTheKey(t *testing.T) {
	counts := func(vs ...store.FacetValue) map[store.FacetValue]int {
		out := map[store.FacetValue]int{}
		for _, v := range vs {
			out[v] = 1
		}
		return out
	}
	for _, tc := range []struct {
		name               string
		counts             map[store.FacetValue]int
		maxValues, maxByte int
		msg                string
	}{
		{"at the value bound", counts("a", "b", int64(3)), 3, 1 << 20, ""},
		{"over it", counts("a", "b", int64(3), true), 3, 1 << 20, `facet of "tag": 4 distinct values under the filter on one shard, more than the 3`},
		{"at the byte bound", counts("abcd", int64(1)), 10, 16 + 4 + 16, ""},
		{"over it", counts(strings.Repeat("x", 100)), 10, 100, `facet of "tag": its values under the filter take 116 bytes on one shard, more than the 100`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := facetTooLarge("tag", tc.counts, tc.maxValues, tc.maxByte)
			if tc.msg == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, codes.InvalidArgument, status.Code(err))
			require.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}
}
