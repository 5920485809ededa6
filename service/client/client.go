package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// BaseURL is where the coordinator is served, such as
	// "http://127.0.0.1:8787". Required unless BaseURLs is set.
	BaseURL string
	// BaseURLs are several coordinators that serve the same leases
	// (replicas over one PostgreSQL database, docs/service.md), in the
	// order to try them. An attempt that gets no answer, times out or is
	// answered with a 5xx moves the call to the next one, with the same
	// body (request id and secret included), so a retried acquisition is
	// answered with the grant it already got, whichever replica receives
	// it. A call starts at the one that answered last. Set BaseURL or
	// BaseURLs, not both.
	BaseURLs []string
	// Lease is the holder's side of the protocol: it stamps send instants
	// and turns grants into leases. Required.
	Lease *lease.Client
	// HTTPClient sends the requests. Nil keeps up to 64 idle connections
	// to the coordinator, and for an http:// or https:// BaseURL writes
	// each request and reads its answer on the calling goroutine (net/http's
	// request writer and response reader, without http.Transport's two
	// goroutine hand-offs per call). Pass one for proxies or a custom
	// RoundTripper.
	HTTPClient *http.Client
	// Token, if set, is sent with every call as Authorization: Bearer
	// <token> (a coordinator started with -auth). Visible ASCII only. No
	// method prints it.
	Token string
	// TLS configures the connections to https:// coordinators: RootCAs for
	// a private CA, Certificates for mutual TLS. Nil uses the host's root
	// CAs. It is cloned; ServerName defaults to the host of the URL. With
	// an HTTPClient, configure its transport instead (TLS must be nil).
	TLS *tls.Config
	// Attempts is how many times one call is sent before giving up. Zero
	// means 4, or one more than the number of BaseURLs if that is more.
	Attempts int
	// AttemptTimeout bounds each attempt; an attempt that gets no reply in
	// time is retried. Zero means 5 seconds.
	AttemptTimeout time.Duration
	// Backoff returns the pause before attempt n (n >= 2). Nil pauses 25ms,
	// doubling each time, at most 1s; tests pass a function returning 0.
	// With several BaseURLs, an attempt that moves to a coordinator not
	// yet tried in this call is sent at once; the pause comes before an
	// attempt that returns to one already tried (n counts those only).
	Backoff func(n int) time.Duration
	// MaxWait is the longest wait one call asks the coordinator for
	// (waitMillis): Hold and Election wait longer as several calls, each
	// a retry of the first that keeps its place in the queue. It must not
	// be more than the coordinator's -max-wait (60 s by default). Zero
	// means 30 seconds.
	MaxWait time.Duration
	// AfterFunc schedules what a held lease does in time (Hold, Do,
	// Election): its renewals and the end of its context at the holder's
	// deadline. It must follow the clock of Lease: nil means
	// clock.RealAfterFunc, right for clock.NewMonotonic; with a
	// clock.Manual, pass its AfterFunc.
	AfterFunc clock.AfterFunc
}

// Client talks to a coordinator over HTTP on behalf of one holder. Acquire is
// the method most callers want. It is safe for concurrent use.
//
// Every call is begun before anything is sent, so a lease's deadline is
// anchored at the first send of its request. A call whose reply is lost,
// times out, or is a temporary error (5xx) is sent again with the same body,
// request id included; the coordinator answers a repeated acquisition with
// the grant it already made, so a retry never mints a second fence.
type Client struct {
	bases    []string
	cur      atomic.Int32 // the index in bases of the coordinator that answered last
	lc       *lease.Client
	hc       *http.Client
	conns    []*connPool // instead of hc, for each base: an http:// or https:// coordinator and no HTTPClient
	auth     []string    // the Authorization header's value, if a Token is set
	attempts int
	timeout  time.Duration
	backoff  func(int) time.Duration
	maxWait  time.Duration
	after    clock.AfterFunc
}

