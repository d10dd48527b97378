package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
	"github.com/trawl-search/trawl/bench/internal/procstat"
	"github.com/trawl-search/trawl/bench/internal/promtext"
	"github.com/trawl-search/trawl/shard/client"
)

// Routers, in the order tables list them.
const (
	trawlName = "trawl"
	baseName  = "baseline"
)

// scenario is a fault applied to one replica of every shard, the one the
// router under test was using (or, with all, to every replica), through
// its proxy, for the length of one run.
type scenario struct {
	name, what string
	all        bool
	apply      func(*cluster.Replica) error
	// undo lifts the fault; nil: restore the proxies.
	undo func(context.Context, *cluster.Replica) error
	// midway applies the fault half-way through the run instead of
	// before it: in-flight queries meet it, not only new connections.
	midway bool
}

var scenarios = []scenario{
	{"healthy", "no fault", false, nil, nil, false},
	{"killed", "in every shard, the replica the router was using is SIGKILLed just before the run (its proxy's connections to it break, and new ones are closed at once, as a dead port's RST would be), and restarted after it; the wait until it has caught up is outside the measured window", false,
		func(r *cluster.Replica) error { r.Kill(); return nil },
		func(ctx context.Context, r *cluster.Replica) error { return r.Restart(ctx) }, false},
	{"blackholed", "in every shard, the replica the router was using goes silent: connections stay open, nothing is forwarded either way (a powered-off host: no FIN, no RST)", false,
		func(r *cluster.Replica) error { return r.Proxy.Blackhole() }, nil, false},
	{"dropped", "in every shard, the replica the router was using goes silent as above, but half-way through the run, on warm connections with queries in flight (a silent drop mid-run)", false,
		func(r *cluster.Replica) error { return r.Proxy.Blackhole() }, nil, true},
	{"slowed", "every replica: +50 ms on about 10 % of its answers (each reply chunk delayed with probability 0.1, seeded per replica; the chunks behind a delayed one on its connection wait too)", true,
		func(r *cluster.Replica) error {
			return r.Proxy.SlowSome(50*time.Millisecond, 0.1, uint64(100*r.Shard+r.Index))
		}, nil, false},
}

