package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
)

// results is everything a suite run measured.
type results struct {
	plan
	command            string
	info               machine.Info
	loadStart, loadEnd string
	took               time.Duration

	mainLoad   time.Duration
	loadAt     map[string]string // load average as each family started
	routerIdle float64           // router CPU s/s while idle
	// idleAfterCapacity, idleAtEnd: replicas refusing an idle scan as
	// overloaded, after the capacity runs and at the end of the 3 × 3 runs.
	idleAfterCapacity, idleAfterScenarios, idleAtEnd []string
	// sweepLatched: replicas found latched after each overload run.
	sweepLatched map[float64]map[string][]int
	// scenarioLatched: the same after each scenario run (once it is lifted).
	scenarioLatched map[string]map[string][]int
	// scenarioFaulted: per scenario, router and round, the replica index
	// the fault hit in each shard (nil for a fault on every replica).
	scenarioFaulted map[string]map[string][]faultedReplicas
	// overheadReplicas: the replica of each shard the overhead family
	// called directly (the one trawl's router was using).
	overheadReplicas []int
	capacity         float64
	capacityRuns     []loadgen.Summary
	scenarios        map[string]map[string][]loadgen.Summary // scenario → router → rounds
	sweep            map[float64]map[string][]loadgen.Summary
	// ablation: case → variant → rounds (ablation.go); nil when not run.
	ablation map[string]map[string][]loadgen.Summary
	overhead []overheadRound
	scale    []scaleCell
	// rates: /cluster/status of the main cluster's trawl router once
	// loaded (the replicas' measured scan rates).
	rates statusRates
	// The devshards families.
	widths   []widthCell
	kinds    []kindCell
	kindRate float64
	tls      []tlsRound
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// med is the median over rounds of one figure of each summary.
func med(ss []loadgen.Summary, f func(loadgen.Summary) float64) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = f(s)
	}
	return median(xs)
}

// pooledRatio is f of the pooled runs a over f of the pooled runs b,
// followed by the per-round ratios.
func pooledRatio(a, b []loadgen.Summary, f func(loadgen.Summary) float64) string {
	pa, pb := f(loadgen.Pool(a)), f(loadgen.Pool(b))
	if pb <= 0 {
		return "–"
	}
	var rs []string
	for i := range min(len(a), len(b)) {
		if d := f(b[i]); d > 0 {
			rs = append(rs, fmt.Sprintf("%.2f", f(a[i])/d))
		}
	}
	return fmt.Sprintf("%.2f (%s)", pa/pb, strings.Join(rs, ", "))
}

// faultedReplicas is one run's faulted replica in each shard: its index,
// and whether it was the group's raft leader.
type faultedReplicas struct {
	idx    []int
	leader []bool
}

// faulted lists, per round, the replica index the fault hit in each shard,
// L marking a leader ("1 0L 2" for shards 0, 1, 2).
func faulted(rounds []faultedReplicas) string {
	if len(rounds) == 0 {
		return "–"
	}
	var out []string
	for _, f := range rounds {
		var ids []string
		for s, i := range f.idx {
			id := strconv.Itoa(i)
			if s < len(f.leader) && f.leader[s] {
				id += "L"
			}
			ids = append(ids, id)
		}
		out = append(out, strings.Join(ids, " "))
	}
	return strings.Join(out, "; ")
}

// ratio is the median of the per-round ratios a[i]/b[i]: each ratio
// compares two runs taken back to back.
func ratio(a, b []loadgen.Summary, f func(loadgen.Summary) float64) float64 {
	var xs []float64
	for i := range min(len(a), len(b)) {
		if d := f(b[i]); d > 0 {
			xs = append(xs, f(a[i])/d)
		}
	}
	return median(xs)
}

func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

