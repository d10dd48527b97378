package raftgrpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard/shardpb"
)

// Timeouts of the raft transport. raft calls the transport synchronously
// from its replication and election goroutines; a bound keeps a
// blackholed peer from stalling them.
const (
	// raftRPCTimeout bounds AppendEntries, RequestVote and TimeoutNow.
	raftRPCTimeout = 5 * time.Second
	// snapshotRate is the slowest transfer a snapshot install is allowed
	// before it is abandoned (and retried by raft).
	snapshotRate = 8 << 20 // bytes per second
	// snapshotChunkBytes is the size of one InstallSnapshot stream message.
	snapshotChunkBytes = 1 << 20
)

// Transport is a raft.Transport over the shard's own gRPC server: the
// Raft service (shardpb/raft.proto) carries raft's structs as msgpack, the
// codec raft's own TCP transport uses, so every field raft adds travels
// without a change here. It shares the shard's port, so the shard's TLS
// and mTLS cover replication; it dials peers with the options its caller
// gives (the shard's client credentials).
type Transport struct {
	cfg      Config
	consumer chan raft.RPC
	done     chan struct{}
	closeMu  sync.Once

	mu        sync.Mutex
	conns     map[raft.ServerAddress]*grpc.ClientConn
	heartbeat func(raft.RPC) // raft's fast path for heartbeats, when set
	// noPipeline holds the peers that answered the pipeline stream
	// Unimplemented (an older version): raft replicates to them one
	// AppendEntries at a time.
	noPipeline map[raft.ServerAddress]bool
	// maxAppend is maxAppendBytes; tests lower it to split small requests.
	maxAppend int
	// pipelined counts the AppendEntries this replica was sent over
	// pipeline streams.
	pipelined atomic.Uint64
}

// Config is what a Transport needs from the node that owns it.
type Config struct {
	// Local is this replica's advertised address.
	Local string
	// DialOptions reach a peer (credentials, keepalive, backoff; the
	// transport adds its message size limits).
	DialOptions []grpc.DialOption
	// MayVote reports whether this replica may take part in elections:
	// ask for votes, grant them, or accept a leadership hand-over. A
	// replica that started empty may not until it has caught up. Nil:
	// always.
	MayVote func() bool
	// SawAppend is told the commit index of every AppendEntries from a
	// leader, once the request proves it (provenCommit), else 0. Nil:
	// nobody is told.
	SawAppend func(leaderCommit uint64)
	// GroupState answers a starting peer's GroupState question. Nil: an
	// empty answer.
	GroupState func() *shardpb.GroupStateResponse
	// Pace runs a leader's recovery traffic at a bounded share of the
	// cores: streaming a snapshot, and the AppendEntries raft sends one at
	// a time to a follower it is catching up. Nil: full speed.
	Pace Pacer
	// ReceivePace runs a catching-up follower's side of the same traffic
	// (storing each AppendEntries sent one at a time, each snapshot chunk)
	// at a bounded share: the answer waits, so the leader sends no faster
	// than the follower's budget. The node passes one that paces only
	// while the replica does not serve. Nil: full speed.
	ReceivePace Pacer
}

// pacedAppendBytes is the largest AppendEntries part sent under a pacer:
// raft sends a follower that is behind up to 64 entries (~96 MiB at
// 1536-D) a request, and a part of a few MiB keeps each paced stretch of
// work, and each wait, short.
const pacedAppendBytes = 4 << 20

// Pacer runs work at a bounded share of the cores (recovery.Throttle).
type Pacer interface {
	// Do runs work on the calling goroutine and then waits until the
	// work's CPU time fits the budget.
	Do(ctx context.Context, work func()) error
}

// noPace runs work at once.
type noPace struct{}

func (noPace) Do(_ context.Context, work func()) error {
	work()
	return nil
}

