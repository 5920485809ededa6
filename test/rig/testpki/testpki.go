// Package testpki makes a private certificate authority at run time, for
// the tests of TLS and mutual TLS (crypto/x509, ECDSA P-256): a CA, a
// server certificate for 127.0.0.1 and localhost, and a client
// certificate, each written as PEM files.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a CA and what it signed, as files in Dir.
type PKI struct {
	Dir string
	// CA is the CA's certificate (PEM), CAPool a pool holding it.
	CA     string
	CAPool *x509.CertPool
	// Server and ServerKey: a certificate for 127.0.0.1, ::1 and localhost.
	Server, ServerKey string
	// Client and ClientKey: a client certificate (CN "client").
	Client, ClientKey string
	ca                *x509.Certificate
	caKey             *ecdsa.PrivateKey
}

// New makes a CA named name and its certificates in dir.
func New(dir, name string) (*PKI, error) {
	p := &PKI{Dir: dir, CAPool: x509.NewCertPool()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	p.caKey = key
	p.CAPool.AddCert(p.ca)
	if p.CA, err = writePEM(dir, name+"-ca.pem", "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if p.Server, p.ServerKey, err = p.Issue(name+"-server", "127.0.0.1", false); err != nil {
		return nil, err
	}
	if p.Client, p.ClientKey, err = p.Issue(name+"-client", "client", true); err != nil {
		return nil, err
	}
	return p, nil
}

// Issue signs a new certificate with common name cn (a server's for
// 127.0.0.1, ::1 and localhost, or a client's) and writes it and its key
// as file.pem and file-key.pem.
func (p *PKI) Issue(file, cn string, client bool) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", err
	}
	if cert, err = writePEM(p.Dir, file+".pem", "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if key, err = writePEM(p.Dir, file+"-key.pem", "PRIVATE KEY", kder); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

// ClientConfig is a TLS client configuration trusting the CA, with the
// client certificate if withCert.
func (p *PKI) ClientConfig(withCert bool) (*tls.Config, error) {
	cfg := &tls.Config{RootCAs: p.CAPool}
	if withCert {
		pair, err := tls.LoadX509KeyPair(p.Client, p.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePEM(dir, name, kind string, der []byte) (string, error) {
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
