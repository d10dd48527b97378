package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawl-search/trawl/internal/faultproxy"
)

// Config is the shape of a cluster.
type Config struct {
	Bin      string // the router binary
	Dir      string // data directories and logs go under it
	Shards   int
	Replicas int // 1 (groups of one, no --peers) or more (raft groups)
	Dim      int
	// ShardArgs are extra `router shard` flags for every replica
	// (--index ivf, say).
	ShardArgs []string
	// ShardEnv is added to every replica's environment (GOMEMLIMIT, say,
	// as the Helm chart sets it).
	ShardEnv []string
	// Direct starts no fault proxies: routers reach the replicas at their
	// own ports, as in production. For families that inject no fault: a
	// proxy relays every byte through the harness's process, whose CPU
	// the measured processes' figures leave out.
	Direct bool
	// Ports gives every process of the cluster and its routers their
	// ports. Clusters started at the same time must share one; nil: the
	// cluster's own.
	Ports *Ports
}

// Replica is one `router shard` process and the fault proxy in front of
// its gRPC port.
type Replica struct {
	Proc
	Shard, Index int
	GRPC, HTTP   string
	Dir          string
	Proxy        *faultproxy.Proxy
}

// Cluster is Shards × Replicas replica processes.
type Cluster struct {
	cfg     Config
	Shards  [][]*Replica
	routers []*Router
}

// ShardName is the name of shard i in --shard flags.
func ShardName(i int) string { return "shard-" + strconv.Itoa(i) }

// Start launches every replica with its proxy and waits until all serve.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Ports == nil {
		cfg.Ports = &Ports{}
	}
	c := &Cluster{cfg: cfg}
	if err := c.start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	for s := range c.cfg.Shards {
		reps := make([]*Replica, c.cfg.Replicas)
		peers := make([]string, len(reps))
		for i := range reps {
			g, err := c.cfg.Ports.Free()
			if err != nil {
				return err
			}
			h, err := c.cfg.Ports.Free()
			if err != nil {
				return err
			}
			reps[i] = &Replica{Shard: s, Index: i, GRPC: g, HTTP: h,
				Dir: filepath.Join(c.cfg.Dir, fmt.Sprintf("%s-%d", ShardName(s), i))}
			peers[i] = g
		}
		c.Shards = append(c.Shards, reps)
		for _, r := range reps {
			args := []string{"shard", "--grpc-addr", r.GRPC, "--http-addr", r.HTTP, "--data-dir", r.Dir,
				"--dim", strconv.Itoa(c.cfg.Dim), "--metric", "cosine"}
			if len(reps) > 1 {
				// Raft talks replica to replica directly; only the
				// router's traffic goes through the proxies.
				args = append(args, "--peers", strings.Join(peers, ","), "--advertise-addr", r.GRPC)
			}
			args = append(args, c.cfg.ShardArgs...)
			r.Proc = Proc{Name: fmt.Sprintf("%s/%d", ShardName(s), r.Index), Bin: c.cfg.Bin, Args: args, Log: r.Dir + ".log", Env: c.cfg.ShardEnv}
			if err := r.Start(); err != nil {
				return err
			}
			if c.cfg.Direct {
				continue
			}
			// The proxy listens again on the same port after a stop:
			// keep it out of the ephemeral range too (see FreePort).
			pa, err := c.cfg.Ports.Free()
			if err != nil {
				return err
			}
			p, err := faultproxy.Start(pa, r.GRPC)
			if err != nil {
				return fmt.Errorf("proxy for %s: %w", r.Name, err)
			}
			r.Proxy = p
		}
	}
	for _, reps := range c.Shards {
		for _, r := range reps {
			if err := waitReady(ctx, &r.Proc, "http://"+r.HTTP+"/readyz", 60*time.Second); err != nil {
				return err
			}
		}
	}
	return nil
}

// ShardFlags are `router serve` --shard flags naming every replica by its
// proxy (by its own port when Direct).
func (c *Cluster) ShardFlags() []string {
	var out []string
	for s, reps := range c.Shards {
		addrs := make([]string, len(reps))
		for i, r := range reps {
			addrs[i] = r.GRPC
			if r.Proxy != nil {
				addrs[i] = r.Proxy.Addr()
			}
		}
		out = append(out, "--shard", ShardName(s)+"="+strings.Join(addrs, ","))
	}
	return out
}

// Restore puts every proxy back to forwarding.
func (c *Cluster) Restore() error {
	var es []error
	for _, reps := range c.Shards {
		for _, r := range reps {
			if r.Proxy != nil {
				es = append(es, r.Proxy.Restore())
			}
		}
	}
	return errs(es)
}

