package qdrantgrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/admission"
	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/httpx"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/metrics"
)

// Version is the Qdrant release whose gRPC API (its .proto files, as
// qdrant/go-client v1.17.1 carries them) these services follow.
// HealthCheck reports it, so the clients' compatibility check (same
// major, minor within one) passes.
const Version = "1.17.1"

// MaxMessageBytes bounds a request message: Qdrant's own default
// (max_request_size_mb 32), so an upsert a Qdrant server takes fits.
const MaxMessageBytes = 32 << 20

// Metadata keys of trawl's own.
const (
	// DegradedKey is trailing metadata on every answer that ran a fan-out:
	// "true" when a shard is missing from it, else "false".
	DegradedKey = "x-trawl-degraded"
	// UnavailableKey, in the trailer of a degraded answer, lists the
	// missing shards, comma-separated, each as name=reason.
	UnavailableKey = "x-trawl-unavailable-shards"
	// DeadlineKey, in the trailer of every answer that ran a fan-out, is
	// the deadline it ran under, in milliseconds (scatter_gather's
	// deadline_ms).
	DeadlineKey = "x-trawl-deadline-ms"
	// AllowPartialKey, request metadata "false", refuses a degraded
	// answer (Unavailable) instead of giving it: REST's ?allow_partial.
	AllowPartialKey = "x-trawl-allow-partial"
)

// Config wires the services.
type Config struct {
	// Coordinator runs the use cases, the same as the REST routes'.
	Coordinator *coordinator.Coordinator
	Budget      budget.Config
	// Keys, when not nil (--api-key-file), are the API keys a call must
	// present, as Qdrant's clients send them (api-key metadata) or as
	// authorization: Bearer, with the collections each may read or write.
	Keys *apikey.Keyring
	// Limiter admits calls: the router's, shared with its HTTP port.
	Limiter *admission.Limiter
	// Metrics counts admission refusals; nil counts nothing.
	Metrics *metrics.Router
	// Logger logs internal errors; nil logs nothing.
	Logger *slog.Logger
	// Backups is where snapshots are kept, shared with the REST routes
	// (nil: the Snapshots calls answer that none is configured).
	Backups *httpx.Backups
}

// server holds what the three services share.
type server struct {
	cfg Config
}

// New builds a gRPC server serving Qdrant's Qdrant, Collections and
// Points services; opts add to its options (TLS credentials). Serve it on
// --qdrant-grpc-addr; GracefulStop drains it.
func New(cfg Config, opts ...grpc.ServerOption) *grpc.Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Limiter == nil {
		cfg.Limiter = admission.NewLimiter(admission.LimiterConfig{})
	}
	s := &server{cfg: cfg}
	opts = append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.intercept),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		// Qdrant's clients ping every 10 s, also while idle (go-client's
		// default keepalive); grpc-go's default policy would answer that
		// with GOAWAY too_many_pings.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}, opts...)
	g := grpc.NewServer(opts...)
	pb.RegisterQdrantServer(g, &qdrantService{})
	pb.RegisterCollectionsServer(g, &collectionsService{s: s})
	pb.RegisterPointsServer(g, &pointsService{s: s})
	pb.RegisterSnapshotsServer(g, &snapshotsService{s: s})
	return g
}

type ctxKey int

const (
	startKey ctxKey = iota
	scopeKey
)

// healthMethod is open like REST's GET /: the clients' version probe,
// holding no data.
const healthMethod = "/qdrant.Qdrant/HealthCheck"

// intercept is every call's shared handling: its start (Qdrant's "time"),
// the API key, admission on arrival (a refusal costs no decoding), the
// handler's error as a gRPC status in Qdrant's words, a clear answer for
// the RPCs trawl does not serve, and a panic contained as Internal.
func (s *server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	ctx = context.WithValue(ctx, startKey, time.Now())
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.ErrorContext(ctx, "panic in a Qdrant gRPC call", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
	}()
	if info.FullMethod != healthMethod {
		if s.cfg.Keys != nil {
			sc, ok := s.authenticate(ctx)
			if !ok {
				return nil, s.status(ctx, unauthenticated())
			}
			ctx = context.WithValue(ctx, scopeKey, sc)
		}
		if err := s.cfg.Limiter.Check(); err != nil {
			return nil, s.status(ctx, s.refused(ctx, err))
		}
	}
	resp, err = handler(ctx, req)
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented && strings.HasPrefix(st.Message(), "method ") {
			return nil, status.Errorf(codes.Unimplemented, "%s is not served: trawl serves the subset of Qdrant's API applications use (docs/qdrant.md)", info.FullMethod)
		}
		return nil, s.status(ctx, err)
	}
	return resp, nil
}

// authenticate finds the call's key: Qdrant's api-key metadata, or
// authorization: Bearer. Lookups take constant time.
func (s *server) authenticate(ctx context.Context) (apikey.Scope, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, k := range md.Get("api-key") {
		if sc, ok := s.cfg.Keys.Lookup(k); ok {
			return sc, true
		}
	}
	for _, a := range md.Get("authorization") {
		if token, ok := strings.CutPrefix(a, "Bearer "); ok {
			if sc, ok := s.cfg.Keys.Lookup(token); ok {
				return sc, true
			}
		}
	}
	return apikey.Scope{}, false
}

func unauthenticated() *wire.Error {
	return &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated,
		Msg: "missing or wrong API key: send it as api-key metadata or as authorization: Bearer <key>"}
}

