package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// ScanObserver is told how long each scan took, and each collection's
// document count; metrics.ShardServer is one.
type ScanObserver interface {
	Scan(outcome string, d time.Duration)
	// Queries is told how many queries a scan served, by kind: ScanExact
	// (float32 over every row), ScanInt8 (int8 codes, exact re-scoring)
	// or ScanIVF (an IVF index probe, exact re-scoring).
	Queries(kind string, n int)
	DocumentObserver
}

// Scan outcomes, the outcome label of trawl_shard_scan_duration_seconds.
const (
	ScanOK         = "ok"
	ScanOverloaded = "overloaded" // refused by the scan queue before it started
	// ScanCancelled: the caller cancelled the scan mid-way (a hedge's
	// loser, a client gone) and it stopped at its next block; the time
	// cancelled scans spent is the _sum of their series.
	ScanCancelled = "cancelled"
	ScanDeadline  = "deadline_exceeded" // stopped at its deadline
	ScanError     = "error"
)

// Scan kinds, the kind label of trawl_shard_scan_queries_total.
const (
	ScanExact = "exact"
	ScanInt8  = "int8"
	ScanIVF   = "ivf"
)

// Config is what a shard server is.
type Config struct {
	Kernel vector.Kernel
	// Int8Kernel scores int8 codes of int8 and IVF collections:
	// quant.FromEnv() if unnamed.
	Int8Kernel quant.Kernel
	// Collections are the replica's catalog and documents, written only
	// by its state machine (NewStateMachine) as the Node's log commits.
	Collections *Collections
	// Trainer configures the trainer of each int8 or IVF collection
	// (Logger: the server's if nil).
	Trainer store.TrainerConfig
	// Node is the replica's raft group: writes go through its log, reads
	// are refused while it is not serving, and it decides the health
	// status.
	Node *raftnode.Node
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
	// PeerDialOptions reach the group's other replicas (the leader a
	// follower forwards writes to): shard.DialOptions with the peers'
	// credentials.
	PeerDialOptions []grpc.DialOption
}

// Server answers the shard service for one replica.
type Server struct {
	shardpb.UnimplementedShardServer
	cfg    Config
	health *health.Server
	tracer trace.Tracer // nil: tracing off
	// leaders are the connections writes are forwarded on.
	leaders leaders
	// rates: the measured scan rates Stats reports.
	rates scanRates
	// snapshots: snapshots asked for after a drop (requestSnapshot).
	snapshots snapshots
}

// New returns a server over cfg.Collections and cfg.Node, and starts the
// trainers of its int8 and IVF collections. It reports
// NOT_SERVING on grpc.health.v1 until the node serves, so a replica still
// loading is skipped by routers without counting as a failure.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Scans == nil {
		cfg.Scans = admission.NewScanQueue(admission.ScanQueueConfig{})
	}
	if cfg.Int8Kernel.Name == "" {
		cfg.Int8Kernel = quant.FromEnv()
	}
	if cfg.Trainer.Logger == nil {
		cfg.Trainer.Logger = cfg.Logger
	}
	s := &Server{cfg: cfg, health: health.NewServer(), tracer: shard.Tracer(cfg.TracerProvider), leaders: leaders{opts: cfg.PeerDialOptions}}
	s.snapshots.node, s.snapshots.log = cfg.Node, cfg.Logger
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	cfg.Collections.onDropped(s.snapshots.request)
	cfg.Collections.startTrainers(s.startTrainer)
	return s
}

// setServing flips the health status, as the node's serving state changes.
func (s *Server) setServing(serving bool) {
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

// Register adds the shard, health and raft services to g (same port,
// same TLS).
func (s *Server) Register(g *grpc.Server) {
	shardpb.RegisterShardServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
	s.cfg.Node.Register(g)
	s.cfg.Node.OnServing(s.setServing)
}

// readable refuses a read while the replica is not serving (loading,
// catching up, no leader heard from within --max-leader-silence), with
// codes.Unavailable and reason NOT_SERVING, so the router skips it without
// counting a failure and tries the next replica. A replica that serves but
// has not applied minIndex yet (a follower is normally milliseconds
// behind its leader) first waits for it, for at most half the read's
// remaining budget, and refuses only then: the other half is left for the
// router's next replica.
func (s *Server) readable(ctx context.Context, minIndex uint64) error {
	n := s.cfg.Node
	if !n.Serving() {
		return shard.NotServingStatus("replica is not serving: loading, catching up, or not hearing from a leader")
	}
	if n.AppliedIndex() >= minIndex {
		return nil
	}
	wait := maxApplyWait
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl) / 2
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := n.WaitApplied(wctx, minIndex); err != nil {
		return shard.NotServingStatus(fmt.Sprintf("replica has applied index %d, the read asks for %d", n.AppliedIndex(), minIndex))
	}
	return nil
}

