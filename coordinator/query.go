package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/fusion"
	"github.com/trawl-search/trawl/vector"
)

// Limits of a query tree (Qdrant's Query API with prefetch).
const (
	// MaxPrefetchDepth is how deep prefetches nest, as Qdrant allows.
	MaxPrefetchDepth = 64
	// MaxQueryStages is the most stages one request holds, its batch's
	// trees together: the leaves go to every shard in one RPC.
	MaxQueryStages = 256
	// DefaultPrefetchLimit is a prefetch's limit when it names none.
	DefaultPrefetchLimit = 10
)

// FusionMethod is how a stage fuses its prefetches' lists.
type FusionMethod uint8

const (
	// FusionRRF is reciprocal rank fusion (fusion.RRF).
	FusionRRF FusionMethod = iota + 1
	// FusionDBSF is distribution-based score fusion (fusion.DBSF).
	FusionDBSF
)

// Fusion is a stage's fusion.
type Fusion struct {
	Method FusionMethod
	// K is RRF's k; 0 means fusion.DefaultRRFK.
	K int
	// Weights are RRF's per-prefetch weights, nil for all 1.
	Weights []float32
}

// Stage is one stage of a query tree. A stage without Prefetch is a leaf:
// Query runs across every shard and is merged globally. A stage with
// Prefetch first has each prefetch's list, then either fuses them
// (Fusion) or scores the union of their points with Query's vector (a
// re-scoring) and keeps the best Query.K.
//
// Query.Filter is the stage's own filter: a stage's filter applies to
// every stage under it too, as Qdrant propagates filters into the leaves.
// Query.K is the stage's limit and Query.ScoreThreshold its threshold
// (on the fused score under Fusion, kept while at least it). WithPayload
// and WithVector are read from the root stage alone.
type Stage struct {
	// Name names the stage in errors, e.g. "prefetch[1].prefetch[0]";
	// the root's is "".
	Name     string
	Query    Query
	Fusion   *Fusion
	Prefetch []Stage
}

// QuerySearch is one Query API request: one tree per query of a batch,
// answered together.
type QuerySearch struct {
	Collection Collection
	Path       fanout.Path
	Trees      []Stage
	Budget     budget.Budget
	// AllowPartial false refuses a degraded answer.
	AllowPartial bool
}

// node is a stage being evaluated.
type node struct {
	st *Stage
	// filters are the stage's own filter and those of the stages above
	// it, all of which its points must match.
	filters []*filter.Filter
	// carry is set on the stages whose points are the answer's: the root
	// and, under a fusion, its prefetches. They fetch the payloads and
	// vectors the answer asks for, so no later read is needed.
	carry    bool
	answer   *Stage // the root, whose WithPayload and WithVector carry reads
	children []*node
	height   int
	hits     []Hit
	// metric says hits' scores are the collection metric's (not fused).
	metric bool
}