// New returns a transport; Register its service on the shard's gRPC
// server.
func New(cfg Config) *Transport {
	if cfg.MayVote == nil {
		cfg.MayVote = func() bool { return true }
	}
	if cfg.SawAppend == nil {
		cfg.SawAppend = func(uint64) {}
	}
	if cfg.GroupState == nil {
		cfg.GroupState = func() *shardpb.GroupStateResponse { return &shardpb.GroupStateResponse{} }
	}
	if cfg.Pace == nil {
		cfg.Pace = noPace{}
	}
	if cfg.ReceivePace == nil {
		cfg.ReceivePace = noPace{}
	}
	return &Transport{
		cfg:      cfg,
		consumer: make(chan raft.RPC),
		done:     make(chan struct{}),
		conns:    map[raft.ServerAddress]*grpc.ClientConn{},

		noPipeline: map[raft.ServerAddress]bool{},
		maxAppend:  maxAppendBytes,
	}
}

// Register adds the Raft service to g, the shard's gRPC server.
func (t *Transport) Register(g *grpc.Server) {
	shardpb.RegisterRaftServer(g, raftService{Transport: t})
}

// GroupState asks peer for its raft state (a starting replica decides
// from its peers' answers whether to bootstrap a group).
func (t *Transport) GroupState(ctx context.Context, peer string) (*shardpb.GroupStateResponse, error) {
	cc, err := t.conn(raft.ServerAddress(peer))
	if err != nil {
		return nil, err
	}
	return shardpb.NewRaftClient(cc).GroupState(ctx, &shardpb.GroupStateRequest{})
}

// The msgpack handle matches raft's NetworkTransport (new time format).
func encodeMsgpack(v any) ([]byte, error) { return encodeMsgpackSized(v, 0) }

// encodeMsgpackSized is encodeMsgpack into a buffer of size bytes to
// start with: an AppendEntries of a bulk load's entries is megabytes,
// which a buffer grown from nothing copies about twice over.
func encodeMsgpackSized(v any, size int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(size)
	err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(v)
	return buf.Bytes(), err
}

func decodeMsgpack(b []byte, v any) error {
	return codec.NewDecoder(bytes.NewReader(b), &codec.MsgpackHandle{}).Decode(v)
}

// errNotVoting is what a replica that may not vote yet answers, and what
// its own vote requests fail with before they are sent.
var errNotVoting = status.Error(codes.Unavailable, "replica started on an empty data directory and takes no part in elections until it has caught up with its group")

// --- raft.Transport, client side ---

// Consumer implements raft.Transport.
func (t *Transport) Consumer() <-chan raft.RPC { return t.consumer }

// LocalAddr implements raft.Transport.
func (t *Transport) LocalAddr() raft.ServerAddress { return raft.ServerAddress(t.cfg.Local) }

// AppendEntries implements raft.Transport. A request larger than
// maxAppendBytes goes as consecutive smaller ones (splitAppend), and the
// answer is the first that failed, else the last.
//
// Raft sends entries one request at a time only to a follower that is
// behind (its replicateTo loop, until the follower has every entry it
// knew of; then it pipelines), so these go under Config.Pace: a follower
// catching up from the log costs its leader at most the recovery share
// of the cores. Writes reach caught-up followers over the pipeline, and
// heartbeats are never paced.
func (t *Transport) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if isHeartbeat(args) {
		// Heartbeats have their own connection, so they never queue
		// behind megabytes of entries (raft's TCP transport does the same).
		return t.unaryOn(target+heartbeatConn, target, shardpb.RaftClient.AppendEntries, args, resp)
	}
	limit := t.maxAppend
	if _, unpaced := t.cfg.Pace.(noPace); !unpaced {
		limit = min(limit, pacedAppendBytes)
	}
	for _, part := range splitAppend(args, limit) {
		var r raft.AppendEntriesResponse
		var err error
		// The wait is bounded by the budget; raft's own timeout covers
		// the call.
		_ = t.cfg.Pace.Do(context.Background(), func() {
			err = t.unary(target, shardpb.RaftClient.AppendEntries, part, &r)
		})
		if err != nil {
			return err
		}
		*resp = r
		if !r.Success {
			break
		}
	}
	return nil
}

// heartbeatConn suffixes a target in the connection cache for its
// heartbeat connection.
const heartbeatConn = "#heartbeat"

// RequestVote implements raft.Transport.
func (t *Transport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if !t.cfg.MayVote() {
		return errNotVoting
	}
	return t.unary(target, shardpb.RaftClient.RequestVote, args, resp)
}

