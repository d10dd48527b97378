package replica

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/testpki"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild() // a shard process for the crash test; never returns
	}
	goleak.VerifyTestMain(m)
}

// Timings of the single-node replicas serve opens: a group of one elects
// itself within an election timeout or two, and MaxLeaderSilence is at
// its minimum of 3x the election timeout.
const (
	serveElection = 100 * time.Millisecond
	serveSilence  = 3 * serveElection
)

// neverTrain, as Int8MinRows and IVFMinRows, keeps a replica's trainer
// from training anything itself, for tests that commit their own trained
// values (it still builds the IVF index of committed centroids).
const neverTrain = math.MaxInt32

// serve opens a single-node replica of cfg (a real raft group of one, its
// log in memory) on a loopback gRPC server with shard.ServerOptions and
// opts, waits until it serves, and returns it with a client dialled with
// dial. Both are closed when the test ends.
func serve(t testing.TB, cfg Config, opts []grpc.ServerOption, dial client.DialConfig) (*Replica, *client.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.InMemory = true
	cfg.Advertise = ln.Addr().String()
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.MaxLeaderSilence = serveElection, serveElection, serveSilence
	if cfg.Kernel.Name == "" {
		cfg.Kernel = vector.Generic()
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	rep, err := Open(cfg)
	if err != nil {
		ln.Close()
		require.NoError(t, err)
	}
	g := grpc.NewServer(append(shard.ServerOptions(), opts...)...)
	rep.Register(g)
	go g.Serve(ln)
	c, err := client.Dial(ln.Addr().String(), dial)
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		g.Stop()
		require.NoError(t, rep.Close())
	})
	require.Eventually(t, rep.Server.Serving, 10*time.Second, 5*time.Millisecond, "the replica never served")
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.WaitSettled(wctx)
	return rep, c
}

func memConfig(dim int, m vector.Metric) Config {
	return Config{Legacy: catalog.Settings{Dim: dim, Metric: m}, Kernel: vector.Generic()}
}

var place = shard.Placement{Fingerprint: "fp1", Shard: "shard-0"}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

// commitTrained commits a trained value through rep's log, as its
// trainer would, and returns once the replica has applied it.
func commitTrained(t testing.TB, rep *Replica, name string, value []byte) {
	t.Helper()
	_, err := rep.Server.SetTrained(ctx(t), nil, name, value)
	require.NoError(t, err)
}

// trainScale trains an int8 scale on mem's first rows (131 072 at most),
// as the trainer does, serialised for commitTrained.
func trainScale(t testing.TB, mem *store.Memory) []byte {
	t.Helper()
	var s quant.Scale
	require.NoError(t, mem.View(func(r vector.Rows) error {
		var err error
		s, err = quant.TrainRows(r, 131072, quant.DefaultKind)
		return err
	}))
	b, err := s.MarshalBinary()
	require.NoError(t, err)
	return b
}

func TestServerValidatesEveryVector(t *testing.T) {
	_, c := serve(t, memConfig(4, vector.Cosine), nil, client.DialConfig{})
	for _, tc := range []struct {
		name string
		v    []float32
		msg  string
	}{
		{"wrong dimension", []float32{1, 2, 3}, "has 3 dimensions, want 4"},
		{"NaN", []float32{1, float32(math.NaN()), 0, 0}, "element 1 is not a finite number"},
		{"Inf", []float32{float32(math.Inf(1)), 0, 0, 0}, "element 0 is not a finite number"},
		{"zero under cosine", []float32{0, 0, 0, 0}, "zero vector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Upsert(ctx(t), place, []*shardpb.Vector{{Id: "a", Vector: shard.EncodeVector(tc.v)}})
			require.Equal(t, codes.InvalidArgument, status.Code(err))
			require.ErrorContains(t, err, tc.msg)
			_, err = c.Search(ctx(t), []client.Query{{Vector: tc.v, K: 1}}, 0)
			require.Equal(t, codes.InvalidArgument, status.Code(err))
		})
	}
	st, err := c.Stats(ctx(t))
	require.NoError(t, err)
	require.Zero(t, st.GetDocCount(), "nothing invalid was stored")
}

