// Package testpki writes a throwaway certificate authority and certificates
// for 127.0.0.1 into a test's temporary directory, so TLS and mTLS are
// tested for real. For tests only.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and the files of the certificates it issued.
type PKI struct {
	Dir                   string
	CAFile                string
	ServerCert, ServerKey string
	ClientCert, ClientKey string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// New creates a CA (serial 1), a server certificate (serial 10) and a
// client certificate (serial 20).
func New(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{Dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "trawl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	check(t, err)
	p.ca, err = x509.ParseCertificate(der)
	check(t, err)
	p.caKey = key
	p.CAFile = filepath.Join(p.Dir, "ca.crt")
	writePEM(t, p.CAFile, "CERTIFICATE", der)
	p.ServerCert, p.ServerKey = p.Issue(t, "server", 10, x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey = p.Issue(t, "client", 20, x509.ExtKeyUsageClientAuth)
	return p
}

// Issue writes a certificate for 127.0.0.1 named name and returns its
// certificate and key files.
func (p *PKI) Issue(t testing.TB, name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	check(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	check(t, err)
	certFile, keyFile = filepath.Join(p.Dir, name+".crt"), filepath.Join(p.Dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	check(t, os.WriteFile(path+".tmp", pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	check(t, os.Rename(path+".tmp", path))
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
