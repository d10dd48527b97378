package admission

import (
	"container/list"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
)

// Reason says why a query was refused: the reason label of
// trawl_admission_rejected_total.
type Reason string

// The refusal reasons.
const (
	// ReasonLimit: the learned concurrency limit is reached.
	ReasonLimit Reason = "limit"
	// ReasonDeadline: queries are taking longer than this one's deadline
	// while the router is busy, so it would not finish in time.
	ReasonDeadline Reason = "deadline"
	// ReasonMaxInflight: the hard cap (--max-inflight) is reached.
	ReasonMaxInflight Reason = "max_inflight"
)

// Reasons lists every refusal reason, so metrics can create their series
// at zero.
func Reasons() []Reason { return []Reason{ReasonLimit, ReasonDeadline, ReasonMaxInflight} }

// Refusal is the error of a refused admission.
type Refusal struct {
	Reason Reason
	// Limit and Inflight are the limiter's state when it refused.
	Limit, Inflight int
}

func (r *Refusal) Error() string {
	switch r.Reason {
	case ReasonMaxInflight:
		return fmt.Sprintf("router is at --max-inflight=%d concurrent queries; retry shortly", r.Limit)
	case ReasonDeadline:
		return fmt.Sprintf("router is overloaded (%d queries in flight) and queries take longer than this one's deadline; retry shortly or with a longer deadline_ms", r.Inflight)
	}
	return fmt.Sprintf("router is overloaded: %d queries in flight, at its learned limit of %d; retry shortly (add shards or replicas if this persists)", r.Inflight, r.Limit)
}

// DefaultMaxInflight is --max-inflight's default: requests in flight
// before the router answers 429 whatever it has learned.
const DefaultMaxInflight = 256

// LimiterConfig tunes a Limiter; the zero value of each field is its
// default.
type LimiterConfig struct {
	// Max is the hard cap on requests in flight (--max-inflight);
	// DefaultMaxInflight if zero. The learned limit never exceeds it.
	Max int
	// Off leaves only Max enforced (--admission=false, for baselines).
	Off bool
	// Floor is the smallest the learned limit gets: 4 × GOMAXPROCS if zero,
	// capped by Max. Below it the router never refuses for the limit, so a
	// quiet router with a few slow queries is never starved.
	Floor int
	// Target is the share of a query's deadline an admitted query may use
	// before the limit shrinks (0.7 if zero, at most 1). Lower refuses
	// earlier and keeps more slack for the time before the query's clock
	// starts (reading and decoding its body), which the limiter counts too. Below it the limit
	// grows while it binds; above it, or on a missed deadline, it shrinks.
	Target float64
	// Backoff is the factor of one shrink (0.8 if zero); shrinks happen at
	// most once per Interval, so one slow burst costs one step, not one per
	// query in it. From the cap of 256 to a floor of 8 takes about 15
	// steps, under a second at the default Interval.
	Backoff float64
	// Interval is the shortest time between shrinks (50 ms if zero).
	Interval time.Duration
	// Pressure is how long after the last query that used more than Target
	// of its deadline the learned limit is enforced (1 s if zero). Outside
	// it only Max is: while admitted queries finish well inside their
	// deadlines nothing is refused, however many there are.
	Pressure time.Duration
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// Limiter is the router's adaptive concurrency limit, an AIMD controller
// on deadline slack. It starts at Max and refuses nothing but Max while
// admitted queries finish well inside their deadlines. Pressure is a query
// that used more than Target of its deadline (or missed it), or the oldest
// query in flight passing that mark — felt as a spike starts, before its
// first answers come back late. At the onset of pressure the limit drops to
// what is in flight, then by Backoff at most once per Interval while it
// lasts; every query that finishes in time while the limit binds raises it,
// by 1/limit under pressure (about one per round of queries) and by one
// after (doubling per round, as TCP's slow start). The limit never falls
// below Floor.
//
// Its signal is the deadline, not a latency trend against a baseline (as
// Netflix's gradient limiters and failsafe-go's adaptive limiter use):
// trawl queries each carry a deadline, so a latency that rises but stays
// well inside it costs nobody anything and must refuse nothing, and a
// batch is charged one unit per query, which those limiters' one-permit
// acquisitions do not express.
type Limiter struct {
	cfg LimiterConfig

	mu         sync.Mutex
	limit      float64
	inflight   int
	latency    time.Duration // EWMA of admitted queries' elapsed time
	lastShrink time.Time
	lastRefuse time.Time
	lastSlow   time.Time // when a query last used more than Target of its deadline
	// saturations counts the times the limiter came near its limit (an
	// admission at 80 % of it, or a refusal for it): a query during whose
	// life that happened found the limit binding.
	saturations uint64
	// admitted holds the permits in flight, oldest first: the oldest one
	// still running past Target of its deadline is pressure too, felt as
	// soon as a spike starts rather than once its first answers come back.
	admitted list.List
}

// NewLimiter returns a limiter, not under pressure, its limit at Max.
func NewLimiter(cfg LimiterConfig) *Limiter {
	if cfg.Max <= 0 {
		cfg.Max = DefaultMaxInflight
	}
	if cfg.Floor <= 0 {
		cfg.Floor = 4 * runtime.GOMAXPROCS(0)
	}
	cfg.Floor = min(cfg.Floor, cfg.Max)
	if cfg.Target <= 0 || cfg.Target > 1 {
		cfg.Target = 0.7
	}
	if cfg.Backoff <= 0 || cfg.Backoff >= 1 {
		cfg.Backoff = 0.8
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 50 * time.Millisecond
	}
	if cfg.Pressure <= 0 {
		cfg.Pressure = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{cfg: cfg, limit: float64(cfg.Max)}
}

// Limit is the current learned limit.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// Refusing reports whether the limiter refused a query within the last
// second: hedging pauses meanwhile, since a hedge is extra load exactly
// when there is too much.
func (l *Limiter) Refusing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lastRefuse.IsZero() && l.cfg.Now().Sub(l.lastRefuse) < time.Second
}

// Check is the admission test on a request's line and headers, before its
// body is read: it refuses when the limiter is full now, and reserves
// nothing (a client still sending its body holds no slot).
func (l *Limiter) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refuse(1, 0)
}

