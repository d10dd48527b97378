package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
	"github.com/trawl-search/trawl/bench/internal/promtext"
)

// runRebuild is `trawlbench rebuild`: a 3 × 3 cluster of router shard
// processes and one router serve, searched open loop at the default
// deadline. Each round, for each --recovery-cpu share compared (every
// replica restarted with it), it measures a healthy window, then wipes one
// follower of every shard (SIGKILL, its data directory removed, started
// again) and measures until all three serve again. It prints, per round
// and share, the healthy p99, the rebuild window's p99 and their ratio,
// the degraded shares, how long the rebuild took and the recovery CPU the
// shards charged to their throttles; then the medians over rounds.
func runRebuild(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rebuild", flag.ExitOnError)
	rows := fs.Int("rows", 30_000, "vectors loaded before the run (1536-D)")
	rate := fs.Float64("rate", 40, "queries per second offered, open loop")
	deadline := fs.Int("deadline-ms", 50, "?deadline_ms of every search (50: the default)")
	healthy := fs.Duration("healthy", 10*time.Second, "the healthy window of each round and share")
	rounds := fs.Int("rounds", 3, "rounds; the shares' order rotates each round")
	sharesFlag := fs.String("shares", "0.25,1", "--recovery-cpu values compared (1: not throttled)")
	root := fs.String("repo", "..", "the trawl repository (cmd/router is built from it)")
	keep := fs.Bool("keep", false, "keep the work directory (logs, data) after the run")
	_ = fs.Parse(args)
	var shares []string
	for _, s := range strings.Split(*sharesFlag, ",") {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return fmt.Errorf("-shares %q: %w", s, err)
		}
		shares = append(shares, s)
	}
	rg, closeRig, err := newRig(ctx, *root, "rebuild", *keep, *rows)
	if err != nil {
		return err
	}
	defer closeRig()
	work, bin, npy, q, loadBefore := rg.work, rg.bin, rg.npy, rg.queries, rg.loadBefore
	c, err := cluster.Start(ctx, cluster.Config{Bin: bin, Dir: work, Shards: 3, Replicas: 3, Dim: 1536,
		ShardArgs: []string{"--recovery-cpu", shares[0]}})
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.StartRouter(ctx, "router")
	if err != nil {
		return err
	}
	if _, err := c.Load(ctx, r, npy); err != nil {
		return err
	}
	t := loadgen.Target{Base: r.Base, DeadlineMS: *deadline, Timeout: 10 * time.Second}
	current := shares[0]
	var results []rebuildRun
	for round := range *rounds {
		for i := range shares {
			share := shares[(round+i)%len(shares)]
			if share != current {
				if err := restartWithShare(ctx, c, share); err != nil {
					return err
				}
				current = share
			}
			if _, err := loadgen.Closed(ctx, t, q, 2, time.Second); err != nil { // warm
				return err
			}
			run, err := measureRebuild(ctx, c, t, q, *rate, *healthy)
			if err != nil {
				return err
			}
			run.round, run.share = round+1, share
			log.Printf("round %d, --recovery-cpu %s: %s", run.round, share, run)
			results = append(results, run)
		}
	}
	fmt.Printf("`trawlbench rebuild %s`: 3 shards × 3 replicas of `router shard` (one process each) and one `router serve`, "+
		"%d × 1536 loaded; %.0f queries/s open loop at deadline_ms=%d; per round and --recovery-cpu share (every replica "+
		"restarted with it), a %s healthy window, then one follower of every shard SIGKILLed, its data directory removed "+
		"and started again, measured until all three serve again. Load average %s before, %s after (the machine is shared).\n\n",
		strings.Join(args, " "), *rows, *rate, *deadline, *healthy, loadBefore, machine.LoadAvg())
	fmt.Println("| round | --recovery-cpu | healthy p99 | rebuild p99 | ÷ healthy | degraded healthy | degraded rebuild | rebuild took | charged recovery CPU (waited) | process CPU: rebuilt, leaders | missing shards by reason |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, x := range results {
		fmt.Printf("| %d | %s | %s | %s | %.2f | %.2f %% | %.2f %% | %.1f s | %.2f s (%.2f s) | %.2f s, %.2f s | %v |\n", x.round, x.share,
			ms(x.healthy.Latency.P99), ms(x.rebuild.Latency.P99), x.ratio(),
			100*x.healthy.Share(x.healthy.Degraded), 100*x.rebuild.Share(x.rebuild.Degraded), x.took.Seconds(), x.cpu, x.waited,
			x.procVictims, x.procLeaders, x.reasons)
	}
	fmt.Println()
	fmt.Println("| --recovery-cpu | median rebuild p99 ÷ healthy | median rebuild p99 | median healthy p99 | median degraded rebuild | median rebuild took |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, share := range shares {
		var ratio, rp99, hp99, deg, took []float64
		for _, x := range results {
			if x.share != share {
				continue
			}
			ratio = append(ratio, x.ratio())
			rp99 = append(rp99, float64(x.rebuild.Latency.P99.Microseconds())/1000)
			hp99 = append(hp99, float64(x.healthy.Latency.P99.Microseconds())/1000)
			deg = append(deg, 100*x.rebuild.Share(x.rebuild.Degraded))
			took = append(took, x.took.Seconds())
		}
		fmt.Printf("| %s | %.2f | %.1f ms | %.1f ms | %.2f %% | %.1f s |\n", share, median(ratio), median(rp99), median(hp99), median(deg), median(took))
	}
	return nil
}

