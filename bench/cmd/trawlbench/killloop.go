package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
	"github.com/trawl-search/trawl/bench/internal/promtext"
)

// runKillLoop is `trawlbench killloop`: a 3 × 3 cluster of router shard
// processes and one router serve; closed-loop clients search at a short
// deadline while one replica of shard-0 is SIGKILLed, restarted on the
// same address after -down, killed again -every after its restart, and
// so on. It prints the share of answers missing shard-0 and the router's
// reasons for it (trawl_scatter_shard_unavailable_total).
func runKillLoop(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("killloop", flag.ExitOnError)
	rows := fs.Int("rows", 20_000, "vectors loaded before the run")
	clients := fs.Int("clients", 4, "closed-loop search clients")
	deadline := fs.Int("deadline-ms", 100, "?deadline_ms of every search")
	every := fs.Duration("every", 1500*time.Millisecond, "from a replica's restart to its next SIGKILL")
	down := fs.Duration("down", 3*time.Second, "from a SIGKILL to the restart")
	dur := fs.Duration("duration", 30*time.Second, "how long the clients search")
	replica := fs.Int("replica", 0, "which replica of shard-0 is killed")
	root := fs.String("repo", "..", "the trawl repository (cmd/router is built from it)")
	keep := fs.Bool("keep", false, "keep the work directory (logs, data) after the run")
	_ = fs.Parse(args)
	rg, closeRig, err := newRig(ctx, *root, "kill", *keep, *rows)
	if err != nil {
		return err
	}
	defer closeRig()
	work, bin, npy, q, loadBefore := rg.work, rg.bin, rg.npy, rg.queries, rg.loadBefore
	c, err := cluster.Start(ctx, cluster.Config{Bin: bin, Dir: work, Shards: 3, Replicas: 3, Dim: 1536})
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
	if _, err := loadgen.Closed(ctx, t, q, 2, time.Second); err != nil { // warm
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	before, err := promtext.ScrapeSamples(ctx, hc, r.Base+"/metrics", "trawl_scatter_shard_unavailable_total")
	if err != nil {
		return err
	}
	victim := c.Shards[0][*replica]
	kctx, stopKilling := context.WithCancel(ctx)
	kills := make(chan int, 1)
	go func() {
		n := 0
		defer func() { kills <- n }()
		for {
			if sleep(kctx, *every) != nil {
				return
			}
			victim.Kill()
			n++
			// Restarted whatever happens: the run must end with every
			// replica up.
			_ = sleep(kctx, *down)
			if err := victim.Start(); err != nil {
				log.Printf("restart %s: %v", victim.Name, err)
				return
			}
		}
	}()
	s, err := loadgen.Closed(ctx, t, q, *clients, *dur)
	stopKilling()
	nKills := <-kills
	if err != nil {
		return err
	}
	after, err := promtext.ScrapeSamples(ctx, hc, r.Base+"/metrics", "trawl_scatter_shard_unavailable_total")
	if err != nil {
		return err
	}
	reasons := map[string]float64{}
	for _, a := range after {
		if a.Labels["shard"] != cluster.ShardName(0) || a.Labels["path"] != "search" {
			continue
		}
		v := a.Value
		for _, b := range before {
			if b.Labels["shard"] == a.Labels["shard"] && b.Labels["path"] == a.Labels["path"] && b.Labels["reason"] == a.Labels["reason"] {
				v -= b.Value
			}
		}
		if v > 0 {
			reasons[a.Labels["reason"]] = v
		}
	}
	answers := s.Sent - s.Refused
	var missing float64
	var parts []string
	for k, v := range reasons {
		missing += v
		parts = append(parts, fmt.Sprintf("%s %.0f (%.1f %%)", k, v, 100*v/float64(answers)))
	}
	sort.Strings(parts)
	fmt.Printf("`trawlbench killloop %s`: 3 shards × 3 replicas, %d × 1536; %s of shard-0 SIGKILLed %d times in %s "+
		"(restarted %s after each kill, killed again %s after each restart) while %d clients searched at deadline_ms=%d; "+
		"load average %s before, %s after.\n\n",
		strings.Join(args, " "), *rows, victim.Name, nKills, *dur, *down, *every, *clients, *deadline, loadBefore, machine.LoadAvg())
	fmt.Printf("answers %d, degraded %d (%.1f %%), failed %d; p50 %s, p99 %s; shard-0 missing from %.0f (%.1f %%): %s\n",
		answers, s.Degraded, 100*s.Share(s.Degraded), s.Failed, ms(s.Latency.P50), ms(s.Latency.P99),
		missing, 100*missing/float64(max(answers, 1)), strings.Join(parts, ", "))
	return nil
}
