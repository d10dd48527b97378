package coordinator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/vector"
)

// groupsOverTree answers a GroupSearch whose query has prefetches (Tree):
// the groups of the tree's answer as points/query ranks it. The tree runs
// once (Query: every branch merged globally, fusions and re-scorings over
// the global lists) for its best vector.MaxK points, whose candidates the
// prefetches' limits bound; walking that ranking, a point joins the group
// of each of its values, the first Limit groups met are the answer (a
// group ranks by its best hit), each with its first GroupSize points.
// Scores are the tree's: a point's fused score is the same in every group
// and as in the ungrouped query.
//
// When the tree yields vector.MaxK points and they leave fewer than Limit
// groups or a group short of GroupSize, points past them could change the
// answer: the request is refused (CodeInvalid), as SearchGroups refuses,
// rather than answered inexactly.
func (c *Coordinator) groupsOverTree(ctx context.Context, g GroupSearch) (GroupAnswer, error) {
	path := strings.Split(g.GroupBy, ".")
	root := *g.Tree
	asked := root.Query.WithPayload
	root.Query.K = vector.MaxK
	root.Query.WithPayload = withKey(asked, path[0])
	a, err := c.Query(ctx, QuerySearch{Collection: g.Collection, Path: fanout.PathSearch, Trees: []Stage{root},
		Budget: g.Budget, AllowPartial: g.AllowPartial})
	ans := GroupAnswer{Summary: a.Summary, Shards: a.Shards, Exact: a.Exact}
	if err != nil {
		return ans, err
	}
	hits := a.Hits[0]
	ans.Groups = []Group{}
	at := map[any]int{} // a group's value → its index in ans.Groups
	short := 0          // groups with fewer than GroupSize hits
	for _, h := range hits {
		for _, v := range groupValues(h.Payload, path) {
			i, ok := at[v]
			if !ok {
				if len(ans.Groups) == g.Limit {
					continue
				}
				i, at[v] = len(ans.Groups), len(ans.Groups)
				ans.Groups = append(ans.Groups, Group{Value: v})
				short++
			}
			if n := len(ans.Groups[i].Hits); n < g.GroupSize {
				ans.Groups[i].Hits = append(ans.Groups[i].Hits, selectPayload(h, asked, path[0]))
				if n+1 == g.GroupSize {
					short--
				}
			}
		}
	}
	if len(hits) == vector.MaxK && (len(ans.Groups) < g.Limit || short > 0) {
		return ans, errorf(CodeInvalid, nil, "the query's best %d points hold %d groups of %q, %d of them short of group_size %d, and the limit is %d: narrow the filter or the prefetch limits (trawl answers groups exactly or not at all)",
			len(hits), len(ans.Groups), g.GroupBy, short, g.GroupSize, g.Limit)
	}
	return ans, nil
}

// withKey is a payload selection that also holds key (grouping reads it).
func withKey(sel *PayloadSelection, key string) *PayloadSelection {
	switch {
	case sel == nil:
		return &PayloadSelection{Keys: []string{key}}
	case sel.All || slices.Contains(sel.Keys, key):
		return sel
	}
	return &PayloadSelection{Keys: append(slices.Clone(sel.Keys), key)}
}

// selectPayload is h with the payload the request asked for (sel), where
// the search fetched withKey(sel, key).
func selectPayload(h Hit, sel *PayloadSelection, key string) Hit {
	switch {
	case sel == nil:
		h.Payload = nil
	case sel.All || slices.Contains(sel.Keys, key) || h.Payload == nil:
	default:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(h.Payload, &m); err == nil {
			delete(m, key)
			if b, err := json.Marshal(m); err == nil {
				h.Payload = b
			}
		}
	}
	return h
}