var (
	p50     = func(s loadgen.Summary) float64 { return msOf(s.Latency.P50) }
	p90     = func(s loadgen.Summary) float64 { return msOf(s.Latency.P90) }
	p99     = func(s loadgen.Summary) float64 { return msOf(s.Latency.P99) }
	p999    = func(s loadgen.Summary) float64 { return msOf(s.Latency.P999) }
	pmax    = func(s loadgen.Summary) float64 { return msOf(s.Latency.Max) }
	goodput = func(s loadgen.Summary) float64 { return s.Goodput() }
	thru    = func(s loadgen.Summary) float64 { return s.Throughput() }
	degr    = func(s loadgen.Summary) float64 { return 100 * s.Share(s.Degraded) }
	refused = func(s loadgen.Summary) float64 { return 100 * s.Share(s.Refused) }
	failed  = func(s loadgen.Summary) float64 { return 100 * s.Share(s.Failed) }
	refP99  = func(s loadgen.Summary) float64 { return msOf(s.RefusalLatency.P99) }
	late    = func(s loadgen.Summary) float64 { return 100 * s.Share(s.Late) }
)

func counter(name string) func(loadgen.Summary) float64 {
	return func(s loadgen.Summary) float64 { return s.Counters[name] }
}

func (r *results) title() string {
	if r.quick {
		return "trawl bench results (QUICK: reduced sizes, short runs)"
	}
	return "trawl bench results"
}

// kernelsReport is where benchreport writes its report by default, relative
// to bench/, the directory trawlbench runs in.
const kernelsReport = "KERNELS.md"

// relLink is target as a markdown link from a file in dir (both relative to
// the working directory, or absolute), so a report written into bench/out/
// still links to bench/KERNELS.md.
func relLink(dir, target string) string {
	absDir, err1 := filepath.Abs(dir)
	absTarget, err2 := filepath.Abs(target)
	if err1 != nil || err2 != nil {
		return target
	}
	rel, err := filepath.Rel(absDir, absTarget)
	if err != nil {
		return target
	}
	return filepath.ToSlash(rel)
}

