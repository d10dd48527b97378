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
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/tracing"
	"github.com/trawl-search/trawl/metrics"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/recovery"
	"github.com/trawl-search/trawl/shard/replica"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

func runShard(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	grpcAddr := fs.String("grpc-addr", ":7070", "gRPC listen address (search/write service and grpc.health.v1)")
	httpAddr := fs.String("http-addr", ":9090", "HTTP listen address for /metrics, /healthz and /readyz")
	prof := fs.Bool("pprof", false, pprofHelp)
	dataDir := fs.String("data-dir", "", "data directory (created if missing): the raft log (raft.db) and snapshots")
	peers := fs.String("peers", "", "every replica of this shard, this one included, as HOST:PORT,HOST:PORT,... (the addresses they reach each other at); empty: a group of one")
	advertise := fs.String("advertise-addr", "", "this replica's address as its peers reach it: its entry in --peers, or what --join adds (default: --grpc-addr)")
	join := fs.String("join", "", "join an existing group through any of its replicas, HOST:PORT,...: the replica asks to be added (as a non-voter, promoted to voter once caught up from the leader's snapshot and log) and never seeds a group; start it on an empty --data-dir. Not with --peers")
	timings := raftTimingFlags(fs)
	dim := fs.Int("dim", vector.DefaultDim, legacyHelp+": vector dimension")
	metricName := fs.String("metric", "cosine", legacyHelp+": similarity metric: cosine, dot or l2")
	quantName := fs.String("quantization", "none", legacyHelp+": none, or int8: keep int8 codes beside the float32 rows (the leader trains the scale once the shard holds 1000 rows and commits it through the log) and scan them for queries without \"exact\": true, re-scoring the candidates in float32")
	indexName := fs.String("index", "flat", legacyHelp+": flat, or ivf: once the shard holds 16384 rows the leader trains k-means centroids (about sqrt(rows) lists) and commits them through the log; every replica partitions its int8 codes into lists around them and queries without \"exact\": true probe their \"nprobe\" nearest lists instead of every row (default: what the leader measures after each build to keep recall 0.99 at k <= 10 and at k <= 100, committed so every replica probes alike; one list in twenty, at least 8, until then). Implies --quantization int8")
	tlsCert := fs.String("tls-cert", "", "server certificate; enables TLS")
	tlsKey := fs.String("tls-key", "", "server key")
	clientCA := fs.String("tls-client-ca", "", "CA that client certificates must chain to; enables mTLS")
	recoveryCPU := fs.Float64("recovery-cpu", recovery.DefaultShare,
		"share of this replica's cores (GOMAXPROCS) its recovery work may use: restoring a snapshot, applying the log while catching up, and, as a leader, streaming a snapshot or catch-up entries to a follower; queries and writes are never throttled. More than 0, at most 1 (1: not throttled)")
	bgNice := fs.Int("background-nice", replica.DefaultBackgroundNice, "how many nice levels below this process the threads that store the raft log and encode writes' int8 codes run (0..19; 0: at the process's priority): on a machine short of cores searches run first and writes take the cores left; nothing is slower on an idle machine. Applying writes stays at the process's priority: it holds the lock searches read under")
	peerCA := fs.String("tls-peer-ca", "", "CA to verify peers' certificates with for raft traffic (default: --tls-client-ca); with --tls-cert, peers are dialled over TLS presenting --tls-cert as the client certificate")
	logLevel := logLevelFlag(fs, slog.LevelInfo)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	if *bgNice < 0 || *bgNice > 19 {
		return fmt.Errorf("--background-nice %d: want 0..19", *bgNice)
	}
	if err := timings.check(); err != nil {
		return err
	}
	throttle, err := recovery.New(*recoveryCPU, 0)
	if err != nil {
		return fmt.Errorf("--recovery-cpu: %w", err)
	}
	if err := os.MkdirAll(*dataDir, 0o750); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if *dim < catalog.MinDim || *dim > catalog.MaxDim {
		return fmt.Errorf("--dim %d: want %d..%d", *dim, catalog.MinDim, catalog.MaxDim)
	}
	m, err := vector.ParseMetric(*metricName)
	if err != nil {
		return err
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
	raftLevel := raftLogLevel(*logLevel)
	legacy := catalog.Settings{Dim: *dim, Metric: m, Quantization: qz.String(), Index: idx.String()}.Normalize()
	// The scan rate is measured while the node loads (it reads no store):
	// the start-up path does not wait for it, and Stats reports 0 until
	// it is in. It is measured at shard.RefDim, the dimension rates are
	// expressed in: collections of every size share the replica's cores.
	calibrated := make(chan float64, 1)
	go func() {
		rate, err := server.Calibrate(ctx, log, kernel, m, shard.RefDim)
		if err != nil {
			log.Warn("scan rate not measured", "err", err)
			return
		}
		calibrated <- rate
	}()
	tel, flush, err := startTracing(ctx, log, tracing.ServiceShard)
	if err != nil {
		return err
	}
	defer flush()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs := metrics.NewShardServer(reg, kernel.Name)
	opts := append(shard.ServerOptions(), shard.ServerTracing(tel.TracerProvider, tel.Propagator)...)
	var peerCreds credentials.TransportCredentials
	if *tlsCert != "" {
		tc, err := shard.ServerTLS(*tlsCert, *tlsKey, *clientCA)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
		ca := *peerCA
		if ca == "" {
			ca = *clientCA
		}
		if ca != "" {
			if peerCreds, err = shard.ClientCredentials(ca, *tlsCert, *tlsKey); err != nil {
				return fmt.Errorf("--tls-peer-ca: %w", err)
			}
		} else if *peers != "" || *join != "" {
			return errors.New("raft traffic over TLS needs a CA to verify peers: --tls-peer-ca or --tls-client-ca")
		}
	} else if *clientCA != "" || *peerCA != "" {
		return errors.New("--tls-client-ca and --tls-peer-ca need --tls-cert and --tls-key")
	}
	ln, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		return err
	}
	adv := *advertise
	if adv == "" {
		adv = *grpcAddr
	}
	peerList, joinList := addrList(*peers), addrList(*join)
	if len(peerList) > 0 && len(joinList) > 0 {
		ln.Close()
		return errors.New("--peers seeds a new group and --join joins an existing one: give one of them")
	}
	if len(peerList)+len(joinList) > 0 && *advertise == "" && strings.HasPrefix(adv, ":") {
		ln.Close()
		return fmt.Errorf("--advertise-addr is required with --peers or --join when --grpc-addr %s has no host", *grpcAddr)
	}
	rep, err := replica.Open(replica.Config{
		Legacy: legacy, Kernel: kernel,
		DataDir: *dataDir, Advertise: adv, Peers: peerList, Join: len(joinList) > 0,
		MaxLeaderSilence: *timings.maxSilence, HeartbeatTimeout: *timings.heartbeat, ElectionTimeout: *timings.election,
		Recovery: throttle, RecoveryAlone: true,
		PeerCreds: peerCreds, Observer: obs, TracerProvider: tel.TracerProvider, Logger: log, RaftLogLevel: raftLevel,
		BackgroundNice: *bgNice,
	})
	if err != nil {
		ln.Close()
		return err
	}
	defer rep.Close()
	metrics.RegisterShardRaft(reg, raftGauges{rep})
	metrics.RegisterShardRecovery(reg, func() (time.Duration, time.Duration) {
		st := throttle.Stats()
		return st.CPU, st.Waited
	})
	metrics.CollectionBytes(reg, rep.Collections.Bytes)
	srv := rep.Server
	go func() {
		select {
		case rate := <-calibrated:
			srv.SetScanRate(rate)
		case <-ctx.Done():
		}
	}()
	g := grpc.NewServer(opts...)
	rep.Register(g)
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
	var h http.Handler = mux
	if *prof {
		h = withPprof(mux)
	}
	hs := &http.Server{Addr: *httpAddr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 3)
	go func() { errc <- g.Serve(ln) }()
	go func() { errc <- hs.ListenAndServe() }()
	if len(joinList) > 0 {
		// After Serve: the leader checks this replica answers before it
		// adds it.
		go func() {
			if err := srv.Join(ctx, joinList); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("--join: %w", err)
			}
		}()
	}
	log.Info("shard started; serving once caught up with its group", "grpc", ln.Addr().String(), "http", *httpAddr,
		"advertise", adv, "peers", peerList, "join", joinList, "kernel", kernel.Name, "legacy_collection", legacy.String())
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

