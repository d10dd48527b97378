package apitest

import (
	"net"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// GRPC serves the router's Qdrant gRPC API on a loopback port, as
// --qdrant-grpc-addr does, and returns a client connection to it; both
// close when the test ends.
func (e *Env) GRPC() *grpc.ClientConn {
	e.T.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(e.T, err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = e.R.QdrantGRPC.Serve(ln)
	}()
	e.T.Cleanup(func() {
		e.R.QdrantGRPC.Stop()
		<-served
	})
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(e.T, err)
	e.T.Cleanup(func() { _ = cc.Close() })
	return cc
}