func TestServerUpsertGetDeleteAndPlacement(t *testing.T) {
	_, c := serve(t, memConfig(2, vector.Cosine), nil, client.DialConfig{})
	_, err := c.Upsert(ctx(t), place, []*shardpb.Vector{
		{Id: "a", Vector: shard.EncodeVector([]float32{3, 4})},
		{Id: "b", Vector: shard.EncodeVector([]float32{0, 1})},
	})
	require.NoError(t, err)
	v, err := c.Get(ctx(t), "a", 0)
	require.NoError(t, err)
	got, err := shard.DecodeVector(v.GetVector())
	require.NoError(t, err)
	require.InDeltaSlice(t, []float32{0.6, 0.8}, got, 1e-6, "stored normalised under cosine")

	resp, err := c.Search(ctx(t), []client.Query{{Vector: []float32{0, 2}, K: 5, ExcludeID: "b"}}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, resp.Docs)
	require.Len(t, resp.Hits, 1)
	require.Len(t, resp.Hits[0], 1)
	require.Equal(t, "a", resp.Hits[0][0].ID)
	require.InDelta(t, 0.8, resp.Hits[0][0].Score, 1e-6)

	// A write routed under another shard list is a reshard: refused.
	_, err = c.Upsert(ctx(t), shard.Placement{Fingerprint: "fp2", Shard: "shard-0"}, []*shardpb.Vector{{Id: "c", Vector: shard.EncodeVector([]float32{1, 0})}})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	_, _, err = c.Delete(ctx(t), shard.Placement{Fingerprint: "fp1", Shard: "shard-1"}, "a")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))

	found, _, err := c.Delete(ctx(t), place, "a")
	require.NoError(t, err)
	require.True(t, found)
	found, _, err = c.Delete(ctx(t), place, "a")
	require.NoError(t, err)
	require.False(t, found)
	_, err = c.Get(ctx(t), "a", 0)
	require.Equal(t, codes.NotFound, status.Code(err))
}

// TestServerRefusesASearchWithoutQueries: a search of no queries is
// refused, and so is one in the old form (the single query in the
// reserved field 1, as a router of the version before one Search RPC
// sends it): the replica meets no queries, never answers empty.
func TestServerRefusesASearchWithoutQueries(t *testing.T) {
	rep, c := serve(t, memConfig(2, vector.DotProduct), nil, client.DialConfig{})
	_, err := c.Upsert(ctx(t), place, []*shardpb.Vector{{Id: "a", Vector: shard.EncodeVector([]float32{1, 0})}})
	require.NoError(t, err)
	_, err = c.Search(ctx(t), nil, 0)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.ErrorContains(t, err, "no queries")

	q, err := proto.Marshal(&shardpb.Query{Vector: shard.EncodeVector([]float32{1, 0}), K: 1})
	require.NoError(t, err)
	old := protowire.AppendTag(nil, 1, protowire.BytesType)
	old = protowire.AppendBytes(old, q)
	var req shardpb.SearchRequest
	require.NoError(t, proto.Unmarshal(old, &req))
	require.Empty(t, req.GetQueries())
	_, err = rep.Server.Search(ctx(t), &req)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.ErrorContains(t, err, "no queries")
}

func TestProbeReportsNotServing(t *testing.T) {
	rep, c := serve(t, memConfig(2, vector.DotProduct), nil, client.DialConfig{})
	require.NoError(t, c.Probe(ctx(t)))
	// Draining: NOT_SERVING for good, whatever the node says after.
	rep.Server.Shutdown()
	err := c.Probe(ctx(t))
	require.ErrorIs(t, err, shard.ErrNotServing)
	var ns interface{ NotServing() bool }
	require.ErrorAs(t, err, &ns)
}

func TestRefusedWriteIsMarkedNeverSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	c, err := client.Dial(addr, client.DialConfig{})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Upsert(ctx(t), place, []*shardpb.Vector{{Id: "a", Vector: shard.EncodeVector([]float32{1})}})
	var ns interface{ NeverSent() bool }
	require.ErrorAs(t, err, &ns)
	require.Equal(t, codes.Unavailable, status.Code(err))
}

func TestWarmedConnectionIsReady(t *testing.T) {
	_, c := serve(t, memConfig(2, vector.DotProduct), nil, client.DialConfig{})
	require.Equal(t, connectivity.Ready, c.WaitSettled(ctx(t)))
	require.True(t, c.Ready())
}

func TestMutualTLS(t *testing.T) {
	p := testpki.New(t)
	stc, err := shard.ServerTLS(p.ServerCert, p.ServerKey, p.CAFile)
	require.NoError(t, err)
	creds := grpc.Creds(credentials.NewTLS(stc))

	ctc, err := shard.ClientCredentials(p.CAFile, p.ClientCert, p.ClientKey)
	require.NoError(t, err)
	_, c := serve(t, memConfig(2, vector.DotProduct), []grpc.ServerOption{creds}, client.DialConfig{Creds: ctc})
	require.Equal(t, connectivity.Ready, c.WaitSettled(ctx(t)))
	_, err = c.Stats(ctx(t))
	require.NoError(t, err)

	// Without a client certificate the shard refuses the connection.
	noCert, err := shard.ClientCredentials(p.CAFile, "", "")
	require.NoError(t, err)
	_, anon := serve(t, memConfig(2, vector.DotProduct), []grpc.ServerOption{creds}, client.DialConfig{Creds: noCert})
	_, err = anon.Stats(ctx(t))
	require.Error(t, err)
	require.Contains(t, []codes.Code{codes.Unavailable, codes.Unknown}, status.Code(err), "%v", err)
}

