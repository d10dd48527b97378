package budget

import (
	"errors"
	"fmt"
	"time"
)

// The contract's numbers (DESIGN.md, "Deadline budget").
const (
	// DefaultPlaintext is the default deadline with a plaintext shard hop.
	DefaultPlaintext = 50 * time.Millisecond
	// DefaultTLS is the default once inter-node TLS is configured: a cold
	// TLS hop plus a remote 1536-D search measured ~50 ms.
	DefaultTLS = 250 * time.Millisecond
	// DefaultMax is the largest deadline a query may ask for, unless the
	// router is started with another --max-deadline-ms.
	DefaultMax = 10 * time.Second
	// NetworkOverhead is kept back from the deadline for the hop back to the
	// router and the merge.
	NetworkOverhead = 5 * time.Millisecond
	// MinShard is the smallest per-shard budget.
	MinShard = time.Millisecond
)

// ErrInvalid is wrapped by every error Resolve returns: the caller sent a
// deadline that is not an integer number of milliseconds ≥ 1.
var ErrInvalid = errors.New("invalid deadline_ms")

// Config is what the router knows about itself.
type Config struct {
	// TLS is true when the router talks to shards over TLS (--tls-ca given).
	TLS bool
	// Max caps any deadline; zero means DefaultMax.
	Max time.Duration
	// Fallback, when positive, is the deadline of a query that names none
	// (--default-deadline-ms), in place of DefaultPlaintext or DefaultTLS:
	// for shards that scan more rows than those budgets cover, so that
	// clients need not all add ?deadline_ms=. Max caps it too.
	Fallback time.Duration
}

// Budget is the time one fan-out may take.
type Budget struct {
	// Deadline is the router's whole answer time.
	Deadline time.Duration
	// Shard is the deadline each shard RPC carries.
	Shard time.Duration
}

// ShardDeadline is the time by which every shard RPC of a query whose clock
// started at start must be done. It is the one place a shard deadline is
// computed: the fan-out, lookups and gets all take theirs from here.
func (b Budget) ShardDeadline(start time.Time) time.Time { return start.Add(b.Shard) }

// Default is the deadline a query gets when it names none.
func (c Config) Default() time.Duration {
	d := DefaultPlaintext
	switch {
	case c.Fallback > 0:
		d = c.Fallback
	case c.TLS:
		d = DefaultTLS
	}
	return min(d, c.max())
}

func (c Config) max() time.Duration {
	if c.Max <= 0 {
		return DefaultMax
	}
	return c.Max
}

// Resolve applies the rules to the raw ?deadline_ms= values of a request
// (nil or empty when absent).
func Resolve(c Config, raw []string) (Budget, error) {
	d := c.Default()
	switch len(raw) {
	case 0:
	case 1:
		ms, err := parseMillis(raw[0])
		if err != nil {
			return Budget{}, err
		}
		d = c.clamp(ms)
	default:
		return Budget{}, fmt.Errorf("%w: given %d times, want once", ErrInvalid, len(raw))
	}
	return ForDeadline(d), nil
}

// ForDeadline derives the per-shard budget from a deadline.
func ForDeadline(d time.Duration) Budget {
	return Budget{Deadline: d, Shard: max(d-NetworkOverhead, MinShard)}
}

// ForRemaining is the budget of a query whose caller set its own deadline
// and has left of it (a gRPC client's deadline, which travels with the
// call): that time, capped at the maximum like any deadline. Zero or less
// is a deadline already passed; the caller refuses the query.
func ForRemaining(c Config, left time.Duration) Budget {
	return ForDeadline(min(left, c.max()))
}

// clamp caps a positive millisecond count at the maximum. A count too large
// for a Duration is above any maximum.
func (c Config) clamp(ms uint64) time.Duration {
	m := c.max()
	if ms > uint64(m/time.Millisecond) {
		return m
	}
	return time.Duration(ms) * time.Millisecond
}

// parseMillis accepts decimal digits only (no sign, space or unit). An
// integer too large to represent saturates: it is still an integer ≥ 1, so it
// is clamped rather than refused.
func parseMillis(s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty, want an integer number of milliseconds ≥ 1", ErrInvalid)
	}
	var n uint64
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%w: %q is not an integer number of milliseconds ≥ 1", ErrInvalid, s)
		}
		if n > (1<<63)/10 {
			n = 1 << 63
			continue
		}
		n = n*10 + uint64(r-'0')
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: %q, want an integer number of milliseconds ≥ 1", ErrInvalid, s)
	}
	return n, nil
}

// ErrInvalidTimeout is wrapped by ResolveTimeout's errors about Qdrant's
// timeout parameter.
var ErrInvalidTimeout = errors.New("invalid timeout")

// ResolveTimeout applies the rules to a request that may carry trawl's
// ?deadline_ms= and Qdrant's ?timeout= (whole seconds ≥ 1, as Qdrant's
// clients send it). deadline_ms, when given, wins: it is the finer one and
// trawl's own. A timeout is a deadline of that many seconds, clamped to
// the maximum like any deadline — so a Qdrant client's generous timeout
// still gets trawl's bounded answer time.
func ResolveTimeout(c Config, deadlineMS, timeoutS []string) (Budget, error) {
	if len(deadlineMS) > 0 || len(timeoutS) == 0 {
		return Resolve(c, deadlineMS)
	}
	if len(timeoutS) > 1 {
		return Budget{}, fmt.Errorf("%w: given %d times, want once", ErrInvalidTimeout, len(timeoutS))
	}
	s, err := parseMillis(timeoutS[0])
	if err != nil {
		return Budget{}, fmt.Errorf("%w: %q is not an integer number of seconds ≥ 1", ErrInvalidTimeout, timeoutS[0])
	}
	ms := s * 1000
	if s > (1<<63)/1000 {
		ms = 1 << 63
	}
	return ForDeadline(c.clamp(ms)), nil
}