// rebuildRun is one round's figures for one share.
type rebuildRun struct {
	round            int
	share            string
	healthy, rebuild loadgen.Summary
	took             time.Duration
	cpu, waited      float64 // recovery seconds the shards charged, and waited
	// procVictims is the rebuilt replicas' process CPU (new processes:
	// all of it rebuilding), procLeaders the leaders' over the window.
	procVictims, procLeaders float64
	// reasons are the router's trawl_scatter_shard_unavailable_total
	// over the rebuild window, by reason.
	reasons map[string]float64
}

func (x rebuildRun) ratio() float64 {
	return float64(x.rebuild.Latency.P99) / float64(max(x.healthy.Latency.P99, 1))
}

func (x rebuildRun) String() string {
	return fmt.Sprintf("healthy p99 %s, rebuild p99 %s (%.2f×), degraded %.2f %% / %.2f %%, rebuilt in %.1f s, recovery CPU %.2f s, throttled %.2f s, "+
		"process CPU rebuilt %.2f s, leaders %.2f s, missing shards by reason %v",
		ms(x.healthy.Latency.P99), ms(x.rebuild.Latency.P99), x.ratio(),
		100*x.healthy.Share(x.healthy.Degraded), 100*x.rebuild.Share(x.rebuild.Degraded), x.took.Seconds(), x.cpu, x.waited,
		x.procVictims, x.procLeaders, x.reasons)
}

// restartWithShare SIGKILLs every replica and starts it again on its data
// with --recovery-cpu share, and waits until every one serves.
func restartWithShare(ctx context.Context, c *cluster.Cluster, share string) error {
	for _, reps := range c.Shards {
		for _, rep := range reps {
			rep.Kill()
			i := slices.Index(rep.Args, "--recovery-cpu")
			rep.Args[i+1] = share
		}
	}
	for _, reps := range c.Shards {
		for _, rep := range reps {
			if err := rep.Start(); err != nil {
				return err
			}
		}
	}
	for _, reps := range c.Shards {
		for _, rep := range reps {
			if err := cluster.WaitReady(ctx, &rep.Proc, "http://"+rep.HTTP+"/readyz", 120*time.Second); err != nil {
				return err
			}
		}
	}
	// The router's reconnect backoff is capped at about a second.
	return sleep(ctx, 3*time.Second)
}

