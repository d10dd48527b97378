package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// rawWriters and rawBatch are how the raw commit rate is driven: as
// `router load` drives a shard by default (4 requests in flight of 256).
const (
	rawWriters = 4
	rawBatch   = 256
)

// rawCommitRate is the raw commit rate of one raft group of three: a
// 1 × 3 cluster on its own takes rows 1536-D vectors straight from
// rawWriters writers to its leader's gRPC port, in batches of rawBatch,
// with no router; it returns vectors/s and the time it took. The cluster
// is closed before it returns.
func rawCommitRate(ctx context.Context, bin, dir string, rows int) (float64, time.Duration, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, 0, err
	}
	c, err := cluster.Start(ctx, cluster.Config{Bin: bin, Dir: dir, Shards: 1, Replicas: 3, Dim: 1536})
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	leader, err := findLeader(ctx, c.Shards[0], time.Minute)
	if err != nil {
		return 0, 0, err
	}
	defer leader.Close()
	// A pool of rows reused under new ids: generating them as they are
	// sent would take CPU from the group.
	rng := rand.New(rand.NewPCG(7, 7))
	pool := make([][]byte, 1024)
	for i := range pool {
		v := make([]float32, 1536)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		pool[i] = shard.EncodeVector(v)
	}
	p := shard.Placement{Fingerprint: "raw", Shard: cluster.ShardName(0)}
	var next atomic.Int64
	errs := make(chan error, rawWriters)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range rawWriters {
		wg.Go(func() {
			for {
				lo := int(next.Add(rawBatch)) - rawBatch
				if lo >= rows {
					return
				}
				vs := make([]*shardpb.Vector, 0, rawBatch)
				for i := lo; i < min(lo+rawBatch, rows); i++ {
					vs = append(vs, &shardpb.Vector{Id: fmt.Sprint("raw-", i), Vector: pool[i%len(pool)]})
				}
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				_, err := leader.Upsert(wctx, p, vs)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("raw commit rate: rows %d..: %w", lo, err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	return float64(rows) / took.Seconds(), took, nil
}

// findLeader dials the replica that reports itself leader.
func findLeader(ctx context.Context, reps []*cluster.Replica, wait time.Duration) (*client.Conn, error) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		for _, r := range reps {
			cn, err := client.Dial(r.GRPC, client.DialConfig{})
			if err != nil {
				return nil, err
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cn.Stats(sctx)
			cancel()
			if err == nil && st.GetRole() == "leader" {
				return cn, nil
			}
			cn.Close()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no leader in %s", wait)
}