func TestServerCertificateReloadsFromDisk(t *testing.T) {
	p := testpki.New(t)
	stc, err := shard.ServerTLS(p.ServerCert, p.ServerKey, "")
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", stc)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	serial := func() int64 {
		ctc, err := shard.ClientTLS(p.CAFile, "", "")
		require.NoError(t, err)
		c, err := tls.Dial("tcp", ln.Addr().String(), ctc)
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	require.EqualValues(t, 10, serial())
	// Renewal rewrites the files in place (as cert-manager does).
	newCert, newKey := p.Issue(t, "server-renewed", 11, x509.ExtKeyUsageServerAuth)
	for src, dst := range map[string]string{newCert: p.ServerCert, newKey: p.ServerKey} {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(dst, b, 0o600))
	}
	require.EqualValues(t, 11, serial(), "the next handshake serves the renewed certificate")
}

// Rotating the CA that client certificates must chain to takes effect at
// the next handshake, without restarting the shard.
func TestClientCARotationNeedsNoRestart(t *testing.T) {
	p := testpki.New(t)
	next := testpki.New(t) // the new CA, and a router certificate it issued
	stc, err := shard.ServerTLS(p.ServerCert, p.ServerKey, p.CAFile)
	require.NoError(t, err)
	creds := grpc.Creds(credentials.NewTLS(stc))

	dialWithNewCert := func() error {
		ctc, err := shard.ClientCredentials(p.CAFile, next.ClientCert, next.ClientKey)
		require.NoError(t, err)
		_, c := serve(t, memConfig(2, vector.DotProduct), []grpc.ServerOption{creds}, client.DialConfig{Creds: ctc})
		_, err = c.Stats(ctx(t))
		return err
	}
	require.Error(t, dialWithNewCert(), "a certificate from an untrusted CA is refused")

	b, err := os.ReadFile(next.CAFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p.CAFile+".new", b, 0o600))
	// The router keeps trusting the shard's (old-CA) server certificate via
	// its own copy; only the shard's client CA file rotates.
	old, err := os.ReadFile(p.CAFile)
	require.NoError(t, err)
	serverCA := p.CAFile + ".router"
	require.NoError(t, os.WriteFile(serverCA, old, 0o600))
	require.NoError(t, os.Rename(p.CAFile+".new", p.CAFile))

	ctc, err := shard.ClientCredentials(serverCA, next.ClientCert, next.ClientKey)
	require.NoError(t, err)
	_, c := serve(t, memConfig(2, vector.DotProduct), []grpc.ServerOption{creds}, client.DialConfig{Creds: ctc})
	_, err = c.Stats(ctx(t))
	require.NoError(t, err, "the rotated client CA is read at the next handshake")
}

// Rotating the CA the router trusts takes effect at the next connection,
// with the same credentials: no router restart.
func TestRouterCARotationNeedsNoRestart(t *testing.T) {
	oldPKI, newPKI := testpki.New(t), testpki.New(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	copyFile := func(src string) {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(caFile+".tmp", b, 0o600))
		require.NoError(t, os.Rename(caFile+".tmp", caFile))
	}
	copyFile(oldPKI.CAFile)
	creds, err := shard.ClientCredentials(caFile, "", "")
	require.NoError(t, err)
	statsVia := func(p *testpki.PKI) error {
		stc, err := shard.ServerTLS(p.ServerCert, p.ServerKey, "")
		require.NoError(t, err)
		_, c := serve(t, memConfig(2, vector.DotProduct), []grpc.ServerOption{grpc.Creds(credentials.NewTLS(stc))}, client.DialConfig{Creds: creds})
		_, err = c.Stats(ctx(t))
		return err
	}
	require.NoError(t, statsVia(oldPKI))
	require.Error(t, statsVia(newPKI), "a shard certificate from an untrusted CA is refused")

	copyFile(newPKI.CAFile)
	require.NoError(t, statsVia(newPKI), "the rotated CA is read at the next handshake")
	require.Error(t, statsVia(oldPKI), "and the old one is no longer trusted")
}
