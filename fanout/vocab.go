package fanout

// Path names a fan-out path: the path label of the scatter metrics.
type Path string

// The fan-out paths.
const (
	PathSearch      Path = "search"
	PathSearchBatch Path = "search_batch"
	// PathScroll lists a page of documents in id order; PathCount counts
	// the documents a filter matches (Qdrant's points/scroll and count,
	// and delete by filter's listing).
	PathScroll Path = "scroll"
	PathCount  Path = "count"
)

// Paths lists every fan-out path, so metrics can create their series at
// zero.
func Paths() []Path { return []Path{PathSearch, PathSearchBatch, PathScroll, PathCount} }

// Reason says why a shard is missing from an answer: the shard_errors
// values of the API and the reason label of
// trawl_scatter_shard_unavailable_total (DESIGN.md names them).
type Reason string

// The missing-shard reasons.
const (
	// ReasonDeadline: no replica answered within the shard deadline.
	ReasonDeadline Reason = "deadline_exceeded"
	// ReasonUnavailable: no replica was ready, or every one asked failed to
	// connect.
	ReasonUnavailable Reason = "unavailable"
	// ReasonSuspect: every replica is in its cooldown; answered at once.
	ReasonSuspect Reason = "suspect"
	// ReasonOverloaded: every replica asked refused with RESOURCE_EXHAUSTED
	// (its scan could not have finished in time).
	ReasonOverloaded Reason = "overloaded"
	// ReasonNotServing: every replica asked was reachable but refused the
	// read as not serving (loading, catching up, or behind the read's
	// index): "catching up", not "unreachable".
	ReasonNotServing Reason = "not_serving"
	// ReasonInternal: the shard answered with an error (or the router's own
	// code for it panicked).
	ReasonInternal Reason = "internal"
)

// Reasons lists every missing-shard reason.
func Reasons() []Reason {
	return []Reason{ReasonDeadline, ReasonUnavailable, ReasonSuspect, ReasonOverloaded, ReasonNotServing, ReasonInternal}
}

// HedgeOutcome is how a hedged attempt ended: the outcome label of
// trawl_scatter_hedges_total.
type HedgeOutcome string

// The hedge outcomes.
const (
	// HedgeWon: the hedge answered first.
	HedgeWon HedgeOutcome = "won"
	// HedgeLost: another attempt answered first; the hedge was cancelled.
	HedgeLost HedgeOutcome = "lost"
	// HedgeFailed: the hedge itself failed.
	HedgeFailed HedgeOutcome = "failed"
)

// HedgeOutcomes lists every hedge outcome.
func HedgeOutcomes() []HedgeOutcome { return []HedgeOutcome{HedgeWon, HedgeLost, HedgeFailed} }

// StatusOK is a shard's status in an answer's shard detail when it
// answered; otherwise its status is its missing Reason.
const StatusOK = "ok"