func (r *results) write(path string) error {
	dir := filepath.Dir(path)
	base := strings.TrimSuffix(filepath.Base(path), ".md")
	charts, err := r.charts(dir, base)
	if err != nil {
		return err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	ms := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	w("# %s\n\n", r.title())
	w("Written by `%s` (from `bench/`; `make %s` at the top) on %s; it took %s. ",
		r.command, map[bool]string{true: "bench-quick", false: "bench"}[r.quick], time.Now().UTC().Format("2006-01-02 15:04 UTC"), r.took.Round(time.Second))
	w("Load average (1, 5, 15 min) at start **%s**, at end **%s**: the machine is shared, so every comparison below "+
		"is between runs taken back to back in the same run, and figures are medians over rounds (%d for capacity and overhead, and "+
		"the scenarios, whose rounds are pooled rather than taken a median of; %d for the overload sweep, %d for fan-out and size; the order of trawl and its baseline alternates between rounds). "+
		"Each section gives the load average as it began.\n\n", r.loadStart, r.loadEnd, r.rounds, r.sweepRounds, r.scaleRounds)
	w("%s\n", r.info.Markdown())
	w("## Setup\n\n")
	w("- Real processes on loopback: `router shard` replicas (raft groups of three with `--peers`, or groups of one), " +
		"each behind a fault proxy (`internal/faultproxy`, run inside `trawlbench`; raft traffic goes replica to replica, " +
		"only the router's goes through the proxies), and `router serve` processes reaching the replicas through the proxies.\n")
	w("- **trawl** is `router serve` with its defaults; **baseline** is `router serve %s`, over the same shards, in the same run.\n",
		strings.Join([]string{"--hedge=false", "--failover=false", "--prewarm=false", "--admission=false"}, " "))
	w("- Queries: 256 random Gaussian %d-D vectors, k=10, sent as `vector_b64` (JSON floats where said), `?deadline_ms=%d`. "+
		"Corpus: random Gaussian vectors loaded with `router load` from a `.npy`. Metric cosine, exact float32 scan.\n", r.dim, r.deadlineMS)
	w("- Outcomes: *complete* is a 200 without `X-Trawl-Degraded: true`; *degraded* a 200 marked degraded or a 503; *refused* a 429. " +
		"Latency percentiles (HdrHistogram, 3 significant digits) are over every request not refused, client timeouts included; " +
		"*late* is the share of all requests, refusals included, answered later than the deadline + 50 ms (DESIGN.md promises deadline + 10 ms). " +
		"The load generator and the fault proxies run in one process on the same 2 cores as the cluster, so their own delays are in every figure. " +
		"Open loop is vegeta at a fixed arrival rate; closed loop is N clients each waiting for its answer.\n")
	w("- One measured run lasts %s (fan-out and size runs %s); a fault is applied just before a run (so the run includes its detection) and lifted "+
		"after it, then %s pass before the next. Capacity is what 8 closed-loop clients get; open loop at more concurrency can exceed it.\n",
		r.phase, r.scalePhase, r.settle)
	gb := func(rows int) float64 { return float64(rows) * float64(r.dim) * 4 / 1e9 }
	w("- Memory and disk: one copy of the main corpus (%d × %d float32) is %.2f GB; the 3 × 3 cluster holds three copies in RAM "+
		"(%.2f GB) and about twice that on disk (raft log plus snapshot per replica: ~%.1f GB). Loading it took %s.\n\n",
		r.mainRows, r.dim, gb(r.mainRows), 3*gb(r.mainRows), 6*gb(r.mainRows), r.mainLoad.Round(100*time.Millisecond))

	w("## Capacity\n\n")
	w("Complete answers/s from 8 closed-loop clients through trawl's router, healthy 3 shards × 3 replicas, %d vectors: "+
		"**%.1f/s** (rounds: %s; p99 %s ms; load average %s). Every open-loop rate below is a multiple of this figure.\n\n",
		r.mainRows, r.capacity, joinF(r.capacityRuns, goodput, "%.1f"), ms(med(r.capacityRuns, p99)), r.loadAt["capacity"])

	w("**Idle check** (a shard's scan admission can latch shut: see bench/README.md): one scan sent straight to each of the 9 replicas "+
		"with the router's shard budget (%d ms) while nothing else runs. A replica that refuses it as overloaded (RESOURCE_EXHAUSTED, "+
		"with nothing ahead of it) is *latched*; the harness then sends it %d scans with a 30 s deadline, which bring its scan estimate "+
		"down, so one family's overload does not decide the next family's figures. Latched after the capacity runs: %s; after the "+
		"scenarios: %s; at the end of the 3 × 3 runs: %s. The overload table counts them after every run.\n\n",
		r.deadlineMS-5, recoveryScans, listOrNone(r.idleAfterCapacity), listOrNone(r.idleAfterScenarios), listOrNone(r.idleAtEnd))
	w("## Scenarios: trawl against its baseline\n\n")
	w("Open loop at %.1f× capacity (%.1f queries/s), 3 shards × 3 replicas, %d vectors; load average %s. Faults:\n\n",
		r.latFactor, r.latFactor*r.capacity, r.mainRows, r.loadAt["scenarios"])
	for _, sc := range scenarios {
		w("- **%s**: %s.\n", sc.name, sc.what)
	}
	w("\nEach row pools the rounds: its percentiles and shares are over every request of its %d round(s) (about %d requests), "+
		"complete/s is their total over their total time, and the counters are totals. (A single run's p99 is its second-worst "+
		"answer, and one unlucky query moved it by 2×.) *Faulted* is the replica, per shard, that the fault hit in each round: "+
		"the one that router had been sending to most in a short probe just before (see bench/README.md), so each router loses "+
		"the replica it was using; L marks a raft leader.\n\n", r.rounds, int(float64(r.rounds)*r.latFactor*r.capacity*r.phase.Seconds()))
	w("| scenario | router | complete/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | degraded %% | refused %% | failed %% | late %% | hedges | failovers | admission refusals | faulted (per round) | replicas latched after (per round) |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, sc := range scenarios {
		for _, name := range []string{trawlName, baseName} {
			p := loadgen.Pool(r.scenarios[sc.name][name])
			w("| %s | %s | %.1f | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %s | %s |\n", sc.name, name,
				goodput(p), ms(p50(p)), ms(p90(p)), ms(p99(p)), ms(p999(p)), ms(pmax(p)),
				degr(p), refused(p), failed(p), late(p),
				p.Counters["trawl_scatter_hedges_total"], p.Counters["trawl_scatter_failovers_total"],
				p.Counters["trawl_admission_rejected_total"], faulted(r.scenarioFaulted[sc.name][name]), ints(r.scenarioLatched[sc.name][name]))
		}
	}
	w("\nRatios trawl ÷ baseline of the pooled figures (in brackets: each round's ratio, runs taken back to back):\n\n| scenario | p50 | p99 | complete/s |\n|---|---:|---:|---:|\n")
	for _, sc := range scenarios {
		t, bl := r.scenarios[sc.name][trawlName], r.scenarios[sc.name][baseName]
		w("| %s | %s | %s | %s |\n", sc.name, pooledRatio(t, bl, p50), pooledRatio(t, bl, p99), pooledRatio(t, bl, goodput))
	}
	w("\n![latency per scenario](%s)\n\n", charts.scenarios)

	w("## Overload: offered load from %.1f× to %.0f× capacity\n\n", r.factors[0], r.factors[len(r.factors)-1])
	w("Open loop, healthy 3 × 3 cluster; load average %s. *Goodput* is complete answers/s; ÷ capacity is against the %.1f/s measured above.\n\n",
		r.loadAt["sweep"], r.capacity)
	w("| offered | offered/s | router | answers/s | goodput/s | goodput ÷ capacity | refused %% | degraded %% | failed %% | late %% | p50 ms (not refused) | p99 ms (not refused) | refusal p99 ms | replicas latched after (per round) |\n")
	w("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, f := range r.factors {
		for _, name := range []string{trawlName, baseName} {
			ss := r.sweep[f][name]
			w("| %.1f× | %.0f | %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n", f, f*r.capacity, name,
				med(ss, thru), med(ss, goodput), med(ss, goodput)/r.capacity, med(ss, refused), med(ss, degr), med(ss, failed), med(ss, late),
				ms(med(ss, p50)), ms(med(ss, p99)), ms(med(ss, refP99)), ints(r.sweepLatched[f][name]))
		}
	}
	w("\nGoodput ratio trawl ÷ baseline (median of per-round ratios): ")
	var parts []string
	for _, f := range r.factors {
		parts = append(parts, fmt.Sprintf("%.1f×: %.2f", f, ratio(r.sweep[f][trawlName], r.sweep[f][baseName], goodput)))
	}
	w("%s.\n\n![goodput against offered load](%s)\n\n", strings.Join(parts, ", "), charts.sweep)

	r.writeAblation(w, ms)
	r.writeRates(w)
	r.writeOverhead(w, ms)
	r.writeWidths(w, ms)
	r.writeScale(w, ms, charts)
	r.writeKinds(w, ms)
	r.writeTLS(w, ms)
	w("## Kernels\n\n")
	kernels := relLink(dir, kernelsReport)
	if r.quick {
		w("Not run by `make bench-quick`. `make bench` runs `go run ./cmd/benchreport`, which writes the kernel and scan report to [KERNELS.md](%s).\n\n", kernels)
	} else {
		w("`make bench` runs `go run ./cmd/benchreport` too: the kernel and scan report is [KERNELS.md](%s) (its chart KERNELS.png).\n\n", kernels)
	}
	w("## Not measured here\n\n")
	w("- 1 000 000 vectors: `make bench-ivf` (which `make bench` runs after this suite) measures `router shard` processes of " +
		"1 000 000 × 1536 (3 groups of one, `--index ivf`, their exact scan as the baseline) in `RESULTS-ivf-1m-*.md`, with the " +
		"RAM they took and their data directories' size on disk after the load; the peer comparison is `make bench-peer` " +
		"(`RESULTS-peer-20k.md`, `RESULTS-peer.md`).\n")
	w("- int8, IVF and filtered queries on `router shard` processes under faults (the families above use in-process shards, healthy).\n")
	if r.quick {
		w("- Quick runs are short: a p99 over one 2 s run at 0.5× capacity rests on a few dozen answers, close to the maximum; the overload sweep has one round.\n")
	}
	w("- A faster JSON vector decoder (see the figures above for whether it matters).\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func ints(xs []int) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprint(x))
	}
	return strings.Join(parts, ", ")
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return fmt.Sprintf("**%d**: %s", len(xs), strings.Join(xs, "; "))
}

func joinF(ss []loadgen.Summary, f func(loadgen.Summary) float64, format string) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, fmt.Sprintf(format, f(s)))
	}
	return strings.Join(parts, ", ")
}