// NewClient returns a client.
func NewClient(cfg ClientConfig) (*Client, error) {
	bases := cfg.BaseURLs
	switch {
	case cfg.BaseURL != "" && len(bases) > 0:
		return nil, errors.New("wire: set ClientConfig.BaseURL or BaseURLs, not both")
	case cfg.BaseURL != "":
		bases = []string{cfg.BaseURL}
	case len(bases) == 0:
		return nil, errors.New("wire: ClientConfig.BaseURL is required")
	case len(bases) > maxBaseURLs:
		return nil, errors.New("wire: ClientConfig.BaseURLs holds " + strconv.Itoa(len(bases)) + " URLs, more than " + strconv.Itoa(maxBaseURLs))
	}
	if cfg.Lease == nil {
		return nil, errors.New("wire: ClientConfig.Lease is required")
	}
	if cfg.MaxWait < 0 || cfg.MaxWait > wire.MaxWaitMillis*time.Millisecond {
		return nil, errors.New("wire: ClientConfig.MaxWait must be from 0 to MaxWaitMillis milliseconds, got " + cfg.MaxWait.String())
	}
	if cfg.TLS != nil && cfg.HTTPClient != nil {
		return nil, errors.New("wire: set ClientConfig.TLS or HTTPClient, not both (configure TLS in the HTTPClient's transport)")
	}
	for _, c := range []byte(cfg.Token) {
		if c <= ' ' || c > '~' {
			return nil, errors.New("wire: ClientConfig.Token must be visible ASCII (no spaces or line breaks)")
		}
	}
	c := &Client{lc: cfg.Lease, hc: cfg.HTTPClient, backoff: cfg.Backoff,
		attempts: cmp.Or(max(cfg.Attempts, 0), max(4, len(bases)+1)), timeout: cmp.Or(max(cfg.AttemptTimeout, 0), 5*time.Second),
		maxWait: cmp.Or(cfg.MaxWait.Truncate(time.Millisecond), defaultMaxWait), after: cfg.AfterFunc}
	if c.after == nil {
		c.after = clock.RealAfterFunc
	}
	own := c.hc == nil
	for i, b := range bases {
		if b == "" {
			return nil, errors.New("wire: ClientConfig.BaseURLs[" + strconv.Itoa(i) + "] is empty")
		}
		b = strings.TrimRight(b, "/")
		c.bases = append(c.bases, b)
		if u, err := url.Parse(b); own && err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil {
			p := &connPool{host: u.Host}
			if u.Scheme == "https" {
				p.tls = tlsFor(cfg.TLS, u)
				if u.Port() == "" {
					p.host = u.Host + ":443"
				}
			} else if u.Port() == "" {
				p.host = u.Host + ":80"
			}
			p.hostHeader = u.Host
			if cfg.Token != "" {
				p.authLine = "Authorization: Bearer " + cfg.Token + "\r\n"
			}
			c.conns = append(c.conns, p)
		} else {
			c.conns = append(c.conns, nil)
		}
	}
	if cfg.Token != "" {
		c.auth = []string{"Bearer " + cfg.Token}
	}
	if c.hc == nil && slices.Contains(c.conns, nil) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = maxIdleConns, maxIdleConns
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS.Clone()
		}
		// The coordinator's answers are a few hundred bytes and never
		// compressed: no Accept-Encoding header, no gzip reader.
		tr.DisableCompression = true
		c.hc = &http.Client{Transport: tr}
	}
	if c.backoff == nil {
		c.backoff = func(n int) time.Duration {
			d := 25 * time.Millisecond << (n - 2)
			if n > 8 || d > time.Second {
				return time.Second
			}
			return d
		}
	}
	return c, nil
}

// defaultMaxWait is the default ClientConfig.MaxWait.
const defaultMaxWait = 30 * time.Second

