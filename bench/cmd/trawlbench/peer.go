package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/bench/internal/loadgen"
	"github.com/trawl-search/trawl/bench/internal/machine"
	"github.com/trawl-search/trawl/bench/internal/peer"
	"github.com/trawl-search/trawl/bench/internal/promtext"
	"github.com/trawl-search/trawl/bench/internal/weaviate"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
)

// peerPlan is the shape of a `trawlbench peer` run.
type peerPlan struct {
	recipe  peer.Recipe
	shards  int
	k       int
	warmup  int           // single-client queries before the timed ones
	single  int           // timed single-client queries (each round)
	clients int           // closed-loop clients of the throughput run
	window  time.Duration // one throughput run
	rounds  int
	// deadlineMS is every trawl query's deadline_ms.
	deadlineMS int
	flat       bool  // also a Weaviate class with a flat index
	nprobes    []int // trawl systems besides the default nprobe, on the same shards
	batch      int   // Weaviate import: objects a request
	importCC   int   // Weaviate import: requests in flight
	// exact: also trawl's exact float32 scan ("exact": true) on the same
	// shards, exactSingle timed single-client queries a round (its scan
	// grows with the corpus).
	exact       bool
	exactSingle int
	recallKs    []int  // besides k, for trawl's systems but the exact one
	memLimit    string // GOMEMLIMIT of every trawl shard, "" unset
	// nprobeAll: also trawl's index at nprobe = its shards' most lists
	// (every list: the index's flat int8 scan).
	nprobeAll bool
	// dataset is "synthetic" (recipe) or "mnist" (the MNIST digits,
	// recipe.Rows and recipe.Queries of them); about describes it.
	dataset, about string
	metric         vector.Metric
	// collections are the trawl collections made, each of its kind and
	// named after it: flat (float32 scan), int8 (flat int8 codes, re-scored)
	// or ivf.
	collections []string
}

// peerSystem is one side of the comparison: how to ask it query i and
// get back trawl's ids of its answer.
type peerSystem struct {
	name   string
	search func(ctx context.Context, hc *http.Client, i int) ([]string, error)
	// searchK asks query i for k hits (nil: the system is measured at
	// the plan's k only).
	searchK func(ctx context.Context, hc *http.Client, i, k int) ([]string, error)
	pids    func() []int // processes whose RSS is the system's
	// warmup and single override the plan's (0: the plan's).
	warmup, single int
	// nprobe is the nprobe the system's queries name, 0 for the
	// default; index is whether it answers from trawl's index.
	nprobe int
	index  bool
	// exact: the system's queries ask "exact": true.
	exact bool
	// flat: trawl's shards hold too few rows to train an index and answer
	// by their flat int8 scan (the 20 000-row run).
	flat bool

	importTook time.Duration
	importNote string
	rss        int64 // bytes, after import
	rssAnon    int64 // its anonymous part
	rounds     []peerRound
	recall     float64         // of the first round's single-client answers
	recallAt   map[int]float64 // at the plan's recallKs, untimed passes
	shardNote  string          // trawl: each shard's index, from /cluster/status
	bytesPerV  float64         // trawl: the shards' anonymous RSS a vector
}

type peerRound struct {
	single, multi loadgen.Summary
	errors        int64
	loadAvg       string
}

