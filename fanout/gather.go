package fanout

import (
	"context"
	"errors"
	"time"

	"github.com/trawl-search/trawl/budget"
)

// Answer is what a shard's read answer must tell the engine: how many
// documents the replica held, for coverage.
type Answer interface {
	GetDocCount() uint64
}

// Call is one attempt of a read against one replica. ctx carries the
// attempt's deadline and is cancelled when another attempt wins.
type Call[R Replica, T any] func(ctx context.Context, r R) (T, error)

// Request is one fan-out, or one lookup, and the time it may take.
type Request struct {
	// Path labels the fan-out in metrics; lookups leave it empty.
	Path Path
	// Collection is the collection the fan-out reads, for metrics.
	Collection string
	// Control marks the router's own bookkeeping reads (the catalog, the
	// document surveys): they count for a replica's health but not for
	// its latency, whose sub-millisecond answers would shrink the hedge
	// delay of real queries.
	Control bool
	// Start is when the query's clock started (work before the fan-out,
	// such as a like_id lookup, already spent part of the deadline).
	Start time.Time
	// Budget is the query's deadline and per-shard budget.
	Budget budget.Budget
	// Prefer, when set, says which replicas are known to answer the read
	// without waiting — for a read that must see a write, those known to
	// have applied it — by the shard's position in the topology
	// (Cluster.Shards) and the replica's address. A shard's preferred replicas are asked
	// first, cheapest first; hedges and failover go on to the others. It
	// never overrides health: a suspect or unready replica is not asked,
	// preferred or not. It is called once per replica per shard read, so
	// it must be cheap.
	Prefer func(shard int, replica string) bool
	// DeferReport leaves the fan-out uncounted by Gather: the caller may
	// read again (with a newer slot map, after a shard refused the first
	// read SLOT_MOVED) and counts the one answer it gives with
	// Cluster.Report, so each answer counts once however many reads it
	// took.
	DeferReport bool
}

// ShardDeadline is when every shard RPC of the request must be done.
func (r Request) ShardDeadline() time.Time { return r.Budget.ShardDeadline(r.Start) }

// hardStop is when Gather answers whatever the shards do: the whole
// deadline (never before the shard deadline, which is at least 1 ms).
func (r Request) hardStop() time.Time {
	return r.Start.Add(max(r.Budget.Deadline, r.Budget.Shard))
}

// Result is one shard's part of a fan-out.
type Result[T any] struct {
	Shard string
	// Value is the winning answer; meaningful only when Reason is "".
	Value T
	// Reason is why the shard is missing, "" if it answered.
	Reason Reason
	Err    error
	// Replica is the address that answered (or failed last).
	Replica    string
	Latency    time.Duration
	Hedged     bool
	FailedOver bool
}

// Summary is the scatter_gather block of an answer.
type Summary struct {
	ShardsTotal   int
	ShardsQueried int
	// Unavailable lists missing shards in cluster order; ShardErrors gives
	// each its reason.
	Unavailable   []string
	ShardErrors   map[string]Reason
	Coverage      float64
	Elapsed       time.Duration
	Deadline      time.Duration
	ShardDeadline time.Duration
}

// Degraded is true exactly when a shard is missing.
func (s Summary) Degraded() bool { return len(s.Unavailable) > 0 }