// tlsFor is the TLS configuration of the connections to u: cfg (cloned),
// naming u's host, speaking HTTP/1.1.
func tlsFor(cfg *tls.Config, u *url.URL) *tls.Config {
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

// String describes the client without its token.
func (c *Client) String() string {
	return "client.Client(" + strings.Join(c.bases, ", ") + ", holder " + strconv.Quote(c.lc.HolderID()) + ")"
}

// GoString is String, so %#v does not print the token either.
func (c *Client) GoString() string { return c.String() }

// maxIdleConns is how many idle connections the default transport keeps.
const maxIdleConns = 64

// maxBaseURLs bounds ClientConfig.BaseURLs.
const maxBaseURLs = 64

// Lease is a lease held through a Client: the core lease (token, deadline)
// and the secret that renewing or releasing it takes, which the Client chose
// at random for this acquisition. The secret is not printed by any method.
type Lease struct {
	*lease.Lease
	secret string
}

// String describes the lease without its secret.
func (l *Lease) String() string {
	if l == nil || l.Lease == nil {
		return "<nil lease>"
	}
	return "lease " + l.Token().String() + " until " + l.Deadline().String()
}

// GoString is String, so %#v does not print the secret either.
func (l *Lease) GoString() string { return l.String() }

// Acquire asks for resource. It returns the lease, or a *DeniedError naming
// the live holder (the caller itself included: a holder is never granted a
// second lease on what it holds), or the last failure after every attempt.
func (c *Client) Acquire(ctx context.Context, resource string) (*Lease, error) {
	req, err := c.lc.BeginAcquire(resource)
	if err != nil {
		return nil, err
	}
	secret, err := random(32)
	if err != nil {
		return nil, err
	}
	reply, err := c.send(ctx, wire.Message{Op: wire.OpAcquire, Request: req, Secret: secret})
	if err != nil {
		return nil, err
	}
	if !reply.OK {
		if reply.HeldBy != "" {
			return nil, &DeniedError{Resource: resource, HeldBy: reply.HeldBy, RetryAfter: clock.FromMillis(reply.RetryAfterMillis)}
		}
		return nil, errors.New("wire: acquisition refused without a holder (reason " + strconv.Quote(reply.Reason) + ")")
	}
	return c.complete(req, reply, secret, c.lc.CompleteAcquire)
}

// Renew extends l. It returns a new Lease with the same fence and a deadline
// anchored at this renewal's send instant, or ErrExpired if l is no longer
// the current lease.
func (c *Client) Renew(ctx context.Context, l *Lease) (*Lease, error) {
	if l == nil {
		return nil, errors.New("wire: Renew needs a lease")
	}
	req, err := c.lc.BeginRenewal(l.Lease)
	if err != nil {
		return nil, err
	}
	reply, err := c.send(ctx, wire.Message{Op: wire.OpRenew, Request: req, Secret: l.secret})
	if err != nil {
		return nil, err
	}
	if !reply.OK {
		return nil, ErrExpired
	}
	return c.complete(req, reply, l.secret, c.lc.CompleteRenewal)
}

// Release ends l. It returns nil when the coordinator ended it (or already
// had, for a retry whose first reply was lost) and ErrExpired when l was no
// longer the current lease.
func (c *Client) Release(ctx context.Context, l *Lease) error {
	if l == nil {
		return errors.New("wire: Release needs a lease")
	}
	tok := l.Token()
	id, err := random(16)
	if err != nil {
		return err
	}
	reply, err := c.send(ctx, wire.Message{Op: wire.OpRelease, Secret: l.secret, Request: lease.Request{
		RequestID: id, Resource: tok.Resource, HolderID: tok.HolderID, Fence: tok.Fence,
	}})
	if err != nil {
		return err
	}
	if !reply.OK {
		return ErrExpired
	}
	return nil
}

func (c *Client) complete(req lease.Request, reply wire.Reply, secret string, fn func(lease.Request, lease.Grant) (*lease.Lease, error)) (*Lease, error) {
	g := reply.Grant
	if g == nil {
		return nil, errors.New("wire: a granted reply without a grant")
	}
	l, err := fn(req, g.Lease())
	if err != nil {
		return nil, err
	}
	return &Lease{Lease: l, secret: secret}, nil
}

// maxReplyBytes bounds what the client reads of a reply.
const maxReplyBytes = 1 << 20

// contentTypeJSON is the Content-Type header of every call, shared: net/http
// only reads it.
var contentTypeJSON = []string{"application/json"}

// send posts m until it gets an answer, a refusal that will not change, or
// runs out of attempts or ctx. Each attempt may take AttemptTimeout, plus
// the wait m asks the coordinator for.
func (c *Client) send(ctx context.Context, m wire.Message) (wire.Reply, error) {
	body, err := wire.EncodeMessage(m)
	if err != nil {
		return wire.Reply{}, err
	}
	var last error
	start := int(c.cur.Load())
	for n := 1; n <= c.attempts; n++ {
		if err := ctx.Err(); err != nil {
			return wire.Reply{}, err
		}
		i := (start + n - 1) % len(c.bases)
		if back := n - len(c.bases); back >= 1 {
			// A coordinator this call already tried: pause first (the
			// pause of the back-th retry of a client with one URL).
			if d := c.backoff(back + 1); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return wire.Reply{}, ctx.Err()
				case <-t.C:
				}
			}
		}
		reply, retry, err := c.attempt(ctx, i, m.Op, body, c.timeout+m.Wait)
		if err == nil {
			c.cur.Store(int32(i))
			return reply, nil
		}
		if ctx.Err() != nil {
			return wire.Reply{}, ctx.Err()
		}
		if !retry {
			return wire.Reply{}, err
		}
		last = err
	}
	return wire.Reply{}, errors.Join(errors.New("wire: "+string(m.Op)+" got no answer after "+strconv.Itoa(c.attempts)+" attempts"), last)
}