// Query answers a QuerySearch. Each tree is evaluated bottom up in
// rounds: the first round sends every leaf of every tree to every shard
// in one batch fan-out and merges each leaf's global top list; each later
// round computes the stages whose prefetches are all done — a fusion on
// the router, over the globally merged lists (never one shard's); a
// re-scoring as one more batch fan-out, the query restricted to its
// candidates with has_id, scored exactly. A tree of depth d takes at most
// d fan-outs, all within the request's one deadline.
//
// The request counts once in the fan-out metrics, however many rounds it
// took: its summary is the union of theirs (a shard missing from any
// round is missing from the answer, coverage the lowest), so an answer
// missing a shard in any branch is degraded, and counted once.
func (c *Coordinator) Query(ctx context.Context, s QuerySearch) (Answer, error) {
	start := time.Now()
	ctx = context.WithoutCancel(ctx)
	if err := c.unlistedError(s.Collection); err != nil {
		return Answer{}, err
	}
	roots, byHeight, err := planQuery(s.Trees)
	if err != nil {
		return Answer{}, err
	}
	run := queryRun{c: c, s: s, start: start, exact: true}
	for h, stages := range byHeight {
		var qs []Query
		var asked []*node
		for _, n := range stages {
			switch {
			case len(n.children) == 0:
				qs, asked = append(qs, n.leafQuery()), append(asked, n)
			case n.st.Fusion != nil:
				if n.hits, err = n.fuse(s.Collection.Settings); err != nil {
					return run.done(), errorf(CodeInvalid, err, "%s: %v", n.label(), err)
				}
			default:
				q, ok := n.rescoreQuery()
				if !ok {
					n.hits = []Hit{} // no candidates: nothing to score
					continue
				}
				qs, asked = append(qs, q), append(asked, n)
			}
		}
		if len(qs) == 0 {
			continue
		}
		a, err := run.search(ctx, h, qs)
		if err != nil {
			return run.done(), err
		}
		for i, n := range asked {
			// A sparse query's scores are dot products, not the
			// collection metric's (which fuse reads for l2).
			n.hits, n.metric = a.Hits[i], n.st.Query.Sparse == nil
		}
	}
	ans := run.done()
	ans.Hits = make([][]Hit, len(roots))
	for i, r := range roots {
		ans.Hits[i] = r.hits
	}
	return ans, nil
}

// planQuery checks the trees and lays them out by height (a leaf's is 0,
// a stage's one more than its highest prefetch's), the rounds Query runs.
func planQuery(trees []Stage) ([]*node, [][]*node, error) {
	var byHeight [][]*node
	count := 0
	var build func(st, root *Stage, above []*filter.Filter, carry bool, depth int) (*node, error)
	build = func(st, root *Stage, above []*filter.Filter, carry bool, depth int) (*node, error) {
		n := &node{st: st, carry: carry, answer: root, filters: above}
		if !st.Query.Filter.Empty() {
			n.filters = append(slices.Clip(above), st.Query.Filter)
		}
		count++
		switch {
		case count > MaxQueryStages:
			return nil, errorf(CodeInvalid, nil, "the request has more than %d query stages (prefetches and queries together)", MaxQueryStages)
		case depth > MaxPrefetchDepth:
			return nil, errorf(CodeInvalid, nil, "%s: prefetches nest deeper than %d", n.label(), MaxPrefetchDepth)
		case st.Query.K < 1 || st.Query.K > vector.MaxK:
			return nil, errorf(CodeInvalid, nil, "%s: limit is %d, want 1..%d", n.label(), st.Query.K, vector.MaxK)
		case st.Fusion != nil && len(st.Prefetch) == 0:
			return nil, errorf(CodeInvalid, nil, "%s: fusion needs prefetches: it fuses their results", n.label())
		case st.Fusion == nil && len(st.Query.Vector) == 0 && st.Query.LikeID == "" && st.Query.Recommend == nil && st.Query.Sparse == nil:
			return nil, errorf(CodeInvalid, nil, "%s: a query is required", n.label())
		case st.Fusion != nil && st.Fusion.Weights != nil && len(st.Fusion.Weights) != len(st.Prefetch):
			return nil, errorf(CodeInvalid, nil, "%s: rrf has %d weights for %d prefetches: want one per prefetch", n.label(), len(st.Fusion.Weights), len(st.Prefetch))
		}
		if err := n.checkFilter(); err != nil {
			return nil, err
		}
		if st.Query.Recommend != nil && st.Fusion == nil {
			// Checked here, not by the round that runs it: a later
			// round's refusal would come after shards were asked.
			if err := checkRecommend(0, st.Query); err != nil {
				var e *Error
				if errors.As(err, &e) {
					return nil, errorf(CodeInvalid, err, "%s: %s", n.label(), strings.TrimPrefix(e.Msg, "query 0: "))
				}
				return nil, err
			}
		}
		for i := range st.Prefetch {
			child, err := build(&st.Prefetch[i], root, n.filters, carry && st.Fusion != nil, depth+1)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, child)
			n.height = max(n.height, child.height+1)
		}
		for len(byHeight) <= n.height {
			byHeight = append(byHeight, nil)
		}
		byHeight[n.height] = append(byHeight[n.height], n)
		return n, nil
	}
	roots := make([]*node, len(trees))
	for i := range trees {
		r, err := build(&trees[i], &trees[i], nil, true, 0)
		if err != nil {
			return nil, nil, err
		}
		roots[i] = r
	}
	return roots, byHeight, nil
}

