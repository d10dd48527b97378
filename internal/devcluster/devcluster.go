// Package devcluster runs a whole trawl cluster in one process: shards ×
// replicas, each a real gRPC server on a 127.0.0.1 port behind a fault
// proxy, loaded with a seeded synthetic corpus. router dev serves it, and
// end-to-end tests use it to break replicas for real.
//
// It is for development and tests only; router serve never uses it.
package devcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/faultproxy"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/vector"
)

// Config shapes a dev cluster.
type Config struct {
	Shards   int // 3 if zero
	Replicas int // 2 if zero
	Dim      int // vector.DefaultDim if zero
	Metric   vector.Metric
	Kernel   vector.Kernel
	Docs     int
	Seed     uint64
	// TLS, when set, makes every replica serve gRPC over TLS with it.
	TLS *tls.Config
	// Corpus, when set, replaces the synthetic corpus (Docs and Seed are
	// then ignored). Under cosine it is normalised in place.
	Corpus []shard.Record
	Logger *slog.Logger
	// TracerProvider and Propagator, when set, trace every replica's RPCs
	// and scans (shard.ServerTracing, shard.Config.TracerProvider). Nil:
	// no tracing.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
}

// Replica is one running replica.
type Replica struct {
	Shard  string
	Index  int
	Proxy  *faultproxy.Proxy
	Server *shard.Server
	Store  *shard.Memory
	grpc   *grpc.Server
}

// Cluster is a running dev cluster.
type Cluster struct {
	Names    []string
	Replicas [][]*Replica // [shard][replica]
	Corpus   []shard.Record
}

