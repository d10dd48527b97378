package fanout

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// kind is what an attempt's error means for the engine.
type kind int

const (
	kindOK kind = iota
	// kindConnectivity: Unavailable or DeadlineExceeded. Fail over; may
	// count against the replica.
	kindConnectivity
	// kindCanceled: the client left or a hedge lost. Nobody's failure.
	kindCanceled
	// kindNotServing: the replica is loading. Skip it, count nothing.
	kindNotServing
	// kindOverloaded: RESOURCE_EXHAUSTED, the replica refused the work
	// before starting it. Fail over within the budget, count nothing, and
	// hedge to it no more for a while.
	kindOverloaded
	// kindAnswer: any other code is the shard's answer (Internal,
	// InvalidArgument, NotFound, …): no failover, no health change.
	kindAnswer
)

// code is the gRPC code of err, mapping bare context errors the way gRPC
// does.
func code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded
	}
	if errors.Is(err, context.Canceled) {
		return codes.Canceled
	}
	return codes.Unknown
}

func classify(err error) kind {
	if err == nil {
		return kindOK
	}
	var ns interface{ NotServing() bool }
	if errors.As(err, &ns) && ns.NotServing() {
		return kindNotServing
	}
	switch code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return kindConnectivity
	case codes.Canceled:
		return kindCanceled
	case codes.ResourceExhausted:
		return kindOverloaded
	}
	return kindAnswer
}

// neverSent reports whether a failed write provably never reached the
// replica (the shard client marks such errors), so it may be retried.
func neverSent(err error) bool {
	var ns interface{ NeverSent() bool }
	return errors.As(err, &ns) && ns.NeverSent()
}

// outcome is the label a shard RPC is recorded under: "ok" or the code's
// name in snake case.
func outcome(err error) string {
	switch c := code(err); c {
	case codes.OK:
		return "ok"
	case codes.DeadlineExceeded:
		return "deadline_exceeded"
	case codes.Unavailable:
		return "unavailable"
	case codes.Canceled:
		return "canceled"
	case codes.NotFound:
		return "not_found"
	case codes.InvalidArgument:
		return "invalid_argument"
	case codes.FailedPrecondition:
		return "failed_precondition"
	case codes.ResourceExhausted:
		return "resource_exhausted"
	default:
		return "internal"
	}
}
