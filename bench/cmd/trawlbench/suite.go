package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
)

// plan is how big and how long every family of the suite runs.
type plan struct {
	quick                    bool
	dim                      int
	mainRows                 int           // the 3 × 3 cluster of the fault and overload families
	scaleRows                int           // corpus of the shard-count family
	shardSweep               []int         // shard counts, groups of one
	sizeRows                 []int         // corpora of the size family, 3 shards of one
	phase                    time.Duration // one measured run
	settle                   time.Duration // after a fault is lifted, for both routers' probers to see it
	preferProbe              time.Duration // one client's queries that find the replica a router is using, before a fault
	scalePhase               time.Duration // one run of the fan-out and size families
	pause                    time.Duration // between overload steps, for queues to drain
	idle                     time.Duration // router idle CPU measurement
	afterLoad                time.Duration // after a bulk load, before measuring
	warm                     time.Duration // two clients' queries that warm a new router's connections and its shards' pages
	rounds                   int           // of the scenarios, capacity and overhead families
	sweepRounds, scaleRounds int
	factors                  []float64 // offered load as multiples of capacity
	deadlineMS               int
	latFactor                float64 // offered load of the latency scenarios, × capacity
	// The devshards families (devfamilies.go): shard counts of the
	// router-overhead family, the dev corpus of every devshards cluster,
	// and the rows an IVF shard holds before it trains.
	widths              []int
	devDocs, ivfMinRows int
	devRounds           int
	devPhase            time.Duration
}

func quickPlan() plan {
	// Runs and pauses are cut to what keeps each family's order of
	// events, and the overload sweep skips 2×: a cold build of trawlbench
	// and the router takes ~1 m 50 s of the 3 minutes on 2 cores, and
	// the suite at twice these took 2 m 40 s.
	return plan{quick: true, dim: 1536, mainRows: 5_000, scaleRows: 2_000, shardSweep: []int{1, 3, 8},
		sizeRows: []int{500, 2_000}, phase: 750 * time.Millisecond, settle: 200 * time.Millisecond, preferProbe: 200 * time.Millisecond,
		scalePhase: 500 * time.Millisecond, pause: 250 * time.Millisecond, idle: 300 * time.Millisecond, afterLoad: 250 * time.Millisecond,
		warm: 200 * time.Millisecond,
		// One round each: with the devshards families, two rounds of the
		// scenarios took bench-quick past its 3 minutes.
		rounds: 1, sweepRounds: 1, scaleRounds: 1,
		factors: []float64{0.5, 1, 3, 5}, deadlineMS: 200, latFactor: 0.5,
		widths: []int{3, 32}, devDocs: 2_000, ivfMinRows: 500, devRounds: 1, devPhase: 500 * time.Millisecond}
}

func fullPlan() plan {
	return plan{dim: 1536, mainRows: 100_000, scaleRows: 100_000, shardSweep: []int{1, 3, 8},
		sizeRows: []int{10_000, 100_000}, phase: 10 * time.Second, settle: 2500 * time.Millisecond, preferProbe: 2 * time.Second,
		scalePhase: 5 * time.Second, pause: time.Second, idle: 3 * time.Second, afterLoad: 3 * time.Second,
		warm:   500 * time.Millisecond,
		rounds: 3, sweepRounds: 3, scaleRounds: 3,
		// At 200 ms, replicas of ~33 000 rows latched into refusing every
		// scan (RESOURCE_EXHAUSTED) once contention had pushed their scan
		// estimate past the budget: see bench/README.md, "A replica's scan
		// admission can latch shut".
		factors: []float64{0.5, 1, 2, 3, 5}, deadlineMS: 1000, latFactor: 0.5,
		widths: []int{3, 32}, devDocs: 32_000, ivfMinRows: 8_000, devRounds: 3, devPhase: 5 * time.Second}
}

