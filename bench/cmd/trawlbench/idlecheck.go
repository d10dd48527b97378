package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// idleCheck sends one scan to every replica, directly over gRPC, with the
// budget the router would give it, while nothing else is asked of the
// cluster, and returns the replicas that refused it as overloaded: a
// shard's scan admission that refuses with nothing ahead of it has an
// estimate it cannot recover from without a longer deadline.
func (e *env) idleCheck(ctx context.Context, c *cluster.Cluster) ([]string, error) {
	budget := time.Duration(e.deadlineMS-5) * time.Millisecond
	vec := loadgen.LittleEndian(e.queries.Vectors[0])
	var refused []string
	for _, reps := range c.Shards {
		for _, r := range reps {
			cn, err := shard.Dial(r.Proxy.Addr(), shard.DialConfig{})
			if err != nil {
				return nil, err
			}
			qctx, cancel := context.WithTimeout(ctx, budget)
			cn.WaitSettled(qctx)
			_, err = cn.Search(qctx, &shardpb.Query{Vector: vec, K: 10}, 0)
			cancel()
			cn.Close()
			if status.Code(err) == codes.ResourceExhausted {
				msg := status.Convert(err).Message()
				if i := strings.Index(msg, ": "); i >= 0 {
					msg = msg[i+2:]
				}
				refused = append(refused, fmt.Sprintf("%s (%s)", r.Name, msg))
			}
		}
	}
	return refused, nil
}
