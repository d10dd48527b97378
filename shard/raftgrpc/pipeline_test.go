package raftgrpc

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/trawl-search/trawl/shard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// follower serves a Transport on a real gRPC server (the shard's server
// options, so its 64 MiB receive limit) and answers raft's side with
// answer, recording every AppendEntries it is handed.
type follower struct {
	t    *Transport
	addr raft.ServerAddress

	mu   sync.Mutex
	seen []*raft.AppendEntriesRequest
}

func startFollower(t *testing.T, answer func(*raft.AppendEntriesRequest) *raft.AppendEntriesResponse) *follower {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &follower{addr: raft.ServerAddress(lis.Addr().String())}
	f.t = New(Config{Local: string(f.addr)})
	g := grpc.NewServer(shard.ServerOptions()...)
	f.t.Register(g)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(lis)
	}()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		for {
			select {
			case rpc := <-f.t.Consumer():
				req := rpc.Command.(*raft.AppendEntriesRequest)
				f.mu.Lock()
				f.seen = append(f.seen, req)
				f.mu.Unlock()
				rpc.Respond(answer(req), nil)
			case <-f.t.done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = f.t.Close()
		g.Stop()
		<-served
		<-answered
	})
	return f
}

func (f *follower) requests() []*raft.AppendEntriesRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*raft.AppendEntriesRequest(nil), f.seen...)
}

// accept answers every request with success at its last entry.
func accept(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
	last := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		last = req.Entries[n-1].Index
	}
	return &raft.AppendEntriesResponse{Term: req.Term, LastLog: last, Success: true}
}

func leaderTransport(t *testing.T) *Transport {
	t.Helper()
	tr := New(Config{Local: "leader", DialOptions: shard.DialOptions(nil, nil)})
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// entries returns n entries from index first, of term, size bytes each.
func entries(first uint64, n int, term uint64, size int) []*raft.Log {
	out := make([]*raft.Log, n)
	for i := range out {
		out[i] = &raft.Log{Index: first + uint64(i), Term: term, Type: raft.LogCommand, Data: make([]byte, size)}
	}
	return out
}

// TestPipelineAnswersInOrder: many AppendEntries sent without waiting
// reach the follower in order and come back, in order, each with its own
// answer.
func TestPipelineAnswersInOrder(t *testing.T) {
	f := startFollower(t, accept)
	p, err := leaderTransport(t).AppendEntriesPipeline("f", f.addr)
	require.NoError(t, err)
	defer p.Close()

	const n = 50
	got := make(chan raft.AppendFuture, n)
	go func() {
		for range n {
			got <- <-p.Consumer()
		}
	}()
	for i := range n {
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 2,
			PrevLogEntry: uint64(10 * i), PrevLogTerm: 2, Entries: entries(uint64(10*i+1), 10, 2, 100),
		}
		_, err := p.AppendEntries(req, &raft.AppendEntriesResponse{})
		require.NoError(t, err)
	}
	for i := range n {
		fut := <-got
		require.NoError(t, fut.Error())
		require.Equal(t, uint64(10*i), fut.Request().PrevLogEntry)
		require.True(t, fut.Response().Success)
		require.Equal(t, uint64(10*i+10), fut.Response().LastLog)
	}
	reqs := f.requests()
	require.Len(t, reqs, n)
	for i, r := range reqs {
		require.Equal(t, uint64(10*i), r.PrevLogEntry, "request %d out of order", i)
	}
}

// TestLargeAppendIsSplit: a request over the transport's bound is
// delivered in parts that each follow the one before, through the
// pipeline and the one-at-a-time path alike, and the answer is the last
// part's. (The bound is lowered from 32 MiB to 32 KiB: msgpack under the
// race detector takes seconds a 32 MiB message.)
func TestLargeAppendIsSplit(t *testing.T) {
	f := startFollower(t, accept)
	tr := leaderTransport(t)
	tr.maxAppend = 32 << 10
	// 7 entries of 12 KiB: 84 KiB, over the bound whole.
	req := func() *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 3, PrevLogEntry: 4, PrevLogTerm: 2,
			LeaderCommitIndex: 4, Entries: entries(5, 7, 3, 12<<10),
		}
	}
	check := func(from int) {
		reqs := f.requests()[from:]
		require.Len(t, reqs, 4, "7 entries of 12 KiB, two to a part of at most 32 KiB")
		prev, term, next := uint64(4), uint64(2), uint64(5)
		for _, r := range reqs {
			require.Equal(t, prev, r.PrevLogEntry)
			require.Equal(t, term, r.PrevLogTerm)
			require.Equal(t, next, r.Entries[0].Index)
			last := r.Entries[len(r.Entries)-1]
			prev, term, next = last.Index, last.Term, last.Index+1
		}
		require.Equal(t, uint64(11), prev)
	}

	var resp raft.AppendEntriesResponse
	require.NoError(t, tr.AppendEntries("f", f.addr, req(), &resp))
	require.True(t, resp.Success)
	require.Equal(t, uint64(11), resp.LastLog)
	check(0)

	p, err := tr.AppendEntriesPipeline("f", f.addr)
	require.NoError(t, err)
	defer p.Close()
	fut, err := p.AppendEntries(req(), &raft.AppendEntriesResponse{})
	require.NoError(t, err)
	require.NoError(t, fut.Error())
	require.Equal(t, uint64(11), fut.Response().LastLog)
	require.Same(t, fut, <-p.Consumer())
	check(4)
}

