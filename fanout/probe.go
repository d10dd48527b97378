package fanout

import (
	"context"
	"sync"
	"time"
)

// Prober settings (DESIGN.md): with 3 failures to suspicion, a dead or
// powered-off replica is suspect within ~1.5–2 s even with no queries, and a
// replica reachable again rejoins on its first successful probe.
const (
	ProbeInterval = 500 * time.Millisecond
	ProbeTimeout  = 250 * time.Millisecond
)

// Probe checks one replica (grpc.health.v1 Check); nil means serving.
type Probe[R Replica] func(ctx context.Context, r R) error

// RunProber probes every replica every interval until ctx ends, feeding
// the same health state queries feed. It keeps touching the network for
// suspect replicas, so they rejoin as soon as they answer.
func (c *Cluster[R]) RunProber(ctx context.Context, interval, timeout time.Duration, probe Probe[R]) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.ProbeOnce(ctx, timeout, probe)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ProbeOnce probes every replica once, concurrently, and waits for all.
func (c *Cluster[R]) ProbeOnce(ctx context.Context, timeout time.Duration, probe Probe[R]) {
	var wg sync.WaitGroup
	for _, s := range c.shards {
		for _, r := range s.list() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				var err error
				if perr := c.safely("probe", r.shard, func() { err = probe(pctx, r.r) }); perr != nil {
					err = perr
				}
				if ctx.Err() != nil {
					return // shutting down: not the replica's fault
				}
				_ = c.safely("probe record", r.shard, func() { c.recordProbe(r, err, timeout) })
			}()
		}
	}
	wg.Wait()
}

// recordProbe applies a probe result. A probe failure is a connectivity
// failure whatever its code (the probe's whole job is reachability), except
// NOT_SERVING, which says the replica is alive but loading.
func (c *Cluster[R]) recordProbe(r *replicaState[R], err error, timeout time.Duration) {
	now := c.opts.Now()
	var becameSuspect, wasSuspect bool
	r.mu.Lock()
	switch classify(err) {
	case kindOK:
		wasSuspect = r.success()
	case kindNotServing, kindCanceled:
	default:
		becameSuspect = r.failure(now, "probe: "+err.Error())
	}
	r.mu.Unlock()
	c.announce(r, becameSuspect, wasSuspect, err)
}

// ReplicaStatus is one replica's health, for /cluster/status.
type ReplicaStatus struct {
	Addr                string
	Suspect             bool
	ConsecutiveFailures int
	LastError           string
	Latency             time.Duration
}

// ShardStatus is one shard's health.
type ShardStatus struct {
	Name string
	// Docs sums the shard's last known document count of every
	// collection a fan-out has read; DocsSeen is false before any.
	Docs     uint64
	DocsSeen bool
	Replicas []ReplicaStatus
}

// Status reports every shard's and replica's health.
func (c *Cluster[R]) Status() []ShardStatus {
	now := c.opts.Now()
	out := make([]ShardStatus, len(c.shards))
	for i, s := range c.shards {
		s.mu.Lock()
		out[i] = ShardStatus{Name: s.name, DocsSeen: len(s.docs) > 0}
		for _, d := range s.docs {
			out[i].Docs += d
		}
		s.mu.Unlock()
		for _, r := range s.list() {
			r.mu.Lock()
			out[i].Replicas = append(out[i].Replicas, ReplicaStatus{
				Addr: r.r.Addr(), Suspect: r.suspect(now), ConsecutiveFailures: r.consecutive,
				LastError: r.lastErr, Latency: r.mean,
			})
			r.mu.Unlock()
		}
	}
	return out
}
