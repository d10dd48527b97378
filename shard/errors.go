package shard

import (
	"errors"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reasons in the google.rpc.ErrorInfo detail of a shard's Unavailable
// answers, so a client can tell them from a connectivity failure.
const (
	// ReasonNotLeader: a write reached a replica that is not the leader
	// and was not accepted; metadata "leader" names the leader's address
	// when known (empty during an election). Retrying elsewhere is safe.
	ReasonNotLeader = "NOT_LEADER"
	// ReasonNotServing: a read reached a replica that is loading, catching
	// up, not hearing from a leader, or has not applied the min_index
	// asked for. Another replica may answer.
	ReasonNotServing = "NOT_SERVING"
	errorDomain      = "trawl.shard"
)

func withReason(msg, reason string, md map[string]string) error {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: md}); err == nil {
		st = d
	}
	return st.Err()
}

// NotServingStatus is a replica's refusal of a read it cannot serve now.
func NotServingStatus(msg string) error { return withReason(msg, ReasonNotServing, nil) }

// NotLeaderStatus is a follower's refusal of a write it did not accept.
func NotLeaderStatus(leader string) error {
	msg := "not the leader; the write was not accepted (no leader known: election in progress)"
	if leader != "" {
		msg = "not the leader; the write was not accepted; the leader is " + leader
	}
	return withReason(msg, ReasonNotLeader, map[string]string{"leader": leader})
}

// errorInfo returns the ErrorInfo detail of a gRPC error, if any: on
// Unavailable (NOT_LEADER, NOT_SERVING) and FailedPrecondition
// (COLLECTION_NOT_FOUND) answers.
func errorInfo(err error) (*errdetails.ErrorInfo, bool) {
	s, ok := status.FromError(err)
	if !ok || (s.Code() != codes.Unavailable && s.Code() != codes.FailedPrecondition) {
		return nil, false
	}
	for _, d := range s.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == errorDomain {
			return ei, true
		}
	}
	return nil, false
}

// NotLeaderError is what Conn.Upsert and Conn.Delete return when the
// replica was not the leader and did not accept the write. NeverSent lets
// package fanout retry it on another replica (the write provably was not
// applied); Leader names the leader to try first, empty when unknown.
type NotLeaderError struct {
	leader string
	err    error
}

func (e *NotLeaderError) Error() string   { return e.err.Error() }
func (e *NotLeaderError) Unwrap() error   { return e.err }
func (e *NotLeaderError) NeverSent() bool { return true }

// Leader is the leader's advertised address, empty during an election.
func (e *NotLeaderError) Leader() string { return e.leader }

// GRPCStatus keeps status.Code working through the wrapper.
func (e *NotLeaderError) GRPCStatus() *status.Status { return status.Convert(e.err) }

// FromStatus turns a shard's NOT_LEADER and NOT_SERVING answers into
// errors with NeverSent/Leader and NotServing methods.
func FromStatus(err error) error {
	ei, ok := errorInfo(err)
	if !ok {
		return err
	}
	switch ei.GetReason() {
	case ReasonNotLeader:
		return &NotLeaderError{leader: ei.GetMetadata()["leader"], err: err}
	case ReasonNotServing:
		return notServingError{err: err}
	case ReasonCollectionNotFound:
		uid, _ := strconv.ParseUint(ei.GetMetadata()["uid"], 10, 64)
		return &CollectionNotFoundError{Name: ei.GetMetadata()["collection"], HeldUID: uid, err: err}
	case ReasonSlotMoved:
		epoch, _ := strconv.ParseUint(ei.GetMetadata()["epoch"], 10, 64)
		return &SlotMovedError{Epoch: epoch, Retry: ei.GetMetadata()["retry"] == "true", err: err}
	}
	return err
}

// ReasonSlotMoved: the replica's slot map does not let it take a write,
// or answer a read, for a slot the request gives it (the reader's map is
// older or newer than the replica's, or the slot is fenced while it
// moves). The status is FailedPrecondition; nothing was applied.
const ReasonSlotMoved = "SLOT_MOVED"

// SlotMovedStatus is a replica's refusal of a request routed by another
// slot map than its own; epoch is the replica's map epoch, and retry says
// the slot is fenced while it moves (retry once the move flips the map).
func SlotMovedStatus(msg string, epoch uint64, retry bool) error {
	st := status.New(codes.FailedPrecondition, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonSlotMoved, Domain: errorDomain,
		Metadata: map[string]string{"epoch": strconv.FormatUint(epoch, 10), "retry": strconv.FormatBool(retry)}}); err == nil {
		st = d
	}
	return st.Err()
}

// SlotMovedError is a replica's SLOT_MOVED answer (FromStatus). Like
// CollectionNotFoundError its NotServing method makes package fanout ask
// another replica on a read (a follower may not have applied a map change
// its leader has), and a write refused so is never retried elsewhere by
// the engine: the coordinator re-reads the catalog and routes it again.
type SlotMovedError struct {
	// Epoch is the replica's slot map epoch; Retry is true when the slot
	// is fenced for a move.
	Epoch uint64
	Retry bool
	// read marks a read's refusal (AsRead): another replica of the group
	// may hold the map the read asks for.
	read bool
	err  error
}