// maxApplyWait bounds readable's wait for a write to apply when the read
// carries no deadline.
const maxApplyWait = time.Second

// Shutdown marks the server NOT_SERVING for good, so probes stop choosing it
// while it drains.
func (s *Server) Shutdown() { s.health.Shutdown() }

// Close closes the connections writes were forwarded on and waits for
// a snapshot under way after drops (one not started is dropped: the next
// start snapshots as raft decides).
func (s *Server) Close() {
	s.leaders.close()
	s.snapshots.wait()
}

// Search implements shardpb.ShardServer: one query or a batch, one scan.
func (s *Server) Search(ctx context.Context, req *shardpb.SearchRequest) (*shardpb.SearchResponse, error) {
	if len(req.GetQueries()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no queries")
	}
	if err := s.readable(ctx, req.GetMinIndex()); err != nil {
		return nil, err
	}
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		return nil, err
	}
	keep, err := s.cfg.Collections.slotReadFilter(col, req.GetSlots())
	if err != nil {
		return nil, err
	}
	res, docs, exact, err := s.search(ctx, col, req.GetQueries(), keep)
	if err != nil {
		return nil, err
	}
	return &shardpb.SearchResponse{Results: res, DocCount: docs, Exact: exact}, nil
}

// errOverloaded marks a scan refused by admission, for the scan metric.
var errOverloaded = errors.New("overloaded")

func (s *Server) observe(err error, d time.Duration) {
	if s.cfg.Observer == nil {
		return
	}
	outcome := ScanOK
	switch {
	case errors.Is(err, errOverloaded):
		outcome = ScanOverloaded
	case errors.Is(err, context.Canceled):
		outcome = ScanCancelled
	case errors.Is(err, context.DeadlineExceeded):
		outcome = ScanDeadline
	case err != nil:
		outcome = ScanError
	}
	s.cfg.Observer.Scan(outcome, d)
}

// decodeVector checks a vector the way the router does, so a shard never
// stores or scans what the router would refuse, whoever calls it. Under
// cosine it returns the vector normalised. what and i name the vector in
// an error ("query 3"); the name is formatted only then, since every query
// of every search passes through here.
func (s *Server) decodeVector(set catalog.Settings, b []byte, what string, i int) ([]float32, error) {
	if err := checkVector(set, b, what, i); err != nil {
		return nil, err
	}
	v, err := shard.DecodeVector(b)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s %d: %v", what, i, err)
	}
	if set.Metric == vector.Cosine && !s.cfg.Kernel.Normalize(v) {
		return nil, status.Errorf(codes.InvalidArgument, "%s %d is a zero vector, which has no direction under cosine", what, i)
	}
	return v, nil
}

// checkVector checks a vector's little-endian bytes in place: the
// collection's dimension, and every element finite.
func checkVector(set catalog.Settings, b []byte, what string, i int) error {
	if len(b)%4 != 0 {
		return status.Errorf(codes.InvalidArgument, "%s %d: vector is %d bytes, not a whole number of float32", what, i, len(b))
	}
	if len(b)/4 != set.Dim {
		return status.Errorf(codes.InvalidArgument, "%s %d has %d dimensions, want %d", what, i, len(b)/4, set.Dim)
	}
	for j := 0; j < len(b); j += 4 {
		// All exponent bits set is Inf or NaN: one mask on the bits
		// instead of two float64 tests per element.
		if binary.LittleEndian.Uint32(b[j:])&0x7f800000 == 0x7f800000 {
			return status.Errorf(codes.InvalidArgument, "%s %d: element %d is not a finite number", what, i, j/4)
		}
	}
	return nil
}