// Gather sends a read to every shard at once and returns each shard's
// result, in cluster order, with the fan-out's summary. It returns by the
// request's deadline whatever the replicas do: a shard that has not
// answered by then is missing with deadline_exceeded, and its attempts are
// cancelled and finish on their own.
func Gather[R Replica, T Answer](ctx context.Context, c *Cluster[R], req Request, call Call[R, T]) ([]Result[T], Summary) {
	ctx, span := c.start(ctx, SpanGather)
	defer span.End()
	ctx, cancel := context.WithDeadline(ctx, req.ShardDeadline())
	defer cancel()
	hardStop := time.NewTimer(time.Until(req.hardStop()))
	defer hardStop.Stop()

	type indexed struct {
		i int
		r Result[T]
	}
	done := make(chan indexed, len(c.shards)) // buffered: late attempts never block
	for i, s := range c.shards {
		go func() {
			var r Result[T]
			if err := c.safely("read", s.name, func() { r = newShardRead(c, s, call, req.Prefer).run(ctx) }); err != nil {
				r = Result[T]{Shard: s.name, Reason: ReasonInternal, Err: err}
			}
			done <- indexed{i, r}
		}()
	}
	results := make([]Result[T], len(c.shards))
	got := make([]bool, len(c.shards))
collect:
	for range c.shards {
		select {
		case x := <-done:
			results[x.i], got[x.i] = x.r, true
		case <-hardStop.C:
			break collect
		}
	}
	for i, s := range c.shards {
		if !got[i] {
			results[i] = Result[T]{Shard: s.name, Reason: ReasonDeadline, Err: context.DeadlineExceeded}
		}
	}
	sum := summarize(c, results, req)
	annotateGather(span, req, sum)
	annotateMissing(span, results)
	if !req.DeferReport && !anyAbsent(results) {
		c.Report(req, sum)
	}
	return results, sum
}

// Report counts a fan-out that was gathered with DeferReport: once per
// answer, degraded or not, as Gather counts its own.
func (c *Cluster[R]) Report(req Request, sum Summary) {
	_ = c.safely("reporter", "", func() { c.opts.Reporter.Fanout(req.Path, req.Collection, sum.Elapsed, sum.Coverage, sum.ShardErrors) })
}

// summarize builds the scatter_gather block. Coverage counts each missing
// shard with its last known document count in the request's collection,
// or the mean of the known ones in that collection if it was never seen
// there, and at least 1, so coverage is below 1 whenever a shard is
// missing.
func summarize[R Replica, T Answer](c *Cluster[R], results []Result[T], req Request) Summary {
	sum := Summary{
		ShardsTotal:   len(results),
		ShardErrors:   map[string]Reason{},
		Unavailable:   []string{},
		Deadline:      req.Budget.Deadline,
		ShardDeadline: req.Budget.Shard,
	}
	var answered, total float64
	var known []float64
	docs := make([]float64, len(results))
	seen := make([]bool, len(results))
	for i, r := range results {
		s := c.shards[i]
		s.mu.Lock()
		if r.Reason == "" {
			s.docs[req.Collection] = r.Value.GetDocCount()
		}
		d, ok := s.docs[req.Collection]
		s.mu.Unlock()
		docs[i], seen[i] = float64(d), ok
		if seen[i] {
			known = append(known, docs[i])
		}
	}
	mean := 0.0
	for _, k := range known {
		mean += k
	}
	if len(known) > 0 {
		mean /= float64(len(known))
	}
	for i, r := range results {
		if r.Reason == "" {
			sum.ShardsQueried++
			answered += docs[i]
			total += docs[i]
			continue
		}
		sum.Unavailable = append(sum.Unavailable, r.Shard)
		sum.ShardErrors[r.Shard] = r.Reason
		d := mean
		if seen[i] {
			d = docs[i]
		}
		total += max(d, 1)
	}
	sum.Coverage = 1
	if total > 0 && len(sum.Unavailable) > 0 {
		sum.Coverage = answered / total
	}
	sum.Elapsed = time.Since(req.Start)
	return sum
}

// KeepCollections forgets the last known document counts of every
// collection not in names (dropped ones), so the bookkeeping is bounded
// by the catalog. A fan-out over a forgotten collection still in flight
// may note its count again; the next call forgets it.
func (c *Cluster[R]) KeepCollections(names []string) {
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	for _, s := range c.shards {
		s.mu.Lock()
		for n := range s.docs {
			if !keep[n] {
				delete(s.docs, n)
			}
		}
		s.mu.Unlock()
	}
}

// anyAbsent reports whether a shard is missing because what the fan-out
// asked for is not there: every replica asked refused with an error whose
// Absent method says so (a collection the shard does not hold). Such a
// fan-out is no answer — the caller answers not found or unavailable —
// so it is not counted as a fan-out, degraded or not.
func anyAbsent[T any](results []Result[T]) bool {
	for _, r := range results {
		var a interface{ Absent() bool }
		if r.Reason != "" && errors.As(r.Err, &a) && a.Absent() {
			return true
		}
	}
	return false
}
