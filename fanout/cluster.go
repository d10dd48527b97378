package fanout

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/codes"
)

// Replica is what the engine needs of one replica's connection.
type Replica interface {
	// Addr names the replica in answers, metrics and logs.
	Addr() string
	// Ready reports whether a query sent now would go out on an
	// established connection. Only ready replicas are chosen.
	Ready() bool
}

// Reporter receives the engine's measurements; metrics.Router is one.
type Reporter interface {
	// Fanout reports one fan-out over collection (Request.Collection).
	Fanout(path Path, collection string, elapsed time.Duration, coverage float64, missing map[string]Reason)
	ShardRPC(shard, replica, outcome string, d time.Duration)
	Failover(shard string)
	Hedge(shard string, outcome HedgeOutcome)
	Suspect(shard, replica string, suspect bool)
}

// Shard is a named set of replicas holding the same documents.
type Shard[R Replica] struct {
	Name     string
	Replicas []R
}

// Options tune a Cluster; the zero value of each field is a sane default.
type Options struct {
	Reporter Reporter
	// Now is the clock for health state (cooldowns); time.Now if nil.
	Now    func() time.Time
	Logger *slog.Logger
	// HedgeBudget is the share of shard RPCs that may be hedges (0.05 if
	// zero, DESIGN.md's "≤ 5 % extra shard RPCs"; negative disables
	// hedging); HedgeBurst the hedges allowed at once beyond it (10 if
	// zero), so a replica that just went silent is covered until the
	// prober marks it suspect.
	HedgeBudget float64
	HedgeBurst  float64
	// HedgeMaxOutstanding: no hedge goes to a replica with this many of
	// this router's calls already outstanding on it (4 if zero): its queue
	// is long, so the hedge would wait behind it and add load where there
	// is too much.
	HedgeMaxOutstanding int
	// MinHedgeDelay is the smallest hedge delay (1 ms if zero), so a
	// replica answering in microseconds is not hedged on noise.
	MinHedgeDelay time.Duration
	// HedgePaused, when set, is asked before every hedge; while it says
	// true no hedge is sent (the router's admission is refusing queries: a
	// hedge is extra load exactly when there is too much).
	HedgePaused func() bool
	// NoFailover keeps a read on its first replica: a connectivity error
	// ends the shard's read (--failover=false, for baselines only).
	NoFailover bool
	// TracerProvider makes the spans of fan-outs, shard reads, attempts,
	// lookups and writes (DESIGN.md, Layout: tracing). Nil means
	// OpenTelemetry's noop provider: no spans, and no attributes built.
	TracerProvider trace.TracerProvider
}

// Hedging defaults (Options).
const (
	DefaultHedgeBudget         = 0.05
	DefaultHedgeMaxOutstanding = 4
)

// OverloadCooldown is how long a replica that refused a read with
// RESOURCE_EXHAUSTED is not hedged to.
const OverloadCooldown = time.Second

// Cluster is the engine's view of every shard.
type Cluster[R Replica] struct {
	shards []*shardState[R]
	opts   Options
	hedges *tokenBucket
	tracer trace.Tracer
	// traced is false for a noop provider: spans are then skipped before
	// the tracer is called at all (see start).
	traced bool
}

type shardState[R Replica] struct {
	name string
	// pos is the shard's position in the topology (Request.Prefer).
	pos int
	// reps is the shard's replica set: an immutable slice swapped whole by
	// SetReplicas, so a read works on the set it started with while the
	// router's discovery changes it.
	reps atomic.Pointer[[]*replicaState[R]]

	mu sync.Mutex
	// docs is the shard's last known document count of each collection:
	// what its last answer to a fan-out over that collection said.
	docs map[string]uint64
	// leader is the replica that last accepted a write, or that a refusal
	// named: writes go there first.
	leader string
}

// list is the shard's replica set now.
func (s *shardState[R]) list() []*replicaState[R] { return *s.reps.Load() }

type replicaState[R Replica] struct {
	shard string
	r     R
	health
}

