package shard

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ClientTLS is the router's TLS configuration for shard connections: the
// shard's certificate verified against caFile and, when certFile and
// keyFile are given, a client certificate for mTLS. The client certificate
// is read at every handshake, so a renewed one on disk is used without a
// restart.
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
// certificate is read at every handshake, so cert-manager rewriting the
// Secret's files takes effect without a restart; handshakes are rare on
// long-lived connections, so the read costs nothing that matters. With
// clientCAFile, clients must present a certificate that chains to it.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	tc := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return loadPair(certFile, keyFile) },
	}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
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
