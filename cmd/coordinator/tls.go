//go:build !js && !wasip1

package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"sync/atomic"
)

// tlsFiles is the server's TLS configuration read from files (-tls-cert,
// -tls-key, -tls-client-ca), which load reads again (at SIGHUP): each new
// handshake uses the configuration of the last load that succeeded;
// connections already open keep theirs.
type tlsFiles struct {
	cert, key, clientCA string
	cur                 atomic.Pointer[tls.Config]
}

// load reads the files and, if they are good, makes them the
// configuration. A bad file leaves the configuration as it was.
func (f *tlsFiles) load() error {
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return errors.New("-tls-cert/-tls-key: " + err.Error())
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
	if f.clientCA != "" {
		pem, err := os.ReadFile(f.clientCA)
		if err != nil {
			return errors.New("-tls-client-ca: " + err.Error())
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("-tls-client-ca: " + f.clientCA + " holds no PEM certificate")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	f.cur.Store(cfg)
	return nil
}

// config is the http.Server's TLSConfig: every handshake takes the
// configuration loaded last.
func (f *tlsFiles) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return f.cur.Load(), nil
		},
	}
}