// EachShard applies f to one replica of every shard, replica idx[s] of
// shard s (what losing a zone does, when each shard's lost replica is
// the one named).
func (c *Cluster) EachShard(idx []int, f func(*Replica) error) error {
	var es []error
	for s, reps := range c.Shards {
		es = append(es, f(reps[idx[s]]))
	}
	return errs(es)
}

// EachReplica runs f on every replica of every shard.
func (c *Cluster) EachReplica(f func(*Replica) error) error {
	var es []error
	for _, reps := range c.Shards {
		for _, r := range reps {
			es = append(es, f(r))
		}
	}
	return errs(es)
}

// EachShardParallel is EachShard with f run for all shards at once (a
// restart that waits for catch-up, say).
func (c *Cluster) EachShardParallel(idx []int, f func(*Replica) error) error {
	es := make([]error, len(c.Shards))
	var wg sync.WaitGroup
	for s, reps := range c.Shards {
		wg.Go(func() { es[s] = f(reps[idx[s]]) })
	}
	wg.Wait()
	return errs(es)
}

// Close kills every router and replica and closes the proxies.
func (c *Cluster) Close() {
	for _, r := range c.routers {
		r.Kill()
	}
	for _, reps := range c.Shards {
		for _, r := range reps {
			r.Kill()
			if r.Proxy != nil {
				r.Proxy.Close()
			}
		}
	}
}

// Router is a `router serve` process.
type Router struct {
	Proc
	Base string
}

// Baseline are the flags that switch off every feature whose effect the
// benchmarks measure (DESIGN.md, Overload).
var Baseline = []string{"--hedge=false", "--failover=false", "--prewarm=false", "--admission=false"}

// StartRouter runs `router serve` over the cluster with extra flags and
// waits for /readyz.
func (c *Cluster) StartRouter(ctx context.Context, name string, extra ...string) (*Router, error) {
	extra = append([]string{"--ensure-collection", c.collectionSpec()}, extra...)
	r, err := startRouter(ctx, c.cfg.Ports, c.cfg.Bin, c.cfg.Dir, name, c.ShardFlags(), extra)
	if r != nil {
		c.routers = append(c.routers, r)
	}
	return r, err
}

// collectionSpec is the collection trawl every router ensures: the
// cluster's dimension, cosine, and the quantization and index ShardArgs
// give (the shards' legacy flags, which no longer decide it).
func (c *Cluster) collectionSpec() string {
	quant, index := "none", "flat"
	for i := 0; i+1 < len(c.cfg.ShardArgs); i++ {
		switch c.cfg.ShardArgs[i] {
		case "--quantization":
			quant = c.cfg.ShardArgs[i+1]
		case "--index":
			index = c.cfg.ShardArgs[i+1]
		}
	}
	return fmt.Sprintf("trawl=%d:cosine:%s:%s", c.cfg.Dim, quant, index)
}

// startRouter runs `router serve` with shard flags and extra flags, logging
// under dir, and waits for /readyz. The router is returned, to be killed,
// whenever it started.
func startRouter(ctx context.Context, ports *Ports, bin, dir, name string, shards, extra []string) (*Router, error) {
	addr, err := ports.Free()
	if err != nil {
		return nil, err
	}
	// --discover=false: the router reaches replicas through their fault
	// proxies, addresses their groups do not know; discovery would replace
	// them with the groups' own and bypass the faults.
	args := append(append([]string{"serve", "--http-addr", addr, "--qdrant-grpc-addr", "", "--discover=false"}, shards...), extra...)
	r := &Router{Base: "http://" + addr,
		Proc: Proc{Name: name, Bin: bin, Args: args, Log: filepath.Join(dir, name+".log")}}
	if err := r.Start(); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, &r.Proc, r.Base+"/readyz", 60*time.Second); err != nil {
		return r, err
	}
	return r, nil
}

// Restart starts a stopped router again with the same flags and waits
// for /readyz.
func (r *Router) Restart(ctx context.Context) error {
	if err := r.Start(); err != nil {
		return err
	}
	return waitReady(ctx, &r.Proc, r.Base+"/readyz", 60*time.Second)
}

// Restart starts a killed replica again on the same ports and data
// directory and waits until it serves (it has caught up with its group).
func (r *Replica) Restart(ctx context.Context) error {
	if err := r.Start(); err != nil {
		return err
	}
	return waitReady(ctx, &r.Proc, "http://"+r.HTTP+"/readyz", 120*time.Second)
}