func (n *node) label() string {
	if n.st.Name == "" {
		return "query"
	}
	return n.st.Name
}

// checkFilter refuses a stage whose filters together (with the has_id
// of a re-scoring) would be a filter no shard accepts: too deep, or too
// many conditions. It is checked here so bad input never reaches a shard.
func (n *node) checkFilter() error {
	fs := n.filters
	if len(n.st.Prefetch) > 0 && n.st.Fusion == nil {
		fs = append(slices.Clip(fs), &filter.Filter{Must: []filter.Condition{{Op: filter.OpHasID}}})
	}
	f := allOf(fs)
	if f.Empty() {
		return nil
	}
	b, err := json.Marshal(f)
	if err == nil {
		_, err = filter.Parse(b)
	}
	if err != nil {
		return errorf(CodeInvalid, err, "%s.filter: with the filters of the stages above it: %v", n.label(), err)
	}
	return nil
}

// allOf is the filter all of fs hold: nil for none, the one, or each
// nested under must (so nesting grows by one, not with the tree's depth).
func allOf(fs []*filter.Filter) *filter.Filter {
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	out := &filter.Filter{Must: make([]filter.Condition, len(fs))}
	for i, f := range fs {
		out.Must[i] = filter.Condition{Op: filter.OpFilter, Nested: f}
	}
	return out
}

// leafQuery is a leaf's query: its filters together, the answer's
// payload and vector if it carries the answer's points.
func (n *node) leafQuery() Query {
	q := n.st.Query
	q.Filter = allOf(n.filters)
	q.WithPayload, q.WithVector = nil, false
	if n.carry {
		q.WithPayload, q.WithVector = n.answer.Query.WithPayload, n.answer.Query.WithVector
	}
	return q
}

// rescoreQuery is a re-scoring's query: its vector over the union of its
// prefetches' points (has_id), exact, so no candidate is missed by an
// approximate scan. false when there is no candidate.
func (n *node) rescoreQuery() (Query, bool) {
	var ids []string
	seen := map[string]bool{}
	for _, ch := range n.children {
		for _, h := range ch.hits {
			if !seen[h.ID] {
				seen[h.ID] = true
				ids = append(ids, h.ID)
			}
		}
	}
	if len(ids) == 0 {
		return Query{}, false
	}
	q := n.leafQuery()
	q.Exact = true
	q.Filter = allOf(append(slices.Clip(n.filters), &filter.Filter{Must: []filter.Condition{{Op: filter.OpHasID, IDs: ids}}}))
	return q, true
}

// fuse is a fusion stage's list: its prefetches' lists fused, kept while
// at least the threshold, cut at its limit. Each point keeps what the
// first list holding it carried (payload, vector, shard).
func (n *node) fuse(set catalog.Settings) ([]Hit, error) {
	lists := make([][]fusion.Point, len(n.children))
	first := map[string]Hit{}
	for i, ch := range n.children {
		lists[i] = make([]fusion.Point, len(ch.hits))
		for j, h := range ch.hits {
			s := h.Score
			if ch.metric && QueryMetric(set, ch.st.Query) == vector.Euclidean {
				s = -s // a distance: DBSF wants larger better
			}
			lists[i][j] = fusion.Point{ID: h.ID, Score: s}
			if _, ok := first[h.ID]; !ok {
				first[h.ID] = h
			}
		}
	}
	var fused []fusion.Point
	switch f := n.st.Fusion; f.Method {
	case FusionRRF:
		k := f.K
		if k == 0 {
			k = fusion.DefaultRRFK
		}
		var err error
		if fused, err = fusion.RRF(lists, k, f.Weights); err != nil {
			return nil, err
		}
	case FusionDBSF:
		fused = fusion.DBSF(lists)
	default:
		return nil, fmt.Errorf("unknown fusion %d", f.Method)
	}
	out := make([]Hit, 0, min(len(fused), n.st.Query.K))
	for _, p := range fused {
		if len(out) == n.st.Query.K {
			break
		}
		if t := n.st.Query.ScoreThreshold; t != nil && float64(p.Score) < *t {
			break // Qdrant keeps fused points while they reach the threshold
		}
		h := first[p.ID]
		h.Score = p.Score
		out = append(out, h)
	}
	return out, nil
}

