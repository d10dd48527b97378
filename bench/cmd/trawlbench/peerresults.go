package main

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
	"github.com/trawl-search/trawl/vector/ivf"
)

// peerResults is what a `trawlbench peer` run measured.
type peerResults struct {
	plan               peerPlan
	command            string
	info               machine.Info
	loadStart, loadEnd string
	took, exactTook    time.Duration
	systems            []*peerSystem // trawl first, then Weaviate HNSW, then (optionally) flat
}

func (s *peerSystem) med(f func(loadgen.Summary) float64, multi bool) float64 {
	xs := make([]float64, len(s.rounds))
	for i, r := range s.rounds {
		if multi {
			xs[i] = f(r.multi)
		} else {
			xs[i] = f(r.single)
		}
	}
	return median(xs)
}

// perRound is a/b of one figure, round by round.
func perRound(a, b *peerSystem, f func(loadgen.Summary) float64, multi bool) []float64 {
	var out []float64
	for i := range min(len(a.rounds), len(b.rounds)) {
		x, y := f(a.rounds[i].single), f(b.rounds[i].single)
		if multi {
			x, y = f(a.rounds[i].multi), f(b.rounds[i].multi)
		}
		if y > 0 {
			out = append(out, x/y)
		}
	}
	return out
}

func fmtRatios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " / ")
}

