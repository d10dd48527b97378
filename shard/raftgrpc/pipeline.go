package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard/shardpb"
)

// pipelineDepth is how many AppendEntries a leader's pipeline to one
// follower has sent and not yet had answered, beyond the one whose answer
// it is reading: enough to keep a follower's log writes back to back
// while the answers travel (raft's TCP transport defaults to 2 in flight),
// few enough that a follower that fails drops little work.
const pipelineDepth = 8

// maxAppendBytes bounds the entries one AppendEntries message carries. The
// shard's gRPC server receives messages of at most 64 MiB, and raft bounds
// a request by a count of entries only (MaxAppendEntries), each entry one
// write of up to several MiB: a request over this is sent as consecutive
// smaller ones (splitAppend), so raising the count never makes a message
// the follower refuses, and replication never stalls on one.
const maxAppendBytes = 32 << 20

// AppendEntriesPipeline implements raft.Transport: the leader's
// AppendEntries to target go over one bidirectional stream, answered in
// order, so the leader sends the next batch while the follower stores the
// last one instead of waiting a round trip each time. raft falls back to
// AppendEntries one at a time when this fails, and after any error.
func (t *Transport) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	t.mu.Lock()
	unsupported := t.noPipeline[target]
	t.mu.Unlock()
	if unsupported {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	cc, err := t.conn(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := shardpb.NewRaftClient(cc).AppendEntriesPipeline(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("raft pipeline to %s: %w", target, err)
	}
	p := &pipeline{
		t: t, target: target, stream: stream, cancel: cancel,
		inflight: make(chan *appendFuture, pipelineDepth),
		done:     make(chan raft.AppendFuture, pipelineDepth),
		closed:   make(chan struct{}),
		received: make(chan struct{}),
	}
	go p.receive()
	return p, nil
}

// pipeline is one leader-to-follower AppendEntries stream. raft calls
// AppendEntries and Close from one goroutine; receive reads the answers.
type pipeline struct {
	t      *Transport
	target raft.ServerAddress
	stream grpc.BidiStreamingClient[shardpb.RaftMessage, shardpb.RaftMessage]
	// cancel ends the stream: on Close, and when a send or an answer takes
	// longer than raftRPCTimeout (a blackholed follower).
	cancel    context.CancelFunc
	inflight  chan *appendFuture // sent, in order, awaiting answers
	done      chan raft.AppendFuture
	closed    chan struct{}
	closeOnce sync.Once
	received  chan struct{} // closed when receive returns
}

// AppendEntries implements raft.AppendPipeline: it sends args (in parts,
// if large) and returns a future answered once the follower has answered
// every part. It blocks while pipelineDepth requests await answers.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	parts := splitAppend(args, p.t.maxAppend)
	f := &appendFuture{start: time.Now(), args: args, resp: resp, parts: len(parts), answered: make(chan struct{})}
	for _, part := range parts {
		// 256 bytes more for the request's own fields (term, leader,
		// indexes).
		b, err := encodeMsgpackSized(part, appendSize(part.Entries)+256)
		if err != nil {
			return nil, fmt.Errorf("raft pipeline: encode: %w", err)
		}
		if err := p.send(b); err != nil {
			return nil, err
		}
	}
	select {
	case p.inflight <- f:
		return f, nil
	case <-p.closed:
		return nil, raft.ErrPipelineShutdown
	}
}

// send sends one message, ending the stream if the follower takes in
// nothing for raftRPCTimeout (flow control would block it for ever).
func (p *pipeline) send(b []byte) error {
	timer := time.AfterFunc(raftRPCTimeout, p.cancel)
	defer timer.Stop()
	if err := p.stream.Send(&shardpb.RaftMessage{Msgpack: b}); err != nil {
		return fmt.Errorf("raft pipeline to %s: %w", p.target, err)
	}
	return nil
}

// receive answers the futures in the order they were sent.
func (p *pipeline) receive() {
	defer close(p.received)
	for {
		select {
		case f := <-p.inflight:
			f.err = p.await(f)
			close(f.answered)
			select {
			case p.done <- f:
			case <-p.closed:
				return
			}
		case <-p.closed:
			return
		}
	}
}

