package coordinator

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
)

// Limits of a GroupSearch: the most groups, and the most hits a group
// holds.
const (
	MaxGroups    = 100
	MaxGroupSize = 100
)

// GroupSearch is a search whose hits are grouped by a payload key's value
// (Qdrant's search/groups and query/groups): the Limit groups whose best
// hit is best, each with its GroupSize best hits.
type GroupSearch struct {
	Collection Collection
	// Query is the search (a vector, a stored id, or a recommendation);
	// its K is ignored.
	Query Query
	// Tree, when set, is a query with prefetches (Qdrant's query/groups
	// with prefetch) grouped instead of Query: its root's Query.K is
	// ignored, its WithPayload and WithVector are the hits'
	// (groupsOverTree).
	Tree *Stage
	// GroupBy is a dotted payload path; a point whose value there is a
	// string or an integer (or an array of them: one group each) belongs
	// to that value's group; other points belong to none.
	GroupBy   string
	GroupSize int
	Limit     int
	Budget    budget.Budget
	// AllowPartial false refuses a degraded answer.
	AllowPartial bool
}

// Group is one group: its value (a string or an int64) and its hits,
// best first.
type Group struct {
	Value any
	Hits  []Hit
}

// GroupAnswer is a grouped search's groups, best group first, and the
// summary of its fan-outs (degraded when any was).
type GroupAnswer struct {
	Groups  []Group
	Summary fanout.Summary
	Shards  []ShardReport
	Exact   bool
}

