package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/trawl-search/trawl/bench/internal/cluster"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
)

// runDevShards is `trawlbench devshards`: many shards in one process
// (internal/devcluster: the shard package's servers, raft groups of one,
// each behind a fault proxy), seeded with the dev corpus (payloads lang,
// year, tags), for the families where one process per shard would
// measure the machine's oversubscription instead (32 shards on 2 cores)
// or where the corpus needs payloads. It writes the shards' addresses to
// -out and serves until it is signalled.
func runDevShards(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("devshards", flag.ExitOnError)
	shards := fs.Int("shards", 3, "shards, one replica each")
	docs := fs.Int("docs", 10_000, "documents of the dev corpus")
	dim := fs.Int("dim", 1536, "dimension")
	quantName := fs.String("quantization", "none", "none or int8")
	indexName := fs.String("index", "flat", "flat or ivf")
	ivfMin := fs.Int("ivf-min-rows", 0, "rows a shard holds before its IVF centroids are trained (0: ivf.MinRows)")
	int8Min := fs.Int("int8-min-rows", 0, "rows a shard holds before its int8 scale is trained (0: store.DefaultInt8MinRows); IVF needs the scale first")
	tlsDir := fs.String("tls-dir", "", "serve gRPC over TLS with a CA and certificate written here (ca.pem)")
	out := fs.String("out", "", "file to write the shard addresses to (JSON)")
	dataDir := fs.String("data-dir", "", "the replicas' raft logs and snapshots (removed by the suite with its work directory)")
	_ = fs.Parse(args)
	qz, err := store.ParseQuantization(*quantName)
	if err != nil {
		return err
	}
	idx, err := store.ParseIndex(*indexName)
	if err != nil {
		return err
	}
	if idx == store.IndexIVF {
		qz = store.QuantInt8
	}
	k, err := vector.FromEnv()
	if err != nil {
		return err
	}
	cfg := devcluster.Config{Shards: *shards, Replicas: 1, Dim: *dim, Metric: vector.Cosine, Kernel: k, Docs: *docs, Seed: 1,
		Quantization: qz, Index: idx, IVFMinRows: *ivfMin, Int8MinRows: *int8Min, DataDir: *dataDir,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if *tlsDir != "" {
		if cfg.TLS, err = writePKI(*tlsDir); err != nil {
			return err
		}
	}
	t0 := time.Now()
	dc, err := devcluster.Start(cfg)
	if err != nil {
		return err
	}
	defer dc.Close()
	spec := cluster.DevSpec{Seeded: time.Since(t0)}
	for _, s := range dc.Specs() {
		spec.Shards = append(spec.Shards, cluster.DevShard{Name: s.Name, Addrs: s.Addrs})
	}
	if *tlsDir != "" {
		spec.CA = filepath.Join(*tlsDir, "ca.pem")
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	// Written whole, then renamed: the parent polls for the file.
	if err := os.WriteFile(*out+".tmp", b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(*out+".tmp", *out); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// writePKI writes a throwaway CA (dir/ca.pem) and returns a server TLS
// configuration with a certificate it issued for 127.0.0.1, as
// internal/testpki does for the tests (which needs a testing.TB).
func writePKI(dir string) (*tls.Config, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "trawlbench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(10), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, nil
}
