package main

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
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

// bulkPlan sizes the bulk-load family.
type bulkPlan struct {
	rows, clients, deadlineMS int
	// qps, when set, replaces the closed-loop clients with an open loop
	// of qps searches a second on each router: searches a cluster has
	// room for, whose latency a load may only stretch by sharing CPU,
	// where closed-loop clients take every core they can get.
	qps float64
	// window is one stretch of the searches during the load (they run in
	// back-to-back windows until the load ends); idle the searches'
	// length once it has (0: as long as the load took, at least 20 s).
	window, idle time.Duration
	// sample is how often every replica's raft leader gauge is read.
	sample time.Duration
	// pprofDir, if set, receives profiles of the load (pprofFor long).
	pprofDir string
	pprofFor time.Duration
	// traceFor, when set, adds an execution trace this long, taken after
	// the CPU profile (go tool trace -pprof=sched reads where searches
	// waited to run).
	traceFor time.Duration
	// loadFlags are more `router load` flags (--rate N caps its
	// vectors a second).
	loadFlags []string
}

// runBulkLoad is `trawlbench bulkload`: a healthy 3 × 3 cluster loads a
// corpus through `router load` on one router while clients search through
// that router and through a second one, then search the loaded cluster
// idle. It prints what a healthy cluster must keep at zero during a bulk
// load (degraded answers, leadership changes, outcome_unknown writes) and
// the search p99 during the load over the idle one.
func runBulkLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bulkload", flag.ExitOnError)
	quick := fs.Bool("quick", false, "5 000 vectors and short runs instead of 100 000")
	rows := fs.Int("rows", 0, "vectors to load (0: 100 000, or 5 000 with -quick)")
	clients := fs.Int("clients", 4, "closed-loop search clients on each router (0: the load alone, no searches)")
	deadline := fs.Int("deadline-ms", 1000, "?deadline_ms of every search")
	qps := fs.Float64("qps", 0, "searches a second on each router, open loop, instead of -clients closed-loop clients (0: closed loop)")
	quant := fs.String("quantization", "", "the collection's quantization (int8; empty: float32 rows)")
	proxied := fs.Bool("proxy", false, "routers reach the replicas through the harness's fault proxies, as the fault families do (default: directly, as in production)")
	shardEnv := fs.String("shard-env", "", "environment variables for every replica, space separated (GOMAXPROCS=4, say)")
	shardFlags := fs.String("shard-flags", "", "more `router shard` flags for every replica, space separated (--background-nice 0, say)")
	root := fs.String("repo", "..", "the trawl repository (cmd/router is built from it)")
	keep := fs.Bool("keep", false, "keep the work directory (logs, data) after the run")
	pprofDir := fs.String("pprof", "", "run the shards and router A with --pprof and write their CPU, block and mutex profiles, taken during the load, into this directory")
	raw := fs.Bool("raw", false, "first measure the raw commit rate of one raft group of three (a 1 × 3 cluster alone, the same rows sent straight to its leader, 4 batches of 256 in flight) and report the load's rate over it")
	loadFlags := fs.String("load-flags", "", "more `router load` flags, space separated (--rate 2500 caps the load's vectors a second, say)")
	pprofFor := fs.Duration("pprof-for", 10*time.Second, "how long the CPU profiles run, from 1 s into the load")
	traceFor := fs.Duration("trace-for", 0, "with -pprof: also an execution trace of every profiled process this long, after the CPU profile (0: none)")
	idle := fs.Duration("idle", 0, "how long the searches of the idle cluster run after the load (0: as long as the load took, at least 20 s, so the idle p99 rests on as many answers as the load's)")
	_ = fs.Parse(args)
	p := bulkPlan{rows: 100_000, clients: *clients, qps: *qps, deadlineMS: *deadline, window: 5 * time.Second, idle: *idle,
		sample: 200 * time.Millisecond, pprofDir: *pprofDir, pprofFor: *pprofFor, traceFor: *traceFor, loadFlags: strings.Fields(*loadFlags)}
	if *quick {
		p.rows, p.window = 5_000, time.Second
		if p.idle == 0 {
			p.idle = 3 * time.Second
		}
	}
	if *rows > 0 {
		p.rows = *rows
	}
	rg, closeRig, err := newRig(ctx, *root, "bulk", *keep, p.rows)
	if err != nil {
		return err
	}
	defer closeRig()
	work, bin, npy, q := rg.work, rg.bin, rg.npy, rg.queries
	var rawRate float64
	if *raw {
		var took time.Duration
		rawRate, took, err = rawCommitRate(ctx, bin, filepath.Join(work, "raw"), p.rows)
		if err != nil {
			return err
		}
		log.Printf("raw commit rate of one group of three: %d vectors in %s, %.1f vectors/s (load average %s)", p.rows, took.Round(time.Millisecond), rawRate, machine.LoadAvg())
	}
	var prof, shardArgs []string
	if *quant != "" {
		shardArgs = append(shardArgs, "--quantization", *quant)
	}
	shardArgs = append(shardArgs, strings.Fields(*shardFlags)...)
	if p.pprofDir != "" {
		if err := os.MkdirAll(p.pprofDir, 0o750); err != nil {
			return err
		}
		prof = []string{"--pprof"}
	}
	c, err := cluster.Start(ctx, cluster.Config{Bin: bin, Dir: work, Shards: 3, Replicas: 3, Dim: 1536, ShardArgs: append(shardArgs, prof...), ShardEnv: strings.Fields(*shardEnv), Direct: !*proxied})
	if err != nil {
		return err
	}
	defer c.Close()
	loading, err := c.StartRouter(ctx, "loading", prof...)
	if err != nil {
		return err
	}
	second, err := c.StartRouter(ctx, "second")
	if err != nil {
		return err
	}
	r, err := bulkLoad(ctx, p, c, bin, npy, q, loading, second)
	if err != nil {
		return err
	}
	fmt.Print(r.markdown(p, "trawlbench bulkload "+strings.Join(args, " ")))
	if rawRate > 0 {
		fmt.Printf("\nraw commit rate of one group of three, measured first: %.1f vectors/s; the load's rate is %.2f× it\n", rawRate, loadRate(r.loadOut)/rawRate)
	}
	return nil
}

