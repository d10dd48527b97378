package loader

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// Clock is the time a load runs on; tests give a fake one so rates,
// latencies and retry delays are deterministic.
type Clock interface {
	Now() time.Time
	// Sleep waits for d, or returns ctx's error as soon as ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NewClient is the HTTP client for a load with conns requests in flight.
// With caFile set, an https router's certificate must chain to a CA in
// that PEM file (and only those: the system pool is not consulted, as for
// the router's own --tls-ca); verification is never skipped.
func NewClient(caFile string, conns int) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep a connection per worker: the default of 2 idle connections per
	// host would make every worker past the second dial (and, with TLS,
	// handshake) again for each batch.
	tr.MaxIdleConnsPerHost = max(conns, 2)
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, nil
}

// ReadAPIKey reads the router's API key from path, as `router serve
// --api-key-file` does: the file's content less surrounding white space.
func ReadAPIKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--api-key-file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", errors.New("--api-key-file: the file is empty")
	}
	return key, nil
}