func (r *peerResults) write(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	png := strings.TrimSuffix(filepath.Base(path), ".md") + ".png"
	if err := r.chart(filepath.Join(dir, png)); err != nil {
		return err
	}
	curve, err := r.curve(path)
	if err != nil {
		return err
	}
	p := r.plan
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	var peers []string
	for _, s := range r.systems {
		switch {
		case strings.HasPrefix(s.name, "Weaviate"):
			if len(peers) == 0 || peers[len(peers)-1] != "Weaviate 1.35.2" {
				peers = append(peers, "Weaviate 1.35.2")
			}
		case s.exact:
			peers = append(peers, "its exact scan")
		}
	}
	if len(peers) == 0 {
		peers = []string{"itself at other nprobe"}
	}
	switch {
	case len(p.collections) > 1 && r.hasWeaviate():
		w("# trawl's %s collections against %s on %s, same machine, same run\n\n", strings.Join(p.collections, ", "), strings.Join(peers, " and "), r.datasetName())
	case len(p.collections) > 1:
		w("# trawl's %s collections on %s, against a brute force, same machine, same run\n\n", strings.Join(p.collections, ", "), r.datasetName())
	default:
		w("# trawl IVF against %s, same machine, same run\n\n", strings.Join(peers, " and "))
	}
	target := "`make bench-peer`, `make bench-ivf`"
	switch {
	case p.dataset == "mnist" && r.hasWeaviate():
		target = "`make bench-peer`"
	case p.dataset == "mnist":
		target = "`make bench-realdata`"
	}
	w("Written by `%s` (from `bench/`; %s at the top) on %s; it took %s. ", r.command, target,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), r.took.Round(time.Second))
	w("Load average (1, 5, 15 min) at start **%s**, at end **%s**. The machine is shared with other work, so compare "+
		"the systems by the same-round ratios below; figures are medians over %d rounds, the systems measured one after "+
		"another within a round (order reversed every other round), every process of both systems running throughout.\n\n",
		r.loadStart, r.loadEnd, p.rounds)
	w("%s\n", r.info.Markdown())
	w("## Setup\n\n")
	kmax := p.k
	for _, k := range p.recallKs {
		kmax = max(kmax, k)
	}
	w("- **Corpus** (`bench/internal/peer`): %s. Exact top-%d of every query by brute force with trawl's float32 "+
		"kernel (`vector.Kernel.Scan`, streamed chunk by chunk with the .npy file; %s for corpus, file and answers).\n", p.about, kmax, r.exactTook.Round(time.Millisecond))
	wait := "the run waits until every shard's index block in `/cluster/status` is `ready` with `nprobe_calibrated` true and no retrain due"
	if ix := r.ivfSystem(); ix != nil && ix.flat {
		wait = fmt.Sprintf("every shard holds fewer than `ivf.MinRows` (%d) rows, so none trains an index: each answers by its flat "+
			"int8 scan with exact float32 re-scoring of the best candidates, and the run waits until `/cluster/status` counts every row", ivf.MinRows)
	}
	var colls []string
	for _, kind := range p.collections {
		colls = append(colls, fmt.Sprintf("`%s` (%s)", kind, strings.ReplaceAll(collectionKinds[kind], ":", ", ")))
	}
	w("- **trawl**: %d `router shard` processes (groups of one replica each, no raft peers) behind one `router serve` at its "+
		"defaults; collections (quantization, index) %s, metric %s, each spanning every shard, created by `--ensure-collection` "+
		"and loaded in turn with `router load --collection` from one .npy file; for ivf, %s. Queries: `POST "+
		"/v1/collections/{c}/search?deadline_ms=%d` with `vector_b64` and `k` = %d, default `nprobe` and oversample; a degraded "+
		"answer counts as an error.\n", p.shards, strings.Join(colls, ", "), p.metric, wait, p.deadlineMS, p.k)
	if p.memLimit != "" {
		w("  Every shard runs with `GOMEMLIMIT=%s`, as the Helm chart sets it (90 %% of the pod's memory limit).\n", p.memLimit)
	}
	if p.exact && slices.Contains(p.collections, "ivf") {
		w("- **trawl exact**: the same shards asked with `\"exact\": true` (every row scanned in float32, as a flat shard does); "+
			"%d single-client warm-up and %d timed queries a round, as its scan grows with the corpus.\n", 8, min(p.exactSingle, p.single))
	}
	if len(p.recallKs) > 0 {
		w("- **Recall at other k**: after the timed rounds, every query once more at k = %s through trawl's systems but the exact scan, "+
			"untimed, by exact id set against the brute force's top-k.\n", joinInts(p.recallKs))
	}
	w("- **Per system and round**: %d single-client warm-up queries, then %d timed single-client queries (closed loop, one "+
		"in flight: p50/p99), then %d closed-loop clients for %s (q/s). Latency is the client's, request sent to answer "+
		"parsed. Recall@%d by exact id set against the brute force, from the first round's single-client answers (%d queries).\n",
		p.warmup, p.single, p.clients, p.window, p.k, p.recipe.Queries)
	if !r.hasWeaviate() {
		w("- RSS (VmRSS, and RssAnon: heap without file pages such as a memory-mapped raft log or LSM segment) from `/proc/<pid>/status` "+
			"after each collection's import: the router and its %d shards together, every collection loaded until then.\n\n", p.shards)
	} else {
		w("- **Weaviate 1.35.2**: one `weaviate-server` (built by `make weaviate` from `tools/weaviate/go.mod`) on loopback, "+
			"`vectorizer: none`, `distance: %s`, `shardingConfig.desiredCount: %d`; class `PeerHnsw` with `vectorIndexType: hnsw` at "+
			"Weaviate's defaults (efConstruction, maxConnections, dynamic ef)", weaviateDistance(p.metric), p.shards)
		if p.flat {
			w(" and class `PeerFlat` with `vectorIndexType: flat` (its exact baseline) in the same process")
		}
		w(". Imported through `/v1/batch/objects` with explicit vectors and a UUID per document that encodes its row; the "+
			"run waits until the class counts every object and each shard reports `vectorIndexingStatus: READY` with an empty "+
			"queue. Queries: GraphQL `Get` with `nearVector`, `limit: %d`, returning `_additional { id }`.\n", p.k)
		w("- RSS (VmRSS, and RssAnon: heap without file pages such as a memory-mapped raft log or LSM segment) from `/proc/<pid>/status` after import: trawl's is the router and its %d shards together; Weaviate's is its one "+
			"process", p.shards)
		if p.flat {
			w(" (holding the HNSW class only at that moment; the flat class's figure is the process with both)")
		}
		w(".\n\n")
	}

	w("## Results\n\n![p50 and q/s per system](%s)\n\n", png)
	if curve != "" {
		w("![recall@%d against p50 and q/s, over nprobe](%s)\n\n", p.k, filepath.Base(curve))
	}
	other := ""
	for _, k := range p.recallKs {
		other += fmt.Sprintf(" | recall@%d", k)
	}
	w("| system | p50 ms, 1 client | p99 ms, 1 client | q/s, %d clients | recall@%d%s | import + index | RSS after import (anonymous) | shards' anonymous RSS a vector |\n|---|---:|---:|---:|---:%s|---:|---:|---:|\n",
		p.clients, p.k, other, strings.Repeat("|---:", len(p.recallKs)))
	for _, s := range r.systems {
		at := ""
		for _, k := range p.recallKs {
			if v, ok := s.recallAt[k]; ok {
				at += fmt.Sprintf(" | %.4f", v)
			} else {
				at += " | —"
			}
		}
		bpv := "—"
		if s.bytesPerV > 0 {
			bpv = fmt.Sprintf("%.0f B", s.bytesPerV)
		}
		w("| %s | %.2f | %.2f | %.0f | %.4f%s | %.1f s | %.0f MiB (%.0f) | %s |\n", s.name, s.med(p50, false), s.med(p99, false),
			s.med(thru, true), s.recall, at, s.importTook.Seconds(), float64(s.rss)/(1<<20), float64(s.rssAnon)/(1<<20), bpv)
	}
	if ix := r.ivfSystem(); ix != nil && ix.shardNote != "" {
		n := ix.shardNote
		w("\ntrawl's index per shard (`/cluster/status`): %s. A float32 vector is %d B.\n", n, 4*p.recipe.Dim)
	}
	w("\nImport: ")
	for i, s := range r.systems {
		if i > 0 {
			w("; ")
		}
		w("%s: %s", s.name, s.importNote)
	}
	w(".\n\nPer round (p50 ms / p99 ms / q/s; errors in the throughput run; load average as the system's run began):\n\n")
	w("| round | system | p50 | p99 | q/s | errors | load avg |\n|---|---|---:|---:|---:|---:|---|\n")
	for i := range p.rounds {
		for _, s := range r.systems {
			if i >= len(s.rounds) {
				continue
			}
			pr := s.rounds[i]
			w("| %d | %s | %.2f | %.2f | %.0f | %d | %s |\n", i+1, s.name, p50(pr.single), p99(pr.single), pr.multi.Throughput(), pr.errors, pr.loadAvg)
		}
	}
	r.writeExactVerdict(w)
	r.writeChecks(w)
	var h *peerSystem
	for _, s := range r.systems {
		if strings.HasPrefix(s.name, "Weaviate") && strings.Contains(s.name, "hnsw") {
			h = s
			break
		}
	}
	if t := r.ivfSystem(); h != nil && t != nil {
		pr := perRound(t, h, p50, false)
		qr := perRound(t, h, thru, true)
		w("\nSame-round ratios, trawl ÷ Weaviate HNSW (rounds 1 … %d): p50 **%s** (below 1: trawl faster), %d-client q/s **%s** "+
			"(above 1: trawl more).\n\n", p.rounds, fmtRatios(pr), p.clients, fmtRatios(qr))
		if t.flat {
			// Issue 15's goal is the index's; below MinRows there is none.
			return os.WriteFile(path, []byte(b.String()), 0o644)
		}
		w("## Verdict against issue 15\n\n")
		w("Goal: at %d clustered %d-D cosine documents over %d shards, `--index ivf` at the default nprobe has single-client "+
			"p50 at or below Weaviate HNSW's, %d-client q/s at or above it, and recall@10 ≥ 0.99 by exact id set.\n\n",
			p.recipe.Rows, p.recipe.Dim, p.shards, p.clients)
		okP50 := t.med(p50, false) <= h.med(p50, false)
		okQPS := t.med(thru, true) >= h.med(thru, true)
		okRec := t.recall >= 0.99
		mark := func(ok bool) string {
			if ok {
				return "met"
			}
			return "**not met**"
		}
		w("- p50: trawl %.2f ms against %.2f ms (median ratio %.2f): %s.\n", t.med(p50, false), h.med(p50, false), median(pr), mark(okP50))
		w("- q/s at %d clients: trawl %.0f against %.0f (median ratio %.2f): %s.\n", p.clients, t.med(thru, true), h.med(thru, true), median(qr), mark(okQPS))
		w("- recall@%d: trawl %.4f (Weaviate HNSW %.4f): %s.\n", p.k, t.recall, h.recall, mark(okRec))
		if okP50 && okQPS && okRec {
			w("\n**The goal is met in this run.**\n")
		} else {
			w("\n**The goal is not met in this run.**\n")
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// chart: p50 and q/s per system, side by side.
func (r *peerResults) chart(path string) error {
	tag := fmt.Sprintf("(commit %s, load avg %s, %d × %d-D, %d shards)", r.info.Commit, r.loadStart, r.plan.recipe.Rows, r.plan.recipe.Dim, r.plan.shards)
	names := make([]string, len(r.systems))
	for i, s := range r.systems {
		names[i] = strings.SplitN(strings.TrimPrefix(s.name, "Weaviate 1.35.2 "), ",", 2)[0]
	}
	// Many systems (an nprobe sweep): shorter tick labels, slanted, so
	// they do not run into each other; the legend has the full names.
	ticks := names
	if len(names) > 5 {
		ticks = make([]string, len(names))
		for i, n := range names {
			ticks[i] = strings.NewReplacer("trawl ", "", " (int8)", "", "(every list)", "(all)").Replace(n)
		}
	}
	// trawl's bars in its reds, the peer's in blues, as in the suite's charts.
	cols := make([]color.Color, len(r.systems))
	nt, nw := 0, 0
	for i, s := range r.systems {
		if strings.HasPrefix(s.name, "trawl") {
			cols[i] = []color.Color{trawlColor, trawlLight}[nt%2]
			nt++
		} else {
			cols[i] = []color.Color{baseColor, baseLight}[nw%2]
			nw++
		}
	}
	mk := func(title, ylabel string, val func(*peerSystem) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title + "\n" + tag
		p.Y.Label.Text = ylabel
		for i, s := range r.systems {
			vals := make(plotter.Values, len(r.systems))
			vals[i] = val(s)
			bc, err := plotter.NewBarChart(vals, vg.Points(40))
			if err != nil {
				return nil, err
			}
			bc.Color = cols[i]
			bc.LineStyle.Width = 0
			p.Add(bc)
			p.Legend.Add(fmt.Sprintf("%s: %.3g", names[i], val(s)), bc)
		}
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, p.Y.Max*1.35
		p.NominalX(ticks...)
		if len(names) > 5 {
			p.X.Tick.Label.Rotation = math.Pi / 6
			p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YTop
		}
		return p, nil
	}
	a, err := mk("Single-client p50 (median of rounds)", "latency, ms", func(s *peerSystem) float64 { return s.med(p50, false) })
	if err != nil {
		return err
	}
	b, err := mk(fmt.Sprintf("Throughput, %d closed-loop clients (median of rounds)", r.plan.clients), "queries/s",
		func(s *peerSystem) float64 { return s.med(thru, true) })
	if err != nil {
		return err
	}
	return savePNG(path, 12*vg.Inch, 5*vg.Inch, a, b)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// writeExactVerdict compares trawl's index at its default nprobe with its
// exact scan, when both ran: issue 15's goal at a million vectors is
// ≥ 20× the exact scan's q/s at recall@10 ≥ 0.99.
func (r *peerResults) writeExactVerdict(w func(string, ...any)) {
	var ix, ex *peerSystem
	for _, s := range r.systems {
		switch {
		case s.index && s.nprobe == 0 && strings.HasPrefix(s.name, "trawl") && ix == nil:
			ix = s
		case s.exact:
			ex = s
		}
	}
	if ix == nil || ex == nil {
		return
	}
	p := r.plan
	qr := perRound(ix, ex, thru, true)
	pr := perRound(ix, ex, p50, false)
	if ix.flat {
		w("\n## The flat int8 scan against the exact scan\n\n")
		w("Same shards, same run, the default answer (int8 codes scanned, the best candidates re-scored in float32) against `\"exact\": true` (float32 throughout): %d-client q/s **%.1f×** the exact scan's (rounds: %s), "+
			"single-client p50 **%.3g×** (rounds: %s), at recall@%d %.4f.\n", p.clients, median(qr), fmtRatios(qr), median(pr), fmtRatios(pr), p.k, ix.recall)
		return
	}
	w("\n## The index against the exact scan\n\n")
	w("Same shards, same run, default nprobe against `\"exact\": true`: %d-client q/s **%.1f×** the exact scan's (rounds: %s), "+
		"single-client p50 **%.3g×** (rounds: %s), at recall@%d %.4f.\n", p.clients, median(qr), fmtRatios(qr), median(pr), fmtRatios(pr), p.k, ix.recall)
	if p.recipe.Rows >= 1_000_000 {
		ok := median(qr) >= 20 && ix.recall >= 0.99
		verdict := "**not met**"
		if ok {
			verdict = "met"
		}
		w("\nIssue 15's goal at 1 000 000 vectors, ≥ 20× the exact scan's q/s at recall@10 ≥ 0.99: %s in this run.\n", verdict)
	}
}

// curve charts recall@k against p50 and against q/s for trawl's index at
// each nprobe measured, with the exact scan and any peer as single
// points, into the results' name with -curve.png; "" when fewer than two
// nprobe were measured.
func (r *peerResults) curve(mdPath string) (string, error) {
	var ivfs []*peerSystem
	for _, s := range r.systems {
		if s.index {
			ivfs = append(ivfs, s)
		}
	}
	if len(ivfs) < 2 {
		return "", nil
	}
	path := strings.TrimSuffix(mdPath, ".md") + "-curve.png"
	tag := fmt.Sprintf("(commit %s, load avg %s, %d × %d-D, %d shards)", r.info.Commit, r.loadStart, r.plan.recipe.Rows, r.plan.recipe.Dim, r.plan.shards)
	mk := func(title, xlabel string, x func(*peerSystem) float64, logX, legendLeft bool) (*plot.Plot, error) {
		pl := plot.New()
		pl.Title.Text = title + "\n" + tag
		pl.X.Label.Text = xlabel
		pl.Y.Label.Text = fmt.Sprintf("recall@%d (exact id set)", r.plan.k)
		if logX {
			// Latencies span two decades (an index probe to a peer's
			// exact scan): a log axis keeps trawl's points apart.
			pl.X.Scale, pl.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		}
		// trawl's index, by recall (the default at its measured place):
		// it rises with nprobe, where the timings are noisy.
		sorted := slices.Clone(ivfs)
		slices.SortFunc(sorted, func(a, b *peerSystem) int { return cmp.Or(cmp.Compare(a.recall, b.recall), cmp.Compare(x(a), x(b))) })
		xy := make(plotter.XYs, len(sorted))
		labels := make([]string, len(sorted))
		for i, s := range sorted {
			xy[i] = plotter.XY{X: x(s), Y: s.recall}
			labels[i] = "default"
			if s.nprobe > 0 {
				labels[i] = fmt.Sprintf("nprobe %d", s.nprobe)
			}
		}
		line, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		line.Color, pts.Color = trawlColor, trawlColor
		pl.Add(line, pts)
		pl.Legend.Add("trawl ivf (int8)", line, pts)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: labels})
		if err != nil {
			return nil, err
		}
		pl.Add(lb)
		minRecall := 1.0
		for _, s := range r.systems {
			minRecall = min(minRecall, s.recall)
		}
		peers := 0
		for _, s := range r.systems {
			if s.index {
				continue
			}
			sc, err := plotter.NewScatter(plotter.XYs{{X: x(s), Y: s.recall}})
			if err != nil {
				return nil, err
			}
			switch {
			case strings.HasPrefix(s.name, "trawl int8"):
				sc.Color, sc.Shape = trawlLight, draw.BoxGlyph{}
			case strings.HasPrefix(s.name, "trawl"):
				sc.Color = color.Black
			default:
				sc.Color = []color.Color{baseColor, baseLight}[peers%2]
				sc.Shape = draw.PyramidGlyph{}
				peers++
			}
			sc.Radius = vg.Points(4)
			pl.Add(sc)
			pl.Legend.Add(strings.SplitN(s.name, ",", 2)[0], sc)
		}
		// Room above recall 1 and below the lowest, so no point sits on
		// the frame.
		pl.Y.Min, pl.Y.Max = minRecall-(1-minRecall)*0.15-0.0005, 1+(1-minRecall)*0.1+0.0005
		pl.Legend.Top, pl.Legend.Left = false, legendLeft
		return pl, nil
	}
	a, err := mk("Recall against single-client p50, over nprobe", "p50 latency, ms (median of rounds; log scale)",
		func(s *peerSystem) float64 { return s.med(p50, false) }, true, false)
	if err != nil {
		return "", err
	}
	b, err := mk(fmt.Sprintf("Recall against throughput, %d clients, over nprobe", r.plan.clients), "queries/s (median of rounds)",
		func(s *peerSystem) float64 { return s.med(thru, true) }, false, true)
	if err != nil {
		return "", err
	}
	return path, savePNG(path, 12*vg.Inch, 5*vg.Inch, a, b)
}

// ivfSystem is trawl's index at its default nprobe, nil when the run
// made no ivf collection.
func (r *peerResults) ivfSystem() *peerSystem {
	for _, s := range r.systems {
		if s.index && s.nprobe == 0 {
			return s
		}
	}
	return nil
}

func (r *peerResults) hasWeaviate() bool {
	return slices.ContainsFunc(r.systems, func(s *peerSystem) bool { return strings.HasPrefix(s.name, "Weaviate") })
}

// datasetName is the corpus in a title.
func (r *peerResults) datasetName() string {
	if r.plan.dataset == "mnist" {
		return fmt.Sprintf("MNIST-784 (%d × 784, l2)", r.plan.recipe.Rows)
	}
	return fmt.Sprintf("%d × %d-D %s", r.plan.recipe.Rows, r.plan.recipe.Dim, r.plan.dataset)
}

// recallBars are the recall@10 each kind of trawl collection is expected
// to reach at its defaults on any data: the flat scan is exact; the int8
// scan re-scores 4 × max(k, 10) candidates; the index's default nprobe is
// calibrated for 0.99 of each shard's own top-10.
var recallBars = []struct {
	kind string
	min  float64
}{{"flat", 1}, {"int8", 0.98}, {"ivf", 0.95}}

// writeChecks states, when the run made more than one collection, whether
// each one's recall@k at its defaults reached its bar.
func (r *peerResults) writeChecks(w func(string, ...any)) {
	if len(r.plan.collections) < 2 {
		return
	}
	w("\n## Recall at the defaults\n\n")
	for _, b := range recallBars {
		var s *peerSystem
		for _, x := range r.systems {
			if x.nprobe == 0 && !x.exact && strings.HasPrefix(x.name, "trawl "+b.kind+" ") {
				s = x
				break
			}
		}
		if s == nil {
			continue
		}
		verdict := "met"
		if s.recall < b.min {
			verdict = "**not met**"
		}
		w("- %s: recall@%d %.4f, bar %.2f: %s.\n", strings.SplitN(s.name, ",", 2)[0], r.plan.k, s.recall, b.min, verdict)
	}
}