// measureRebuild measures a healthy window, then the rebuild of one
// wiped follower of every shard, in back-to-back one-second open-loop
// windows pooled, until all three serve again and a second more.
func measureRebuild(ctx context.Context, c *cluster.Cluster, t loadgen.Target, q *loadgen.Queries, rate float64, healthy time.Duration) (rebuildRun, error) {
	var run rebuildRun
	h, err := loadgen.Open(ctx, t, q, rate, healthy)
	if err != nil {
		return run, err
	}
	run.healthy = h
	hc := &http.Client{Timeout: 5 * time.Second}
	var victims, leaders []*cluster.Replica
	for _, reps := range c.Shards {
		var leader, follower *cluster.Replica
		for _, rep := range reps {
			ls, err := promtext.ScrapeSamples(ctx, hc, "http://"+rep.HTTP+"/metrics", "trawl_shard_raft_leader")
			if err != nil {
				return run, err
			}
			if len(ls) > 0 && ls[0].Value == 1 {
				leader = rep
			} else {
				follower = rep
			}
		}
		if leader == nil || follower == nil {
			return run, fmt.Errorf("shard %d: no leader or no follower", reps[0].Shard)
		}
		victims, leaders = append(victims, follower), append(leaders, leader)
	}
	before, err := recoverySeconds(ctx, hc, leaders)
	if err != nil {
		return run, err
	}
	leadersBefore, err := processCPU(ctx, hc, leaders)
	if err != nil {
		return run, err
	}
	reasonsBefore, err := unavailable(ctx, hc, t.Base)
	if err != nil {
		return run, err
	}
	start := time.Now()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		done   bool
		werr   error
		doneAt time.Time
	)
	wg.Go(func() {
		var errs []error
		for _, v := range victims {
			v.Kill()
			if err := os.RemoveAll(v.Dir); err != nil {
				errs = append(errs, err)
			}
			if err := v.Start(); err != nil {
				errs = append(errs, err)
			}
		}
		for _, v := range victims {
			errs = append(errs, cluster.WaitReady(ctx, &v.Proc, "http://"+v.HTTP+"/readyz", 5*time.Minute))
		}
		mu.Lock()
		done, werr, doneAt = true, errors.Join(errs...), time.Now()
		mu.Unlock()
	})
	var windows []loadgen.Summary
	for {
		mu.Lock()
		finished, at := done, doneAt
		mu.Unlock()
		if finished && time.Since(at) >= time.Second {
			break
		}
		s, err := loadgen.Open(ctx, t, q, rate, time.Second)
		if err != nil {
			wg.Wait()
			return run, err
		}
		windows = append(windows, s)
	}
	wg.Wait()
	if werr != nil {
		return run, werr
	}
	run.took = doneAt.Sub(start)
	run.rebuild = loadgen.Pool(windows)
	after, err := recoverySeconds(ctx, hc, append(leaders, victims...))
	if err != nil {
		return run, err
	}
	// The victims' counters started at zero with their processes.
	run.cpu, run.waited = after[0]-before[0], after[1]-before[1]
	if run.procVictims, err = processCPU(ctx, hc, victims); err != nil {
		return run, err
	}
	leadersAfter, err := processCPU(ctx, hc, leaders)
	if err != nil {
		return run, err
	}
	run.procLeaders = leadersAfter - leadersBefore
	reasonsAfter, err := unavailable(ctx, hc, t.Base)
	if err != nil {
		return run, err
	}
	run.reasons = map[string]float64{}
	for k, v := range reasonsAfter {
		if d := v - reasonsBefore[k]; d > 0 {
			run.reasons[k] = d
		}
	}
	return run, nil
}

// processCPU sums process_cpu_seconds_total over reps.
func processCPU(ctx context.Context, hc *http.Client, reps []*cluster.Replica) (float64, error) {
	var sum float64
	for _, rep := range reps {
		ss, err := promtext.ScrapeSamples(ctx, hc, "http://"+rep.HTTP+"/metrics", "process_cpu_seconds_total")
		if err != nil {
			return 0, err
		}
		for _, s := range ss {
			sum += s.Value
		}
	}
	return sum, nil
}

// unavailable is the router's search fan-outs missing a shard, by reason.
func unavailable(ctx context.Context, hc *http.Client, base string) (map[string]float64, error) {
	ss, err := promtext.ScrapeSamples(ctx, hc, base+"/metrics", "trawl_scatter_shard_unavailable_total")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range ss {
		if s.Labels["path"] == "search" {
			out[s.Labels["reason"]] += s.Value
		}
	}
	return out, nil
}

// recoverySeconds sums the recovery CPU and throttled seconds over reps.
func recoverySeconds(ctx context.Context, hc *http.Client, reps []*cluster.Replica) ([2]float64, error) {
	var out [2]float64
	for _, rep := range reps {
		for i, name := range []string{"trawl_shard_recovery_cpu_seconds_total", "trawl_shard_recovery_throttled_seconds_total"} {
			ss, err := promtext.ScrapeSamples(ctx, hc, "http://"+rep.HTTP+"/metrics", name)
			if err != nil {
				return out, err
			}
			for _, s := range ss {
				out[i] += s.Value
			}
		}
	}
	return out, nil
}