// addrList splits a comma-separated list of addresses, dropping blanks.
func addrList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// raftTimings are the shard's raft timing flags.
type raftTimings struct{ maxSilence, heartbeat, election *time.Duration }

// raftTimingFlags adds --max-leader-silence, --raft-heartbeat-timeout and
// --raft-election-timeout to fs.
func raftTimingFlags(fs *flag.FlagSet) raftTimings {
	return raftTimings{
		maxSilence: fs.Duration("max-leader-silence", raftnode.DefaultMaxLeaderSilence,
			"stop serving reads after this long without hearing from a leader; at least 3x --raft-election-timeout, so a leader change does not flap a healthy shard"),
		heartbeat: fs.Duration("raft-heartbeat-timeout", raftnode.DefaultHeartbeatTimeout,
			fmt.Sprintf("a follower that hears nothing from its leader for 1-2x this (at random) calls an election; the leader sends heartbeats every tenth of it and steps down when no majority has answered it for as long. Longer rides out slower disks and networks, and leaves a shard without writes for longer when its leader dies (%s..%s)", raftnode.MinRaftTimeout, raftnode.MaxRaftTimeout)),
		election: fs.Duration("raft-election-timeout", raftnode.DefaultElectionTimeout,
			fmt.Sprintf("how long a candidate waits for votes before it starts a new election round; at least --raft-heartbeat-timeout (%s..%s)", raftnode.MinRaftTimeout, raftnode.MaxRaftTimeout)),
	}
}