func runPeer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("peer", flag.ExitOnError)
	p := peerPlan{recipe: peer.Recipe{Dim: 1536, Seed: 15}, k: 10}
	fs.IntVar(&p.recipe.Rows, "rows", 100_000, "documents (mnist: at most 60 000)")
	fs.IntVar(&p.recipe.Queries, "queries", 256, "distinct queries (each answered once per single-client run)")
	fs.IntVar(&p.recipe.Clusters, "clusters", 1_000, "Gaussian clusters of the corpus")
	fs.Float64Var(&p.recipe.Noise, "noise", 1, "noise norm relative to a cluster centre's")
	fs.IntVar(&p.shards, "shards", 3, "shards on both systems")
	fs.IntVar(&p.deadlineMS, "deadline-ms", 5000, "deadline_ms of every trawl query (a degraded answer counts as an error); 50 is what users get by default")
	fs.IntVar(&p.warmup, "warmup", 64, "single-client queries before the timed ones, every run")
	fs.IntVar(&p.single, "single", 0, "timed single-client queries per run (0: -queries)")
	fs.IntVar(&p.clients, "clients", 4, "closed-loop clients of the throughput run")
	fs.DurationVar(&p.window, "window", 15*time.Second, "one throughput run")
	fs.IntVar(&p.rounds, "rounds", 3, "rounds; systems alternate within each")
	fs.BoolVar(&p.flat, "flat", true, "also measure a Weaviate class with a flat (exact) index")
	fs.IntVar(&p.batch, "batch", 200, "Weaviate import: objects per /v1/batch/objects request")
	fs.IntVar(&p.importCC, "import-concurrency", 2, "Weaviate import: requests in flight")
	bin := fs.String("weaviate", "../.bin/weaviate-server", "the weaviate-server binary (make weaviate builds it from tools/weaviate); none: trawl alone, to try the harness")
	fs.BoolVar(&p.exact, "exact", false, "also measure trawl's exact float32 scan (\"exact\": true) on the same shards")
	fs.IntVar(&p.exactSingle, "exact-queries", 64, "timed single-client queries a round of the exact system (after 8 warm-up ones)")
	fs.StringVar(&p.memLimit, "shard-memlimit", "", "GOMEMLIMIT of every trawl shard, as the Helm chart sets it (90 % of its memory limit), e.g. 6GiB; empty: unset")
	recallFlag := fs.String("recall-k", "1,100", "comma-separated k, besides -k 10, at which every trawl system but the exact scan is checked for recall (untimed, every query once)")
	nprobeFlag := fs.String("nprobe-extra", "", "comma-separated nprobe values to measure trawl at besides the default, on the same shards; all: every list")
	fs.StringVar(&p.dataset, "dataset", "synthetic", "synthetic (-clusters, -noise; cosine) or mnist (the MNIST digits from the Go module "+peer.MNISTModule+", l2: -rows training images, -queries test images)")
	collFlag := fs.String("collections", "ivf", "comma-separated trawl collections to create and load, each named after its kind: flat (float32 scan), int8 (flat int8 scan, re-scored), ivf")
	out := fs.String("out", "RESULTS-peer.md", "markdown file to write (its PNG beside it)")
	root := fs.String("repo", "..", "the trawl repository (cmd/router is built from it)")
	workFlag := fs.String("work", "", "work directory (default: a new one under the system's temp dir)")
	keep := fs.Bool("keep", false, "keep the work directory (logs, data) after the run")
	_ = fs.Parse(args)
	if p.single <= 0 {
		p.single = p.recipe.Queries
	}
	for f := range strings.SplitSeq(*nprobeFlag, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if f == "all" {
			p.nprobeAll = true
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return fmt.Errorf("-nprobe-extra %q: want positive integers or all", *nprobeFlag)
		}
		p.nprobes = append(p.nprobes, n)
	}
	for f := range strings.SplitSeq(*recallFlag, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || n > 1000 {
			return fmt.Errorf("-recall-k %q: want integers in 1..1000", *recallFlag)
		}
		p.recallKs = append(p.recallKs, n)
	}
	for f := range strings.SplitSeq(*collFlag, ",") {
		f = strings.TrimSpace(f)
		if _, ok := collectionKinds[f]; !ok || slices.Contains(p.collections, f) {
			return fmt.Errorf("-collections %q: want distinct flat, int8 or ivf", *collFlag)
		}
		p.collections = append(p.collections, f)
	}
	switch p.dataset {
	case "synthetic":
		p.metric, p.about = vector.Cosine, p.recipe.String()+". Cosine"
	case "mnist":
		p.metric, p.recipe.Dim = vector.Euclidean, peer.MNISTDim
		p.about = fmt.Sprintf("MNIST digits (`%s`'s `data/`, read from the module cache): the first %d of its 60000 training images "+
			"as documents, %d of its 10000 test images (every %dth) as queries; 784 uint8 pixels as float32 0..255, unnormalised. L2 "+
			"(ANN-benchmarks' mnist-784-euclidean)", peer.MNISTModule, p.recipe.Rows, p.recipe.Queries, 10_000/max(1, p.recipe.Queries))
	default:
		return fmt.Errorf("-dataset %q: want synthetic or mnist", p.dataset)
	}
	rootAbs, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	wbin := ""
	if *bin != "none" {
		if wbin, err = filepath.Abs(*bin); err != nil {
			return err
		}
		if _, err := os.Stat(wbin); err != nil {
			return fmt.Errorf("weaviate binary: %w (run make weaviate)", err)
		}
	}
	work := *workFlag
	if work == "" {
		if work, err = os.MkdirTemp("", "trawlbench-peer-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(work, 0o750); err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(work)
	}
	started := time.Now()
	res := &peerResults{plan: p, command: "trawlbench peer " + strings.Join(args, " "),
		loadStart: machine.LoadAvg(), info: machine.Describe(ctx, rootAbs)}
	logf := log.Printf
	logf("work directory %s, load average %s", work, res.loadStart)

	t0 := time.Now()
	rbin, err := cluster.Build(ctx, rootAbs, work)
	if err != nil {
		return err
	}
	logf("built the router in %s", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	npy := filepath.Join(work, "corpus.npy")
	// Weaviate's import needs the documents in memory; trawl's reads the
	// .npy file, so without Weaviate the corpus is only streamed through.
	corpus, truth, err := writeCorpus(ctx, p, npy, wbin != "", rootAbs)
	if err != nil {
		return err
	}
	res.exactTook = time.Since(t0)
	logf("corpus, .npy file and exact answers in %s", res.exactTook.Round(time.Millisecond))

	// trawl: groups of one replica, so the figures are the index and the
	// scatter-gather, not raft replication.
	trs, c, err := startTrawl(ctx, rbin, work, npy, corpus, p, logf)
	if err != nil {
		return err
	}
	defer c.Close()
	systems := trs

	if wbin != "" {
		ws, err := weaviate.Start(ctx, wbin, filepath.Join(work, "weaviate"), filepath.Join(work, "weaviate.log"))
		if err != nil {
			return err
		}
		defer ws.Kill()
		logf("weaviate up at %s", ws.Base)
		classes := []struct{ name, index string }{{"PeerHnsw", "hnsw"}}
		if p.flat {
			classes = append(classes, struct{ name, index string }{"PeerFlat", "flat"})
		}
		for _, cl := range classes {
			s, err := startWeaviateClass(ctx, ws, cl.name, cl.index, corpus, p, logf)
			if err != nil {
				return err
			}
			systems = append(systems, s)
		}
	}

	for r := range p.rounds {
		order := systems
		if r%2 == 1 {
			// Reverse the order every other round, so no system always
			// runs right after the same neighbour.
			order = make([]*peerSystem, len(systems))
			for i, s := range systems {
				order[len(systems)-1-i] = s
			}
		}
		for _, s := range order {
			pr, got, err := measure(ctx, s, p, r)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", s.name, r+1, err)
			}
			s.rounds = append(s.rounds, pr)
			if r == 0 {
				// Against the queries it answered (the exact system
				// answers fewer).
				s.recall = peer.Recall(got, truth.IDs(p.k)[:len(got)])
			}
			logf("round %d %s: p50 %.2f ms p99 %.2f ms, %d clients %.0f q/s, recall@%d %.4f, errors %d",
				r+1, s.name, p50(pr.single), p99(pr.single), p.clients, pr.multi.Throughput(), p.k, s.recall, pr.errors)
		}
	}
	// Recall at the other k: every query once, untimed, after the timed
	// rounds so their caches are the same for every system.
	for _, s := range systems {
		if s.searchK == nil || s.exact {
			continue
		}
		s.recallAt = map[int]float64{}
		hc := &http.Client{Timeout: 30 * time.Second}
		for _, k := range p.recallKs {
			got := make([][]string, p.recipe.Queries)
			for i := range got {
				if got[i], err = s.searchK(ctx, hc, i, k); err != nil {
					return fmt.Errorf("%s, recall@%d: %w", s.name, k, err)
				}
			}
			s.recallAt[k] = peer.Recall(got, truth.IDs(k))
			logf("%s: recall@%d %.4f", s.name, k, s.recallAt[k])
		}
	}
	res.systems = systems
	res.loadEnd = machine.LoadAvg()
	res.took = time.Since(started)
	return res.write(*out)
}

