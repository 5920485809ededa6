//go:build !js && !wasip1

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
	"github.com/lease-fence/lease-fence/test/rig/testpki"
)

func tlsClient(t *testing.T, url, holder, tok string, cfg *tls.Config) *client.Client {
	return newClient(t, holder, client.Config{BaseURL: url, Token: tok, TLS: cfg, Attempts: 1})
}

func cycle(c *client.Client, resource string) error {
	l, err := c.Acquire(context.Background(), resource)
	if err != nil {
		return err
	}
	if l, err = c.Renew(context.Background(), l); err != nil {
		return err
	}
	return c.Release(context.Background(), l)
}

// TestTLS: a server with a certificate of a private CA (made at run time)
// is reached by client.Client given the CA, over kept-alive connections, and
// with a token; without the CA the handshake fails, and so does plain
// HTTP. Browsers' HTTP/2 is served too.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	pki, err := testpki.New(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	srv := startNet(t, &syncio.Buffer{}, "-quiet", "-memory", "-tls-cert", pki.Server, "-tls-key", pki.ServerKey,
		"-auth", writeTokens(t, filepath.Join(dir, "tokens.json"), appTok))
	if !strings.HasPrefix(srv.url, "https://127.0.0.1:") {
		t.Fatalf("the listening line says %s", srv.url)
	}
	cfg, _ := pki.ClientConfig(false)
	c := tlsClient(t, srv.url, "app-1", appTok.token, cfg)
	for range 3 {
		if err := cycle(c, "app/r"); err != nil {
			t.Fatal(err)
		}
	}
	// Without the CA: the host's roots do not know it.
	var ue x509.UnknownAuthorityError
	if err := cycle(tlsClient(t, srv.url, "app-1", appTok.token, nil), "app/r"); !errors.As(err, &ue) {
		t.Fatalf("without the CA: %v", err)
	}
	if err := cycle(tlsClient(t, strings.Replace(srv.url, "https:", "http:", 1), "app-1", appTok.token, nil), "app/r"); err == nil {
		t.Fatal("plain HTTP to the TLS port worked")
	}
	// The token is still needed over TLS.
	if err := cycle(tlsClient(t, srv.url, "app-1", "", cfg), "app/r"); !isWireCode(err, wire.CodeUnauthorized) {
		t.Fatalf("without the token: %v", err)
	}
	// HTTP/2, as browsers speak it.
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	a := send(t, h2, "POST", srv.url, "/v1/inspect", appTok.token, encode(t, msgOf(wire.OpInspect, "", "app/r", "", 0)))
	resp, err := h2.Get(srv.url + "/healthz")
	if err != nil || a.status != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/2: %v %d %v", err, a.status, resp)
	}
	resp.Body.Close()
}

// TestMutualTLS: with -tls-client-ca, a client without a certificate, or
// with one of another CA, is refused at the handshake; one with a
// certificate of the CA is served.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	pki, err := testpki.New(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.New(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	srv := startNet(t, &syncio.Buffer{}, "-quiet", "-memory", "-tls-cert", pki.Server, "-tls-key", pki.ServerKey, "-tls-client-ca", pki.CA)
	with, _ := pki.ClientConfig(true)
	if err := cycle(tlsClient(t, srv.url, "h", "", with), "r"); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	without, _ := pki.ClientConfig(false)
	if err := cycle(tlsClient(t, srv.url, "h", "", without), "r"); err == nil || isWireAnswer(err) {
		t.Fatalf("without a client certificate: %v", err)
	}
	stranger, _ := other.ClientConfig(true)
	stranger.RootCAs = pki.CAPool // it trusts the server; the server does not trust it
	if err := cycle(tlsClient(t, srv.url, "h", "", stranger), "r"); err == nil || isWireAnswer(err) {
		t.Fatalf("with a certificate of another CA: %v", err)
	}
}

// TestSIGHUPReadsTheFilesAgain: at SIGHUP the tokens file and the TLS files
// are read again: a token removed is refused, one added is served, a new
// certificate is presented to new connections, and the leases are all
// still there. A bad tokens file or certificate is refused and logged, and
// what was read before stays in force.
func TestSIGHUPReadsTheFilesAgain(t *testing.T) {
	dir := t.TempDir()
	pki, err := testpki.New(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.json")
	writeTokens(t, tokens, appTok, adminTok)
	logs := &syncio.Buffer{}
	srv := startNet(t, logs, "-quiet", "-init", "-state", filepath.Join(dir, "state"), "-ttl", "1h", "-auth", tokens,
		"-tls-cert", pki.Server, "-tls-key", pki.ServerKey)
	cfg, _ := pki.ClientConfig(false)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	if _, err := tlsClient(t, srv.url, "app-1", appTok.token, cfg).Acquire(context.Background(), "app/held"); err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(srv.url, "https://"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	reloaded := func(n int, what string) {
		t.Helper()
		srv.hup <- struct{}{}
		for deadline := time.Now().Add(10 * time.Second); strings.Count(logs.String(), what) < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log after SIGHUP:\n%s", what, logs)
			}
		}
	}
	// The app token goes, a new one comes; a new certificate.
	newTok := token{name: "newcomer", token: "tok-newcomer-1234567890abcdef", resources: []string{"app/*"}, holders: []string{"*"}}
	writeTokens(t, tokens, newTok, adminTok)
	if _, _, err := pki.Issue("test-server", "127.0.0.1", false); err != nil {
		t.Fatal(err)
	}
	reloaded(1, "TLS certificate read again")
	if a := send(t, hc, "POST", srv.url, "/v1/inspect", appTok.token, encode(t, msgOf(wire.OpInspect, "", "app/held", "", 0))); a.status != 401 {
		t.Fatalf("the removed token: %d", a.status)
	}
	a := send(t, hc, "POST", srv.url, "/v1/inspect", newTok.token, encode(t, msgOf(wire.OpInspect, "", "app/held", "", 0)))
	if a.status != 200 || a.body["holderId"] != "app-1" {
		t.Fatalf("the new token, and the lease: %d %v", a.status, a.body)
	}
	second := serial()
	if second == first {
		t.Fatal("the new certificate is not presented")
	}
	// Bad files: refused, logged, the ones before stay.
	if err := os.WriteFile(tokens, []byte(`[{"name": "x", "tokenSha256": "00", "resources": ["*"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pki.Server, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	reloaded(1, "the TLS files are refused")
	if !strings.Contains(logs.String(), "the tokens file is refused") || !strings.Contains(logs.String(), "64 hexadecimal digits") {
		t.Fatalf("the log does not say why:\n%s", logs)
	}
	if a := send(t, hc, "POST", srv.url, "/v1/inspect", newTok.token, encode(t, msgOf(wire.OpInspect, "", "app/held", "", 0))); a.status != 200 {
		t.Fatalf("after a bad reload: %d", a.status)
	}
	if serial() != second {
		t.Fatal("a bad certificate replaced the good one")
	}
	srv.close(t)
	assertNoSecrets(t, logs.String(), appTok, adminTok, newTok)
}

// isWireAnswer reports whether err is an answer of the coordinator, not a
// failure to reach it.
func isWireAnswer(err error) bool {
	var we *wire.Error
	var de *client.DeniedError
	return errors.Is(err, client.ErrExpired) || errors.As(err, &de) || errors.As(err, &we)
}
