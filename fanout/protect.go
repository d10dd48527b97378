package fanout

import (
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errPanic is what a shard's result carries when code the engine runs for
// it (a call function, a reporter) panicked: the shard is missing with
// reason internal, and the router lives on.
func errPanic(p any) error {
	return status.Errorf(codes.Internal, "router panic while reading the shard: %v", p)
}

// recovered turns a recovered panic into errPanic, logging it with its
// stack. It must be called from a deferred function, as
//
//	defer func() { if p := recover(); p != nil { err = c.recovered(p, ...) } }()
//
// since recover only works there.
func (c *Cluster[R]) recovered(p any, what, shard string) error {
	c.opts.Logger.Error("panic in fan-out", "in", what, "shard", shard,
		"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	return errPanic(p)
}

// safely runs f, turning a panic into an error (logged, with its stack).
func (c *Cluster[R]) safely(what, shard string, f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = c.recovered(p, what, shard)
		}
	}()
	f()
	return nil
}