// RequestPreVote implements raft.WithPreVote. Without it raft disables
// pre-vote, and a replica that restarts, or misses heartbeats while its
// leader's connection to it backs off, raises the term and deposes a
// healthy leader: an election and a shard without writes, and without
// read-after-write reads, for a second or two.
func (t *Transport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if !t.cfg.MayVote() {
		return errNotVoting
	}
	return t.unary(target, shardpb.RaftClient.RequestPreVote, args, resp)
}

// TimeoutNow implements raft.Transport.
func (t *Transport) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.unary(target, shardpb.RaftClient.TimeoutNow, args, resp)
}

// TimeoutNowSelf hands this replica's raft, through the consumer
// channel, the TimeoutNow a leader sends the follower it transfers
// leadership to: raft stands for election at once instead of waiting out
// its heartbeat timeout. It returns once raft has taken it (ctx bounds the
// wait). Only the owner of a group's only voter should call it: nobody
// else can lead that group, so the wait would be pure loss.
func (t *Transport) TimeoutNowSelf(ctx context.Context) error {
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(t.cfg.Local), Addr: []byte(t.cfg.Local),
	}}
	_, err := t.dispatch(ctx, req, nil)
	return err
}

// call is one unary method of the Raft service, as a method expression
// (shardpb.RaftClient.AppendEntries), so a wrong name is a compile error.
type call func(shardpb.RaftClient, context.Context, *shardpb.RaftMessage, ...grpc.CallOption) (*shardpb.RaftMessage, error)

func (t *Transport) unary(target raft.ServerAddress, method call, args, resp any) error {
	return t.unaryOn(target, target, method, args, resp)
}

func (t *Transport) unaryOn(key, target raft.ServerAddress, method call, args, resp any) error {
	cc, err := t.connKeyed(key, target)
	if err != nil {
		return err
	}
	b, err := encodeMsgpack(args)
	if err != nil {
		return fmt.Errorf("raft %T: encode: %w", args, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), raftRPCTimeout)
	defer cancel()
	out, err := method(shardpb.NewRaftClient(cc), ctx, &shardpb.RaftMessage{Msgpack: b})
	if err != nil {
		return fmt.Errorf("raft %T to %s: %w", args, target, err)
	}
	return decodeMsgpack(out.GetMsgpack(), resp)
}

// InstallSnapshot implements raft.Transport: the request, then the data in
// chunks, on one client stream. Reading and sending each chunk goes under
// Config.Pace, so streaming a snapshot to a rebuilding follower costs the
// leader at most the recovery share of the cores.
func (t *Transport) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	cc, err := t.conn(target)
	if err != nil {
		return err
	}
	req, err := encodeMsgpack(args)
	if err != nil {
		return err
	}
	timeout := 10*time.Second + time.Duration(args.Size/snapshotRate)*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stream, err := shardpb.NewRaftClient(cc).InstallSnapshot(ctx)
	if err != nil {
		return fmt.Errorf("raft InstallSnapshot to %s: %w", target, err)
	}
	buf := make([]byte, snapshotChunkBytes)
	first := true
	for {
		var (
			n         int
			rerr, err error
		)
		_ = t.cfg.Pace.Do(ctx, func() {
			n, rerr = io.ReadFull(data, buf)
			if n > 0 || first {
				chunk := &shardpb.SnapshotChunk{Data: buf[:n]}
				if first {
					chunk.Request, first = req, false
				}
				err = stream.Send(chunk)
			}
		})
		if err != nil {
			// The server's answer says why.
			_, rerr := stream.CloseAndRecv()
			return fmt.Errorf("raft InstallSnapshot to %s: %w (%w)", target, err, rerr)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("raft InstallSnapshot to %s: %w", target, ctx.Err())
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("raft InstallSnapshot: read snapshot: %w", rerr)
		}
	}
	out, err := stream.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("raft InstallSnapshot to %s: %w", target, err)
	}
	return decodeMsgpack(out.GetMsgpack(), resp)
}

// EncodePeer implements raft.Transport.
func (t *Transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }

// DecodePeer implements raft.Transport.
func (t *Transport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// SetHeartbeatHandler implements raft.Transport. raft answers heartbeats
// through it without waiting for its main loop, which may be busy storing
// a large batch of entries; without it a follower's heartbeat answers
// queue behind the fsync and the leader, hearing from no quorum within
// its lease, steps down in the middle of a bulk load.
func (t *Transport) SetHeartbeatHandler(fn func(raft.RPC)) {
	t.mu.Lock()
	t.heartbeat = fn
	t.mu.Unlock()
}

// isHeartbeat reports whether req is one of raft's heartbeats (what its
// own network transport checks).
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	return req.Term != 0 && (len(req.Addr) > 0 || len(req.Leader) > 0) &&
		req.PrevLogEntry == 0 && req.PrevLogTerm == 0 && len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// Close implements raft.WithClose: it closes every peer connection and
// fails RPCs still waiting for raft.
func (t *Transport) Close() error {
	t.closeMu.Do(func() { close(t.done) })
	t.mu.Lock()
	defer t.mu.Unlock()
	for a, cc := range t.conns {
		cc.Close()
		delete(t.conns, a)
	}
	return nil
}

func (t *Transport) conn(target raft.ServerAddress) (*grpc.ClientConn, error) {
	return t.connKeyed(target, target)
}

// connKeyed returns the cached connection key to target, dialling it
// first if needed.
func (t *Transport) connKeyed(key, target raft.ServerAddress) (*grpc.ClientConn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.done:
		return nil, raft.ErrTransportShutdown
	default:
	}
	if cc, ok := t.conns[key]; ok {
		return cc, nil
	}
	opts := append(slices.Clip(t.cfg.DialOptions),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)))
	cc, err := grpc.NewClient("passthrough:///"+string(target), opts...)
	if err != nil {
		return nil, fmt.Errorf("raft peer %s: %w", target, err)
	}
	t.conns[key] = cc
	return cc, nil
}

// --- shardpb.RaftServer, server side ---

// raftService serves the Raft gRPC service for a transport: it decodes each
// RPC and hands it to raft through the transport's consumer channel.
type raftService struct {
	shardpb.UnimplementedRaftServer
	*Transport
}

// fastHeartbeat hands a heartbeat to raft's heartbeat handler.
func (t *Transport) fastHeartbeat(ctx context.Context, hb func(raft.RPC), req *raft.AppendEntriesRequest) (any, error) {
	respCh := make(chan raft.RPCResponse, 1)
	hb(raft.RPC{Command: req, RespChan: respCh})
	select {
	case resp := <-respCh:
		if resp.Error != nil {
			return nil, status.Error(codes.Unknown, resp.Error.Error())
		}
		return resp.Response, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-t.done:
		return nil, status.Error(codes.Unavailable, "raft transport shut down")
	}
}

// dispatch hands a decoded command to raft and waits for its answer.
func (t *Transport) dispatch(ctx context.Context, cmd any, r io.Reader) (any, error) {
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, Reader: r, RespChan: respCh}
	select {
	case t.consumer <- rpc:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-t.done:
		return nil, status.Error(codes.Unavailable, "raft transport shut down")
	}
	select {
	case resp := <-respCh:
		if resp.Error != nil {
			return nil, status.Error(codes.Unknown, resp.Error.Error())
		}
		return resp.Response, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-t.done:
		return nil, status.Error(codes.Unavailable, "raft transport shut down")
	}
}

func (t *Transport) serveUnary(ctx context.Context, in *shardpb.RaftMessage, req any) (*shardpb.RaftMessage, error) {
	if err := decodeMsgpack(in.GetMsgpack(), req); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "decode raft message: %v", err)
	}
	resp, err := t.dispatch(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	b, err := encodeMsgpack(resp)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode raft answer: %v", err)
	}
	return &shardpb.RaftMessage{Msgpack: b}, nil
}