// New builds the engine over shards, in the order given.
func New[R Replica](shards []Shard[R], opts Options) *Cluster[R] {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Reporter == nil {
		opts.Reporter = nopReporter{}
	}
	if opts.HedgeBudget == 0 {
		opts.HedgeBudget = DefaultHedgeBudget
	}
	if opts.HedgeBurst == 0 {
		opts.HedgeBurst = 10
	}
	if opts.HedgeMaxOutstanding <= 0 {
		opts.HedgeMaxOutstanding = DefaultHedgeMaxOutstanding
	}
	if opts.MinHedgeDelay == 0 {
		opts.MinHedgeDelay = time.Millisecond
	}
	if opts.TracerProvider == nil {
		opts.TracerProvider = noop.NewTracerProvider()
	}
	_, untraced := opts.TracerProvider.(noop.TracerProvider)
	c := &Cluster[R]{opts: opts, hedges: newTokenBucket(opts.HedgeBudget, opts.HedgeBurst),
		tracer: opts.TracerProvider.Tracer(tracerName), traced: !untraced}
	for i, s := range shards {
		ss := &shardState[R]{name: s.Name, pos: i, docs: map[string]uint64{}}
		reps := make([]*replicaState[R], 0, len(s.Replicas))
		for _, r := range s.Replicas {
			reps = append(reps, &replicaState[R]{shard: s.Name, r: r})
		}
		ss.reps.Store(&reps)
		c.shards = append(c.shards, ss)
	}
	return c
}

// Shards is the cluster's topology now: each shard's name and replicas,
// shards in the order it was built with. Shard names and order never
// change; a shard's replicas change with SetReplicas.
func (c *Cluster[R]) Shards() []Shard[R] {
	out := make([]Shard[R], len(c.shards))
	for i, s := range c.shards {
		reps := s.list()
		out[i] = Shard[R]{Name: s.name, Replicas: make([]R, len(reps))}
		for j, r := range reps {
			out[i].Replicas[j] = r.r
		}
	}
	return out
}

// SetReplicas makes replicas the set of shard's replicas (the router's
// discovery calls it with what the shard's group lists). A replica kept
// (same Addr) keeps its health and latency state; a new one starts as an
// untried replica; the ones dropped are returned for the caller to close
// once reads that picked them before the change are done — a read works
// on the set it started with, so nothing is closed under it here. An
// empty set is refused: a shard always has a replica to ask. Calls for
// one shard must not overlap.
func (c *Cluster[R]) SetReplicas(shard string, replicas []R) (removed []R, err error) {
	s := c.shard(shard)
	if s == nil {
		return nil, fmt.Errorf("unknown shard %q", shard)
	}
	if len(replicas) == 0 {
		return nil, fmt.Errorf("shard %s: a replica set cannot be empty", shard)
	}
	old := s.list()
	byAddr := make(map[string]*replicaState[R], len(old))
	for _, r := range old {
		byAddr[r.r.Addr()] = r
	}
	next := make([]*replicaState[R], 0, len(replicas))
	for _, r := range replicas {
		if cur, ok := byAddr[r.Addr()]; ok {
			next = append(next, cur)
			delete(byAddr, r.Addr())
			continue
		}
		next = append(next, &replicaState[R]{shard: shard, r: r})
	}
	s.reps.Store(&next)
	for _, r := range old {
		if _, gone := byAddr[r.r.Addr()]; gone {
			removed = append(removed, r.r)
		}
	}
	return removed, nil
}

func (c *Cluster[R]) shard(name string) *shardState[R] {
	for _, s := range c.shards {
		if s.name == name {
			return s
		}
	}
	return nil
}