// bulkResult is what one bulk-load run measured.
type bulkResult struct {
	loadOut       string // router load's summary
	loadTook      time.Duration
	during, idle  [2]loadgen.Summary // per router: loading, second
	lateDuring    [2]loadgen.Summary // the windows of the load's second half
	leaderChanges int
	elections     int
	unknown       float64 // 502 answers of the loading router's writes
	// cpu is the CPU time each process used during the load; loaderCPU
	// the `router load` process's.
	cpu               map[string]time.Duration
	loaderCPU         time.Duration
	loadAvgBefore     string
	loadAvgAfter      string
	windows, lateFrom int
	// missingDuring and missingIdle are, per router, the shards its
	// answers lacked and why (trawl_scatter_shard_unavailable_total's
	// change by shard and reason): what a degraded answer was.
	missingDuring, missingIdle [2]map[string]float64
}

func bulkLoad(ctx context.Context, p bulkPlan, c *cluster.Cluster, bin, npy string, q *loadgen.Queries, routers ...*cluster.Router) (*bulkResult, error) {
	res := &bulkResult{loadAvgBefore: machine.LoadAvg()}
	hc := &http.Client{Timeout: 5 * time.Second}
	targets := make([]loadgen.Target, len(routers))
	for i, r := range routers {
		targets[i] = loadgen.Target{Base: r.Base, DeadlineMS: p.deadlineMS, Timeout: 10 * time.Second}
	}
	if p.clients == 0 {
		targets = nil // the load alone: no searches
	}
	// Warm both routers' connections (the collection is empty).
	if err := each(targets, func(t loadgen.Target) error {
		_, err := loadgen.Closed(ctx, t, q, 1, 500*time.Millisecond)
		return err
	}); err != nil {
		return nil, err
	}
	elections0, err := countElections(c)
	if err != nil {
		return nil, err
	}
	codes0, err := promtext.ScrapeSamples(ctx, hc, routers[0].Base+"/metrics", "trawl_http_requests_total")
	if err != nil {
		return nil, err
	}
	missing0, err := scrapeMissing(ctx, hc, routers)
	if err != nil {
		return nil, err
	}
	sctx, stopSampling := context.WithCancel(ctx)
	changes := make(chan int, 1)
	go func() { changes <- sampleLeaders(sctx, hc, c, p.sample) }()

	loadDone := make(chan error, 1)
	meter := newCPUMeter(c, routers...)
	cpu0 := meter.read()
	t0 := time.Now()
	go func() {
		out, cpu, err := c.LoadCPU(ctx, routers[0], "", npy, p.loadFlags...)
		res.loadOut, res.loadTook, res.loaderCPU = out, time.Since(t0), cpu
		res.cpu = meter.read()
		for name, d := range cpu0 {
			res.cpu[name] -= d
		}
		loadDone <- err
	}()
	profiled := make(chan struct{})
	if p.pprofDir != "" {
		go func() {
			defer close(profiled)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			for _, err := range captureProfiles(ctx, p.pprofDir, p.pprofFor, p.traceFor, profileTargets(c, routers[0])) {
				log.Printf("pprof: %v", err)
			}
		}()
	} else {
		close(profiled)
	}
	search := func(ctx context.Context, t loadgen.Target, d time.Duration) (loadgen.Summary, error) {
		if p.qps > 0 {
			return loadgen.Open(ctx, t, q, p.qps, d)
		}
		return loadgen.Closed(ctx, t, q, p.clients, d)
	}
	var windows [][2]loadgen.Summary
	var loadErr error
	if p.clients == 0 {
		loadErr = <-loadDone
	}
	for running := p.clients > 0; running; {
		var w [2]loadgen.Summary
		err := eachIndexed(targets, func(i int, t loadgen.Target) (err error) {
			w[i], err = search(ctx, t, p.window)
			return err
		})
		if err != nil {
			stopSampling()
			return nil, err
		}
		windows = append(windows, w)
		select {
		case loadErr = <-loadDone:
			running = false
		default:
		}
	}
	<-profiled
	if loadErr != nil {
		stopSampling()
		return nil, loadErr
	}
	missing1, err := scrapeMissing(ctx, hc, routers)
	if err != nil {
		stopSampling()
		return nil, err
	}
	res.windows, res.lateFrom = len(windows), len(windows)/2
	for i := range routers {
		var all, late []loadgen.Summary
		for j, w := range windows {
			all = append(all, w[i])
			if j >= res.lateFrom {
				late = append(late, w[i])
			}
		}
		res.during[i], res.lateDuring[i] = loadgen.Pool(all), loadgen.Pool(late)
	}
	idleFor := p.idle
	if idleFor == 0 {
		idleFor = max(20*time.Second, res.loadTook.Round(time.Second))
	}
	if p.clients > 0 {
		log.Printf("loaded %d vectors in %s; searching the idle cluster for %s", p.rows, res.loadTook.Round(time.Millisecond), idleFor)
	}
	if err := eachIndexed(targets, func(i int, t loadgen.Target) (err error) {
		res.idle[i], err = search(ctx, t, idleFor)
		return err
	}); err != nil {
		stopSampling()
		return nil, err
	}
	missing2, err := scrapeMissing(ctx, hc, routers)
	if err != nil {
		stopSampling()
		return nil, err
	}
	for i := range routers {
		res.missingDuring[i] = missingDelta(missing0[i], missing1[i])
		res.missingIdle[i] = missingDelta(missing1[i], missing2[i])
	}
	stopSampling()
	res.leaderChanges = <-changes
	elections1, err := countElections(c)
	if err != nil {
		return nil, err
	}
	res.elections = elections1 - elections0
	codes1, err := promtext.ScrapeSamples(ctx, hc, routers[0].Base+"/metrics", "trawl_http_requests_total")
	if err != nil {
		return nil, err
	}
	res.unknown = sum502(codes1) - sum502(codes0)
	res.loadAvgAfter = machine.LoadAvg()
	return res, nil
}