// Acquire admits weight queries (a batch's count) whose deadline is
// deadline, or refuses them. The caller must call Done on the permit.
func (l *Limiter) Acquire(weight int, deadline time.Duration) (*Permit, error) {
	weight = max(weight, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refuse(weight, deadline); err != nil {
		return nil, err
	}
	l.inflight += weight
	sat := l.saturations
	if float64(l.inflight) >= 0.8*l.limit {
		l.saturations++
	}
	p := &Permit{l: l, weight: weight, deadline: deadline, saturations: sat, start: l.cfg.Now()}
	p.elem = l.admitted.PushBack(p)
	return p, nil
}

// pressured reports, with l.mu held, whether a query used more than Target
// of its deadline recently.
func (l *Limiter) pressured(now time.Time) bool {
	return !l.lastSlow.IsZero() && now.Sub(l.lastSlow) < l.cfg.Pressure
}

// feelOldest puts the limiter under pressure, with l.mu held, when the
// oldest query in flight has run longer than Target of its deadline. At the
// onset of pressure the limit first drops to what is in flight: more than
// that is already too much.
func (l *Limiter) feelOldest(now time.Time) {
	e := l.admitted.Front()
	if e == nil {
		return
	}
	p := e.Value.(*Permit)
	if p.deadline == 0 || float64(now.Sub(p.start)) <= l.cfg.Target*float64(p.deadline) {
		return
	}
	if !l.pressured(now) {
		l.limit = math.Max(float64(l.cfg.Floor), math.Min(l.limit, float64(l.inflight)))
	}
	l.lastSlow = now
	l.shrink(now)
}

// shrink lowers the limit by Backoff, at most once per Interval.
func (l *Limiter) shrink(now time.Time) {
	if now.Sub(l.lastShrink) >= l.cfg.Interval {
		l.limit = math.Max(float64(l.cfg.Floor), l.limit*l.cfg.Backoff)
		l.lastShrink = now
	}
}

// refuse decides with l.mu held; deadline 0 skips the deadline test.
func (l *Limiter) refuse(weight int, deadline time.Duration) error {
	now := l.cfg.Now()
	l.feelOldest(now)
	pressured := l.pressured(now)
	var r *Refusal
	switch {
	case l.inflight+weight > l.cfg.Max && l.inflight > 0:
		r = &Refusal{Reason: ReasonMaxInflight, Limit: l.cfg.Max, Inflight: l.inflight}
	case l.cfg.Off:
		return nil
	case l.inflight+weight > int(l.limit) && l.inflight > 0:
		l.saturations++
		r = &Refusal{Reason: ReasonLimit, Limit: int(l.limit), Inflight: l.inflight}
	case pressured && deadline > 0 && l.inflight >= l.cfg.Floor && l.latency > deadline:
		r = &Refusal{Reason: ReasonDeadline, Limit: int(l.limit), Inflight: l.inflight}
	default:
		return nil
	}
	l.lastRefuse = now
	return r
}

// Permit is an admission; Done releases it.
type Permit struct {
	l           *Limiter
	weight      int
	deadline    time.Duration
	saturations uint64 // the limiter's count when it was admitted
	start       time.Time
	elem        *list.Element
	once        sync.Once
}

// Done releases the permit and teaches the limiter: elapsed is how long the
// admitted work took, late whether it missed its deadline (an answer
// degraded by a shard's deadline counts as late).
func (p *Permit) Done(elapsed time.Duration, late bool) {
	p.once.Do(func() { p.l.done(p, elapsed, late) })
}

func (l *Limiter) done(p *Permit, elapsed time.Duration, late bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight -= p.weight
	l.admitted.Remove(p.elem)
	if l.latency == 0 {
		l.latency = elapsed
	} else {
		l.latency += (elapsed - l.latency) / 8
	}
	now := l.cfg.Now()
	if late || (p.deadline > 0 && float64(elapsed) > l.cfg.Target*float64(p.deadline)) {
		if !l.pressured(now) {
			l.limit = math.Max(float64(l.cfg.Floor), math.Min(l.limit, float64(l.inflight+p.weight)))
		}
		l.lastSlow = now
		l.shrink(now)
		return
	}
	if l.saturations == p.saturations {
		return // the limit never bound while it ran: nothing to learn
	}
	if l.pressured(now) {
		l.limit = math.Min(float64(l.cfg.Max), l.limit+float64(p.weight)/l.limit)
		return
	}
	// No query has been slow lately: grow as fast as answers come back
	// (doubling per round of queries, as TCP's slow start), so a burst of
	// fast queries is refused only while the limit catches up.
	l.limit = math.Min(float64(l.cfg.Max), l.limit+float64(p.weight))
}
