// Package devcluster runs a whole trawl cluster in one process: shards ×
// replicas, each shard one raft group whose replicas are real gRPC servers
// on 127.0.0.1 ports (raft traffic between them direct, the router's
// traffic through a fault proxy per replica), with their data in a
// directory, loaded with a seeded synthetic corpus written through each
// group's leader. router dev serves it, and end-to-end tests use it to
// break replicas for real.
//
// It is for development and tests only; router serve never uses it.
package devcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/trawl-search/trawl/api"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/faultproxy"
	"github.com/trawl-search/trawl/internal/localport"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/replica"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
)

// Config shapes a dev cluster.
type Config struct {
	Shards int // 3 if zero
	// Replicas per shard, each shard one raft group of this many: 2 if
	// zero (the shape the end-to-end tests were written for); router dev
	// asks for 3, the production shape (a write survives one down).
	Replicas int
	Dim      int // 1536 if zero
	Metric   vector.Metric
	Kernel   vector.Kernel
	Docs     int
	Seed     uint64
	// Collection is the collection created (Dim, Metric, Quantization,
	// Index) through the catalog and seeded with the corpus:
	// api.DefaultCollection ("trawl") if empty.
	Collection string
	// Quantization is every replica's --quantization; Int8MinRows the
	// rows a leader waits for before training the int8 scale
	// (store.DefaultInt8MinRows if zero).
	Quantization store.Quantization
	Int8MinRows  int
	// Index is every replica's --index (store.IndexIVF implies
	// QuantInt8); IVFMinRows the rows a leader waits for before training
	// centroids (ivf.MinRows if zero). Start returns once every replica
	// of a shard that large serves from its index.
	Index      store.IndexKind
	IVFMinRows int
	// TLS, when set, makes every replica serve gRPC over TLS with it.
	TLS *tls.Config
	// Corpus, when set, replaces the synthetic corpus (Docs and Seed are
	// then ignored). Under cosine it is normalised in place.
	Corpus []store.Record
	// DataDir holds every replica's raft log and snapshots
	// (DataDir/shard-i/replica-j) and the cluster's ports (cluster.json).
	// Empty: a temporary directory, removed by Close. A directory that
	// already holds a cluster of the same shape is loaded, not seeded.
	DataDir string
	// HeartbeatTimeout is the replicas' raft heartbeat and election
	// timeout: raft's 1 s if zero, which holds up on a loaded machine
	// running tests under -race (shorter ones make leaders flap there).
	HeartbeatTimeout time.Duration
	// RaftLogLevel is the least level of the raft library's own lines
	// that reach Logger (slog.LevelWarn if zero).
	RaftLogLevel slog.Level
	// BackgroundNice lowers the priority of the threads that store the
	// log and encode writes (replica.Config.BackgroundNice):
	// replica.DefaultBackgroundNice if zero, none if negative.
	BackgroundNice int
	Logger         *slog.Logger
	// TracerProvider and Propagator, when set, trace every replica's RPCs
	// and scans (shard.ServerTracing, shard.Config.TracerProvider). Nil:
	// no tracing.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// PeerProxies puts a second fault proxy in front of every replica, on
	// its peers' way in (raft traffic to it and writes forwarded to it;
	// Replica.PeerProxy), so tests can slow, cut or mute replication and
	// forwarding apart from the router's traffic.
	PeerProxies bool
	// ScanRateBytes, when positive, has the cluster measure its kernel's
	// scan rate once, in the background while it loads, on a scratch
	// buffer this big (server.CalibrationBytes() in router dev), and give
	// the figure to every replica: they share the process's cores, so one
	// measurement is theirs all, and nine at once would measure each
	// other. 0: not measured (Stats reports 0), which keeps tests cheap.
	ScanRateBytes int
}

// Replica is one running replica.
type Replica struct {
	Shard string
	Index int
	// Addr is the replica's plaintext gRPC address, its raft peers' way in.
	Addr  string
	Proxy *faultproxy.Proxy
	// PeerProxy is the proxy its peers reach it through (Config.PeerProxies),
	// nil without.
	PeerProxy *faultproxy.Proxy
	// Store is the replica's store of the cluster's collection
	// (Cluster.Collection), set once Start has seen it created. It shadows
	// replica.Replica.Store, the legacy collection's, which a dev cluster
	// does not use.
	Store *store.Memory
	// Replica is the replica itself: its Collections, Node and Server.
	*replica.Replica
	// servers: the one on Addr, and the router's TLS one if any.
	servers []*grpc.Server
}