// await reads the answers to f's parts: f's response is the first that
// failed, else the last. After a failed part the follower refuses the rest
// too (they do not follow its log); their answers are read and dropped.
func (p *pipeline) await(f *appendFuture) error {
	timer := time.AfterFunc(raftRPCTimeout, p.cancel)
	defer timer.Stop()
	failed := false
	for range f.parts {
		out, err := p.stream.Recv()
		if err != nil {
			if status.Code(err) == codes.Unimplemented {
				p.t.mu.Lock()
				p.t.noPipeline[p.target] = true
				p.t.mu.Unlock()
			}
			return fmt.Errorf("raft pipeline to %s: %w", p.target, err)
		}
		if failed {
			continue
		}
		var r raft.AppendEntriesResponse
		if err := decodeMsgpack(out.GetMsgpack(), &r); err != nil {
			return fmt.Errorf("raft pipeline to %s: decode: %w", p.target, err)
		}
		*f.resp = r
		failed = !r.Success
	}
	return nil
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.done }

// Close implements raft.AppendPipeline: it ends the stream, and fails the
// futures still awaiting answers.
func (p *pipeline) Close() error {
	p.closeOnce.Do(func() {
		close(p.closed)
		p.cancel()
	})
	<-p.received
	for {
		select {
		case f := <-p.inflight:
			f.err = raft.ErrPipelineShutdown
			close(f.answered)
		default:
			return nil
		}
	}
}

// appendFuture is one pipelined AppendEntries (raft.AppendFuture).
type appendFuture struct {
	start    time.Time
	args     *raft.AppendEntriesRequest
	resp     *raft.AppendEntriesResponse
	parts    int
	err      error         // set before answered is closed
	answered chan struct{} // closed once err and resp are final
}

func (f *appendFuture) Error() error {
	<-f.answered
	return f.err
}

func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// splitAppend returns req as consecutive requests whose entries take at
// most maxBytes each (an entry larger than that alone): each part follows
// the previous one's last entry (PrevLogEntry, PrevLogTerm), so the
// follower applies them exactly as it would the whole request, and the
// last part's answer reports its log after all of them. A request within
// maxBytes is returned as it is.
// entrySize is about what e takes encoded: its bytes and a bound on the
// rest of its fields.
func entrySize(e *raft.Log) int { return len(e.Data) + len(e.Extensions) + 64 }

// appendSize is about what entries take encoded (entrySize each).
func appendSize(entries []*raft.Log) int {
	n := 0
	for _, e := range entries {
		n += entrySize(e)
	}
	return n
}

func splitAppend(req *raft.AppendEntriesRequest, maxBytes int) []*raft.AppendEntriesRequest {
	if appendSize(req.Entries) <= maxBytes {
		return []*raft.AppendEntriesRequest{req}
	}
	var parts []*raft.AppendEntriesRequest
	prevIndex, prevTerm := req.PrevLogEntry, req.PrevLogTerm
	for lo := 0; lo < len(req.Entries); {
		hi, n := lo, 0
		for hi < len(req.Entries) && (hi == lo || n+entrySize(req.Entries[hi]) <= maxBytes) {
			n += entrySize(req.Entries[hi])
			hi++
		}
		part := *req
		part.Entries = req.Entries[lo:hi]
		part.PrevLogEntry, part.PrevLogTerm = prevIndex, prevTerm
		parts = append(parts, &part)
		last := req.Entries[hi-1]
		prevIndex, prevTerm = last.Index, last.Term
		lo = hi
	}
	return parts
}

// AppendEntriesPipeline implements shardpb.RaftServer: it hands each
// request to raft in order and answers each in order. Requests are read
// and decoded while raft stores the one before.
func (t raftService) AppendEntriesPipeline(stream grpc.BidiStreamingServer[shardpb.RaftMessage, shardpb.RaftMessage]) error {
	ctx := stream.Context()
	reqs := make(chan *raft.AppendEntriesRequest, pipelineDepth)
	readErr := make(chan error, 1)
	// The reader ends when the stream does: at the leader's Close, or
	// when this handler returns (grpc then ends the stream).
	go func() {
		defer close(reqs)
		for {
			in, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr <- err
				}
				return
			}
			var req raft.AppendEntriesRequest
			if err := decodeMsgpack(in.GetMsgpack(), &req); err != nil {
				readErr <- status.Errorf(codes.InvalidArgument, "decode raft message: %v", err)
				return
			}
			select {
			case reqs <- &req:
			case <-ctx.Done():
				return
			}
		}
	}()
	for req := range reqs {
		t.pipelined.Add(1)
		t.cfg.SawAppend(provenCommit(req))
		resp, err := t.dispatch(ctx, req, nil)
		if err != nil {
			return err
		}
		b, err := encodeMsgpack(resp)
		if err != nil {
			return status.Errorf(codes.Internal, "encode raft answer: %v", err)
		}
		if err := stream.Send(&shardpb.RaftMessage{Msgpack: b}); err != nil {
			return err
		}
	}
	select {
	case err := <-readErr:
		return err
	default:
		return nil
	}
}
