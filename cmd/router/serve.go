package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/api"
	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/tracing"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/vector"
)

// Connection timeouts of the HTTP server.
const (
	// headerTimeout bounds the request line and headers.
	headerTimeout = 5 * time.Second
	// idleTimeout closes a keep-alive connection idle this long.
	idleTimeout = 2 * time.Minute
)

// drainTimeout bounds how long SIGTERM waits for in-flight requests; every
// query is bounded by its deadline (≤ --max-deadline-ms) anyway.
const drainTimeout = 15 * time.Second

// newLogger logs JSON lines at level and above to stderr.
func newLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var shards shardFlag
	httpAddr := fs.String("http-addr", ":8080", "HTTP listen address (API, /metrics, /healthz, /readyz, /cluster/status)")
	fs.Var(&shards, "shard", "a shard and its replicas, NAME=HOST:PORT[,HOST:PORT...] (repeatable; env TRAWL_SHARDS=\"a=h:1,h:2;b=h:3\")")
	tlsCA := fs.String("tls-ca", "", "CA file to verify shards with; enables inter-node TLS (and the 250 ms default deadline)")
	tlsCert := fs.String("tls-cert", "", "client certificate for mTLS to shards")
	tlsKey := fs.String("tls-key", "", "client key for mTLS to shards")
	maxDeadline := fs.Int("max-deadline-ms", int(budget.DefaultMax/time.Millisecond), "largest deadline a query may ask for, in ms")
	defaultDeadline := fs.Int("default-deadline-ms", 0, "deadline of a query that names none, in ms (0: 50, or 250 with --tls-ca); at most --max-deadline-ms")
	httpCert := fs.String("http-tls-cert", "", "certificate to serve the client API over HTTPS")
	httpKey := fs.String("http-tls-key", "", "key to serve the client API over HTTPS")
	apiKeyFile := fs.String("api-key-file", "", "file of API keys, one a line: KEY, or KEY COLLECTIONS [read|write] (COLLECTIONS: names or globs, comma-separated); required as Authorization: Bearer on /v1/* (and on the Qdrant-compatible /collections/* also as the api-key header)")
	colls := addCollectionFlags(fs)
	maxInflight := fs.Int("max-inflight", admission.DefaultMaxInflight, "hard cap on /v1/* requests in flight; beyond it 429 whatever admission learned")
	bodyTimeout := fs.Duration("body-timeout", api.DefaultBodyTimeout, "time a request's body may take to arrive after its headers; then 408 and the connection closes")
	prof := fs.Bool("pprof", false, pprofHelp)
	admit := fs.Bool("admission", true, "adaptive admission: refuse queries past capacity with 429 (false: only --max-inflight; for baselines)")
	hedge := fs.Bool("hedge", true, "hedge reads to a second replica when the first is slow (false for baselines)")
	failover := fs.Bool("failover", true, "fail reads over to another replica within the call (false for baselines)")
	prewarm := fs.Bool("prewarm", true, "dial and handshake every replica at start, before /readyz (false for baselines)")
	qdrantGRPC := fs.String("qdrant-grpc-addr", ":6334", "listen address of Qdrant's gRPC API (the Go, Rust, Java and .NET clients), with the HTTP port's API keys and --http-tls-*; empty: off")
	discover := fs.Bool("discover", true, "learn each shard's replicas from its raft group every 2 s (--shard seeds them), so replicas added or removed with router admin take or leave reads without a restart; the group's addresses (--advertise-addr) must then be reachable from the router")
	readyTimeout := fs.Duration("ready-timeout", app.DefaultReadyTimeout, "how long /readyz waits for every shard to have a replica that serves; past it the router turns ready and answers say what is missing")
	var stores storeFlags
	addStoreFlags(fs, &stores, "directory (a local path or a mounted volume) where the backup routes keep backups; empty (and no --backup-s3-endpoint): backups are off")
	backupMaxAge := fs.Duration("backup-max-age", 0, "how old a collection's last successful backup may be before it is overdue: exported as trawl_backup_max_age_seconds for the chart's alert (0: not exported)")
	logLevel := logLevelFlag(fs, slog.LevelInfo)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(shards) == 0 {
		return errors.New("no shards: give --shard NAME=HOST:PORT at least once (or TRAWL_SHARDS)")
	}
	s3cfg, err := stores.s3Config()
	if err != nil {
		return err
	}
	if *bodyTimeout <= 0 {
		return errors.New("--body-timeout must be positive")
	}
	if err := colls.check(); err != nil {
		return err
	}
	if *maxDeadline < 1 {
		return errors.New("--max-deadline-ms must be at least 1")
	}
	if *defaultDeadline < 0 || *defaultDeadline > *maxDeadline {
		return fmt.Errorf("--default-deadline-ms must be 0 (the built-in default) or 1..%d (--max-deadline-ms)", *maxDeadline)
	}
	dial := client.DialConfig{}
	if *tlsCA != "" {
		creds, err := shard.ClientCredentials(*tlsCA, *tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-ca/--tls-cert/--tls-key: %w", err)
		}
		dial.Creds = creds
	}
	var keys *apikey.Keyring
	if *prof && *apiKeyFile != "" {
		// The profiles are served beside the API, before its key check:
		// a keyed router would hand its stacks and heap to anyone.
		return errors.New("--pprof serves profiles without an API key: it cannot be combined with --api-key-file")
	}
	if *apiKeyFile != "" {
		k, err := apikey.ReadFile(*apiKeyFile)
		if err != nil {
			return fmt.Errorf("--api-key-file: %w", err)
		}
		keys = k
	}
	kernel, err := vector.FromEnv()
	if err != nil {
		return err
	}
	log := newLogger(*logLevel)
	tel, flush, err := startTracing(ctx, log, tracing.ServiceRouter)
	if err != nil {
		return err
	}
	defer flush()
	var grpcOpts []grpc.ServerOption
	if *httpCert != "" {
		tc, err := shard.ServerTLS(*httpCert, *httpKey, "")
		if err != nil {
			return fmt.Errorf("--http-tls-cert/--http-tls-key: %w", err)
		}
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(tc)))
	}
	r, err := app.New(app.Config{
		QdrantGRPCOptions: grpcOpts,
		Shards:            shards, Dial: dial, Keys: keys, Discover: *discover, MaxInflight: *maxInflight, BodyTimeout: *bodyTimeout,
		Collection: *colls.def, EnsureCollections: colls.ensure, MaxCollections: *colls.max,
		NoAdmission: !*admit, NoHedge: !*hedge, NoFailover: !*failover, NoPrewarm: !*prewarm,
		Logger: log, Kernel: kernel, WarmupTimeout: *readyTimeout,
		Budget: budget.Config{TLS: dial.Creds != nil, Max: time.Duration(*maxDeadline) * time.Millisecond,
			Fallback: time.Duration(*defaultDeadline) * time.Millisecond},
		TracerProvider: tel.TracerProvider, Propagator: tel.Propagator,
		BackupDir: stores.dir, BackupS3: s3cfg, BackupMaxAge: *backupMaxAge,
	})
	if err != nil {
		return err
	}
	defer r.Close()
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	stop, err := serveQdrantGRPC(log, *qdrantGRPC, r)
	if err != nil {
		ln.Close()
		return err
	}
	defer stop()
	var h http.Handler = r.API
	if *prof {
		h = withPprof(h)
	}
	return serveHTTP(ctx, log, ln, *httpCert, *httpKey, r, h)
}