func (r *results) writeOverhead(w func(string, ...any), ms func(float64) string) {
	w("## Router overhead (3 shards × 3 replicas, %d vectors)\n\n", r.mainRows)
	w("One client alternates a search through trawl's router with the same query sent by `trawlbench` straight to the replica "+
		"the router was using in every shard (found as the faults' replica is; here replica %s of shards 0, 1, 2) over gRPC "+
		"(through the same proxies), in parallel, timed until the slowest shard answers. "+
		"Overhead is given two ways: the router's percentile minus the direct one, and the percentiles of the per-query differences "+
		"(the same query both ways, back to back), each per round, then the median over rounds. CPU per query is the router "+
		"process's user+system time from `/proc/<pid>/stat` (10 ms ticks) over a closed-loop run of 4 clients, less its idle rate "+
		"(%.1f ms/s: prober and keepalives), divided by its queries. Load average %s.\n\n",
		strings.Trim(fmt.Sprint(r.overheadReplicas), "[]"), r.routerIdle/1e6, r.loadAt["overhead"])
	var rp50, rp99, dp50, dp99, op50, op99, pp50, pp99, cb, cj, jp50, bp50 []float64
	for _, o := range r.overhead {
		rp50 = append(rp50, p50(o.router))
		rp99 = append(rp99, p99(o.router))
		dp50 = append(dp50, p50(o.direct))
		dp99 = append(dp99, p99(o.direct))
		op50 = append(op50, p50(o.router)-p50(o.direct))
		op99 = append(op99, p99(o.router)-p99(o.direct))
		pp50 = append(pp50, msOf(o.pair50))
		pp99 = append(pp99, msOf(o.pair99))
		cb = append(cb, float64(o.cpuB64)/1e3)
		cj = append(cj, float64(o.cpuJSON)/1e3)
		bp50 = append(bp50, p50(o.b64))
		jp50 = append(jp50, p50(o.json))
	}
	w("| | p50 ms | p99 ms |\n|---|---:|---:|\n")
	w("| through the router | %s | %s |\n", ms(median(rp50)), ms(median(rp99)))
	w("| direct to the slowest of 3 shards | %s | %s |\n", ms(median(dp50)), ms(median(dp99)))
	w("| router overhead: difference of the percentiles | %.2f | %.2f |\n", median(op50), median(op99))
	w("| **router overhead: percentiles of the per-query difference** (router − direct, same query back to back) | **%.2f** | **%.2f** |\n\n",
		median(pp50), median(pp99))
	var jr []float64
	for i := range cb {
		if cb[i] > 0 {
			jr = append(jr, cj[i]/cb[i])
		}
	}
	w("| query encoding | router CPU µs/query | p50 ms (4 clients) |\n|---|---:|---:|\n")
	w("| `vector_b64` | %.0f | %s |\n", median(cb), ms(median(bp50)))
	w("| JSON floats | %.0f | %s |\n\n", median(cj), ms(median(jp50)))
	w("JSON ÷ b64 router CPU per query (median of per-round ratios): %.2f.\n\n", median(jr))
}

