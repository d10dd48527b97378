package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trawl-search/trawl/api"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/tracing"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/vector"
)

func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	httpAddr := fs.String("http-addr", ":8080", "HTTP listen address of the router")
	docs := fs.Int("docs", 20000, "synthetic documents to load")
	seed := fs.Uint64("seed", 1, "seed of the synthetic corpus")
	quantName := fs.String("quantization", "none", "the collection's quantization: none or int8")
	dim := fs.Int("dim", vector.DefaultDim, "dimension of the synthetic corpus and its collection")
	collection := fs.String("collection", api.DefaultCollection, "the collection created (--dim, cosine, --quantization, --index) and seeded, and the router's default collection (the collection-less paths')")
	indexName := fs.String("index", "flat", "the collection's index: flat or ivf (implies --quantization int8; a shard trains its index once it holds 16384 documents, so give --docs 50000 or more to see it)")
	dataDir := fs.String("data-dir", "", "where the replicas keep their raft logs and snapshots (default: a temporary directory, removed on exit); a directory holding a dev cluster is loaded, not seeded again")
	backupDir := fs.String("backup-dir", "", "where the backup and snapshot routes keep backups (default: backups/ under --data-dir, or a temporary directory removed on exit)")
	qdrantGRPC := fs.String("qdrant-grpc-addr", "", "listen address of Qdrant's gRPC API for the Go, Rust, Java and .NET clients (e.g. :6334); empty: off")
	// A newcomer's console shows the banner, warnings and errors.
	logLevel := logLevelFlag(fs, slog.LevelWarn)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dim < catalog.MinDim || *dim > catalog.MaxDim {
		return fmt.Errorf("--dim %d: want %d..%d", *dim, catalog.MinDim, catalog.MaxDim)
	}
	if err := catalog.ValidName(*collection); err != nil {
		return fmt.Errorf("--collection: %w", err)
	}
	if *docs < 1 {
		return fmt.Errorf("--docs %d: want at least 1", *docs)
	}
	qz, idx, err := parseScan(fs, *quantName, *indexName)
	if err != nil {
		return err
	}
	kernel, err := vector.FromEnv()
	if err != nil {
		return err
	}
	log := newLogger(*logLevel)
	// One process, one service.name: the dev shards' spans are trawl-router's
	// too (their scan spans still say which shard and replica).
	tel, flush, err := startTracing(ctx, log, tracing.ServiceRouter)
	if err != nil {
		return err
	}
	defer flush()
	t0 := time.Now()
	rateBytes, _ := server.CalibrationBytes()
	dc, err := devcluster.Start(devcluster.Config{Replicas: 3, Docs: *docs, Dim: *dim, Seed: *seed, Collection: *collection, Kernel: kernel, Logger: log, DataDir: *dataDir,
		RaftLogLevel: raftLogLevel(*logLevel),
		Quantization: qz, Index: idx, TracerProvider: tel.TracerProvider, Propagator: tel.Propagator, ScanRateBytes: rateBytes})
	if err != nil {
		return err
	}
	defer dc.Close()
	specs := dc.Specs()
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	bdir := *backupDir
	switch {
	case bdir == "" && *dataDir != "":
		bdir = filepath.Join(*dataDir, "backups")
	case bdir == "":
		if bdir, err = os.MkdirTemp("", "trawl-dev-backups-"); err != nil {
			ln.Close()
			return err
		}
		defer os.RemoveAll(bdir)
	}
	r, err := app.New(app.Config{Shards: specs, Collection: *collection, Logger: log, Kernel: kernel, Budget: budget.Config{}, Extra: dc.Routes,
		TracerProvider: tel.TracerProvider, Propagator: tel.Propagator, BackupDir: bdir})
	if err != nil {
		ln.Close()
		return err
	}
	defer r.Close()
	stop, err := serveQdrantGRPC(log, *qdrantGRPC, r)
	if err != nil {
		ln.Close()
		return err
	}
	defer stop()
	// The banner says the cluster is ready: print it once every shard
	// has a replica that serves.
	if err := r.WaitReady(ctx); err != nil {
		return err
	}
	port := *httpAddr
	if strings.HasPrefix(port, ":") {
		port = "localhost" + port
	}
	how := "written through each shard's raft leader"
	if dc.Loaded {
		how = "loaded from " + *dataDir
	}
	fmt.Print(banner(dc, *seed, how, time.Since(t0), kernel.Name, port, *collection))
	if *qdrantGRPC != "" {
		fmt.Printf("Qdrant gRPC clients (Go, Rust, Java, .NET): %s\n\n", *qdrantGRPC)
	}
	return serveHTTP(ctx, log, ln, "", "", r, r.API)
}

// banner is what router dev prints once it is ready: the cluster's shape,
// read off the running cluster, and queries to paste.
func banner(dc *devcluster.Cluster, seed uint64, how string, took time.Duration, kernel, addr, collection string) string {
	dim := 0
	if len(dc.Corpus) > 0 {
		dim = len(dc.Corpus[0].Vector)
	}
	return fmt.Sprintf(`trawl dev: %d shards x %d replicas (one raft group per shard), %d documents of %d dimensions (seed %d) %s in %s, %s kernel.

Try:
  curl -s -X POST 'http://%[9]s/v1/search?shard_detail=true' -d '{"like_id": "doc-7", "k": 10}'
  curl -s http://%[9]s/cluster/status
Qdrant clients: url http://%[9]s, collection %[10]q:
  curl -s -X POST http://%[9]s/collections/%[10]s/points/count -H 'Content-Type: application/json' -d '{}'
Break a replica and watch the answer (stop | blackhole | slow | restore):
  curl -s -X POST http://%[9]s/dev/replicas/shard-1/0/stop

`, len(dc.Names), len(dc.Replicas[0]), len(dc.Corpus), dim, seed, how, took.Round(time.Millisecond), kernel, addr, collection)
}