// writeCorpus streams the plan's corpus into a .npy file for `router
// load` while the exact answers accumulate, at the largest k any system
// is checked at. A generated corpus stays in memory only when keep is
// set; MNIST is read whole (root is the trawl repository, bench/ under it
// the module that pins MNIST's).
func writeCorpus(ctx context.Context, p peerPlan, npy string, keep bool, root string) (*peer.Corpus, *peer.Truth, error) {
	r := p.recipe
	var c *peer.Corpus
	stream := func(fn func(first int, rows []float32) error) error { return peer.Stream(ctx, r, 8192, fn) }
	if p.dataset == "mnist" {
		dir, err := peer.MNISTDir(ctx, filepath.Join(root, "bench"))
		if err != nil {
			return nil, nil, err
		}
		if c, err = peer.LoadMNIST(dir, r.Rows, r.Queries); err != nil {
			return nil, nil, err
		}
		stream, keep = func(fn func(first int, rows []float32) error) error { return c.Chunks(ctx, 8192, fn) }, false
	} else {
		qs, err := peer.Queries(r)
		if err != nil {
			return nil, nil, err
		}
		c = &peer.Corpus{Recipe: r, Queries: qs}
	}
	kmax := p.k
	for _, k := range p.recallKs {
		kmax = max(kmax, k)
	}
	truth, err := peer.NewTruth(c.Queries, kmax, p.metric)
	if err != nil {
		return nil, nil, err
	}
	w, err := cluster.CreateNpy(npy, r.Rows, r.Dim)
	if err != nil {
		return nil, nil, err
	}
	if keep {
		c.Data = make([]float32, 0, r.Rows*r.Dim)
	}
	err = stream(func(first int, rows []float32) error {
		if err := w.Write(rows); err != nil {
			return err
		}
		if keep {
			c.Data = append(c.Data, rows...)
		}
		return truth.Add(ctx, first, rows)
	})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	return c, truth, nil
}

