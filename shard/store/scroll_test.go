package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/idorder"
)

// TestPagesListEveryMatchInIDOrder: paging through a store with any
// filter and page size visits every matching id exactly once, in id
// order, and counts them, the same as sorting the brute-force matches.
func TestPagesListEveryMatchInIDOrder(t *testing.T) {
	bg := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewMemory(2)
	var recs []Record
	for i := range 500 {
		id := fmt.Sprint(rng.IntN(100000))
		if i%3 == 0 {
			id = fmt.Sprintf("doc-%d", i)
		}
		recs = append(recs, Record{ID: id, Vector: []float32{1, float32(i)}, Payload: fmt.Appendf(nil, `{"n": %d}`, i%7)})
	}
	require.NoError(t, m.Upsert(bg, place, recs))
	for _, tc := range []struct {
		filter string
		limit  int
	}{{"", 1}, {"", 37}, {"", 1000}, {`{"must": {"key": "n", "match": {"value": 3}}}`, 5}, {`{"must_not": {"key": "n", "range": {"gte": 2}}}`, 64}} {
		t.Run(fmt.Sprintf("%s/%d", tc.filter, tc.limit), func(t *testing.T) {
			var f *filter.Filter
			if tc.filter != "" {
				var err error
				f, err = filter.Parse([]byte(tc.filter))
				require.NoError(t, err)
			}
			var want []string
			for _, r := range dedupe(recs) {
				if f.Empty() || f.Match(decodePayload(r.Payload)) {
					want = append(want, r.ID)
				}
			}
			slices.SortFunc(want, idorder.Compare)
			var got []string
			// As the router asks: one more than the page, the extra id
			// being where the next page starts.
			req := PageRequest{Filter: f, Limit: tc.limit + 1, Payload: &PayloadKeys{}}
			for {
				pg, err := m.Page(req)
				require.NoError(t, err)
				require.Equal(t, len(want), pg.Count)
				page := pg.Records[:min(len(pg.Records), tc.limit)]
				for _, r := range page {
					got = append(got, r.ID)
					require.NotEmpty(t, r.Payload)
					require.Nil(t, r.Vector)
				}
				if len(pg.Records) <= tc.limit {
					break
				}
				req.From, req.HasFrom = pg.Records[tc.limit].ID, true
			}
			if want == nil {
				want = []string{}
			}
			if got == nil {
				got = []string{}
			}
			require.Equal(t, want, got)
		})
	}
}

// dedupe keeps the last record of each id, as the store does.
func dedupe(recs []Record) []Record {
	last := map[string]Record{}
	for _, r := range recs {
		last[r.ID] = r
	}
	out := make([]Record, 0, len(last))
	for _, r := range last {
		out = append(out, r)
	}
	return out
}

// TestDeleteMatchingRemovesIdsAndFilterMatches: ids and filter matches go
// together, the count is of documents removed, and the payload index
// forgets them.
func TestDeleteMatchingRemovesIdsAndFilterMatches(t *testing.T) {
	bg := context.Background()
	m := NewMemory(2)
	var recs []Record
	for i := range 20 {
		recs = append(recs, Record{ID: fmt.Sprint(i), Vector: []float32{1, float32(i)}, Payload: fmt.Appendf(nil, `{"even": %v}`, i%2 == 0)})
	}
	require.NoError(t, m.Upsert(bg, place, recs))
	f, err := filter.Parse([]byte(`{"must": {"key": "even", "match": {"value": true}}}`))
	require.NoError(t, err)
	n, err := m.DeleteMatching(bg, place, []string{"1", "3", "4", "nope"}, f)
	require.NoError(t, err)
	require.Equal(t, 12, n) // 10 even, plus 1 and 3; 4 is even already
	require.Equal(t, 8, m.Len())
	pg, err := m.Page(PageRequest{Filter: f, Limit: 100})
	require.NoError(t, err)
	require.Zero(t, pg.Count)
	pg, err = m.Page(PageRequest{Limit: 100, WithVector: true})
	require.NoError(t, err)
	var ids []string
	for _, r := range pg.Records {
		ids = append(ids, r.ID)
		require.Len(t, r.Vector, 2)
	}
	require.Equal(t, []string{"5", "7", "9", "11", "13", "15", "17", "19"}, ids)
}
