package shard

import (
	"context"
	"errors"

	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// ScanObserver is told how long each scan took; metrics.ShardServer is one.
type ScanObserver interface {
	Scan(outcome string, d time.Duration)
	Documents(n int)
}

// Config is what a shard server is.
type Config struct {
	Dim    int
	Metric vector.Metric
	Kernel vector.Kernel
	Store  Store
	// Observer may be nil.
	Observer ScanObserver
	Logger   *slog.Logger
	// Scans admits scans (DESIGN.md, "Overload"): about one per core at a
	// time, earliest deadline first, and a scan that could not finish by
	// its deadline refused with RESOURCE_EXHAUSTED before it starts. A
	// queue with GOMAXPROCS slots if nil.
	Scans *admission.ScanQueue
	// TracerProvider makes the scan span (SpanScan), a child of the RPC's
	// server span when the grpc.Server has ServerTracing. Nil: no spans.
	TracerProvider trace.TracerProvider
}

// Server answers the shard service for one replica.
type Server struct {
	shardpb.UnimplementedShardServer
	cfg    Config
	health *health.Server
	tracer trace.Tracer // nil: tracing off
	// writeMu serialises writes so the placement check and the write it
	// guards are one step.
	writeMu sync.Mutex
}

// NewServer returns a server over cfg.Store. It reports NOT_SERVING on
// grpc.health.v1 until SetServing is called, so a replica still loading is
// skipped by routers without counting as a failure.
func NewServer(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Scans == nil {
		cfg.Scans = admission.NewScanQueue(admission.ScanQueueConfig{})
	}
	s := &Server{cfg: cfg, health: health.NewServer(), tracer: scanTracer(cfg.TracerProvider)}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return s
}

// SetServing flips the health status; call it once the store is loaded.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
}

// Serving reports the health status, for the HTTP /readyz probe.
func (s *Server) Serving() bool {
	resp, err := s.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

// Register adds the shard and health services to g.
func (s *Server) Register(g *grpc.Server) {
	shardpb.RegisterShardServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
}

// Shutdown marks the server NOT_SERVING for good, so probes stop choosing it
// while it drains.
func (s *Server) Shutdown() { s.health.Shutdown() }

// ServerOptions are the options every shard gRPC server needs: keepalive
// enforcement that permits the router's idle pings (10 s), where grpc-go's
// default would answer them with GOAWAY too_many_pings, and server-side
// pings so a vanished router is noticed too.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             5 * time.Second,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    10 * time.Second,
			Timeout: 3 * time.Second,
		}),
		grpc.MaxRecvMsgSize(64 << 20),
	}
}

// Search implements shardpb.ShardServer.
func (s *Server) Search(ctx context.Context, req *shardpb.SearchRequest) (*shardpb.SearchResponse, error) {
	res, docs, err := s.search(ctx, []*shardpb.Query{req.GetQuery()})
	if err != nil {
		return nil, err
	}
	return &shardpb.SearchResponse{Hits: res[0].Hits, DocCount: docs}, nil
}

// SearchBatch implements shardpb.ShardServer.
func (s *Server) SearchBatch(ctx context.Context, req *shardpb.SearchBatchRequest) (*shardpb.SearchBatchResponse, error) {
	if len(req.GetQueries()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no queries")
	}
	res, docs, err := s.search(ctx, req.GetQueries())
	if err != nil {
		return nil, err
	}
	return &shardpb.SearchBatchResponse{Results: res, DocCount: docs}, nil
}

func (s *Server) search(ctx context.Context, pqs []*shardpb.Query) ([]*shardpb.HitList, uint64, error) {
	qs := make([]vector.Query, len(pqs))
	for i, pq := range pqs {
		v, err := s.decodeVector(pq.GetVector(), fmt.Sprintf("query %d", i))
		if err != nil {
			return nil, 0, err
		}
		if pq.GetK() < 1 || pq.GetK() > vector.MaxK {
			return nil, 0, status.Errorf(codes.InvalidArgument, "query %d: k is %d, want 1..%d", i, pq.GetK(), vector.MaxK)
		}
		qs[i] = vector.Query{Vector: v, K: int(pq.GetK()), Exclude: pq.GetExcludeId()}
	}
	ctx, span := s.startScan(ctx)
	release, err := s.cfg.Scans.Acquire(ctx)
	if err != nil {
		if errors.Is(err, admission.ErrWouldMiss) {
			s.observe(errOverloaded, 0)
			err = status.Errorf(codes.ResourceExhausted, "shard overloaded: %v", err)
		} else {
			err = status.FromContextError(err).Err()
		}
		s.endScan(span, qs, 0, err)
		return nil, 0, err
	}
	start := time.Now()
	defer func() { release(time.Since(start)) }()
	var (
		hits [][]vector.Hit
		docs int
	)
	err = s.cfg.Store.View(func(rows vector.Rows) error {
		docs = rows.Len()
		var err error
		hits, err = s.cfg.Kernel.Scan(ctx, s.cfg.Metric, rows, qs)
		return err
	})
	s.observe(err, time.Since(start))
	s.endScan(span, qs, docs, err)
	if err != nil {
		if c := status.FromContextError(ctx.Err()); ctx.Err() != nil {
			return nil, 0, c.Err()
		}
		return nil, 0, status.Errorf(codes.Internal, "scan: %v", err)
	}
	out := make([]*shardpb.HitList, len(hits))
	for i, hs := range hits {
		l := &shardpb.HitList{Hits: make([]*shardpb.Hit, len(hs))}
		for j, h := range hs {
			l.Hits[j] = &shardpb.Hit{Id: h.ID, Score: h.Score}
		}
		out[i] = l
	}
	return out, uint64(docs), nil
}