// Start builds the corpus, starts every replica and loads it.
func Start(cfg Config) (*Cluster, error) {
	if cfg.Shards == 0 {
		cfg.Shards = 3
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 2
	}
	if cfg.Dim == 0 {
		cfg.Dim = vector.DefaultDim
	}
	if cfg.Kernel.Name == "" {
		cfg.Kernel = vector.Generic()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{}
	for i := range cfg.Shards {
		c.Names = append(c.Names, fmt.Sprintf("shard-%d", i))
	}
	table := placement.New(c.Names)
	c.Corpus = cfg.Corpus
	if c.Corpus == nil {
		c.Corpus = Corpus(cfg.Docs, cfg.Dim, cfg.Seed)
	}
	if cfg.Metric == vector.Cosine {
		for _, r := range c.Corpus {
			cfg.Kernel.Normalize(r.Vector)
		}
	}
	byShard := map[string][]shard.Record{}
	for _, r := range c.Corpus {
		h := table.Home(r.ID)
		byShard[h] = append(byShard[h], r)
	}
	for _, name := range c.Names {
		var reps []*Replica
		for j := range cfg.Replicas {
			store := shard.NewMemory(cfg.Dim)
			p := shard.Placement{Fingerprint: table.Fingerprint(), Shard: name}
			if err := store.Upsert(context.Background(), p, byShard[name]); err != nil {
				c.Close()
				return nil, err
			}
			rep, err := startReplica(name, j, store, cfg)
			if err != nil {
				c.Close()
				return nil, err
			}
			reps = append(reps, rep)
		}
		c.Replicas = append(c.Replicas, reps)
	}
	return c, nil
}

func startReplica(name string, idx int, store *shard.Memory, cfg Config) (*Replica, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := shard.NewServer(shard.Config{Dim: cfg.Dim, Metric: cfg.Metric, Kernel: cfg.Kernel, Store: store,
		Logger: cfg.Logger.With("shard", name, "replica", idx), TracerProvider: cfg.TracerProvider})
	opts := append(shard.ServerOptions(), shard.ServerTracing(cfg.TracerProvider, cfg.Propagator)...)
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	g := grpc.NewServer(opts...)
	srv.Register(g)
	srv.SetServing(true)
	go g.Serve(ln)
	proxy, err := faultproxy.Start("127.0.0.1:0", ln.Addr().String())
	if err != nil {
		g.Stop()
		return nil, err
	}
	return &Replica{Shard: name, Index: idx, Proxy: proxy, Server: srv, Store: store, grpc: g}, nil
}

// Specs is the router's --shard list for this cluster, in shard order.
func (c *Cluster) Specs() []app.ShardSpec {
	out := make([]app.ShardSpec, len(c.Names))
	for i, reps := range c.Replicas {
		out[i].Name = c.Names[i]
		for _, r := range reps {
			out[i].Addrs = append(out[i].Addrs, r.Proxy.Addr())
		}
	}
	return out
}

// Close stops every replica.
func (c *Cluster) Close() {
	for _, reps := range c.Replicas {
		for _, r := range reps {
			r.Proxy.Close()
			r.grpc.Stop()
		}
	}
}

// Replica finds a replica by shard name and index.
func (c *Cluster) Replica(shardName string, idx int) (*Replica, bool) {
	for i, n := range c.Names {
		if n == shardName && idx >= 0 && idx < len(c.Replicas[i]) {
			return c.Replicas[i][idx], true
		}
	}
	return nil, false
}

// Corpus makes n clustered vectors: 32 random centres, each vector a
// centre plus noise, so nearest neighbours are meaningful. The same seed
// always gives the same corpus.
func Corpus(n, dim int, seed uint64) []shard.Record {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const centres = 32
	cs := make([][]float32, centres)
	for i := range cs {
		cs[i] = make([]float32, dim)
		for j := range cs[i] {
			cs[i][j] = float32(rng.NormFloat64())
		}
	}
	out := make([]shard.Record, n)
	noise := float32(1 / math.Sqrt(2))
	for i := range out {
		c := cs[rng.IntN(centres)]
		v := make([]float32, dim)
		for j := range v {
			v[j] = c[j] + noise*float32(rng.NormFloat64())
		}
		out[i] = shard.Record{ID: "doc-" + strconv.Itoa(i), Vector: v}
	}
	return out
}

// Routes mounts POST /dev/replicas/{shard}/{replica}/{action} with action
// stop, blackhole, slow (?ms=, default 200) or restore.
func (c *Cluster) Routes(r chi.Router) {
	r.Post("/dev/replicas/{shard}/{replica}/{action}", func(w http.ResponseWriter, req *http.Request) {
		name := chi.URLParam(req, "shard")
		idx, err := strconv.Atoi(chi.URLParam(req, "replica"))
		rep, ok := c.Replica(name, idx)
		if err != nil || !ok {
			http.Error(w, `{"error":{"code":"not_found","message":"no such replica"}}`, http.StatusNotFound)
			return
		}
		switch chi.URLParam(req, "action") {
		case "stop":
			rep.Proxy.Stop()
		case "blackhole":
			err = rep.Proxy.Blackhole()
		case "slow":
			ms := 200
			if s := req.URL.Query().Get("ms"); s != "" {
				if ms, err = strconv.Atoi(s); err != nil || ms < 0 {
					http.Error(w, `{"error":{"code":"invalid_argument","message":"ms must be a non-negative integer"}}`, http.StatusBadRequest)
					return
				}
			}
			err = rep.Proxy.Slow(time.Duration(ms) * time.Millisecond)
		case "restore":
			err = rep.Proxy.Restore()
		default:
			http.Error(w, `{"error":{"code":"not_found","message":"action must be stop, blackhole, slow or restore"}}`, http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, fmt.Sprintf(`{"error":{"code":"internal","message":%q}}`, err.Error()), http.StatusInternalServerError)
			return
		}
		mode, delay := rep.Proxy.Mode()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"shard\":%q,\"replica\":%d,\"addr\":%q,\"mode\":%q,\"delay_ms\":%d}\n",
			name, idx, rep.Proxy.Addr(), mode, delay.Milliseconds())
	})
}