// logVector is what an upserted vector's log entry carries: the bytes as
// they came, checked in place, under dot and l2; under cosine the
// normalised vector, normalised here on the leader so that every replica
// applies the same bytes whatever its CPU's kernel.
func (s *Server) logVector(set catalog.Settings, b []byte, i int) ([]byte, error) {
	if set.Metric != vector.Cosine {
		return b, checkVector(set, b, "vector", i)
	}
	v, err := s.decodeVector(set, b, "vector", i)
	if err != nil {
		return nil, err
	}
	return shard.EncodeVector(v), nil
}

// Upsert implements shardpb.ShardServer. Validation is all-or-nothing,
// against the collection's settings. The leader commits the (validated,
// normalised) vectors through the log and answers once they are on a
// majority's disk and applied here; a follower forwards the write to its
// leader (forward).
func (s *Server) Upsert(ctx context.Context, req *shardpb.UpsertRequest) (*shardpb.UpsertResponse, error) {
	fwd := func(err error) (*shardpb.UpsertResponse, error) {
		var resp *shardpb.UpsertResponse
		leader, err := s.forward(ctx, err, func(ctx context.Context, c shardpb.ShardClient) (err error) {
			resp, err = c.Upsert(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		resp.ForwardedTo = leader
		return resp, nil
	}
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		// A follower that has not applied the create yet: the leader may
		// have.
		if !s.cfg.Node.IsLeader() {
			return fwd(s.notLeader())
		}
		return nil, err
	}
	vs := make([]*shardpb.Vector, len(req.GetVectors()))
	version := uint32(0)
	for i, pv := range req.GetVectors() {
		if pv.GetId() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "vector %d: empty id", i)
		}
		if err := checkUnnamed(col.settings, pv, i); err != nil {
			return nil, err
		}
		var v []byte
		if col.settings.HasUnnamed() {
			if v, err = s.logVector(col.settings, pv.GetVector(), i); err != nil {
				return nil, err
			}
		}
		var payload []byte
		if b := pv.GetPayload(); len(b) > 0 {
			// Checked here as the router checks it: the index and filters
			// assume a payload that decodes.
			if payload, err = filter.CheckPayload(b); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "vector %d: %v", i, err)
			}
		}
		sp, err := checkSparse(col.settings, pv, i)
		if err != nil {
			return nil, err
		}
		if sp != nil {
			version = max(version, upsertVersion)
		}
		named, err := s.checkNamed(col.settings, pv, i)
		if err != nil {
			return nil, err
		}
		if named != nil {
			version = upsertVersionNamed
		}
		vs[i] = &shardpb.Vector{Id: pv.GetId(), Vector: v, Payload: payload, Sparse: sp, Named: named}
	}
	res, idx, err := s.propose(ctx, col, &shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: &shardpb.UpsertCommand{Placement: req.GetPlacement(), Vectors: vs,
		Version: version}}})
	if err != nil {
		return fwd(err)
	}
	return &shardpb.UpsertResponse{DocCount: uint64(res.docs), Index: idx}, nil
}

// notLeader is propose's refusal on a follower, for a write it refuses
// before proposing.
func (s *Server) notLeader() error { return notLeaderError{leader: s.cfg.Node.Leader()} }

// propose commits cmd, a write to col, through the node's log. The entry
// names exactly the incarnation of col its vectors were checked against
// (none for the legacy collection not created yet: the entry creates
// it). The placement check runs in the state machine, on every replica
// alike; the leader checks it first as well only to refuse a reshard
// without spending a log entry.
func (s *Server) propose(ctx context.Context, col *collection, cmd *shardpb.Command) (applyResult, uint64, error) {
	if !col.virtual {
		cmd.Collection = col.ref()
	}
	var (
		p   *shardpb.Placement
		ids []string
	)
	switch op := cmd.GetOp().(type) {
	case *shardpb.Command_Upsert:
		p, ids = op.Upsert.GetPlacement(), upsertIDs(op.Upsert)
	case *shardpb.Command_Delete:
		p, ids = op.Delete.GetPlacement(), deleteIDs(op.Delete)
	case *shardpb.Command_Edit:
		if _, err := s.cfg.Collections.editPlacementCheck(col, op.Edit); err != nil {
			return applyResult{}, 0, err
		}
	}
	if p != nil {
		if _, err := s.cfg.Collections.placementCheck(col, p, ids); err != nil {
			return applyResult{}, 0, err
		}
	}
	return s.proposeCommand(ctx, cmd)
}