// AsRead marks a SlotMovedError in err as a read's refusal, which package
// fanout treats as a replica not serving (it asks the next); a write's is
// a definite refusal. Other errors pass through.
func AsRead(err error) error {
	var sm *SlotMovedError
	if errors.As(err, &sm) {
		out := *sm
		out.read = true
		return &out
	}
	return err
}

func (e *SlotMovedError) Error() string              { return e.err.Error() }
func (e *SlotMovedError) Unwrap() error              { return e.err }
func (e *SlotMovedError) NotServing() bool           { return e.read }
func (e *SlotMovedError) GRPCStatus() *status.Status { return status.Convert(e.err) }

// ReasonCollectionNotFound: the replica holds no collection of the name
// and uid a request gave (not created here yet, dropped, or another
// incarnation). The status is FailedPrecondition.
const ReasonCollectionNotFound = "COLLECTION_NOT_FOUND"

// CollectionNotFoundStatus is a replica's refusal of a request for a
// collection it does not hold; heldUID is the uid of the incarnation of
// that name it does hold, 0 for none.
func CollectionNotFoundStatus(name string, heldUID uint64) error {
	st := status.Newf(codes.FailedPrecondition, "collection %q not found on this replica", name)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonCollectionNotFound, Domain: errorDomain,
		Metadata: map[string]string{"collection": name, "uid": strconv.FormatUint(heldUID, 10)}}); err == nil {
		st = d
	}
	return st.Err()
}

// CollectionNotFoundError is a replica's COLLECTION_NOT_FOUND answer
// (FromStatus). Its NotServing method makes package fanout skip the
// replica without counting a failure and ask the next: a follower that has
// not applied a create yet must not cost the shard its answer. When every
// replica refuses, the coordinator finds this error in the shard's result
// and answers 404 or 503 from the catalog, never a degraded answer. A
// write refused so is not retried elsewhere (the group decided it).
type CollectionNotFoundError struct {
	Name    string
	HeldUID uint64 // the incarnation the replica holds, 0 for none
	err     error
}

func (e *CollectionNotFoundError) Error() string  { return e.err.Error() }
func (e *CollectionNotFoundError) Unwrap() error  { return e.err }
func (*CollectionNotFoundError) NotServing() bool { return true }

// Absent tells package fanout that a shard refusing so did not answer a
// fan-out: the collection is not there, which the caller answers (404 or
// 503), so the fan-out is not counted.
func (*CollectionNotFoundError) Absent() bool    { return true }
func (*CollectionNotFoundError) NeverSent() bool { return true }

// GRPCStatus is FailedPrecondition, the code of the answer.
func (e *CollectionNotFoundError) GRPCStatus() *status.Status { return status.Convert(e.err) }

// LegacyCollection is the collection a data directory written before
// collections holds its rows under, and the name log entries without a
// collection act on.
const LegacyCollection = "trawl"

// ErrNotServing is returned by Probe when the replica answers NOT_SERVING
// (still loading, or shutting down). Its NotServing method lets package
// fanout recognise it without importing this package; reads refused with
// reason NOT_SERVING return an error with the same method.
var ErrNotServing error = notServingError{}

type notServingError struct{ err error }

func (e notServingError) Error() string {
	if e.err == nil {
		return "replica is not serving"
	}
	return e.err.Error()
}
func (e notServingError) Unwrap() error  { return e.err }
func (notServingError) NotServing() bool { return true }

// GRPCStatus is Unavailable, the code of the answer.
func (e notServingError) GRPCStatus() *status.Status {
	if e.err == nil {
		return status.New(codes.Unavailable, "replica is not serving")
	}
	return status.Convert(e.err)
}

// ErrNoReadyConn is what a write gets when the replica's channel is not
// READY: the write was not sent.
var ErrNoReadyConn error = status.Error(codes.Unavailable, "no ready connection to replica")

// NeverSentError marks an RPC that provably never left the router, so a
// write may be retried without risk of applying it twice (field report
// 001). Package fanout recognises it by its NeverSent method.
type NeverSentError struct{ Err error }

func (e NeverSentError) Error() string   { return e.Err.Error() + " (never sent)" }
func (e NeverSentError) Unwrap() error   { return e.Err }
func (e NeverSentError) NeverSent() bool { return true }

// GRPCStatus keeps status.Code working through the wrapper.
func (e NeverSentError) GRPCStatus() *status.Status { return status.Convert(e.Err) }

// MarkNeverSent wraps err when it provably never reached the replica:
// gRPC-go fails an RPC before sending it when the channel could not connect,
// and says so ("Error while dialing": connection refused, no route, name not
// resolved). A reset or GOAWAY on an established stream, or a deadline after
// sending, may have been delivered and stays as it is.
func MarkNeverSent(err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok || s.Code() != codes.Unavailable {
		return err
	}
	msg := s.Message()
	if strings.Contains(msg, "Error while dialing") || strings.Contains(msg, "produced zero addresses") {
		return NeverSentError{Err: err}
	}
	return err
}
