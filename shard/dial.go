package shard

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Connection settings from DESIGN.md ("Every shard connection").
const (
	// KeepaliveTime is grpc-go's floor for client pings; lower values are
	// silently raised to it.
	KeepaliveTime = 10 * time.Second
	// KeepaliveTimeout is how long an unanswered ping may wait before the
	// connection is closed.
	KeepaliveTimeout = 3 * time.Second
	// TCPKeepalive is the OS-level backstop.
	TCPKeepalive = 10 * time.Second
	// ConnectTimeout bounds one connection attempt, TLS handshake included.
	ConnectTimeout = 2 * time.Second
	// MaxBackoff caps the wait between reconnect attempts, so a replica that
	// comes back is READY again within about a second.
	MaxBackoff = time.Second
	// WriteTimeout bounds a write RPC (DESIGN.md, "Writes").
	WriteTimeout = 5 * time.Second
	// AdminTimeout bounds Stats and other non-query RPCs.
	AdminTimeout = 2 * time.Second
)

// DialOptions are the options every connection to a shard replica needs,
// the router's and a replica's to its peers alike: keepalive pings also
// while idle, TCP keepalive, a connect timeout, reconnect backoff capped
// at MaxBackoff, and no idle timeout. creds nil means plaintext; dialer nil
// means TCP. Callers add their message size limits.
func DialOptions(creds credentials.TransportCredentials, dialer func(context.Context, string) (net.Conn, error)) []grpc.DialOption {
	if dialer == nil {
		d := &net.Dialer{KeepAlive: TCPKeepalive}
		dialer = func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }
	}
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(dialer),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                KeepaliveTime,
			Timeout:             KeepaliveTimeout,
			PermitWithoutStream: true,
		}),
		// grpc-go's default backoff grows to 120 s: a router would then
		// reach a restarted replica, and a leader its restarted follower,
		// only long after it is back.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   MaxBackoff,
			},
			MinConnectTimeout: ConnectTimeout,
		}),
		// grpc-go's default 30 min idle timeout would make the next query
		// after a quiet spell pay a cold (TLS) handshake.
		grpc.WithIdleTimeout(0),
	}
}

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
