//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/lease-fence/lease-fence/core/argerr"
	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
)

// The environment that names the connection; flags override it.
const (
	envURL       = "LEASE_FENCE_URL"
	envTokenFile = "LEASE_FENCE_TOKEN_FILE"
)

// connFlags are the connection flags every command but token has.
type connFlags struct {
	url, tokenFile, ca, cert, key string
}

func addConnFlags(fs *flag.FlagSet) *connFlags {
	c := &connFlags{}
	fs.StringVar(&c.url, "url", "", "the coordinator's URL, or a comma list of replicas (default $"+envURL+")")
	fs.StringVar(&c.tokenFile, "token-file", "", "a file holding the bearer token (default $"+envTokenFile+")")
	fs.StringVar(&c.ca, "ca", "", "PEM file of the CA that signed the coordinator's certificate (default: the host's roots)")
	fs.StringVar(&c.cert, "cert", "", "PEM client certificate, for mutual TLS (with --key)")
	fs.StringVar(&c.key, "key", "", "PEM private key of --cert")
	return c
}

// client builds the client of holder from the flags and the environment.
// A missing or unusable setting is a *usageError that names it.
func (c *connFlags) client(getenv func(string) string, holder string) (*client.Client, error) {
	raw, from := c.url, "--url"
	if raw == "" {
		raw, from = getenv(envURL), envURL
	}
	if strings.TrimSpace(raw) == "" {
		return nil, &usageError{"no coordinator URL: set " + envURL + " or pass --url (such as http://127.0.0.1:8787)"}
	}
	var urls []string
	for _, u := range strings.Split(raw, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	cfg := client.Config{}
	if len(urls) == 1 {
		cfg.BaseURL = urls[0]
	} else {
		cfg.BaseURLs = urls
	}
	tokenFile, tfrom := c.tokenFile, "--token-file"
	if tokenFile == "" {
		tokenFile, tfrom = getenv(envTokenFile), envTokenFile
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, &usageError{"the token file (" + tfrom + ") cannot be read: " + err.Error()}
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
			return nil, &usageError{"the token file " + strconv.Quote(tokenFile) + " (" + tfrom + ") must hold one token on one line"}
		}
		cfg.Token = tok
	}
	tcfg, err := c.tls()
	if err != nil {
		return nil, err
	}
	cfg.TLS = tcfg
	clk, err := clock.NewMonotonic("lease-fence:" + holder)
	if err != nil {
		return nil, err
	}
	lc, err := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: holder})
	if err != nil {
		return nil, &usageError{"the holder id " + strconv.Quote(holder) + " is refused: " + err.Error()}
	}
	cfg.Lease = lc
	cl, err := client.New(cfg)
	if err != nil {
		return nil, &usageError{"the coordinator URL (" + from + ") is refused: " + strings.TrimPrefix(err.Error(), "client: ")}
	}
	return cl, nil
}

// tls is the TLS configuration of --ca, --cert and --key; nil without them.
func (c *connFlags) tls() (*tls.Config, error) {
	if c.ca == "" && c.cert == "" && c.key == "" {
		return nil, nil
	}
	cfg := &tls.Config{}
	if c.ca != "" {
		pem, err := os.ReadFile(c.ca)
		if err != nil {
			return nil, &usageError{"the CA file (--ca) cannot be read: " + err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &usageError{"the CA file " + strconv.Quote(c.ca) + " (--ca) holds no PEM certificate"}
		}
		cfg.RootCAs = pool
	}
	if (c.cert == "") != (c.key == "") {
		return nil, &usageError{"--cert and --key go together (a client certificate and its key)"}
	}
	if c.cert != "" {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, &usageError{"the client certificate (--cert, --key) cannot be loaded: " + err.Error()}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// defaultHolder is the holder id when --holder is not given: the host's
// name and this process's id.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "lease-fence"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// exitCode is the exit code of a call's failure: exitConn for a coordinator
// that could not be reached, was unavailable or refused the credentials,
// exitUsage for an argument refused before anything was sent, exitError
// for any other refusal.
func exitCode(err error) int {
	var we *wire.Error
	var ae *argerr.Error
	var ce *client.CertificateError
	switch {
	case errors.As(err, &we):
		if we.Code == wire.CodeNotSupported {
			return exitError // a Worker: it cannot list or watch
		}
		if we.Status == http.StatusUnauthorized || we.Status == http.StatusForbidden || we.Status >= 500 {
			return exitConn
		}
		return exitError
	case errors.As(err, &ae):
		return exitUsage
	case errors.As(err, &ce):
		return exitConn
	}
	// A transport failure: no answer after every attempt, a refused
	// connection, an unreadable answer.
	return exitConn
}

// describe words err for stderr, with a hint for the common refusals.
func describe(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		switch we.Status {
		case http.StatusUnauthorized:
			return fmt.Sprintf("%v (set the token: %s or --token-file)", err, envTokenFile)
		case http.StatusForbidden:
			return fmt.Sprintf("%v (the token's scope does not cover this call)", err)
		}
	}
	return err.Error()
}
