package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/shard/client"
)

// idleCheck sends one scan to every replica, directly over gRPC, with the
// budget the router would give it, while nothing else is asked of the
// cluster, and returns the replicas that refused it as overloaded: a
// shard's scan admission that refuses with nothing ahead of it has an
// estimate it cannot recover from without a longer deadline.
func (e *env) idleCheck(ctx context.Context, c *cluster.Cluster) ([]string, error) {
	latched, err := e.probe(ctx, c, false)
	return names(latched), err
}

// recover finds the latched replicas (as idleCheck) and brings their scan
// estimate back down with scans under a 30 s deadline, which admission
// lets through: a workaround, so that one family's overload does not
// decide the next family's figures. It returns what it found latched.
func (e *env) recover(ctx context.Context, c *cluster.Cluster) ([]string, error) {
	latched, err := e.probe(ctx, c, true)
	return names(latched), err
}

type latchedReplica struct {
	name, msg string
}

func names(ls []latchedReplica) []string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%s (%s)", l.name, l.msg))
	}
	return out
}

// recoveryScans is enough for the scan queue's EWMA (weight 1/8 per scan)
// to fall from seconds to the scan's real duration.
const recoveryScans = 40

func (e *env) probe(ctx context.Context, c *cluster.Cluster, fix bool) ([]latchedReplica, error) {
	budget := time.Duration(e.deadlineMS-5) * time.Millisecond
	vec := []client.Query{{Vector: e.queries.Vectors[0], K: 10}}
	var refused []latchedReplica
	for _, reps := range c.Shards {
		for _, r := range reps {
			cn, err := client.Dial(r.Proxy.Addr(), client.DialConfig{})
			if err != nil {
				return nil, err
			}
			qctx, cancel := context.WithTimeout(ctx, budget)
			cn.WaitSettled(qctx)
			_, err = cn.Search(qctx, vec, 0)
			cancel()
			if status.Code(err) == codes.ResourceExhausted {
				msg := status.Convert(err).Message()
				if i := strings.Index(msg, ": "); i >= 0 {
					msg = msg[i+2:]
				}
				refused = append(refused, latchedReplica{r.Name, msg})
				if fix {
					for range recoveryScans {
						lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
						_, _ = cn.Search(lctx, vec, 0)
						cancel()
					}
				}
			}
			cn.Close()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return refused, nil
}