// candidates returns the replicas a read may use, best first: READY and not
// suspect, ordered by expected latency (mean latency, inflated by calls
// already outstanding on the replica, so a replica that has gone quiet with
// work piling up on it drops back). Untried replicas sort first so every
// replica gets measured; one whose estimate has had no sample for
// remeasureAfter sorts first for one read, which measures it again.
// Replicas prefer names (Request.Prefer; nil: none)
// go before all others, in the same order among themselves: preference
// reorders the healthy candidates and never makes a suspect or unready
// replica one. If none qualifies it reports why: every replica suspect, or
// none ready.
func (c *Cluster[R]) candidates(s *shardState[R], prefer func(shard int, replica string) bool) (out []*replicaState[R], allSuspect bool) {
	now := c.opts.Now()
	type cand struct {
		r    *replicaState[R]
		pref bool
		cost time.Duration
		i    int
	}
	var cs []cand
	suspects := 0
	reps := s.list()
	for i, r := range reps {
		r.mu.Lock()
		sus := r.suspect(now)
		cost := r.mean * time.Duration(1+r.outstanding)
		if r.stale(now) {
			cost = -1
			// One read re-measures a stale estimate; the reads after it
			// keep the estimate until that one answers. Otherwise a replica
			// whose reads all lose to hedges (a cancelled read is no
			// sample) would stay stale, and first, for every read.
			r.sampled = now
		}
		r.mu.Unlock()
		if sus {
			suspects++
			continue
		}
		if !r.r.Ready() {
			continue
		}
		cs = append(cs, cand{r, prefer != nil && prefer(s.pos, r.r.Addr()), cost, i})
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		switch {
		case a.pref != b.pref:
			if a.pref {
				return -1
			}
			return 1
		case a.cost < b.cost:
			return -1
		case a.cost > b.cost:
			return 1
		}
		return a.i - b.i
	})
	for _, x := range cs {
		out = append(out, x.r)
	}
	return out, suspects == len(reps) && len(reps) > 0
}

// record applies an attempt's result to the replica's health and metrics.
func (c *Cluster[R]) record(r *replicaState[R], err error, took, budget time.Duration) {
	c.recordAs(r, err, took, budget, true)
}

// recordAs is record; latency false leaves the replica's latency
// estimate alone (Request.Control).
func (c *Cluster[R]) recordAs(r *replicaState[R], err error, took, budget time.Duration, latency bool) {
	c.opts.Reporter.ShardRPC(r.shard, r.r.Addr(), outcome(err), took)
	now := c.opts.Now()
	r.mu.Lock()
	var becameSuspect, wasSuspect bool
	switch classify(err) {
	case kindOK, kindAnswer:
		if latency {
			r.observeLatency(now, took)
		}
		r.lastAnswer = now
		wasSuspect = r.success()
	case kindConnectivity:
		if code(err) == codes.DeadlineExceeded && !r.counts(budget) {
			break
		}
		becameSuspect = r.failure(now, err.Error())
	case kindOverloaded:
		r.overloadedTill = now.Add(OverloadCooldown)
	case kindCanceled:
		// The attempt lost to a hedge or failover (the deadline case is
		// mapped to DeadlineExceeded before this). Its time is a lower bound
		// of the replica's latency, and when it exceeds the average the
		// average jumps to it at once (as a peak-EWMA balancer does):
		// otherwise a replica gone silent keeps its fast average, stays
		// first choice, and spends a hedge on every query until the prober
		// catches it.
		r.observePeak(took)
	}
	r.mu.Unlock()
	c.announce(r, becameSuspect, wasSuspect, err)
}

// announce reports a replica's change of suspicion to the gauge and the log.
func (c *Cluster[R]) announce(r *replicaState[R], becameSuspect, wasSuspect bool, err error) {
	if becameSuspect {
		c.opts.Reporter.Suspect(r.shard, r.r.Addr(), true)
		c.opts.Logger.Warn("replica suspect", "shard", r.shard, "replica", r.r.Addr(), "err", err)
	}
	if wasSuspect {
		c.opts.Reporter.Suspect(r.shard, r.r.Addr(), false)
		c.opts.Logger.Info("replica rejoined", "shard", r.shard, "replica", r.r.Addr())
	}
}

type nopReporter struct{}

func (nopReporter) Fanout(Path, string, time.Duration, float64, map[string]Reason) {}
func (nopReporter) ShardRPC(string, string, string, time.Duration)                 {}
func (nopReporter) Failover(string)                                                {}
func (nopReporter) Hedge(string, HedgeOutcome)                                     {}
func (nopReporter) Suspect(string, string, bool)                                   {}

// tokenBucket caps hedges at a share of shard RPCs: each RPC earns rate
// tokens, a hedge spends one, and at most burst tokens are kept.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
}

func newTokenBucket(rate, burst float64) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, tokens: burst}
}

func (b *tokenBucket) earn() {
	b.mu.Lock()
	b.tokens = min(b.tokens+b.rate, b.burst)
	b.mu.Unlock()
}

func (b *tokenBucket) spend() bool {
	if b.rate < 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