// proposeCommand commits cmd through the node's log and returns what its
// apply returned and its index.
func (s *Server) proposeCommand(ctx context.Context, cmd *shardpb.Command) (applyResult, uint64, error) {
	// The leader's clock, in the entry: backup fences' leases are
	// measured against it on every replica alike.
	cmd.ProposedMs = time.Now().UnixMilli()
	b, err := proto.Marshal(cmd)
	if err != nil {
		return applyResult{}, 0, status.Errorf(codes.Internal, "encode log entry: %v", err)
	}
	out, idx, err := s.cfg.Node.Propose(ctx, b)
	var pe *raftnode.ProposeError
	switch {
	case errors.As(err, &pe) && pe.NotLeader:
		return applyResult{}, 0, notLeaderError{leader: pe.Leader}
	case errors.As(err, &pe):
		// Leadership lost, shutdown or a timeout after the entry entered
		// the log: it may still commit.
		return applyResult{}, 0, status.Errorf(codes.Unavailable, "write may or may not have committed: %v", pe.Err)
	case err != nil:
		return applyResult{}, 0, status.Errorf(codes.Internal, "propose: %v", err)
	}
	res, _ := out.(applyResult)
	if res.err != nil {
		return res, idx, res.err
	}
	return res, idx, nil
}

// SetTrained commits a trained value every replica of the collection ref
// names must encode rows with identically (an int8 scale, IVF centroids)
// through the log, on the leader, and returns its index; every replica,
// restart and snapshot install then holds the same value
// (store.Memory.Trained). Each collection's trainer commits through
// trainedProposer, which names its incarnation exactly.
func (s *Server) SetTrained(ctx context.Context, ref *shardpb.CollectionRef, name string, value []byte) (uint64, error) {
	col, err := s.cfg.Collections.resolve(ref)
	if err != nil {
		return 0, err
	}
	_, idx, err := s.propose(ctx, col, &shardpb.Command{Op: &shardpb.Command_SetTrained{SetTrained: &shardpb.SetTrainedCommand{Name: name, Value: value}}})
	return idx, err
}

// ServingLeader reports whether this replica leads its group and serves.
func (s *Server) ServingLeader() bool { return s.cfg.Node.ServingLeader() }

// Get implements shardpb.ShardServer.
func (s *Server) Get(ctx context.Context, req *shardpb.GetRequest) (*shardpb.GetResponse, error) {
	if err := s.readable(ctx, req.GetMinIndex()); err != nil {
		return nil, err
	}
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		return nil, err
	}
	keep, err := s.cfg.Collections.slotReadFilter(col, req.GetSlots())
	if err != nil {
		return nil, err
	}
	r, ok := col.mem.Record(req.GetId())
	if !ok || keep != nil && !keep(req.GetId()) {
		return nil, status.Errorf(codes.NotFound, "no vector with id %q", req.GetId())
	}
	return &shardpb.GetResponse{Vector: &shardpb.Vector{Id: req.GetId(), Vector: shard.EncodeVector(r.Vector), Payload: r.Payload,
		Sparse: sparseToPB(r.Sparse), Named: namedToPB(r.Named)}}, nil
}