// collectionKinds are the settings (quantization:index) of the trawl
// collections a peer run can make, by kind, which is also their name.
var collectionKinds = map[string]string{"flat": "none:flat", "int8": "int8:flat", "ivf": "int8:ivf"}

// startTrawl starts `router shard` processes and a router that ensures
// the plan's collections, then loads the corpus into each in turn
// through `router load` and waits until its every shard serves it as
// settled (loadCollection).
func startTrawl(ctx context.Context, bin, work, npy string, corpus *peer.Corpus, p peerPlan, logf func(string, ...any)) ([]*peerSystem, *cluster.Cluster, error) {
	dir := filepath.Join(work, "trawl")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, err
	}
	cfg := cluster.Config{Bin: bin, Dir: dir, Shards: p.shards, Replicas: 1, Dim: corpus.Dim}
	if p.memLimit != "" {
		cfg.ShardEnv = []string{"GOMEMLIMIT=" + p.memLimit}
	}
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	var ensure []string
	for _, kind := range p.collections {
		ensure = append(ensure, "--ensure-collection", fmt.Sprintf("%s=%d:%s:%s", kind, corpus.Dim, p.metric, collectionKinds[kind]))
	}
	rt, err := c.StartRouter(ctx, "trawl", ensure...)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	pids := func() []int {
		ps := []int{rt.PID()}
		for _, reps := range c.Shards {
			for _, r := range reps {
				ps = append(ps, r.PID())
			}
		}
		return ps
	}
	var out []*peerSystem
	for _, kind := range p.collections {
		ss, err := loadCollection(ctx, c, rt, kind, dir, npy, corpus, p, pids, logf)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		out = append(out, ss...)
	}
	return out, c, nil
}