func (r *results) writeScale(w func(string, ...any), ms func(float64) string, charts chartFiles) {
	w("## Fan-out width and corpus size (shards of one replica)\n\n")
	w("Each row is its own cluster of groups of one (`router shard` without `--peers`), loaded with `router load`. "+
		"Latency is one closed-loop client, trawl and baseline alternating; goodput and router CPU per query are 8 closed-loop clients through trawl; "+
		"runs of %s.\n\n", r.scalePhase)
	w("| shards | vectors | load avg | load s | trawl p50 ms | trawl p99 ms | baseline p50 ms | baseline p99 ms | goodput/s (8 clients) | router CPU µs/query |\n")
	w("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.scale {
		cpu := make([]float64, len(c.cpu))
		for i, d := range c.cpu {
			cpu[i] = float64(d) / 1e3
		}
		w("| %d | %d | %s | %.1f | %s | %s | %s | %s | %.1f | %.0f |\n", c.shards, c.rows, c.loadAvg, c.load.Seconds(),
			ms(med(c.trawl, p50)), ms(med(c.trawl, p99)), ms(med(c.base, p50)), ms(med(c.base, p99)),
			med(c.capacity, goodput), median(cpu))
	}
	w("\n![latency against shard count and corpus size](%s)\n\n", charts.scale)
}