// mainFamilies runs capacity, the fault scenarios, the overload sweep and
// the router overhead on one 3 shards × 3 replicas cluster.
func (e *env) mainFamilies(ctx context.Context, res *results) error {
	l, err := e.startLoaded(ctx, "main", 3, 3, e.mainRows, nil)
	if err != nil {
		return err
	}
	c, trawl, base := l.c, l.trawl, l.base
	defer c.Close()
	res.mainLoad = l.took
	routers := map[string]*cluster.Router{trawlName: trawl, baseName: base}

	// Capacity: complete answers/s from 8 closed-loop clients on the
	// healthy cluster through trawl's router (admission refuses nothing at
	// that concurrency), the median over rounds.
	var caps []float64
	res.loadAt["capacity"] = machine.LoadAvg()
	for range e.rounds {
		s, err := loadgen.Closed(ctx, e.target(trawl), e.queries, 8, e.phase)
		if err != nil {
			return err
		}
		caps = append(caps, s.Goodput())
		res.capacityRuns = append(res.capacityRuns, s)
	}
	res.capacity = median(caps)
	e.logf("capacity %.1f complete answers/s (rounds %v)", res.capacity, caps)
	if res.capacity < 1 {
		return fmt.Errorf("capacity %.2f/s: the cluster answers nothing complete", res.capacity)
	}

	if res.idleAfterCapacity, err = e.recover(ctx, c); err != nil {
		return err
	}
	if res.rates, err = readRates(ctx, trawl); err != nil {
		return fmt.Errorf("/cluster/status: %w", err)
	}
	res.scenarios = map[string]map[string][]loadgen.Summary{}
	res.scenarioLatched = map[string]map[string][]int{}
	res.scenarioFaulted = map[string]map[string][]faultedReplicas{}
	res.loadAt["scenarios"] = machine.LoadAvg()
	rate := e.latFactor * res.capacity
	for round := range e.rounds {
		for _, sc := range scenarios {
			if res.scenarios[sc.name] == nil {
				res.scenarios[sc.name] = map[string][]loadgen.Summary{}
				res.scenarioFaulted[sc.name] = map[string][]faultedReplicas{}
			}
			// Alternate which router goes first, so a drift in the
			// machine's load does not favour one.
			order := []string{trawlName, baseName}
			if round%2 == 1 {
				order = []string{baseName, trawlName}
			}
			for _, name := range order {
				var victims []int
				if sc.apply != nil && !sc.all {
					var leaders []bool
					var err error
					if victims, leaders, err = e.preferred(ctx, c, routers[name]); err != nil {
						return err
					}
					res.scenarioFaulted[sc.name][name] = append(res.scenarioFaulted[sc.name][name], faultedReplicas{victims, leaders})
				}
				var mid *time.Timer
				midErr := make(chan error, 1)
				switch {
				case sc.apply != nil && sc.midway:
					mid = time.AfterFunc(e.phase/2, func() { midErr <- c.EachShard(victims, sc.apply) })
				case sc.apply != nil && sc.all:
					if err := c.EachReplica(sc.apply); err != nil {
						return err
					}
				case sc.apply != nil:
					if err := c.EachShard(victims, sc.apply); err != nil {
						return err
					}
				}
				s, err := loadgen.Open(ctx, e.target(routers[name]), e.queries, rate, e.phase)
				if err != nil {
					return err
				}
				if mid != nil {
					if err := <-midErr; err != nil {
						return err
					}
				}
				res.scenarios[sc.name][name] = append(res.scenarios[sc.name][name], s)
				if sc.apply == nil {
					// After a fault the check waits until it is lifted.
					if err := e.noteLatched(ctx, c, res.scenarioLatched, sc.name, name); err != nil {
						return err
					}
				}
				e.logf("round %d %s %s: %.1f complete/s, p99 %s, degraded %.1f%%", round, sc.name, name,
					s.Goodput(), s.Latency.P99, 100*s.Share(s.Degraded))
				if sc.apply != nil {
					var err error
					if sc.undo == nil {
						err = c.Restore()
					} else {
						err = c.EachShardParallel(victims, func(r *cluster.Replica) error { return sc.undo(ctx, r) })
					}
					if err != nil {
						return err
					}
					if err := sleep(ctx, e.settle); err != nil {
						return err
					}
					if err := e.noteLatched(ctx, c, res.scenarioLatched, sc.name, name); err != nil {
						return err
					}
				}
			}
		}
	}

	res.sweep = map[float64]map[string][]loadgen.Summary{}
	res.sweepLatched = map[float64]map[string][]int{}
	// The scenarios may have latched replicas too (recorded, then fixed).
	if res.idleAfterScenarios, err = e.recover(ctx, c); err != nil {
		return err
	}
	res.loadAt["sweep"] = machine.LoadAvg()
	for round := range e.sweepRounds {
		for _, f := range e.factors {
			if res.sweep[f] == nil {
				res.sweep[f] = map[string][]loadgen.Summary{}
			}
			order := []string{trawlName, baseName}
			if round%2 == 1 {
				order = []string{baseName, trawlName}
			}
			for _, name := range order {
				s, err := loadgen.Open(ctx, e.target(routers[name]), e.queries, f*res.capacity, e.phase)
				if err != nil {
					return err
				}
				res.sweep[f][name] = append(res.sweep[f][name], s)
				latched, err := e.recover(ctx, c)
				if err != nil {
					return err
				}
				if res.sweepLatched[f] == nil {
					res.sweepLatched[f] = map[string][]int{}
				}
				res.sweepLatched[f][name] = append(res.sweepLatched[f][name], len(latched))
				if len(latched) > 0 {
					e.logf("after %.1f× %s: %d replicas refusing idle scans: %v", f, name, len(latched), latched)
				}
				e.logf("round %d %.1f× %s: %.1f complete/s, refused %.1f%%, degraded %.1f%%", round, f, name,
					s.Goodput(), 100*s.Share(s.Refused), 100*s.Share(s.Degraded))
				// Let the queue drain and admission's pressure window pass.
				if err := sleep(ctx, e.pause); err != nil {
					return err
				}
			}
		}
	}
	if err := e.overhead(ctx, c, trawl, res); err != nil {
		return err
	}
	if e.ablate {
		if _, err := e.recover(ctx, c); err != nil {
			return err
		}
		if err := e.ablation(ctx, c, trawl, res); err != nil {
			return err
		}
	}
	res.idleAtEnd, err = e.recover(ctx, c)
	return err
}