// Cluster is a running dev cluster.
type Cluster struct {
	Names    []string
	Replicas [][]*Replica // [shard][replica]
	Corpus   []store.Record
	// Collection is the collection holding the corpus, as the catalog
	// holds it.
	Collection coordinator.Collection
	// Loaded is true when the cluster was loaded from DataDir rather than
	// seeded.
	Loaded bool
	tmpDir string
	// stopRate ends the scan-rate measurement (Close).
	stopRate context.CancelFunc
	rateDone chan struct{}
	// peerProxies are the peers' proxies by the address they stand for.
	peerProxies map[string]*faultproxy.Proxy
	closeOnce   sync.Once
	// table places the documents of a collection without a slot map.
	table placement.Table
}

// layout is cluster.json: the shape and the ports a data directory's
// replicas were started on. Raft stores its membership by address, so a
// reloaded cluster must listen on the same ports.
type layout struct {
	Shards   int        `json:"shards"`
	Replicas int        `json:"replicas"`
	Dim      int        `json:"dim"`
	Addrs    [][]string `json:"addrs"`
}

// Start builds the corpus, starts every replica and, on a new data
// directory, writes the corpus through each shard's leader. It returns
// once every replica serves.
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
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = time.Second
	}
	if cfg.Index == store.IndexIVF {
		cfg.Quantization = store.QuantInt8
	}
	if cfg.Collection == "" {
		cfg.Collection = api.DefaultCollection
	}
	c := &Cluster{}
	if cfg.DataDir == "" {
		d, err := os.MkdirTemp("", "trawl-dev-")
		if err != nil {
			return nil, err
		}
		cfg.DataDir, c.tmpDir = d, d
	}
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
	lay, lns, loaded, err := loadLayout(cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Loaded = loaded
	if cfg.PeerProxies {
		c.peerProxies = map[string]*faultproxy.Proxy{}
		for _, row := range lay.Addrs {
			for _, a := range row {
				p, err := faultproxy.StartLoopback(a)
				if err != nil {
					closeAll(lns)
					c.Close()
					return nil, err
				}
				c.peerProxies[a] = p
			}
		}
	}
	for i, name := range c.Names {
		var reps []*Replica
		for j := range cfg.Replicas {
			var ln net.Listener
			if lns != nil {
				ln, lns[i][j] = lns[i][j], nil
			}
			rep, err := c.startReplica(name, j, lay.Addrs[i], ln, filepath.Join(cfg.DataDir, name, fmt.Sprintf("replica-%d", j)), cfg)
			if err != nil {
				closeAll(lns)
				c.Close()
				return nil, err
			}
			reps = append(reps, rep)
		}
		c.Replicas = append(c.Replicas, reps)
	}
	c.measureScanRate(cfg)
	if c.Collection, err = c.ensureCollection(cfg); err != nil {
		c.Close()
		return nil, err
	}
	c.table = table
	if !loaded {
		byShard := map[string][]store.Record{}
		for _, r := range c.Corpus {
			h := c.Home(r.ID)
			byShard[h] = append(byShard[h], r)
		}
		for i, name := range c.Names {
			p := shard.Placement{Fingerprint: table.Fingerprint(), Shard: name}
			if m := c.Collection.Slots; !m.IsZero() {
				p = shard.Placement{Fingerprint: placement.SlotsFingerprint, Shard: name, SlotEpoch: m.Epoch}
			}
			if _, err := seed(c.Replicas[i], c.Collection, p, byShard[name]); err != nil {
				c.Close()
				return nil, fmt.Errorf("seed %s: %w", name, err)
			}
		}
		if err := saveLayout(cfg.DataDir, lay); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.waitServing(2 * time.Minute); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.bindStores(time.Minute); err != nil {
		c.Close()
		return nil, err
	}
	if cfg.Quantization == store.QuantInt8 {
		if err := c.waitInt8(cfg.Int8MinRows, 2*time.Minute); err != nil {
			c.Close()
			return nil, err
		}
	}
	if cfg.Index == store.IndexIVF {
		if err := c.WaitIVF(cfg.IVFMinRows, 5*time.Minute); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// loadLayout reads DataDir's cluster.json, or, for a new cluster, opens a
// listener on a free port for every replica (held open, so no other
// process can take the port before the replica serves on it). The ports
// are below the ephemeral range, so a restart finds them free again.
func loadLayout(cfg Config) (layout, [][]net.Listener, bool, error) {
	path := filepath.Join(cfg.DataDir, "cluster.json")
	b, err := os.ReadFile(path)
	if err == nil {
		var l layout
		if err := json.Unmarshal(b, &l); err != nil {
			return l, nil, false, fmt.Errorf("%s: %w", path, err)
		}
		if l.Shards != cfg.Shards || l.Replicas != cfg.Replicas || l.Dim != cfg.Dim {
			return l, nil, false, fmt.Errorf("%s holds %d shards x %d replicas of %d dimensions, not %d x %d of %d",
				cfg.DataDir, l.Shards, l.Replicas, l.Dim, cfg.Shards, cfg.Replicas, cfg.Dim)
		}
		return l, nil, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return layout{}, nil, false, err
	}
	l := layout{Shards: cfg.Shards, Replicas: cfg.Replicas, Dim: cfg.Dim}
	var lns [][]net.Listener
	for range cfg.Shards {
		var addrs []string
		var row []net.Listener
		for range cfg.Replicas {
			ln, err := localport.Listen()
			if err != nil {
				closeAll(append(lns, row))
				return l, nil, false, err
			}
			addrs = append(addrs, ln.Addr().String())
			row = append(row, ln)
		}
		l.Addrs = append(l.Addrs, addrs)
		lns = append(lns, row)
	}
	return l, lns, false, nil
}

func closeAll(lns [][]net.Listener) {
	for _, row := range lns {
		for _, ln := range row {
			if ln != nil {
				ln.Close()
			}
		}
	}
}

// saveLayout writes cluster.json once the corpus is in, so a cluster
// interrupted while seeding is seeded again rather than loaded half-full.
func saveLayout(dir string, l layout) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cluster.json"), b, 0o640)
}

// seed writes recs into coll through the group's leader in batches, the
// way a router that knows the leader would, and returns the last write's
// index. It gives up after a minute without progress: a whole minute for
// the whole seeding ran out on a machine loaded far past its cores (the
// -race overload tests), where leadership moves and batches take
// seconds, although every batch was going through.
func seed(reps []*Replica, coll coordinator.Collection, p shard.Placement, recs []store.Record) (uint64, error) {
	const patience = time.Minute
	deadline := time.Now().Add(patience)
	// leader dials whichever replica leads now: on a loaded machine the
	// leadership can move in the middle of seeding, and the old leader then
	// refuses every batch with NOT_LEADER.
	leader := func() (*client.Conn, error) {
		for {
			for _, r := range reps {
				if r.Node.IsLeader() {
					return client.Dial(r.Addr, client.DialConfig{})
				}
			}
			if time.Now().After(deadline) {
				return nil, errors.New("no leader elected")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c, err := leader()
	if err != nil {
		return 0, err
	}
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	const batch = 256
	var last uint64
	for i := 0; i < len(recs); i += batch {
		vs := make([]*shardpb.Vector, 0, batch)
		for _, r := range recs[i:min(i+batch, len(recs))] {
			vs = append(vs, &shardpb.Vector{Id: r.ID, Vector: shard.EncodeVector(r.Vector), Payload: r.Payload})
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			c.WaitSettled(ctx)
			ack, err := c.In(client.Collection{Name: coll.Name, UID: coll.UID}).Upsert(ctx, p, vs)
			cancel()
			if err == nil {
				last = ack.Index
				deadline = time.Now().Add(patience)
				break
			}
			if time.Now().After(deadline) {
				return 0, err
			}
			// Keyed upserts of the same bytes: resending is safe, to
			// whoever leads now.
			time.Sleep(50 * time.Millisecond)
			c.Close()
			if c, err = leader(); err != nil {
				return 0, err
			}
		}
	}
	return last, nil
}

// waitInt8 waits until every replica of a shard holding at least minRows
// rows has applied the int8 scale its leader trains, so an int8 cluster
// starts with codes on every replica.
func (c *Cluster) waitInt8(minRows int, timeout time.Duration) error {
	if minRows <= 0 {
		minRows = store.DefaultInt8MinRows
	}
	deadline := time.Now().Add(timeout)
	for _, reps := range c.Replicas {
		for _, r := range reps {
			for r.Store.Len() >= minRows && !r.Store.Int8Ready() {
				if time.Now().After(deadline) {
					return fmt.Errorf("%s replica %d has no int8 codes after %s", r.Shard, r.Index, timeout)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	return nil
}

// WaitIVF waits until every replica of a shard holding at least minRows
// rows (ivf.MinRows if zero) serves from an index built from its
// committed centroids.
func (c *Cluster) WaitIVF(minRows int, timeout time.Duration) error {
	if minRows <= 0 {
		minRows = ivf.MinRows
	}
	deadline := time.Now().Add(timeout)
	for _, reps := range c.Replicas {
		for _, r := range reps {
			for r.Store.Len() >= minRows && !(r.Store.IVFIndexed() && r.Server.Serving()) {
				if time.Now().After(deadline) {
					return fmt.Errorf("%s replica %d has no ivf index after %s", r.Shard, r.Index, timeout)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	return nil
}

// waitServing waits until every replica serves and holds every write its
// leader had applied (a serving follower may trail its leader by a few
// entries for a moment; tests want identical replicas from the start).
func (c *Cluster) waitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	wait := func(r *Replica, what string, ok func() bool) error {
		for !ok() {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s replica %d is not %s after %s", r.Shard, r.Index, what, timeout)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}
	for _, reps := range c.Replicas {
		for _, r := range reps {
			if err := wait(r, "serving", r.Server.Serving); err != nil {
				return err
			}
		}
		var target uint64
		for _, r := range reps {
			if r.Node.IsLeader() {
				target = r.Node.AppliedIndex()
			}
		}
		for _, r := range reps {
			if err := wait(r, "caught up", func() bool { return r.Node.AppliedIndex() >= target }); err != nil {
				return err
			}
		}
	}
	return nil
}

// measureScanRate starts the background scan-rate measurement, when
// cfg asks for one, and hands the figure to every replica.
func (c *Cluster) measureScanRate(cfg Config) {
	if cfg.ScanRateBytes <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stopRate, c.rateDone = cancel, make(chan struct{})
	go func() {
		defer close(c.rateDone)
		start := time.Now()
		rate, err := server.MeasureScanRate(ctx, cfg.Kernel, cfg.Metric, cfg.Dim, cfg.ScanRateBytes)
		if err != nil {
			if ctx.Err() == nil {
				cfg.Logger.Warn("scan rate not measured", "err", err)
			}
			return
		}
		cfg.Logger.Info("scan rate measured", "rows_per_second_per_core_1536d", int64(rate), "kernel", cfg.Kernel.Name,
			"scratch_mib", cfg.ScanRateBytes>>20, "took_ms", time.Since(start).Milliseconds())
		for _, reps := range c.Replicas {
			for _, r := range reps {
				r.Server.SetScanRate(rate)
			}
		}
	}()
}

// startReplica serves a replica on ln, or, when ln is nil, on the address
// its data directory was created with.
func (c *Cluster) startReplica(name string, idx int, peers []string, ln net.Listener, dir string, cfg Config) (*Replica, error) {
	addr := peers[idx]
	if ln == nil {
		var err error
		if ln, err = localport.Relisten(addr, 10*time.Second); err != nil {
			return nil, fmt.Errorf("%s replica %d: listen on %s (the port its data directory was created with): %w", name, idx, addr, err)
		}
	}
	log := cfg.Logger.With("shard", name, "replica", idx)
	rep, err := replica.Open(replica.Config{
		// Routers name no collection yet: every write and search acts on
		// the legacy collection, created with the cluster's settings.
		Legacy:  catalog.Settings{Dim: cfg.Dim, Metric: cfg.Metric, Quantization: cfg.Quantization.String(), Index: cfg.Index.String()}.Normalize(),
		Kernel:  cfg.Kernel,
		DataDir: dir, Advertise: addr, Peers: peers,
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.HeartbeatTimeout,
		MaxLeaderSilence: max(raftnode.DefaultMaxLeaderSilence, 3*cfg.HeartbeatTimeout),
		Int8MinRows:      cfg.Int8MinRows, IVFMinRows: cfg.IVFMinRows,
		TracerProvider: cfg.TracerProvider, Logger: log, RaftLogLevel: cfg.RaftLogLevel,
		PeerDialer: c.peerDialer(), BackgroundNice: backgroundNice(cfg.BackgroundNice),
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("%s replica %d: %w", name, idx, err)
	}
	traced := shard.ServerTracing(cfg.TracerProvider, cfg.Propagator)
	// Without TLS one server on addr serves the router and the peers. With
	// TLS the router's server is a second one on its own port: the peers
	// (raft, forwarded writes) stay on plaintext addr, because test
	// certificates are issued for serving only and cannot authenticate a
	// replica as a client. router shard carries raft on its TLS port.
	peer := grpc.NewServer(append(shard.ServerOptions(), traced...)...)
	rep.Register(peer)
	go peer.Serve(ln)
	servers := []*grpc.Server{peer}
	front := addr
	if cfg.TLS != nil {
		fln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			peer.Stop()
			rep.Close()
			return nil, err
		}
		g := grpc.NewServer(append(append(shard.ServerOptions(), traced...), grpc.Creds(credentials.NewTLS(cfg.TLS)))...)
		rep.Register(g)
		go g.Serve(fln)
		servers = append(servers, g)
		front = fln.Addr().String()
	}
	proxy, err := faultproxy.StartLoopback(front)
	if err != nil {
		for _, g := range servers {
			g.Stop()
		}
		rep.Close()
		return nil, err
	}
	return &Replica{Shard: name, Index: idx, Addr: addr, Proxy: proxy, PeerProxy: c.peerProxies[addr], Replica: rep, servers: servers}, nil
}

// peerDialer reaches a peer through its peer proxy (Config.PeerProxies);
// nil, the plain TCP dialer, without them.
func (c *Cluster) peerDialer() func(ctx context.Context, addr string) (net.Conn, error) {
	if c.peerProxies == nil {
		return nil
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if p, ok := c.peerProxies[addr]; ok {
			addr = p.Addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
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

// Close stops every replica, and removes the data directory if it was a
// temporary one. Closing again does nothing (a test may close the cluster
// to read its data directory before its cleanup closes it).
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		if c.stopRate != nil {
			c.stopRate()
			<-c.rateDone
		}
		for _, reps := range c.Replicas {
			for _, r := range reps {
				r.Proxy.Close()
				for _, g := range r.servers {
					g.Stop()
				}
				_ = r.Replica.Close()
			}
		}
		for _, p := range c.peerProxies {
			p.Close()
		}
		if c.tmpDir != "" {
			_ = os.RemoveAll(c.tmpDir)
		}
	})
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
// centre plus noise, so nearest neighbours are meaningful, each with a
// small payload (lang, year, tags). The same seed always gives the same
// corpus.
func Corpus(n, dim int, seed uint64) []store.Record {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// Payloads come from their own stream, so the vectors of a seed are
	// what they were before documents had payloads.
	prng := rand.New(rand.NewPCG(seed^0x5bd1e995, seed))
	const centres = 32
	cs := make([][]float32, centres)
	for i := range cs {
		cs[i] = make([]float32, dim)
		for j := range cs[i] {
			cs[i][j] = float32(rng.NormFloat64())
		}
	}
	out := make([]store.Record, n)
	noise := float32(1 / math.Sqrt(2))
	for i := range out {
		c := cs[rng.IntN(centres)]
		v := make([]float32, dim)
		for j := range v {
			v[j] = c[j] + noise*float32(rng.NormFloat64())
		}
		out[i] = store.Record{ID: "doc-" + strconv.Itoa(i), Vector: v, Payload: payload(prng)}
	}
	return out
}

// payload makes a dev document's small payload: a language (en half the
// time), a year in 2000..2025 and zero to three tags, so the README's
// filtered queries match a useful share of the corpus.
func payload(rng *rand.Rand) []byte {
	langs := []string{"en", "en", "de", "fr", "es", "ja"}
	tags := []string{"go", "rust", "python", "search", "vectors", "databases"}
	var ts []string
	for _, i := range rng.Perm(len(tags))[:rng.IntN(4)] {
		ts = append(ts, strconv.Quote(tags[i]))
	}
	return fmt.Appendf(nil, `{"lang":%q,"year":%d,"tags":[%s]}`,
		langs[rng.IntN(len(langs))], 2000+rng.IntN(26), strings.Join(ts, ","))
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

// Home is the shard that holds id of the dev collection: by its slot map,
// or by the shard list for one created before slots.
func (c *Cluster) Home(id string) string {
	if m := c.Collection.Slots; !m.IsZero() {
		return m.Home(id)
	}
	return c.table.Home(id)
}

// backgroundNice is Config.BackgroundNice as replica.Config takes it.
func backgroundNice(n int) int {
	switch {
	case n == 0:
		return replica.DefaultBackgroundNice
	case n < 0:
		return 0
	}
	return n
}