// serveQdrantGRPC serves the router's Qdrant gRPC API on addr (nothing when
// addr is empty). stop drains it: in-flight calls finish, bounded by the
// drain timeout.
func serveQdrantGRPC(log *slog.Logger, addr string, r *app.Router) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--qdrant-grpc-addr: %w", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := r.QdrantGRPC.Serve(ln); err != nil {
			log.Error("qdrant grpc server", "err", err)
		}
	}()
	log.Info("qdrant grpc listening", "addr", ln.Addr().String())
	return func() {
		drained := make(chan struct{})
		go func() {
			r.QdrantGRPC.GracefulStop()
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(drainTimeout):
			r.QdrantGRPC.Stop()
		}
		<-served
	}, nil
}

// serveHTTP serves the router until ctx ends (SIGTERM), then drains: not
// ready first, in-flight requests finished, then return.
//
// h is what answers the requests: r.API, wrapped with --pprof.
func serveHTTP(ctx context.Context, log *slog.Logger, ln net.Listener, certFile, keyFile string, r *app.Router, h http.Handler) error {
	// Header and idle timeouts, with --body-timeout on each body, keep slow
	// or idle clients from holding connections (and so the router) for
	// long; no write timeout, since an answer is bounded by its deadline.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout}
	if certFile != "" {
		tc, err := shard.ServerTLS(certFile, keyFile, "")
		if err != nil {
			return fmt.Errorf("--http-tls-cert/--http-tls-key: %w", err)
		}
		srv.TLSConfig = tc
	}
	errc := make(chan error, 1)
	go func() {
		if certFile != "" {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	log.Info("router listening", "addr", ln.Addr().String(), "https", certFile != "")
	select {
	case err := <-errc:
		ln.Close()
		return err
	case <-ctx.Done():
	}
	log.Info("draining")
	r.API.SetReady(false)
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	return srv.Shutdown(sctx)
}