// env is what every family shares.
type env struct {
	plan
	bin     string
	work    string
	queries *loadgen.Queries // vector_b64 bodies
	jsonQ   *loadgen.Queries // the same vectors as JSON floats
	logf    func(format string, args ...any)
	// ports is every cluster's and router's: quick runs start clusters
	// at the same time.
	ports cluster.Ports
	// ablate runs the ablation family (ablation.go) on the main cluster.
	ablate bool
}

func runSuite(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("suite", flag.ExitOnError)
	quick := fs.Bool("quick", false, "reduced sizes and short runs (under 3 minutes with the build), writing out/RESULTS-quick.md")
	out := fs.String("out", "", "markdown file to write, its PNGs beside it (default RESULTS.md, or out/RESULTS-quick.md with -quick: out/ is ignored by git)")
	root := fs.String("repo", "..", "the trawl repository (cmd/router is built from it)")
	rounds := fs.Int("rounds", 0, "rounds of every comparison (0: the plan's)")
	phase := fs.Duration("phase", 0, "length of one measured run (0: the plan's)")
	keep := fs.Bool("keep", false, "keep the work directory (logs, data) after the run")
	deadline := fs.Int("deadline-ms", 0, "?deadline_ms of every query (0: the plan's, 200 quick, 1000 full)")
	families := fs.String("families", "main,ablation,scale,dev", "which families to run: main (capacity, scenarios, overload, overhead on 3 × 3), ablation (on main's cluster: trawl with hedge, failover, admission or prewarm off, one at a time; needs main), scale (fan-out and size), dev (in-process shards: width, scan kinds and filters, TLS restart); without main, the dev scan kinds run at -kind-rate")
	kindRate := fs.Float64("kind-rate", 20, "offered queries/s of the dev scan-kind family when main (which measures capacity) is not run")
	_ = fs.Parse(args)
	p := fullPlan()
	if *quick {
		p = quickPlan()
	}
	if *rounds > 0 {
		p.rounds, p.sweepRounds, p.scaleRounds, p.devRounds = *rounds, *rounds, *rounds, *rounds
	}
	if *phase > 0 {
		p.phase = *phase
	}
	if *deadline > 0 {
		p.deadlineMS = *deadline
	}
	if *out == "" {
		*out = "RESULTS.md"
		if p.quick {
			*out = filepath.Join("out", "RESULTS-quick.md")
		}
	}
	// The report and its charts are written at the end of a run of
	// minutes: make their directory now, so a missing one fails at once.
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	rootAbs, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	started := time.Now()
	res := &results{plan: p, command: "trawlbench suite " + strings.Join(args, " "), loadStart: machine.LoadAvg(), loadAt: map[string]string{},
		info: machine.Describe(ctx, rootAbs)}
	work, err := os.MkdirTemp("", "trawlbench-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(work)
	}
	e := &env{plan: p, work: work, logf: log.Printf}
	e.logf("work directory %s, load average %s", work, res.loadStart)
	t0 := time.Now()
	if e.bin, err = cluster.Build(ctx, rootAbs, work); err != nil {
		return err
	}
	e.logf("built the router in %s", time.Since(t0).Round(time.Millisecond))
	if e.queries, err = loadgen.NewQueries(256, p.dim, 10, loadgen.B64, 1); err != nil {
		return err
	}
	if e.jsonQ, err = loadgen.NewQueries(256, p.dim, 10, loadgen.JSON, 1); err != nil {
		return err
	}
	run := map[string]bool{}
	for _, f := range strings.Split(*families, ",") {
		run[strings.TrimSpace(f)] = true
	}
	e.ablate = run["ablation"]
	if e.ablate && !run["main"] {
		return errors.New("-families ablation runs on the main family's cluster: add main")
	}
	if run["main"] {
		if err := e.mainFamilies(ctx, res); err != nil {
			return err
		}
	} else {
		res.capacity = *kindRate / p.latFactor
	}
	if run["scale"] {
		if err := e.scaleFamilies(ctx, res); err != nil {
			return err
		}
	}
	if run["dev"] {
		if err := e.devFamilies(ctx, res); err != nil {
			return err
		}
	}
	res.loadEnd = machine.LoadAvg()
	res.took = time.Since(started)
	return res.write(*out)
}