// scrapeMissing reads each router's trawl_scatter_shard_unavailable_total.
func scrapeMissing(ctx context.Context, hc *http.Client, routers []*cluster.Router) ([][]promtext.Sample, error) {
	out := make([][]promtext.Sample, len(routers))
	for i, r := range routers {
		ss, err := promtext.ScrapeSamples(ctx, hc, r.Base+"/metrics", "trawl_scatter_shard_unavailable_total")
		if err != nil {
			return nil, err
		}
		out[i] = ss
	}
	return out, nil
}

// missingDelta is how much each "shard reason" series of
// trawl_scatter_shard_unavailable_total grew between two scrapes (the
// path label summed), the series that did not left out.
func missingDelta(before, after []promtext.Sample) map[string]float64 {
	key := func(s promtext.Sample) string { return s.Labels["shard"] + " " + s.Labels["reason"] }
	out := map[string]float64{}
	for _, s := range after {
		out[key(s)] += s.Value
	}
	for _, s := range before {
		out[key(s)] -= s.Value
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

// missingText lists missing shards as "shard-1 deadline_exceeded ×2, …",
// or "none".
func missingText(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%.0f", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// sum502 adds up the 502 answers (writes whose outcome is unknown) of
// trawl_http_requests_total.
func sum502(ss []promtext.Sample) float64 {
	n := 0.0
	for _, s := range ss {
		if s.Labels["code"] == "502" {
			n += s.Value
		}
	}
	return n
}

// sampleLeaders reads every replica's trawl_shard_raft_leader every
// period until ctx ends and returns how many times a shard's leader was
// seen to change (to another replica or to none). A shard with a replica
// that could not be scraped is left out of that sample: a slow scrape is
// not a lost leader.
func sampleLeaders(ctx context.Context, hc *http.Client, c *cluster.Cluster, period time.Duration) int {
	last := make([]int, len(c.Shards))
	for i := range last {
		last[i] = -2 // not yet seen
	}
	changes := 0
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		for s, reps := range c.Shards {
			leader, seen := -1, true
			for i, r := range reps {
				ss, err := promtext.ScrapeSamples(ctx, hc, "http://"+r.HTTP+"/metrics", "trawl_shard_raft_leader")
				switch {
				case err != nil || len(ss) == 0:
					seen = false
				case ss[0].Value == 1:
					leader = i
				}
			}
			if ctx.Err() != nil {
				return changes
			}
			if !seen {
				continue
			}
			if last[s] != -2 && leader != last[s] {
				changes++
				log.Printf("shard-%d: leader %d -> %d", s, last[s], leader)
			}
			last[s] = leader
		}
		select {
		case <-ctx.Done():
			return changes
		case <-t.C:
		}
	}
}

// countElections counts the elections every replica has logged: raft
// writes "starting election" at warn, the level shards log raft at, when
// a follower stops hearing from its leader (or on a group's first start).
func countElections(c *cluster.Cluster) (int, error) {
	n := 0
	for _, reps := range c.Shards {
		for _, r := range reps {
			f, err := os.Open(r.Log)
			if err != nil {
				return 0, err
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "starting election") {
					n++
				}
			}
			err = sc.Err()
			f.Close()
			if err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func each(ts []loadgen.Target, f func(loadgen.Target) error) error {
	return eachIndexed(ts, func(_ int, t loadgen.Target) error { return f(t) })
}

// eachIndexed runs f for every target at once and waits for all.
func eachIndexed(ts []loadgen.Target, f func(int, loadgen.Target) error) error {
	es := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() { es[i] = f(i, t) })
	}
	wg.Wait()
	for _, err := range es {
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *bulkResult) markdown(p bulkPlan, command string) string {
	var b strings.Builder
	searchers := fmt.Sprintf("%d closed-loop clients searched through A and %d through router B", p.clients, p.clients)
	if p.qps > 0 {
		searchers = fmt.Sprintf("%.0f searches a second (open loop) went to A and %.0f to router B", p.qps, p.qps)
	}
	fmt.Fprintf(&b, "`%s`: 3 shards × 3 replicas, %d × 1536 loaded through `router load` on router A in %s, while %s at deadline_ms=%d; load average %s before, %s after.\n\n",
		command, p.rows, r.loadTook.Round(100*time.Millisecond), searchers, p.deadlineMS, r.loadAvgBefore, r.loadAvgAfter)
	fmt.Fprintf(&b, "router load: %s\n\n", strings.TrimSpace(lastLines(r.loadOut, 2)))
	b.WriteString(r.cpuLine())
	if p.clients == 0 {
		fmt.Fprintf(&b, "no searches (-clients 0); leadership changes seen: %d; elections the shards logged: %d; outcome_unknown (502) answers to the load's writes: %.0f\n",
			r.leaderChanges, r.elections, r.unknown)
		return b.String()
	}
	b.WriteString("| | answers | degraded | failed | p50 | p99 | p99 ÷ idle p99 |\n|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, s, idle loadgen.Summary, isIdle bool) {
		ratio := "–"
		if idle.Latency.P99 > 0 && !isIdle {
			ratio = fmt.Sprintf("%.2f", float64(s.Latency.P99)/float64(idle.Latency.P99))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %s |\n", name, s.Sent-s.Refused, s.Degraded, s.Failed,
			ms(s.Latency.P50), ms(s.Latency.P99), ratio)
	}
	both := func(x [2]loadgen.Summary) loadgen.Summary { return loadgen.Pool([]loadgen.Summary{x[0], x[1]}) }
	idleBoth := both(r.idle)
	row("A (loading), during the load", r.during[0], r.idle[0], false)
	row("B, during the load", r.during[1], r.idle[1], false)
	row("both, during the load", both(r.during), idleBoth, false)
	row(fmt.Sprintf("both, second half of the load (windows %d–%d)", r.lateFrom+1, r.windows), both(r.lateDuring), idleBoth, false)
	row("A, idle after the load", r.idle[0], r.idle[0], true)
	row("B, idle after the load", r.idle[1], r.idle[1], true)
	row("both, idle after the load", idleBoth, idleBoth, true)
	fmt.Fprintf(&b, "\nshards missing from answers (trawl_scatter_shard_unavailable_total by shard and reason): during the load A %s, B %s; idle A %s, B %s\n",
		missingText(r.missingDuring[0]), missingText(r.missingDuring[1]), missingText(r.missingIdle[0]), missingText(r.missingIdle[1]))
	fmt.Fprintf(&b, "\nleadership changes seen (every replica's trawl_shard_raft_leader every %s, load and idle): %d; elections the shards logged: %d; outcome_unknown (502) answers to the load's writes: %.0f\n",
		p.sample, r.leaderChanges, r.elections, r.unknown)
	return b.String()
}

// cpuLine says how much CPU each process used during the load, the most
// first, as seconds and as a share of the load's wall time.
func (r *bulkResult) cpuLine() string {
	type use struct {
		name string
		d    time.Duration
	}
	us := []use{{"router load", r.loaderCPU}}
	total := r.loaderCPU
	for name, d := range r.cpu {
		us = append(us, use{name, d})
		total += d
	}
	slices.SortFunc(us, func(a, b use) int { return cmp.Compare(b.d, a.d) })
	var b strings.Builder
	fmt.Fprintf(&b, "CPU during the load: %.1f s in all (%.2f cores over %s):", total.Seconds(), total.Seconds()/r.loadTook.Seconds(), r.loadTook.Round(100*time.Millisecond))
	for i, u := range us {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&b, "%s %s %.1f s", sep, u.name, u.d.Seconds())
	}
	b.WriteString("\n\n")
	return b.String()
}

// loadRate is the vectors/s of router load's summary, 0 if it has none.
func loadRate(out string) float64 {
	m := regexp.MustCompile(`\(([0-9.]+) vectors/s\)`).FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// lastLines is the last n non-empty lines of s.
func lastLines(s string, n int) string {
	var ls []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			ls = append(ls, l)
		}
	}
	return strings.Join(ls[max(0, len(ls)-n):], "; ")
}
