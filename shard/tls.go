package shard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc/credentials"
)

// ClientCredentials are the router's transport credentials for shard
// connections: ClientTLS built afresh at every handshake, so a renewed
// client certificate or a rotated CA on disk (cert-manager rewriting the
// Secret's files) is used without a restart. crypto/tls does the whole
// verification, host name included; only its inputs are fresh. Handshakes
// are rare on long-lived connections, so the reads cost nothing that
// matters.
func ClientCredentials(caFile, certFile, keyFile string) (credentials.TransportCredentials, error) {
	if _, err := ClientTLS(caFile, certFile, keyFile); err != nil {
		return nil, err
	}
	return reloadingClient{build: func() (*tls.Config, error) { return ClientTLS(caFile, certFile, keyFile) }}, nil
}

// reloadingClient hands each client handshake to gRPC's TLS credentials
// over a freshly built configuration.
type reloadingClient struct {
	build func() (*tls.Config, error)
}

func (r reloadingClient) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg, err := r.build()
	if err != nil {
		return nil, nil, fmt.Errorf("shard TLS configuration: %w", err)
	}
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, conn)
}

func (reloadingClient) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("shard.ClientCredentials are for clients only")
}

func (reloadingClient) Info() credentials.ProtocolInfo {
	return credentials.NewTLS(&tls.Config{}).Info()
}

func (r reloadingClient) Clone() credentials.TransportCredentials { return r }

// OverrideServerName is deprecated in gRPC and unused by trawl.
func (reloadingClient) OverrideServerName(string) error {
	return errors.New("shard.ClientCredentials: OverrideServerName is not supported")
}

// ClientTLS is a snapshot of the router's TLS configuration for shard
// connections: the shard's certificate verified against caFile and, when
// certFile and keyFile are given, a client certificate for mTLS.
// ClientCredentials rebuilds it at every handshake.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("client certificate and key go together")
	}
	if certFile != "" {
		if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return loadPair(certFile, keyFile)
		}
	}
	return tc, nil
}

// ServerTLS is a shard's (or the router's HTTPS) TLS configuration. The
// certificate, and with clientCAFile the CA that client certificates must
// chain to, are read at every handshake, so cert-manager rewriting the
// Secret's files (a renewal or a CA rotation) takes effect without a
// restart; handshakes are rare on long-lived connections, so the reads cost
// nothing that matters.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	tc := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return loadPair(certFile, keyFile) },
	}
	if clientCAFile != "" {
		if _, err := loadPool(clientCAFile); err != nil {
			return nil, err
		}
		// RequireAnyClientCert demands a certificate; VerifyConnection
		// verifies it against the CA file as it is now.
		tc.ClientAuth = tls.RequireAnyClientCert
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyClient(cs.PeerCertificates, clientCAFile)
		}
	}
	return tc, nil
}

// verifyClient checks a client's chain against the CA file as it is now,
// with the checks crypto/tls makes for RequireAndVerifyClientCert.
func verifyClient(chain []*x509.Certificate, caFile string) error {
	if len(chain) == 0 {
		return errors.New("tls: client presented no certificate")
	}
	roots, err := loadPool(caFile)
	if err != nil {
		return err
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return nil
}

func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}
