package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/trawl-search/trawl/internal/tracing"
	"github.com/trawl-search/trawl/metrics"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/vector"
)

func runShard(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	grpcAddr := fs.String("grpc-addr", ":7070", "gRPC listen address (search/write service and grpc.health.v1)")
	httpAddr := fs.String("http-addr", ":9090", "HTTP listen address for /metrics, /healthz and /readyz")
	dataDir := fs.String("data-dir", "", "data directory (created if missing)")
	dim := fs.Int("dim", vector.DefaultDim, "vector dimension")
	metricName := fs.String("metric", "cosine", "similarity metric: cosine, dot or l2")
	tlsCert := fs.String("tls-cert", "", "server certificate; enables TLS")
	tlsKey := fs.String("tls-key", "", "server key")
	clientCA := fs.String("tls-client-ca", "", "CA that client certificates must chain to; enables mTLS")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	if err := os.MkdirAll(*dataDir, 0o750); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if *dim < 1 || *dim > 65536 {
		return fmt.Errorf("--dim %d: want 1..65536", *dim)
	}
	m, err := vector.ParseMetric(*metricName)
	if err != nil {
		return err
	}
	kernel, err := vector.FromEnv()
	if err != nil {
		return err
	}
	log := newLogger()
	tel, flush, err := startTracing(ctx, log, tracing.ServiceShard)
	if err != nil {
		return err
	}
	defer flush()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs := metrics.NewShardServer(reg, kernel.Name)
	store := shard.NewMemory(*dim)
	srv := shard.NewServer(shard.Config{Dim: *dim, Metric: m, Kernel: kernel, Store: store, Observer: obs, Logger: log,
		TracerProvider: tel.TracerProvider})

	opts := append(shard.ServerOptions(), shard.ServerTracing(tel.TracerProvider, tel.Propagator)...)
	if *tlsCert != "" {
		tc, err := shard.ServerTLS(*tlsCert, *tlsKey, *clientCA)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	} else if *clientCA != "" {
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	g := grpc.NewServer(opts...)
	srv.Register(g)
	ln, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"status":"ok"}`) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !srv.Serving() {
			http.Error(w, `{"status":"not serving"}`, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, `{"status":"ready"}`)
	})
	hs := &http.Server{Addr: *httpAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- g.Serve(ln) }()
	go func() { errc <- hs.ListenAndServe() }()
	obs.Documents(store.Len())
	srv.SetServing(true)
	log.Info("shard serving", "grpc", ln.Addr().String(), "http", *httpAddr, "dim", *dim, "metric", m, "kernel", kernel.Name)
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	srv.Shutdown()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(drainTimeout):
		g.Stop()
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return err
}
