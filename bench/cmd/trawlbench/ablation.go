package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
)

// variant is trawl's router with at most one feature switched off by its
// real `router serve` flag (DESIGN.md, Overload: the baselines' flags).
type variant struct {
	name string
	flag string // "" for trawl with every feature on
}

// variants are the ablation family's routers, trawl first.
var variants = []variant{
	{trawlName, ""},
	{"no-hedge", "--hedge=false"},
	{"no-failover", "--failover=false"},
	{"no-admission", "--admission=false"},
	{"no-prewarm", "--prewarm=false"},
}

// ablationCase is one condition every variant is measured under.
type ablationCase struct {
	name, what string
	// sc is the fault (a scenario of the main family); nil for none.
	sc *scenario
	// factor is the offered load, × capacity; 0: the scenarios' load.
	factor float64
	// cold: restart the router, then send its first queries one at a
	// time (what pre-warming is for).
	cold bool
}

func scenarioNamed(name string) *scenario {
	for i := range scenarios {
		if scenarios[i].name == name {
			return &scenarios[i]
		}
	}
	panic("no scenario " + name)
}

var ablationCases = []ablationCase{
	{name: "healthy", what: "no fault, the scenarios' load", sc: scenarioNamed("healthy")},
	{name: "killed", what: "the killed scenario: the replica each router was using, in every shard, SIGKILLed", sc: scenarioNamed("killed")},
	{name: "slowed", what: "the slowed scenario: +50 ms on about 10 % of every replica's answers", sc: scenarioNamed("slowed")},
	{name: "overload 3×", what: "healthy, open loop at 3× capacity", factor: 3},
	{name: "cold start", what: "the router killed and started again; its first queries from one client, one at a time", cold: true},
}

// ablation runs every case against every variant, in rounds, the
// variants' order rotating between rounds, all over cluster c (the main
// family's, so its capacity is the one measured there). The variants'
// routers live as long as the cluster: c.Close kills them.
func (e *env) ablation(ctx context.Context, c *cluster.Cluster, trawl *cluster.Router, res *results) error {
	routers := map[string]*cluster.Router{trawlName: trawl}
	for _, v := range variants[1:] {
		r, err := c.StartRouter(ctx, v.name, v.flag)
		if err != nil {
			return err
		}
		if _, err := loadgen.Closed(ctx, e.target(r), e.queries, 2, e.warm); err != nil {
			return err
		}
		routers[v.name] = r
	}
	res.ablation = map[string]map[string][]loadgen.Summary{}
	res.loadAt["ablation"] = machine.LoadAvg()
	for round := range e.rounds {
		for _, ac := range ablationCases {
			if res.ablation[ac.name] == nil {
				res.ablation[ac.name] = map[string][]loadgen.Summary{}
			}
			for i := range variants {
				v := variants[(i+round)%len(variants)]
				s, err := e.ablationRun(ctx, c, routers[v.name], ac, res.capacity)
				if err != nil {
					return fmt.Errorf("ablation %s %s: %w", ac.name, v.name, err)
				}
				res.ablation[ac.name][v.name] = append(res.ablation[ac.name][v.name], s)
				e.logf("round %d ablation %s %s: %.1f complete/s, p99 %s, degraded %.1f%%, refused %.1f%%", round, ac.name, v.name,
					s.Goodput(), s.Latency.P99, 100*s.Share(s.Degraded), 100*s.Share(s.Refused))
			}
		}
	}
	return nil
}

// ablationRun measures router r under one case.
func (e *env) ablationRun(ctx context.Context, c *cluster.Cluster, r *cluster.Router, ac ablationCase, capacity float64) (loadgen.Summary, error) {
	if ac.cold {
		r.Kill()
		if err := r.Restart(ctx); err != nil {
			return loadgen.Summary{}, err
		}
		return loadgen.Closed(ctx, e.target(r), e.queries, 1, e.phase)
	}
	var victims []int
	if ac.sc != nil && ac.sc.apply != nil {
		if ac.sc.all {
			if err := c.EachReplica(ac.sc.apply); err != nil {
				return loadgen.Summary{}, err
			}
		} else {
			var err error
			if victims, _, err = e.preferred(ctx, c, r); err != nil {
				return loadgen.Summary{}, err
			}
			if err := c.EachShard(victims, ac.sc.apply); err != nil {
				return loadgen.Summary{}, err
			}
		}
	}
	rate := e.latFactor * capacity
	if ac.factor > 0 {
		rate = ac.factor * capacity
	}
	s, err := loadgen.Open(ctx, e.target(r), e.queries, rate, e.phase)
	if err != nil {
		return s, err
	}
	if ac.sc != nil && ac.sc.apply != nil {
		if ac.sc.undo == nil {
			err = c.Restore()
		} else {
			err = c.EachShardParallel(victims, func(rep *cluster.Replica) error { return ac.sc.undo(ctx, rep) })
		}
		if err != nil {
			return s, err
		}
		if err := sleep(ctx, e.settle); err != nil {
			return s, err
		}
	}
	if ac.factor > 1 {
		// Let the queues drain and admission's pressure window pass.
		if _, err := e.recover(ctx, c); err != nil {
			return s, err
		}
		if err := sleep(ctx, e.pause); err != nil {
			return s, err
		}
	}
	return s, nil
}

// hedgeShare is the extra shard RPCs hedging cost, in %.
func hedgeShare(s loadgen.Summary) float64 {
	h, _ := s.HedgeShare()
	return 100 * h
}

// writeAblation writes the ablation family's section.
func (r *results) writeAblation(w func(string, ...any), ms func(float64) string) {
	if r.ablation == nil {
		return
	}
	w("## Ablation: trawl with one feature off at a time\n\n")
	var flags []string
	for _, v := range variants[1:] {
		flags = append(flags, fmt.Sprintf("**%s** is `router serve %s`", v.name, v.flag))
	}
	w("Over the main 3 × 3 cluster, in the same run as trawl: %s. Load average %s. Cases:\n\n", strings.Join(flags, "; "), r.loadAt["ablation"])
	for _, ac := range ablationCases {
		w("- **%s**: %s.\n", ac.name, ac.what)
	}
	w("\nOpen loop at %.1f× capacity (%.1f queries/s) unless the case says otherwise; %d round(s), the variants' order rotating between "+
		"rounds; each row pools its rounds. *Extra RPCs* is hedges ÷ the shard RPCs the router would have sent without them. "+
		"Ratios are the variant's pooled figure ÷ trawl's, then each round's.\n\n", r.latFactor, r.latFactor*r.capacity, r.rounds)
	w("| case | router | complete/s | p50 ms | p99 ms | max ms | degraded %% | refused %% | late %% | extra RPCs %% | failovers | p99 ÷ trawl | complete/s ÷ trawl |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, ac := range ablationCases {
		t := r.ablation[ac.name][trawlName]
		for _, v := range variants {
			ss := r.ablation[ac.name][v.name]
			p := loadgen.Pool(ss)
			rp99, rgood := "", ""
			if v.name != trawlName {
				rp99, rgood = pooledRatio(ss, t, p99), pooledRatio(ss, t, goodput)
			}
			w("| %s | %s | %.1f | %s | %s | %s | %.1f | %.1f | %.1f | %.2f | %.0f | %s | %s |\n", ac.name, v.name,
				goodput(p), ms(p50(p)), ms(p99(p)), ms(pmax(p)), degr(p), refused(p), late(p), hedgeShare(p),
				p.Counters["trawl_scatter_failovers_total"], rp99, rgood)
		}
	}
	w("\n")
}