// preferred returns, for each shard of c, the index of the replica that
// answered most of router r's reads in a short closed-loop probe sent
// just now: the replica in use, which a fault must hit to be felt. Which
// replica a router prefers follows its latency averages, so a fault on a
// fixed replica index hit one router's choice in one run and missed it
// in the next (RESULTS.md's blackholed baseline swung from 56 ms to
// 997 ms at p99 between two runs).
//
// It also says, per shard, whether that replica was its group's raft
// leader: a killed leader costs an election, a killed follower does not.
func (e *env) preferred(ctx context.Context, c *cluster.Cluster, r *cluster.Router) ([]int, []bool, error) {
	const series = "trawl_shard_request_duration_seconds_count"
	url := r.Base + "/metrics"
	before, err := promtext.ScrapeSamples(ctx, http.DefaultClient, url, series)
	if err != nil {
		return nil, nil, err
	}
	if _, err := loadgen.Closed(ctx, loadgen.Target{Base: r.Base, DeadlineMS: e.deadlineMS, Timeout: 10 * time.Second, NoMetrics: true},
		e.queries, 1, e.preferProbe); err != nil {
		return nil, nil, fmt.Errorf("probe %s: %w", r.Name, err)
	}
	after, err := promtext.ScrapeSamples(ctx, http.DefaultClient, url, series)
	if err != nil {
		return nil, nil, err
	}
	answered := map[[2]string]float64{} // shard, replica → ok calls
	for sign, ss := range map[float64][]promtext.Sample{-1: before, 1: after} {
		for _, s := range ss {
			if s.Labels["outcome"] == "ok" {
				answered[[2]string{s.Labels["shard"], s.Labels["replica"]}] += sign * s.Value
			}
		}
	}
	idx := make([]int, len(c.Shards))
	leaders, err := leaderAddrs(ctx, r.Base)
	if err != nil {
		return nil, nil, err
	}
	var wasLeader []bool
	for si, reps := range c.Shards {
		best := 0.0
		for i, rep := range reps {
			if n := answered[[2]string{cluster.ShardName(si), rep.Proxy.Addr()}]; n > best {
				best, idx[si] = n, i
			}
		}
		if best == 0 {
			return nil, nil, fmt.Errorf("probe %s: no replica of %s answered", r.Name, cluster.ShardName(si))
		}
		wasLeader = append(wasLeader, leaders[reps[idx[si]].Proxy.Addr()])
	}
	return idx, wasLeader, nil
}