// loaded is a started cluster with its two routers, loaded.
type loaded struct {
	c           *cluster.Cluster
	trawl, base *cluster.Router
	took        time.Duration // the bulk load
}

// startLoaded starts a cluster, a trawl router and a baseline router, and
// loads rows vectors through the trawl router. With loadMu, the load and
// the warm-up hold it: clusters started together then load one at a time,
// so each load's time is its own.
func (e *env) startLoaded(ctx context.Context, name string, shards, replicas, rows int, loadMu *sync.Mutex) (*loaded, error) {
	dir := filepath.Join(e.work, name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	t0 := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{Bin: e.bin, Dir: dir, Shards: shards, Replicas: replicas, Dim: e.dim, Ports: &e.ports})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*loaded, error) {
		c.Close()
		return nil, err
	}
	trawl, err := c.StartRouter(ctx, "trawl")
	if err != nil {
		return fail(err)
	}
	base, err := c.StartRouter(ctx, "baseline", cluster.Baseline...)
	if err != nil {
		return fail(err)
	}
	e.logf("%s: %d shards × %d replicas up in %s", name, shards, replicas, time.Since(t0).Round(time.Millisecond))
	if loadMu != nil {
		loadMu.Lock()
		defer loadMu.Unlock()
	}
	npy := filepath.Join(e.work, fmt.Sprintf("corpus-%d.npy", rows))
	if _, err := os.Stat(npy); err != nil {
		if err := cluster.WriteNpy(npy, rows, e.dim, 42); err != nil {
			return fail(err)
		}
	}
	t1 := time.Now()
	if _, err := c.Load(ctx, trawl, npy); err != nil {
		return fail(err)
	}
	loadTook := time.Since(t1)
	e.logf("%s: loaded %d vectors in %s", name, rows, loadTook.Round(time.Millisecond))
	// The shards may snapshot and compact right after a bulk load.
	if err := sleep(ctx, e.afterLoad); err != nil {
		return fail(err)
	}
	// Warm both routers' connections and the shards' pages.
	for _, r := range []*cluster.Router{trawl, base} {
		if _, err := loadgen.Closed(ctx, e.target(r), e.queries, 2, e.warm); err != nil {
			return fail(err)
		}
	}
	return &loaded{c: c, trawl: trawl, base: base, took: loadTook}, nil
}

// eachStarted starts n clusters with start and measures each with
// measure, then stops it. Full runs do one cluster at a time: nothing
// else runs beside the one measured. Quick runs start them all at once
// first (starting clusters one by one was a fifth of a quick run's
// time), then measure them one at a time while the others sit idle.
func eachStarted[T any](all bool, n int, start func(i int) (T, error), measure func(i int, x T) error, stop func(T)) error {
	if !all {
		for i := range n {
			x, err := start(i)
			if err != nil {
				return err
			}
			err = measure(i, x)
			stop(x)
			if err != nil {
				return err
			}
		}
		return nil
	}
	xs, ok, err := startAll(n, start)
	defer func() {
		for i := range n {
			if ok[i] {
				stop(xs[i])
			}
		}
	}()
	if err != nil {
		return err
	}
	for i := range n {
		ok[i] = false
		err := measure(i, xs[i])
		stop(xs[i])
		if err != nil {
			return err
		}
	}
	return nil
}

// startAll runs start(i) for every i in [0, n) at once and waits for all:
// ok[i] says xs[i] started (the caller stops it), err joins the failures.
func startAll[T any](n int, start func(i int) (T, error)) (xs []T, ok []bool, err error) {
	xs, ok = make([]T, n), make([]bool, n)
	es := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { xs[i], es[i] = start(i); ok[i] = es[i] == nil })
	}
	wg.Wait()
	return xs, ok, errors.Join(es...)
}

func (e *env) target(r *cluster.Router) loadgen.Target {
	return loadgen.Target{Base: r.Base, DeadlineMS: e.deadlineMS, Timeout: 10 * time.Second}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