// errOverloaded marks a scan refused by admission, for the scan metric.
var errOverloaded = errors.New("overloaded")

func (s *Server) observe(err error, d time.Duration) {
	if s.cfg.Observer == nil {
		return
	}
	outcome := "ok"
	switch {
	case errors.Is(err, errOverloaded):
		outcome = "overloaded"
	case err != nil:
		outcome = "error"
	}
	s.cfg.Observer.Scan(outcome, d)
}

// decodeVector checks a vector the way the router does, so a shard never
// stores or scans what the router would refuse, whoever calls it. Under
// cosine it returns the vector normalised.
func (s *Server) decodeVector(b []byte, what string) ([]float32, error) {
	v, err := DecodeVector(b)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	}
	if len(v) != s.cfg.Dim {
		return nil, status.Errorf(codes.InvalidArgument, "%s has %d dimensions, want %d", what, len(v), s.cfg.Dim)
	}
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, status.Errorf(codes.InvalidArgument, "%s: element %d is not a finite number", what, i)
		}
	}
	if s.cfg.Metric == vector.Cosine && !s.cfg.Kernel.Normalize(v) {
		return nil, status.Errorf(codes.InvalidArgument, "%s is a zero vector, which has no direction under cosine", what)
	}
	return v, nil
}

// checkPlacement refuses a write routed under another shard list: the
// router's shard list changed (a reshard) or the write reached the wrong
// shard. A replica that has never been written adopts the first placement.
func (s *Server) checkPlacement(p *shardpb.Placement) (Placement, error) {
	got := Placement{Fingerprint: p.GetFingerprint(), Shard: p.GetShard()}
	if got.Fingerprint == "" || got.Shard == "" {
		return got, status.Error(codes.InvalidArgument, "write without placement")
	}
	have := s.cfg.Store.Placement()
	if have != (Placement{}) && have != got {
		return got, status.Errorf(codes.FailedPrecondition,
			"shard holds data written as %q under shard list %s, this write is for %q under %s: changing the shard list is a reshard",
			have.Shard, have.Fingerprint, got.Shard, got.Fingerprint)
	}
	return got, nil
}

// Upsert implements shardpb.ShardServer. Validation is all-or-nothing.
func (s *Server) Upsert(ctx context.Context, req *shardpb.UpsertRequest) (*shardpb.UpsertResponse, error) {
	recs := make([]Record, len(req.GetVectors()))
	for i, pv := range req.GetVectors() {
		if pv.GetId() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "vector %d: empty id", i)
		}
		v, err := s.decodeVector(pv.GetVector(), fmt.Sprintf("vector %d", i))
		if err != nil {
			return nil, err
		}
		recs[i] = Record{ID: pv.GetId(), Vector: v}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	p, err := s.checkPlacement(req.GetPlacement())
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Store.Upsert(ctx, p, recs); err != nil {
		return nil, status.Errorf(codes.Internal, "store: %v", err)
	}
	n := s.cfg.Store.Len()
	if s.cfg.Observer != nil {
		s.cfg.Observer.Documents(n)
	}
	return &shardpb.UpsertResponse{DocCount: uint64(n)}, nil
}

// Get implements shardpb.ShardServer.
func (s *Server) Get(_ context.Context, req *shardpb.GetRequest) (*shardpb.GetResponse, error) {
	v, ok := s.cfg.Store.Get(req.GetId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no vector with id %q", req.GetId())
	}
	return &shardpb.GetResponse{Vector: &shardpb.Vector{Id: req.GetId(), Vector: EncodeVector(v)}}, nil
}

// Delete implements shardpb.ShardServer.
func (s *Server) Delete(ctx context.Context, req *shardpb.DeleteRequest) (*shardpb.DeleteResponse, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	p, err := s.checkPlacement(req.GetPlacement())
	if err != nil {
		return nil, err
	}
	found, err := s.cfg.Store.Delete(ctx, p, req.GetId())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "store: %v", err)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Documents(s.cfg.Store.Len())
	}
	return &shardpb.DeleteResponse{Found: found}, nil
}

// Stats implements shardpb.ShardServer.
func (s *Server) Stats(context.Context, *shardpb.StatsRequest) (*shardpb.StatsResponse, error) {
	p := s.cfg.Store.Placement()
	return &shardpb.StatsResponse{
		DocCount:  uint64(s.cfg.Store.Len()),
		Dim:       uint32(s.cfg.Dim),
		Metric:    s.cfg.Metric.String(),
		Kernel:    s.cfg.Kernel.Name,
		Placement: &shardpb.Placement{Fingerprint: p.Fingerprint, Shard: p.Shard},
	}, nil
}