// CloseIdleConnections closes the connections the client keeps open between
// calls. Calls made afterwards open new ones.
func (c *Client) CloseIdleConnections() {
	for _, p := range c.conns {
		if p != nil {
			p.closeIdle()
		}
	}
	if c.hc != nil {
		c.hc.CloseIdleConnections()
	}
}

// attempt sends body once. It reports whether a failure is worth another
// attempt: a transport error, a timeout, an unreadable or temporary (5xx)
// answer are; a request that cannot be built (a bad BaseURL) and any other
// refusal are not.
func (c *Client) attempt(ctx context.Context, base int, op wire.Op, body []byte, timeout time.Duration) (reply wire.Reply, retry bool, err error) {
	var status int
	var data []byte
	if p := c.conns[base]; p != nil {
		status, data, err = p.call(ctx, timeout, op.Path(), body)
	} else {
		actx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, rerr := http.NewRequestWithContext(actx, http.MethodPost, c.bases[base]+op.Path(), bytes.NewReader(body))
		if rerr != nil {
			return wire.Reply{}, false, rerr
		}
		req.Header["Content-Type"] = contentTypeJSON
		if c.auth != nil {
			req.Header["Authorization"] = c.auth
		}
		status, data, err = c.do(req)
	}
	if err != nil {
		return wire.Reply{}, true, err
	}
	if status == http.StatusOK && string(data) == `{"ok":true}` {
		return wire.Reply{OK: true}, false, nil // a release done, the commonest answer
	}
	if status != http.StatusOK {
		e := wire.ParseError(status, data)
		if e == nil {
			e = &wire.Error{Status: status, Code: "http_" + strconv.Itoa(status), Message: "unexpected answer: " + wire.QuoteShort(string(data))}
		}
		return wire.Reply{}, e.Temporary(), e
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return wire.Reply{}, true, errors.New("wire: unreadable reply: " + err.Error())
	}
	return reply, false, nil
}

// do sends req with the HTTPClient and reads the whole answer.
func (c *Client) do(req *http.Request) (int, []byte, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	return resp.StatusCode, data, err
}

// random returns n random bytes, base64url: a release's request id (16),
// the secret of one acquisition (32).
func random(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
