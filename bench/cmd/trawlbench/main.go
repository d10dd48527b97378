// Command trawlbench measures trawl routers under load.
//
//	trawlbench load  -url http://127.0.0.1:8080 -rate 200 -duration 10s   # open loop
//	trawlbench load  -url http://127.0.0.1:8080 -clients 8 -duration 10s  # closed loop
//	trawlbench suite [-quick]   # starts clusters on loopback, writes RESULTS(-quick).md and charts
//	trawlbench peer             # trawl IVF against Weaviate HNSW, writes RESULTS-peer.md and its chart
//	trawlbench peer -weaviate none -dataset mnist -collections flat,int8,ivf   # MNIST-784 recall and q/s
//	trawlbench bulkload [-quick] # a bulk load on a healthy 3 × 3 cluster while clients search two routers
//	trawlbench killloop         # one replica SIGKILLed and restarted in a loop while clients search
//	trawlbench rebuild          # p99 while one wiped replica of every shard rebuilds, by --recovery-cpu
//
// load works against any router; suite builds the router binary, starts
// real `router shard` and `router serve` processes, injects faults with
// internal/faultproxy, and compares trawl with its baseline in the same run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/trawl-search/trawl/bench/internal/loadgen"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "load":
		err = runLoad(ctx, os.Args[2:])
	case "suite":
		err = runSuite(ctx, os.Args[2:])
	case "devshards":
		err = runDevShards(ctx, os.Args[2:])
	case "peer":
		err = runPeer(ctx, os.Args[2:])
	case "bulkload":
		err = runBulkLoad(ctx, os.Args[2:])
	case "killloop":
		err = runKillLoop(ctx, os.Args[2:])
	case "rebuild":
		err = runRebuild(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trawlbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: trawlbench load [flags] | trawlbench suite [flags] | trawlbench peer [flags] | trawlbench bulkload [flags] | trawlbench killloop [flags] | trawlbench rebuild [flags]  (-h for flags)")
	os.Exit(2)
}

func runLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "router base URL")
	rate := fs.Float64("rate", 0, "open loop: queries per second (vegeta, fixed arrival rate)")
	clients := fs.Int("clients", 0, "closed loop: concurrent clients (used when -rate is 0; default 1)")
	dur := fs.Duration("duration", 10*time.Second, "how long to send")
	dim := fs.Int("dim", 1536, "query vector dimensions")
	k := fs.Int("k", 10, "top-k")
	enc := fs.String("encoding", "b64", "query vector as vector_b64 (b64) or JSON floats (json)")
	deadline := fs.Int("deadline-ms", 0, "?deadline_ms sent with each query (0: the router's default)")
	nq := fs.Int("queries", 256, "distinct random queries, cycled")
	seed := fs.Uint64("seed", 1, "query seed")
	keyFile := fs.String("api-key-file", "", "file holding the router's API key, sent as a Bearer token")
	timeout := fs.Duration("timeout", 10*time.Second, "client timeout per request")
	noMetrics := fs.Bool("no-metrics", false, "do not read the router's /metrics before and after")
	_ = fs.Parse(args)
	e, err := loadgen.ParseEncoding(*enc)
	if err != nil {
		return err
	}
	q, err := loadgen.NewQueries(*nq, *dim, *k, e, *seed)
	if err != nil {
		return err
	}
	t := loadgen.Target{Base: *url, DeadlineMS: *deadline, Timeout: *timeout, NoMetrics: *noMetrics}
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return fmt.Errorf("api key: %w", err)
		}
		t.APIKey = strings.TrimSpace(string(b))
	}
	var s loadgen.Summary
	if *rate > 0 {
		s, err = loadgen.Open(ctx, t, q, *rate, *dur)
	} else {
		s, err = loadgen.Closed(ctx, t, q, max(1, *clients), *dur)
	}
	if err != nil {
		return err
	}
	fmt.Print(s)
	return nil
}
