package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/loader"
)

const loadUsage = "usage: router load --router URL [--collection NAME] [--resume-from N] [--api-key-file F] [--tls-ca F] [--batch N] [--concurrency N] FILE\n" +
	`FILE is .npy (float32 [N,dim]; ids are row numbers), .fvecs (ids are record numbers) or .jsonl/.ndjson ({"id", "vector", "payload"} a line)`

// runLoad is `router load`: it parses flags and hands the file to package
// loader, writing progress and the summary to stderr.
func runLoad(ctx context.Context, args []string) error {
	return load(ctx, args, os.Stderr, term.IsTerminal(int(os.Stderr.Fd())))
}

func load(ctx context.Context, args []string, w io.Writer, terminal bool) error {
	// Progress comes from the workers that finish batches and log lines
	// from those that retry: one lock keeps their lines whole.
	stderr := &lockedWriter{w: w}
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	router := fs.String("router", "http://localhost:8080", "router base URL, http:// or https://")
	collection := fs.String("collection", "", "the collection to load into (POST /v1/collections/NAME/vectors); empty: the router's default collection (POST /v1/vectors)")
	resumeFrom := fs.Int64("resume-from", 0, "skip the file's first N records (the number an interrupted or failed load printed)")
	apiKeyFile := fs.String("api-key-file", "", "file holding the router's API key, sent as Authorization: Bearer")
	tlsCA := fs.String("tls-ca", "", "PEM file of the CA that an https router's certificate must chain to (default: the system's roots)")
	batch := fs.Int("batch", loader.DefaultBatch,
		fmt.Sprintf("records per request, 1..%d (the most POST /v1/vectors takes; a request is also cut short of the router's body limit)", loader.MaxBatch))
	concurrency := fs.Int("concurrency", loader.DefaultConcurrency,
		fmt.Sprintf("requests in flight at once, 1..%d", loader.MaxConcurrency))
	rate := fs.Float64("rate", 0, "records sent a second at most (0: as fast as the cluster takes them); a cap leaves searches running meanwhile their CPU")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New(loadUsage)
	}
	if *collection != "" {
		if err := catalog.ValidName(*collection); err != nil {
			return fmt.Errorf("--collection: %w", err)
		}
	}
	if u, err := url.Parse(*router); *tlsCA != "" && err == nil && u.Scheme != "https" {
		return fmt.Errorf("--tls-ca is for an https router; --router is %s", *router)
	}
	cfg := loader.Config{
		Router: *router, Collection: *collection, Batch: *batch, Concurrency: *concurrency, Rate: *rate, ResumeFrom: *resumeFrom,
		Out: stderr, Terminal: terminal,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if *apiKeyFile != "" {
		key, err := loader.ReadAPIKey(*apiKeyFile)
		if err != nil {
			return err
		}
		cfg.APIKey = key
	}
	client, err := loader.NewClient(*tlsCA, *concurrency)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	cfg.Client = client
	src, err := loader.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer src.Close()

	// The first interrupt stops the load cleanly: no new batches, the ones
	// in flight answered, the resume offset printed. The default handling
	// is put back then, so a second one ends the process at once even if
	// the router never answers.
	stop := context.AfterFunc(ctx, func() { signal.Reset(os.Interrupt, syscall.SIGTERM) })
	defer stop()
	_, err = loader.Run(ctx, src, cfg)
	return err
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