// permit refuses a call whose key does not grant need on collection:
// PermissionDenied naming the collection.
func (s *server) permit(ctx context.Context, collection string, need apikey.Access) error {
	if s.cfg.Keys == nil {
		return nil
	}
	sc, ok := ctx.Value(scopeKey).(apikey.Scope)
	if !ok {
		return unauthenticated()
	}
	if sc.Allows(collection, need) {
		return nil
	}
	return &wire.Error{Status: http.StatusForbidden, Code: wire.CodeForbidden,
		Msg: fmt.Sprintf("this API key does not grant %s on collection `%s`", need, collection)}
}

// readable reports whether the call's key may read collection.
func (s *server) readable(ctx context.Context, collection string) bool {
	return s.permit(ctx, collection, apikey.Read) == nil
}

// refused is an admission refusal, answered as every refusal is:
// ResourceExhausted, retry-after 1 (the trailer Qdrant's clients read),
// counted by its reason.
func (s *server) refused(ctx context.Context, err error) error {
	var ref *admission.Refusal
	if errors.As(err, &ref) && s.cfg.Metrics != nil {
		s.cfg.Metrics.Rejected(ref.Reason)
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs("retry-after", "1"))
	return &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeOverloaded, Msg: err.Error()}
}

// admit takes weight slots (one per query) for a decoded call.
func (s *server) admit(ctx context.Context, weight int, deadline time.Duration) (*admission.Permit, error) {
	p, err := s.cfg.Limiter.Acquire(weight, deadline)
	if err != nil {
		return nil, s.refused(ctx, err)
	}
	return p, nil
}

// status is err as a gRPC status, classified as the REST routes classify
// it (a *wire.Error as itself, a coordinator error by its code, anything
// else Internal, logged) and worded as Qdrant words it ("Not found:
// Collection `x` doesn't exist!").
func (s *server) status(ctx context.Context, err error) error {
	// Only a status made here passes as it is: status.FromError would
	// also find a shard's status wrapped inside a coordinator error, and
	// answer with the shard's code and words instead of the use case's.
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	e := &wire.Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Msg: err.Error()}
	var we *wire.Error
	var ce *coordinator.Error
	switch {
	case errors.As(err, &we):
		e = we
	case errors.As(err, &ce) && ce.Code != coordinator.CodeInternal:
		e = &wire.Error{Msg: ce.Msg}
		e.Status, e.Code = wire.StatusOf(ce.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "Timeout: "+err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		s.cfg.Logger.ErrorContext(ctx, "internal error", "err", err)
	}
	return status.Error(code(e), qdrantx.Prefix(e.Status)+e.Msg)
}

// code maps an error's HTTP classification to the gRPC code Qdrant gives
// the same error.
func code(e *wire.Error) codes.Code {
	switch e.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		if e.Code == wire.CodeCatalogConflict {
			return codes.AlreadyExists
		}
		return codes.FailedPrecondition
	case http.StatusRequestTimeout:
		return codes.DeadlineExceeded
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusBadGateway:
		// A write that may or may not have been applied: not Unavailable,
		// which clients retry on their own.
		return codes.Unknown
	}
	return codes.Internal
}

// elapsed is Qdrant's "time": seconds since the call arrived.
func elapsed(ctx context.Context) float64 {
	t, ok := ctx.Value(startKey).(time.Time)
	if !ok {
		return 0
	}
	return time.Since(t).Seconds()
}

// resolveBudget is a call's deadline: the client's gRPC deadline, which
// travels with the call, or Qdrant's timeout field (seconds) when it is
// shorter or the client set none, else the default; capped at
// --max-deadline-ms either way. A deadline already passed is refused.
func (s *server) resolveBudget(ctx context.Context, timeout *uint64) (budget.Budget, error) {
	b := budget.ForDeadline(s.cfg.Budget.Default())
	if timeout != nil {
		tb, err := budget.ResolveTimeout(s.cfg.Budget, nil, []string{strconv.FormatUint(*timeout, 10)})
		if err != nil {
			return budget.Budget{}, wire.Invalid(err.Error())
		}
		b = tb
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return budget.Budget{}, status.Error(codes.DeadlineExceeded, "Timeout: the call's deadline passed before it was served")
		}
		if rb := budget.ForRemaining(s.cfg.Budget, left); timeout == nil || rb.Deadline < b.Deadline {
			b = rb
		}
	}
	return b, nil
}

// allowPartial is the call's x-trawl-allow-partial (default true).
func allowPartial(ctx context.Context) (bool, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vs := md.Get(AllowPartialKey)
	if len(vs) == 0 {
		return true, nil
	}
	v, err := strconv.ParseBool(vs[0])
	if err != nil || len(vs) > 1 {
		return false, wire.Invalid(fmt.Sprintf("%s is %q, want true or false, once", AllowPartialKey, strings.Join(vs, ",")))
	}
	return v, nil
}

// setVerdict puts a fan-out's verdict in the call's trailer: degraded
// true or false, and which shards are missing and why, so a partial
// answer is never silent.
func setVerdict(ctx context.Context, sum fanout.Summary) {
	md := metadata.Pairs(DegradedKey, strconv.FormatBool(sum.Degraded()), DeadlineKey, strconv.FormatInt(sum.Deadline.Milliseconds(), 10))
	if sum.Degraded() {
		parts := make([]string, len(sum.Unavailable))
		for i, sh := range sum.Unavailable {
			parts[i] = sh + "=" + string(sum.ShardErrors[sh])
		}
		md.Set(UnavailableKey, strings.Join(parts, ","))
	}
	_ = grpc.SetTrailer(ctx, md)
}

type qdrantService struct {
	pb.UnimplementedQdrantServer
}

// HealthCheck is Qdrant's version probe.
func (qdrantService) HealthCheck(context.Context, *pb.HealthCheckRequest) (*pb.HealthCheckReply, error) {
	return &pb.HealthCheckReply{Title: "trawl - scatter-gather vector search router (Qdrant-compatible gRPC subset)", Version: Version}, nil
}