// AppendEntries implements shardpb.RaftServer.
func (t raftService) AppendEntries(ctx context.Context, in *shardpb.RaftMessage) (*shardpb.RaftMessage, error) {
	var req raft.AppendEntriesRequest
	if err := decodeMsgpack(in.GetMsgpack(), &req); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "decode raft message: %v", err)
	}
	t.cfg.SawAppend(provenCommit(&req))
	var (
		resp any
		err  error
	)
	t.mu.Lock()
	hb := t.heartbeat
	t.mu.Unlock()
	if hb != nil && isHeartbeat(&req) {
		resp, err = t.fastHeartbeat(ctx, hb, &req)
	} else {
		// One at a time (not over the pipeline): raft catching this
		// replica up. Its answer waits for the budget.
		_ = t.cfg.ReceivePace.Do(ctx, func() { resp, err = t.dispatch(ctx, &req, nil) })
	}
	if err != nil {
		return nil, err
	}
	b, err := encodeMsgpack(resp)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode raft answer: %v", err)
	}
	return &shardpb.RaftMessage{Msgpack: b}, nil
}

// provenCommit is the commit index req reports, once req proves it covers
// every write the group acknowledged, else 0. A new leader learns that the
// entries it inherited are committed only when an entry of its own term is
// (the Raft paper, §5.4.2): until then its commit index can lag writes its
// predecessor acknowledged, and a follower that trusted it would serve
// without them. The proof is an entry of req.Term at or below the commit
// index: the entry before req's, or one of req's.
func provenCommit(req *raft.AppendEntriesRequest) uint64 {
	c := req.LeaderCommitIndex
	if req.PrevLogEntry > 0 && req.PrevLogTerm == req.Term && req.PrevLogEntry <= c {
		return c
	}
	for _, e := range req.Entries {
		if e.Term == req.Term && e.Index <= c {
			return c
		}
	}
	return 0
}

// RequestVote implements shardpb.RaftServer.
func (t raftService) RequestVote(ctx context.Context, in *shardpb.RaftMessage) (*shardpb.RaftMessage, error) {
	if !t.cfg.MayVote() {
		return nil, errNotVoting
	}
	return t.serveUnary(ctx, in, &raft.RequestVoteRequest{})
}

// RequestPreVote implements shardpb.RaftServer.
func (t raftService) RequestPreVote(ctx context.Context, in *shardpb.RaftMessage) (*shardpb.RaftMessage, error) {
	if !t.cfg.MayVote() {
		return nil, errNotVoting
	}
	return t.serveUnary(ctx, in, &raft.RequestPreVoteRequest{})
}

// TimeoutNow implements shardpb.RaftServer.
func (t raftService) TimeoutNow(ctx context.Context, in *shardpb.RaftMessage) (*shardpb.RaftMessage, error) {
	if !t.cfg.MayVote() {
		return nil, errNotVoting
	}
	return t.serveUnary(ctx, in, &raft.TimeoutNowRequest{})
}

// GroupState implements shardpb.RaftServer.
func (t raftService) GroupState(context.Context, *shardpb.GroupStateRequest) (*shardpb.GroupStateResponse, error) {
	return t.cfg.GroupState(), nil
}

// InstallSnapshot implements shardpb.RaftServer: the stream's data is piped
// to raft as the snapshot reader.
func (t raftService) InstallSnapshot(stream grpc.ClientStreamingServer[shardpb.SnapshotChunk, shardpb.RaftMessage]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	var req raft.InstallSnapshotRequest
	if err := decodeMsgpack(first.GetRequest(), &req); err != nil {
		return status.Errorf(codes.InvalidArgument, "decode raft message: %v", err)
	}
	pr, pw := io.Pipe()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if _, err := pw.Write(first.GetData()); err != nil {
			return
		}
		for {
			c, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				pw.Close()
				return
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			// Raft stores the chunk as the pipe hands it over: paced,
			// the leader's stream waits for the follower's budget.
			var werr error
			_ = t.cfg.ReceivePace.Do(stream.Context(), func() { _, werr = pw.Write(c.GetData()) })
			if werr != nil {
				return
			}
		}
	}()
	resp, err := t.dispatch(stream.Context(), &req, io.LimitReader(pr, req.Size))
	pr.CloseWithError(errors.New("snapshot install finished"))
	if err != nil {
		<-copied
		return err
	}
	b, err := encodeMsgpack(resp)
	if err != nil {
		<-copied
		return status.Errorf(codes.Internal, "encode raft answer: %v", err)
	}
	// Drain the client's half-close so SendAndClose does not race a Recv.
	<-copied
	return stream.SendAndClose(&shardpb.RaftMessage{Msgpack: b})
}