// SearchGroups answers a GroupSearch exactly, in two steps.
//
// First it finds the groups: a group's rank is its best hit's, so the
// best Limit groups are the first Limit distinct values met walking the
// exact global ranking of the points holding a value. It searches for the
// best k points (k = Limit·GroupSize at first) and walks them; when they
// hold fewer than Limit groups and more points match, it searches again
// for four times as many, up to vector.MaxK points. Then it asks for
// each group's GroupSize best hits with one batch fan-out, one query per
// group with the filter narrowed to the group's value: exact, whatever
// the shards hold. A search whose best vector.MaxK points hold fewer
// than Limit groups while more points match is refused (CodeInvalid),
// never answered with groups that may not be the best.
func (c *Coordinator) SearchGroups(ctx context.Context, g GroupSearch) (GroupAnswer, error) {
	switch {
	case g.Limit < 1 || g.Limit > MaxGroups:
		return GroupAnswer{}, errorf(CodeInvalid, nil, "limit is %d, want 1..%d", g.Limit, MaxGroups)
	case g.GroupSize < 1 || g.GroupSize > MaxGroupSize:
		return GroupAnswer{}, errorf(CodeInvalid, nil, "group_size is %d, want 1..%d", g.GroupSize, MaxGroupSize)
	case g.GroupBy == "" || slices.Contains(strings.Split(g.GroupBy, "."), ""):
		return GroupAnswer{}, errorf(CodeInvalid, nil, "group_by %q is not a dotted payload path", g.GroupBy)
	}
	ctx = context.WithoutCancel(ctx)
	if err := c.unlistedError(g.Collection); err != nil {
		return GroupAnswer{}, err
	}
	if g.Tree != nil {
		return c.groupsOverTree(ctx, g)
	}
	q := g.Query
	if q.Recommend != nil {
		if err := checkRecommend(0, Query{K: 1, Recommend: q.Recommend}); err != nil {
			return GroupAnswer{}, err
		}
	}
	// Resolve a stored id or a recommendation's examples once: every
	// search below is then by the vector, leaving the same points out.
	req := fanout.Request{Path: fanout.PathSearch, Collection: g.Collection.Name, Start: time.Now(), Budget: g.Budget, Prefer: c.prefer}
	resolved, err := c.resolveLikes(ctx, g.Collection, req, []Query{q})
	if err != nil {
		return GroupAnswer{}, err
	}
	q = resolved[0]
	if q.LikeID != "" {
		q.exclude, q.LikeID = []string{q.LikeID}, ""
	}
	q.Recommend = nil
	left := len(q.exclude)
	path := strings.Split(g.GroupBy, ".")
	ans := GroupAnswer{Exact: true}
	// done is the answer with the request's summary: that of the first
	// degraded fan-out if any, else the last, with the request's deadline
	// and elapsed time.
	done := func() GroupAnswer {
		if ans.Summary.ShardsTotal > 0 {
			ans.Summary.Deadline, ans.Summary.Elapsed = g.Budget.Deadline, time.Since(req.Start)
		}
		return ans
	}
	search := func(p fanout.Path, qs []Query) (Answer, error) {
		// Each fan-out gets what is left of the request's deadline.
		rest := g.Budget.Deadline - time.Since(req.Start)
		if rest <= 0 {
			return Answer{}, errorf(CodeUnavailable, nil, "the deadline (%d ms) passed before the groups were complete", g.Budget.Deadline.Milliseconds())
		}
		a, err := c.Search(ctx, Search{Collection: g.Collection, Path: p, Queries: qs, Budget: budget.ForDeadline(rest), AllowPartial: g.AllowPartial})
		if !ans.Summary.Degraded() {
			ans.Summary, ans.Shards = a.Summary, a.Shards
		}
		ans.Exact = ans.Exact && a.Exact
		return a, err
	}

	var values []any
	for k := min(g.Limit*g.GroupSize, vector.MaxK-left); ; k = min(k*4, vector.MaxK-left) {
		find := q
		find.K, find.WithVector = k+left, false
		find.WithPayload = &PayloadSelection{Keys: []string{path[0]}}
		a, err := search(fanout.PathSearch, []Query{find})
		if err != nil {
			return done(), err
		}
		values = values[:0]
		for _, h := range a.Hits[0] {
			for _, v := range groupValues(h.Payload, path) {
				if len(values) < g.Limit && !slices.Contains(values, v) {
					values = append(values, v)
				}
			}
		}
		if len(values) == g.Limit || len(a.Hits[0]) < k {
			break // enough groups, or every matching point walked
		}
		if k == vector.MaxK-left {
			return done(), errorf(CodeInvalid, nil, "the best %d points hold %d groups of %q, fewer than the limit %d: narrow the filter or lower the limit (trawl answers groups exactly or not at all)",
				k, len(values), g.GroupBy, g.Limit)
		}
	}
	if len(values) == 0 {
		ans.Groups = []Group{}
		return done(), nil
	}
	qs := make([]Query, len(values))
	for i, v := range values {
		qs[i] = q
		qs[i].K = g.GroupSize + left
		qs[i].Filter = withMatch(q.Filter, g.GroupBy, path, v)
	}
	a, err := search(fanout.PathSearchBatch, qs)
	if err != nil {
		return done(), err
	}
	ans.Groups = make([]Group, len(values))
	for i, v := range values {
		ans.Groups[i] = Group{Value: v, Hits: a.Hits[i]}
	}
	return done(), nil
}

// groupValues are the distinct group values (strings and int64s) a
// payload holds at path.
func groupValues(payload []byte, path []string) []any {
	doc, err := filter.DecodePayload(payload)
	if err != nil {
		return nil
	}
	v, ok := filter.Lookup(doc, path)
	if !ok {
		return nil
	}
	vs, isArr := v.([]any)
	if !isArr {
		vs = []any{v}
	}
	var out []any
	for _, x := range vs {
		switch x.(type) {
		case string, int64:
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out
}

// withMatch is f (nil: none) with one more must condition: the value at
// key equals v.
func withMatch(f *filter.Filter, key string, path []string, v any) *filter.Filter {
	out := &filter.Filter{}
	if f != nil {
		out.Must, out.Should, out.MustNot = slices.Clone(f.Must), f.Should, f.MustNot
	}
	c := filter.Condition{Op: filter.OpMatch, Key: key, Path: path}
	switch x := v.(type) {
	case string:
		c.Value = filter.Value{Type: filter.String, Str: x}
	case int64:
		c.Value = filter.Value{Type: filter.Integer, Int: x}
	}
	out.Must = append(out.Must, c)
	return out
}