// loadCollection loads the corpus into the collection kind through
// `router load`, waits until every shard serves it settled (ivf: from an
// index whose default nprobe its leader has measured), and returns its
// systems: the collection at its defaults, then (ivf) at the plan's other
// nprobe and its exact scan.
func loadCollection(ctx context.Context, c *cluster.Cluster, rt *cluster.Router, kind, dir, npy string, corpus *peer.Corpus,
	p peerPlan, pids func() []int, logf func(string, ...any)) ([]*peerSystem, error) {
	t0 := time.Now()
	if _, err := c.LoadInto(ctx, rt, kind, npy); err != nil {
		return nil, err
	}
	loaded := time.Since(t0)
	logf("trawl %s: loaded %d vectors in %s", kind, corpus.Rows, loaded.Round(time.Millisecond))
	// 5 s by default: the comparison is of answers, and Weaviate has no
	// deadline; a trawl answer missing a shard counts as an error.
	url := fmt.Sprintf("%s/v1/collections/%s/search?deadline_ms=%d", rt.Base, kind, p.deadlineMS)
	system := func(nprobe int, exact bool) (*peerSystem, error) {
		body := func(i, k int) ([]byte, error) {
			m := map[string]any{"vector_b64": base64.StdEncoding.EncodeToString(vector.EncodeLE(corpus.Queries[i%len(corpus.Queries)])), "k": k}
			if nprobe > 0 {
				m["nprobe"] = nprobe
			}
			if exact {
				m["exact"] = true
			}
			return json.Marshal(m)
		}
		bodies := make([][]byte, len(corpus.Queries))
		for i := range bodies {
			b, err := body(i, p.k)
			if err != nil {
				return nil, err
			}
			bodies[i] = b
		}
		var name string
		switch {
		case kind == "flat":
			name = fmt.Sprintf("trawl flat (float32), %d shards", p.shards)
		case kind == "int8":
			name = fmt.Sprintf("trawl int8 (re-scored), %d shards", p.shards)
		case exact:
			name = fmt.Sprintf("trawl exact (float32), %d shards", p.shards)
		case nprobe > 0:
			name = fmt.Sprintf("trawl ivf (int8) nprobe %d, %d shards", nprobe, p.shards)
		default:
			name = fmt.Sprintf("trawl ivf (int8), %d shards", p.shards)
		}
		s := &peerSystem{name: name, pids: pids, nprobe: nprobe, index: kind == "ivf" && !exact, exact: exact,
			search: func(ctx context.Context, hc *http.Client, i int) ([]string, error) {
				return trawlSearch(ctx, hc, url, bodies[i%len(bodies)])
			},
			searchK: func(ctx context.Context, hc *http.Client, i, k int) ([]string, error) {
				b, err := body(i, k)
				if err != nil {
					return nil, err
				}
				return trawlSearch(ctx, hc, url, b)
			}}
		if exact {
			s.warmup, s.single = 8, min(p.exactSingle, p.single)
		}
		return s, nil
	}
	s, err := system(0, false)
	if err != nil {
		return nil, err
	}
	// An ivf collection's shards train their centroids during the load
	// (and again each time a shard grows 4×), build their index in the
	// background, then the leader measures the default nprobe and commits
	// it: wait for all of it on every shard, as /cluster/status shows it.
	hc := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(20 * time.Minute)
	var ixs []indexState
	for {
		if _, err := s.search(ctx, hc, 0); err != nil {
			return nil, err
		}
		if ixs, err = clusterIndexes(ctx, hc, rt.Base, kind); err != nil {
			return nil, err
		}
		ready, docs := len(ixs) == p.shards, 0
		for _, ix := range ixs {
			ready = ready && ix.settled()
			docs += ix.Docs
		}
		if ready && docs == corpus.Rows {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("trawl %s: shards not settled 20 minutes after the load: %+v", kind, ixs)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
	s.importTook = time.Since(t0)
	s.importNote = fmt.Sprintf("`router load` %.1f s", loaded.Seconds())
	if kind == "ivf" {
		s.importNote += ", then until every shard answered from its index with a measured default nprobe"
	}
	flat := kind == "ivf"
	for _, ix := range ixs {
		flat = flat && ix.flat()
	}
	if flat {
		// Below ivf.MinRows a shard never trains: it answers by its flat
		// int8 scan with exact re-scoring, and nprobe means nothing.
		s.flat = true
		s.name = fmt.Sprintf("trawl --index ivf below %d rows a shard: flat int8 + re-score, %d shards", ivf.MinRows, p.shards)
		s.importNote = fmt.Sprintf("`router load` %.1f s, then until every shard counted its rows (below %d rows a shard trains no index)", loaded.Seconds(), ivf.MinRows)
		if len(p.nprobes) > 0 || p.nprobeAll {
			logf("trawl: every shard is below %d rows and serves its flat scan: -nprobe-extra skipped", ivf.MinRows)
			p.nprobes, p.nprobeAll = nil, false
		}
	}
	s.rss = rss(s.pids())
	s.rssAnon = rssAnon(s.pids())
	var per []string
	var shardAnon int64
	for i, pid := range s.pids() {
		a := rssAnon([]int{pid})
		if i > 0 {
			shardAnon += a
		}
		per = append(per, fmt.Sprintf("%.0f/%.0f", float64(rss([]int{pid}))/(1<<20), float64(a)/(1<<20)))
	}
	if len(p.collections) == 1 {
		// With more, the shards' memory is every collection's so far.
		s.bytesPerV = float64(shardAnon) / float64(corpus.Rows)
	}
	s.importNote += fmt.Sprintf("; RSS/anonymous of the router, then each shard: %s MiB", strings.Join(per, ", "))
	// The Go heap in use tells live data from freed heap the runtime has
	// not yet returned to the kernel.
	var heap []string
	for _, reps := range c.Shards {
		m, err := promtext.Scrape(ctx, hc, "http://"+reps[0].HTTP+"/metrics")
		if err != nil {
			return nil, err
		}
		heap = append(heap, fmt.Sprintf("%.0f", m["go_memstats_heap_inuse_bytes"]/(1<<20)))
	}
	s.importNote += fmt.Sprintf("; Go heap in use per shard: %s MiB", strings.Join(heap, ", "))
	if b, err := dirBytes(dir); err == nil {
		s.importNote += fmt.Sprintf("; the shards' data directories (raft logs and snapshots) %.2f GiB on disk", float64(b)/(1<<30))
	}
	if len(p.collections) > 1 {
		s.importNote += " (every collection loaded so far)"
	}
	lists := 0
	if kind == "ivf" {
		var shards []string
		for i, ix := range ixs {
			lists = max(lists, ix.Lists)
			note := fmt.Sprintf("%s: %d rows, %d lists trained at %d rows, default nprobe %d (k ≤ 10), %.0f B/vector beside the floats",
				cluster.ShardName(i), ix.Rows, ix.Lists, ix.TrainedRows, ix.DefaultNProbe, ix.BytesPerVector)
			if ix.flat() {
				note = fmt.Sprintf("%s: %d rows, no index trained (below %d rows), flat int8 scan", cluster.ShardName(i), ix.Docs, ivf.MinRows)
			}
			if i < len(c.Shards) {
				note += indexTimes(c.Shards[i][0].Log)
			}
			shards = append(shards, note)
		}
		s.shardNote = strings.Join(shards, "; ")
	}
	logf("trawl %s: serving after %s, RSS %.0f MiB; %s", kind, s.importTook.Round(time.Millisecond), float64(s.rss)/(1<<20), s.shardNote)
	out := []*peerSystem{s}
	if kind != "ivf" {
		return out, nil
	}
	extra := func(x *peerSystem) {
		x.importTook, x.importNote, x.rss, x.rssAnon, x.bytesPerV = s.importTook, "the same shards", s.rss, s.rssAnon, s.bytesPerV
		out = append(out, x)
	}
	nprobes := p.nprobes
	if p.nprobeAll && !slices.Contains(nprobes, lists) {
		nprobes = append(nprobes, lists)
	}
	for _, n := range nprobes {
		x, err := system(n, false)
		if err != nil {
			return nil, err
		}
		if n == lists {
			x.name = fmt.Sprintf("trawl ivf (int8) nprobe %d (every list), %d shards", n, p.shards)
		}
		extra(x)
	}
	if p.exact {
		x, err := system(0, true)
		if err != nil {
			return nil, err
		}
		extra(x)
	}
	return out, nil
}

// dirBytes is the disk the files under dir take: the blocks allocated to
// each inode, counted once however many hard links it has (a snapshot
// links the segment files it holds, so summing file sizes counted them
// once per link, and a 1 000 000-row run reported 17.4 GiB for three
// shards whose directories du measured at 2.1 GiB each).
func dirBytes(dir string) (int64, error) {
	var n int64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			n += info.Size()
			return nil
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			n += st.Blocks * 512
		}
		return nil
	})
	return n, err
}