// check refuses timings out of bounds (raftnode.CheckTimings), naming
// the flags.
func (r raftTimings) check() error {
	return raftnode.CheckTimings(*r.heartbeat, *r.election, *r.maxSilence)
}

// raftGauges feeds the raft gauges: the shard label is the name the
// replica's data was written under.
type raftGauges struct{ r *replica.Replica }

func (g raftGauges) Shard() string        { return g.r.Collections.Placement().Shard }
func (g raftGauges) CommitIndex() uint64  { return g.r.Node.CommitIndex() }
func (g raftGauges) AppliedIndex() uint64 { return g.r.Node.AppliedIndex() }
func (g raftGauges) IsLeader() bool       { return g.r.Node.IsLeader() }

// legacyHelp opens the help of the flags that set the legacy collection.
const legacyHelp = `settings of the legacy collection "trawl" (a data directory written before collections, and routers that name no collection)`

// parseScan parses --quantization and --index. --index ivf implies
// --quantization int8 (the lists are int8 codes, encoded with the
// committed scale, so an IVF shard without them cannot exist); naming
// --quantization none beside it is a contradiction, refused rather than
// silently overridden.
func parseScan(fs *flag.FlagSet, quant, index string) (store.Quantization, store.IndexKind, error) {
	qz, err := store.ParseQuantization(quant)
	if err != nil {
		return qz, store.IndexFlat, fmt.Errorf("--quantization: %w", err)
	}
	idx, err := store.ParseIndex(index)
	if err != nil {
		return qz, idx, fmt.Errorf("--index: %w", err)
	}
	if idx == store.IndexIVF {
		named := false
		fs.Visit(func(f *flag.Flag) { named = named || f.Name == "quantization" })
		if named && qz != store.QuantInt8 {
			return qz, idx, errors.New("--index ivf keeps int8 codes in its lists: it needs --quantization int8 (implied when not given)")
		}
		qz = store.QuantInt8
	}
	return qz, idx, nil
}