// Delete implements shardpb.ShardServer. A request with ids or a filter
// deletes all of them in one log entry; the filter is checked here as the
// router checks it, and evaluated when the entry applies.
func (s *Server) Delete(ctx context.Context, req *shardpb.DeleteRequest) (*shardpb.DeleteResponse, error) {
	if fb := req.GetFilter(); len(fb) > 0 {
		if _, err := filter.Parse(fb); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "delete filter: %v", err)
		}
	}
	fwd := func(err error) (*shardpb.DeleteResponse, error) {
		var resp *shardpb.DeleteResponse
		leader, err := s.forward(ctx, err, func(ctx context.Context, c shardpb.ShardClient) (err error) {
			resp, err = c.Delete(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		resp.ForwardedTo = leader
		return resp, nil
	}
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		if !s.cfg.Node.IsLeader() {
			return fwd(s.notLeader())
		}
		return nil, err
	}
	res, idx, err := s.propose(ctx, col, &shardpb.Command{Op: &shardpb.Command_Delete{Delete: &shardpb.DeleteCommand{
		Placement: req.GetPlacement(), Id: req.GetId(), Ids: req.GetIds(), Filter: req.GetFilter()}}})
	if err != nil {
		return fwd(err)
	}
	return &shardpb.DeleteResponse{Found: res.found, Index: idx, Deleted: uint64(res.deleted)}, nil
}

// Scroll implements shardpb.ShardServer.
func (s *Server) Scroll(ctx context.Context, req *shardpb.ScrollRequest) (*shardpb.ScrollResponse, error) {
	if err := s.readable(ctx, req.GetMinIndex()); err != nil {
		return nil, err
	}
	if req.GetLimit() > shard.MaxScrollLimit {
		return nil, status.Errorf(codes.InvalidArgument, "limit is %d, want at most %d", req.GetLimit(), shard.MaxScrollLimit)
	}
	col, err := s.cfg.Collections.resolve(req.GetCollection())
	if err != nil {
		return nil, err
	}
	keep, err := s.cfg.Collections.slotReadFilter(col, req.GetSlots())
	if err != nil {
		return nil, err
	}
	pr := store.PageRequest{From: req.GetFrom(), HasFrom: req.GetHasFrom(), Limit: int(req.GetLimit()), WithVector: req.GetWithVector(), Keep: keep}
	if fb := req.GetFilter(); len(fb) > 0 {
		f, err := filter.Parse(fb)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "scroll filter: %v", err)
		}
		pr.Filter = f
	}
	if sel := req.GetWithPayload(); sel != nil {
		pr.Payload = &store.PayloadKeys{}
		if !sel.GetAll() {
			pr.Payload.Keys = append([]string{}, sel.GetKeys()...)
		}
	}
	page, err := col.mem.Page(pr)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "scroll: %v", err)
	}
	out := &shardpb.ScrollResponse{Count: uint64(page.Count), DocCount: uint64(page.Docs), Points: make([]*shardpb.Vector, len(page.Records))}
	for i, r := range page.Records {
		v := &shardpb.Vector{Id: r.ID, Payload: r.Payload, Sparse: sparseToPB(r.Sparse), Named: namedToPB(r.Named)}
		if r.Vector != nil {
			v.Vector = shard.EncodeVector(r.Vector)
		}
		out.Points[i] = v
	}
	return out, nil
}

// CalibrateScanRate measures this replica's kernel (Calibrate) at
// shard.RefDim, the dimension rates are expressed in, under the legacy
// collection's metric, and keeps the figure for Stats.
func (s *Server) CalibrateScanRate(ctx context.Context) (float64, error) {
	rate, err := Calibrate(ctx, s.cfg.Logger, s.cfg.Kernel, s.cfg.Collections.LegacySettings().Metric, shard.RefDim)
	if err != nil {
		return 0, err
	}
	s.rates.setCalibrated(rate)
	return rate, nil
}

// SetScanRate sets the calibrated rate: where several replicas share a
// process (router dev), one measurement serves them all.
func (s *Server) SetScanRate(rate float64) { s.rates.setCalibrated(rate) }

// minLiveBytes: smaller scans are mostly fixed costs (heaps, goroutines),
// so their rate would understate what a shard of sizing interest does.
const minLiveBytes = 4 << 20

// observeRate folds a full exact scan of one query into the running rate,
// per core of the workers the scan split over. Batches are left out: one
// pass serves every query of a batch, so its rows per second are another
// quantity.
func (s *Server) observeRate(rows, dim, queries int, d time.Duration) {
	if queries != 1 || rows*dim*4 < minLiveBytes {
		return
	}
	s.rates.observe(rowsPerSecond(rows, dim, vector.ScanWorkers(rows, runtime.GOMAXPROCS(0)), d))
}