// indexTimes reads, from a shard's log, how long its last training of
// centroids, build of its index and measurement of its default nprobe
// took, and the levels measured; "" when the log says nothing of them.
func indexTimes(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	last := map[string]map[string]any{}
	for _, line := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if msg, _ := m["msg"].(string); msg != "" {
			last[msg] = m
		}
	}
	var out []string
	if m := last["ivf centroids trained and committed"]; m != nil {
		out = append(out, fmt.Sprintf("last training %s", logDuration(m["took"])))
	}
	if m := last["ivf index built"]; m != nil {
		out = append(out, fmt.Sprintf("its build %s (%v rows)", logDuration(m["took"]), m["rows"]))
	}
	if m := last["ivf default nprobe trained and committed"]; m != nil {
		var lv []string
		for _, k := range []string{"10", "100"} {
			if np, ok := m["nprobe_k"+k]; ok {
				lv = append(lv, fmt.Sprintf("k ≤ %s: nprobe %v, sample recall %.3f", k, np, m["sample_recall_k"+k]))
			}
		}
		out = append(out, fmt.Sprintf("nprobe measured in %s (%s)", logDuration(m["took"]), strings.Join(lv, "; ")))
	}
	if len(out) == 0 {
		return ""
	}
	return " — " + strings.Join(out, ", ")
}