// leaderAddrs is the set of replica addresses (as the router names them)
// whose role in the router's /cluster/status is leader.
func leaderAddrs(ctx context.Context, base string) (map[string]bool, error) {
	var st struct {
		Shards []struct {
			Replicas []struct {
				Addr string `json:"addr"`
				Role string `json:"role"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	if err := clusterStatus(ctx, http.DefaultClient, base, &st); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, sh := range st.Shards {
		for _, rep := range sh.Replicas {
			out[rep.Addr] = rep.Role == "leader"
		}
	}
	return out, nil
}

// noteLatched recovers latched replicas and records how many there were
// after the run of router name in family key.
func (e *env) noteLatched(ctx context.Context, c *cluster.Cluster, into map[string]map[string][]int, key, name string) error {
	latched, err := e.recover(ctx, c)
	if err != nil {
		return err
	}
	if into[key] == nil {
		into[key] = map[string][]int{}
	}
	into[key][name] = append(into[key][name], len(latched))
	if len(latched) > 0 {
		e.logf("after %s %s: %d replicas refusing idle scans: %v", key, name, len(latched), latched)
	}
	return nil
}

// overheadRound is one round of the router-overhead family.
type overheadRound struct {
	router, direct loadgen.Summary // interleaved, one client
	// pair50, pair99 are percentiles of router − direct over the pairs
	// of one query sent both ways back to back: the same query, the same
	// moment's load.
	pair50, pair99  time.Duration
	b64, json       loadgen.Summary // closed loop, 4 clients, for CPU
	cpuB64, cpuJSON time.Duration   // router CPU per query
}

// overhead measures what the router adds over calling the shards
// directly: one client alternates a search through the router with the
// same query sent straight to the replica the router was using in every
// shard over gRPC, in parallel, timed until the slowest answers. Then the router's CPU per
// query from /proc, with vector_b64 and with JSON floats.
func (e *env) overhead(ctx context.Context, c *cluster.Cluster, trawl *cluster.Router, res *results) error {
	// Straight to the replica the router was using in each shard: the
	// router picks the fastest of three, and against replica 0 (as this
	// family did) its overhead came out negative, −3.1 ms at p50.
	using, _, err := e.preferred(ctx, c, trawl)
	if err != nil {
		return err
	}
	res.overheadReplicas = using
	conns := make([]*client.Conn, len(c.Shards))
	for i, reps := range c.Shards {
		cn, err := client.Dial(reps[using[i]].Proxy.Addr(), client.DialConfig{})
		if err != nil {
			return err
		}
		defer cn.Close()
		conns[i] = cn
	}
	t := e.target(trawl)
	t.NoMetrics = true
	res.loadAt["overhead"] = machine.LoadAvg()
	idle, err := idleCPU(ctx, trawl.PID(), e.idle)
	if err != nil {
		return err
	}
	res.routerIdle = idle
	for round := range e.rounds {
		var r overheadRound
		var err error
		if r.router, r.direct, r.pair50, r.pair99, err = e.interleaved(ctx, t, conns); err != nil {
			return err
		}
		cpu := func(q *loadgen.Queries) (loadgen.Summary, time.Duration, error) {
			return cpuPerQuery(ctx, trawl.PID(), idle, func() (loadgen.Summary, error) {
				return loadgen.Closed(ctx, t, q, 4, e.phase)
			})
		}
		first, second := e.queries, e.jsonQ
		if round%2 == 1 {
			first, second = second, first
		}
		s1, c1, err := cpu(first)
		if err != nil {
			return err
		}
		s2, c2, err := cpu(second)
		if err != nil {
			return err
		}
		r.b64, r.cpuB64, r.json, r.cpuJSON = s1, c1, s2, c2
		if round%2 == 1 {
			r.b64, r.cpuB64, r.json, r.cpuJSON = s2, c2, s1, c1
		}
		e.logf("overhead round %d: router p50 %s p99 %s, direct p50 %s p99 %s, CPU/query b64 %s json %s", round,
			r.router.Latency.P50, r.router.Latency.P99, r.direct.Latency.P50, r.direct.Latency.P99, r.cpuB64, r.cpuJSON)
		res.overhead = append(res.overhead, r)
	}
	return nil
}

// interleaved alternates router and direct searches for one phase.
func (e *env) interleaved(ctx context.Context, t loadgen.Target, conns []*client.Conn) (viaR, dir loadgen.Summary, pair50, pair99 time.Duration, err error) {
	return e.interleavedFor(ctx, t, conns, e.phase)
}

// interleavedFor is interleaved for phase.
func (e *env) interleavedFor(ctx context.Context, t loadgen.Target, conns []*client.Conn, phase time.Duration) (viaR, dir loadgen.Summary, pair50, pair99 time.Duration, err error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("%s/v1/search?deadline_ms=%d", t.Base, t.DeadlineMS)
	hdr := http.Header{"Content-Type": []string{"application/json"}}
	viaRouter, direct := loadgen.NewTally(), loadgen.NewTally()
	budget := time.Duration(e.deadlineMS) * time.Millisecond
	start := time.Now()
	var routerTime, directTime time.Duration
	var diffs []time.Duration
	for i := 0; time.Since(start) < phase; i++ {
		if err := ctx.Err(); err != nil {
			return viaR, dir, 0, 0, err
		}
		q := i % len(e.queries.Bodies)
		o, code, took := loadgen.Do(hc, url, hdr, e.queries.Bodies[q])
		viaRouter.Add(o, code, took)
		routerTime += took
		vec := []client.Query{{Vector: e.queries.Vectors[q], K: 10}}
		t0 := time.Now()
		qctx, cancel := context.WithTimeout(ctx, budget)
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := true
		for _, cn := range conns {
			wg.Go(func() {
				if _, err := cn.Search(qctx, vec, 0); err != nil {
					mu.Lock()
					ok = false
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		cancel()
		d := time.Since(t0)
		directTime += d
		if ok {
			direct.Add(loadgen.Complete, 200, d)
		} else {
			direct.Add(loadgen.Degraded, 0, d)
		}
		if ok && o == loadgen.Complete {
			diffs = append(diffs, took-d)
		}
	}
	slices.Sort(diffs)
	at := func(q float64) time.Duration {
		if len(diffs) == 0 {
			return 0
		}
		return diffs[min(len(diffs)-1, int(q*float64(len(diffs))))]
	}
	return viaRouter.Summarise("router, 1 client interleaved", routerTime),
		direct.Summarise("direct gRPC, 1 client interleaved", directTime), at(0.5), at(0.99), nil
}

// scaleCell is one cluster of the shard-count and corpus-size families:
// shards groups of one replica each.
type scaleCell struct {
	shards, rows int
	load         time.Duration
	trawl, base  []loadgen.Summary // 1 client
	capacity     []loadgen.Summary // 8 clients, trawl
	cpu          []time.Duration   // trawl router CPU per query at 8 clients
	loadAvg      string
}

// idleCPU is the router's CPU per second while it serves no query (its
// prober and keepalives), to take out of the per-query figure.
func idleCPU(ctx context.Context, pid int, d time.Duration) (float64, error) {
	before, err := procstat.CPU(pid)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := sleep(ctx, d); err != nil {
		return 0, err
	}
	after, err := procstat.CPU(pid)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / time.Since(t0).Seconds(), nil
}

// cpuPerQuery runs f and charges the router's CPU over it, less its idle
// rate, to the queries f sent.
func cpuPerQuery(ctx context.Context, pid int, idle float64, f func() (loadgen.Summary, error)) (loadgen.Summary, time.Duration, error) {
	before, err := procstat.CPU(pid)
	if err != nil {
		return loadgen.Summary{}, 0, err
	}
	t0 := time.Now()
	s, err := f()
	if err != nil {
		return s, 0, err
	}
	after, err := procstat.CPU(pid)
	if err != nil {
		return s, 0, err
	}
	used := float64(after-before) - idle*time.Since(t0).Seconds()
	return s, time.Duration(max(used, 0) / float64(max(s.Sent, 1))), nil
}

// scaleFamilies measures latency, capacity and router CPU over shard
// counts and corpus sizes, on shards of one replica: fan-out width and
// data size are what vary, not replication.
func (e *env) scaleFamilies(ctx context.Context, res *results) error {
	type key struct{ shards, rows int }
	var cells []key
	seen := map[key]bool{}
	add := func(k key) {
		if !seen[k] {
			seen[k] = true
			cells = append(cells, k)
		}
	}
	for _, n := range e.shardSweep {
		add(key{n, e.scaleRows})
	}
	for _, rows := range e.sizeRows {
		add(key{3, rows})
	}
	var loadMu sync.Mutex
	return eachStarted(e.quick, len(cells),
		func(i int) (*loaded, error) {
			k := cells[i]
			return e.startLoaded(ctx, fmt.Sprintf("scale-%dx%d", k.shards, k.rows), k.shards, 1, k.rows, &loadMu)
		},
		func(i int, l *loaded) error {
			cell, err := e.scaleCell(ctx, cells[i].shards, cells[i].rows, l)
			if err == nil {
				res.scale = append(res.scale, cell)
			}
			return err
		},
		func(l *loaded) { l.c.Close() })
}

func (e *env) scaleCell(ctx context.Context, shards, rows int, l *loaded) (scaleCell, error) {
	cell := scaleCell{shards: shards, rows: rows}
	trawl, base := l.trawl, l.base
	cell.load = l.took
	cell.loadAvg = machine.LoadAvg()
	idle, err := idleCPU(ctx, trawl.PID(), e.idle)
	if err != nil {
		return cell, err
	}
	for round := range e.scaleRounds {
		order := []*cluster.Router{trawl, base}
		if round%2 == 1 {
			order = []*cluster.Router{base, trawl}
		}
		for _, r := range order {
			s, err := loadgen.Closed(ctx, e.target(r), e.queries, 1, e.scalePhase)
			if err != nil {
				return cell, err
			}
			if r == trawl {
				cell.trawl = append(cell.trawl, s)
			} else {
				cell.base = append(cell.base, s)
			}
		}
		t := e.target(trawl)
		t.NoMetrics = true
		s, cpu, err := cpuPerQuery(ctx, trawl.PID(), idle, func() (loadgen.Summary, error) {
			return loadgen.Closed(ctx, t, e.queries, 8, e.scalePhase)
		})
		if err != nil {
			return cell, err
		}
		cell.capacity = append(cell.capacity, s)
		cell.cpu = append(cell.cpu, cpu)
	}
	e.logf("%d shards, %d rows: trawl p50 %s p99 %s, %.1f complete/s at 8 clients", shards, rows,
		cell.trawl[0].Latency.P50, cell.trawl[0].Latency.P99, cell.capacity[0].Goodput())
	return cell, nil
}