// TestSplitAppendFailureIsTheAnswer: when the follower refuses a part,
// the answer is that refusal, not a later part's.
func TestSplitAppendFailureIsTheAnswer(t *testing.T) {
	f := startFollower(t, func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
		if req.PrevLogEntry > 4 { // the follower lacks what the later parts follow
			return &raft.AppendEntriesResponse{Term: req.Term, LastLog: 4, Success: false}
		}
		return &raft.AppendEntriesResponse{Term: req.Term, LastLog: 4, Success: false, NoRetryBackoff: true}
	})
	tr := leaderTransport(t)
	tr.maxAppend = 32 << 10
	p, err := tr.AppendEntriesPipeline("f", f.addr)
	require.NoError(t, err)
	defer p.Close()
	fut, err := p.AppendEntries(&raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 3, PrevLogEntry: 4, PrevLogTerm: 2,
		Entries: entries(5, 3, 3, 20<<10),
	}, &raft.AppendEntriesResponse{})
	require.NoError(t, err)
	require.NoError(t, fut.Error())
	require.False(t, fut.Response().Success)
	require.True(t, fut.Response().NoRetryBackoff, "the first part's refusal")
}

// TestPipelineCloseFailsWhatIsInFlight: a follower that never answers
// leaves futures waiting; Close ends the stream and fails them, and
// returns.
func TestPipelineCloseFailsWhatIsInFlight(t *testing.T) {
	release := make(chan struct{})
	f := startFollower(t, func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
		<-release
		return accept(req)
	})
	defer close(release)
	p, err := leaderTransport(t).AppendEntriesPipeline("f", f.addr)
	require.NoError(t, err)
	var futs []raft.AppendFuture
	for i := range 3 {
		fut, err := p.AppendEntries(&raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 2, PrevLogEntry: uint64(i), PrevLogTerm: 2, Entries: entries(uint64(i+1), 1, 2, 10),
		}, &raft.AppendEntriesResponse{})
		require.NoError(t, err)
		futs = append(futs, fut)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		require.NoError(t, p.Close())
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while the follower held an answer")
	}
	for _, fut := range futs {
		require.Error(t, fut.Error())
	}
	_, err = p.AppendEntries(&raft.AppendEntriesRequest{Term: 2, Entries: entries(9, 1, 2, 10)}, &raft.AppendEntriesResponse{})
	require.Error(t, err, "a closed pipeline takes nothing")
}

func TestSplitAppend(t *testing.T) {
	req := &raft.AppendEntriesRequest{Term: 5, PrevLogEntry: 9, PrevLogTerm: 4, LeaderCommitIndex: 9,
		Entries: append(entries(10, 2, 4, 100), entries(12, 3, 5, 300)...)}
	require.Equal(t, []*raft.AppendEntriesRequest{req}, splitAppend(req, 2000), "within the bound: as it is")

	parts := splitAppend(req, 400)
	var sizes [][]uint64
	for _, p := range parts {
		var idx []uint64
		for _, e := range p.Entries {
			idx = append(idx, e.Index)
		}
		sizes = append(sizes, idx)
		require.Equal(t, req.Term, p.Term)
		require.Equal(t, req.LeaderCommitIndex, p.LeaderCommitIndex)
	}
	require.Equal(t, [][]uint64{{10, 11}, {12}, {13}, {14}}, sizes)
	require.Equal(t, []uint64{9, 11, 12, 13}, []uint64{parts[0].PrevLogEntry, parts[1].PrevLogEntry, parts[2].PrevLogEntry, parts[3].PrevLogEntry})
	require.Equal(t, []uint64{4, 4, 5, 5}, []uint64{parts[0].PrevLogTerm, parts[1].PrevLogTerm, parts[2].PrevLogTerm, parts[3].PrevLogTerm})
	require.Equal(t, uint64(9), req.PrevLogEntry, "the request itself is left as it was")
}