// logDuration is a slog JSON duration (nanoseconds) as a duration.
func logDuration(v any) string {
	ns, ok := v.(float64)
	if !ok {
		return fmt.Sprint(v)
	}
	return time.Duration(ns).Round(time.Millisecond).String()
}

// indexState is one replica's index block of /cluster/status.
type indexState struct {
	Kind             string  `json:"kind"`
	State            string  `json:"state"`
	Lists            int     `json:"lists"`
	TrainedRows      int     `json:"trained_rows"`
	DefaultNProbe    int     `json:"default_nprobe"`
	NProbeCalibrated bool    `json:"nprobe_calibrated"`
	Rows             int     `json:"rows"`
	BytesPerVector   float64 `json:"bytes_per_vector"`
	// Docs is the replica's document count of the collection (its
	// doc_count, beside the index block).
	Docs int `json:"-"`
}

// settled: a flat collection's store (it trains at most an int8 scale,
// which its queries never wait for); or serving from an index with a
// measured default nprobe, and no retrain due (the shard has not grown 4×
// past its centroids' rows); or below ivf.MinRows.
func (ix indexState) settled() bool {
	return ix.Kind == "flat" && ix.State == store.IndexStateReady || ix.flat() || ix.State == store.IndexStateReady && ix.NProbeCalibrated && ix.TrainedRows > 0 && ix.Rows < 4*ix.TrainedRows
}

// flat: the shard holds fewer rows than ivf.MinRows, so it trains no
// index and answers by its flat scan.
func (ix indexState) flat() bool {
	return ix.State == store.IndexStateUntrained && ix.Docs < ivf.MinRows
}

// clusterStatus decodes the router's /cluster/status into st.
func clusterStatus(ctx context.Context, hc *http.Client, base string, st any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/cluster/status", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cluster status: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(st); err != nil {
		return fmt.Errorf("cluster status: %w", err)
	}
	return nil
}