// queryRun is the bookkeeping of one Query: its rounds' summaries merged
// into the one the request answers and counts with.
type queryRun struct {
	c      *Coordinator
	s      QuerySearch
	start  time.Time
	sum    fanout.Summary
	shards []ShardReport
	exact  bool
}

// search runs one round's queries as one uncounted batch fan-out, with
// what is left of the request's deadline. It is the tree's only contact
// with the shards: a leaf is a Query whose globally merged top list the
// round answers, whatever kind of query it is (a vector, an id, a
// recommendation; a named or sparse vector once Query can say so), so
// new kinds of leaf need no change to the tree code.
func (r *queryRun) search(ctx context.Context, round int, qs []Query) (Answer, error) {
	b := r.s.Budget
	if round > 0 {
		rest := r.s.Budget.Deadline - time.Since(r.start)
		if rest <= 0 {
			return Answer{}, errorf(CodeUnavailable, nil, "the deadline (%d ms) passed before the query's prefetches were complete", r.s.Budget.Deadline.Milliseconds())
		}
		b = budget.ForDeadline(rest)
	}
	path := r.s.Path
	if len(qs) > 1 {
		path = fanout.PathSearchBatch
	}
	a, err := r.c.Search(ctx, Search{Collection: r.s.Collection, Path: path, Queries: qs, Budget: b,
		AllowPartial: r.s.AllowPartial, uncounted: true})
	if a.Summary.ShardsTotal > 0 {
		r.merge(a)
	}
	return a, err
}

// merge adds a round's summary to the request's: a shard missing from
// any round is missing (its first reason), coverage the lowest.
func (r *queryRun) merge(a Answer) {
	r.exact = r.exact && a.Exact
	if r.sum.ShardsTotal == 0 {
		r.sum, r.shards = a.Summary, a.Shards
		r.sum.ShardErrors = maps.Clone(a.Summary.ShardErrors)
		return
	}
	if a.Summary.Degraded() && !r.sum.Degraded() {
		r.shards = a.Shards
	}
	for name, why := range a.Summary.ShardErrors {
		if _, ok := r.sum.ShardErrors[name]; !ok {
			r.sum.ShardErrors[name] = why
		}
	}
	r.sum.Unavailable = []string{}
	for _, sh := range r.c.shards {
		if _, ok := r.sum.ShardErrors[sh.Name]; ok {
			r.sum.Unavailable = append(r.sum.Unavailable, sh.Name)
		}
	}
	r.sum.ShardsQueried = r.sum.ShardsTotal - len(r.sum.Unavailable)
	r.sum.Coverage = min(r.sum.Coverage, a.Summary.Coverage)
}

// done is the request's answer so far (without hits), counted once in
// the fan-out metrics if any round was gathered.
func (r *queryRun) done() Answer {
	if r.sum.ShardsTotal == 0 {
		return Answer{}
	}
	r.sum.Elapsed = time.Since(r.start)
	r.sum.Deadline, r.sum.ShardDeadline = r.s.Budget.Deadline, r.s.Budget.Shard
	r.c.cluster.Report(fanout.Request{Path: r.s.Path, Collection: r.s.Collection.Name}, r.sum)
	return Answer{Summary: r.sum, Shards: r.shards, Exact: r.exact}
}