// clusterIndexes is the first replica's index of collection on every
// shard, from the router's /cluster/status.
func clusterIndexes(ctx context.Context, hc *http.Client, base, collection string) ([]indexState, error) {
	var st struct {
		Shards []struct {
			Replicas []struct {
				Collections []struct {
					Name     string      `json:"name"`
					DocCount int         `json:"doc_count"`
					Index    *indexState `json:"index"`
				} `json:"collections"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	if err := clusterStatus(ctx, hc, base, &st); err != nil {
		return nil, err
	}
	var out []indexState
	for _, sh := range st.Shards {
		if len(sh.Replicas) == 0 {
			continue
		}
		for _, col := range sh.Replicas[0].Collections {
			if col.Name == collection && col.Index != nil {
				ix := *col.Index
				ix.Docs = col.DocCount
				out = append(out, ix)
			}
		}
	}
	return out, nil
}

func trawlSearch(ctx context.Context, hc *http.Client, url string, body []byte) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("trawl search: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("trawl search: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("trawl search: %s: %.300s", resp.Status, raw)
	}
	var a struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
		ScatterGather struct {
			Degraded bool `json:"degraded"`
		} `json:"scatter_gather"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("trawl search: %w", err)
	}
	if a.ScatterGather.Degraded {
		return nil, fmt.Errorf("trawl search: degraded answer: %.300s", raw)
	}
	ids := make([]string, len(a.Items))
	for i, it := range a.Items {
		ids[i] = it.ID
	}
	return ids, nil
}

// weaviateDistance is Weaviate's name for m: l2-squared ranks as l2 does
// (the same neighbours, squared distances).
func weaviateDistance(m vector.Metric) string {
	if m == vector.Euclidean {
		return "l2-squared"
	}
	return "cosine"
}

// startWeaviateClass creates a class, imports the corpus into it and waits
// for its index.
func startWeaviateClass(ctx context.Context, ws *weaviate.Server, class, index string, corpus *peer.Corpus, p peerPlan, logf func(string, ...any)) (*peerSystem, error) {
	if err := ws.CreateClass(ctx, class, index, weaviateDistance(p.metric), p.shards); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := ws.Import(ctx, class, corpus.Data, corpus.Dim, p.batch, p.importCC); err != nil {
		return nil, err
	}
	imported := time.Since(t0)
	if err := ws.WaitIndexed(ctx, class, corpus.Rows, 10*time.Minute); err != nil {
		return nil, err
	}
	bodies := make([][]byte, len(corpus.Queries))
	for i, q := range corpus.Queries {
		bodies[i] = weaviate.SearchBody(class, q, p.k)
	}
	s := &peerSystem{name: fmt.Sprintf("Weaviate 1.35.2 %s, %d shards", index, p.shards),
		search: func(ctx context.Context, hc *http.Client, i int) ([]string, error) {
			uuids, err := ws.Search(ctx, hc, class, bodies[i%len(bodies)])
			if err != nil {
				return nil, err
			}
			ids := make([]string, len(uuids))
			for j, u := range uuids {
				ids[j] = peer.ID(weaviate.Row(u))
			}
			return ids, nil
		},
		pids: func() []int { return []int{ws.PID()} }}
	s.importTook = time.Since(t0)
	s.importNote = fmt.Sprintf("`/v1/batch/objects` %.1f s (%d a request, %d in flight), then until indexed", imported.Seconds(), p.batch, p.importCC)
	s.rss, s.rssAnon = rss(s.pids()), rssAnon(s.pids())
	logf("weaviate %s: imported in %s, indexed after %s, process RSS %.0f MiB", class, imported.Round(time.Millisecond),
		s.importTook.Round(time.Millisecond), float64(s.rss)/(1<<20))
	return s, nil
}

// measure runs warm-up queries, then p.single timed queries one at a time
// (or the system's own counts; the answers of the first p.recipe.Queries
// are returned for recall), then p.clients closed-loop
// clients for p.window.
func measure(ctx context.Context, s *peerSystem, p peerPlan, round int) (peerRound, [][]string, error) {
	pr := peerRound{loadAvg: machine.LoadAvg()}
	tr := &http.Transport{MaxIdleConnsPerHost: p.clients, MaxIdleConns: p.clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	warmup, single := p.warmup, p.single
	if s.warmup > 0 {
		warmup = s.warmup
	}
	if s.single > 0 {
		single = s.single
	}
	for i := range warmup {
		if _, err := s.search(ctx, hc, i+round); err != nil {
			return pr, nil, err
		}
	}
	got := make([][]string, min(single, p.recipe.Queries))
	tl := loadgen.NewTally()
	t0 := time.Now()
	for i := range single {
		q0 := time.Now()
		ids, err := s.search(ctx, hc, i)
		took := time.Since(q0)
		if err != nil {
			return pr, nil, err
		}
		tl.Add(loadgen.Complete, http.StatusOK, took)
		if i < len(got) {
			got[i] = ids
		}
	}
	pr.single = tl.Summarise("closed 1", time.Since(t0))

	wctx, cancel := context.WithTimeout(ctx, p.window)
	defer cancel()
	tallies := make([]*loadgen.Tally, p.clients)
	var next atomic.Int64
	var errs atomic.Int64
	var wg sync.WaitGroup
	t0 = time.Now()
	for c := range p.clients {
		tallies[c] = loadgen.NewTally()
		wg.Go(func() {
			for wctx.Err() == nil {
				q0 := time.Now()
				_, err := s.search(wctx, hc, int(next.Add(1)-1))
				took := time.Since(q0)
				switch {
				case err != nil && wctx.Err() != nil:
					return // cut short by the end of the window, not an answer
				case err != nil:
					errs.Add(1)
					tallies[c].Add(loadgen.Failed, 0, took)
				default:
					tallies[c].Add(loadgen.Complete, http.StatusOK, took)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	all := loadgen.NewTally()
	for _, t := range tallies {
		all.Merge(t)
	}
	pr.multi = all.Summarise(fmt.Sprintf("closed %d", p.clients), elapsed)
	pr.errors = errs.Load()
	return pr, got, ctx.Err()
}

// rss is the summed resident set of pids, from /proc/<pid>/status:
// VmRSS, which counts file pages mapped and touched (a memory-mapped raft
// log or LSM segment) as well as the heap.
func rss(pids []int) int64 { return procStatus(pids, "VmRSS:") }

// rssAnon is the anonymous part of rss (heap and stacks): memory that
// cannot be dropped and read back from a file.
func rssAnon(pids []int) int64 { return procStatus(pids, "RssAnon:") }

func procStatus(pids []int, field string) int64 {
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, field); ok {
				f := strings.Fields(v)
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					total += n << 10
				}
			}
		}
	}
	return total
}
