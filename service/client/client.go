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
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// Config configures a Client.
type Config struct {
	// BaseURL is where the coordinator is served: an http:// or https://
	// URL with a host and at most a path, such as "http://127.0.0.1:8787"
	// or "https://leases.example.com/prefix" (the calls go to
	// /prefix/v1/acquire and the like). New refuses anything else,
	// naming the mistake ("localhost:8787" has no scheme). Required unless
	// BaseURLs is set.
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
	// to each coordinator, and writes each request and reads its answer
	// on the calling goroutine (net/http's request writer and response
	// reader, without http.Transport's two goroutine hand-offs per call).
	// Pass one for proxies or a custom RoundTripper.
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
	// Sessions sends the calls that do not wait (acquisitions, renewals,
	// releases and inspections) on call sessions where the coordinator
	// offers them (wire.SessionPath: a connection turned by an HTTP/1.1
	// Upgrade into calls and answers without HTTP's headers, which costs
	// the coordinator less per call, docs/service.md). A coordinator that
	// does not offer them (a Worker, one with -auth, an older build)
	// answers the first upgrade with a refusal, and the client sends every
	// call as a request from then on. Calls that wait are always requests.
	// Without HTTPClient only.
	Sessions bool
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
	// stream sends watches (long answers read as they come): the
	// HTTPClient, or one of its own made at the first watch.
	streamOnce sync.Once
	stream     *http.Client
	tls        *tls.Config
	// holds are the client's Held, whose renewals share calls;
	// noBatch is set once a coordinator answered that it takes no batch
	// of renewals.
	holds   holds
	noBatch atomic.Bool
}

// New returns a client.
func New(cfg Config) (*Client, error) {
	bases := cfg.BaseURLs
	switch {
	case cfg.BaseURL != "" && len(bases) > 0:
		return nil, errors.New("client: set Config.BaseURL or BaseURLs, not both")
	case cfg.BaseURL != "":
		bases = []string{cfg.BaseURL}
	case len(bases) == 0:
		return nil, errors.New("client: Config.BaseURL is required")
	case len(bases) > maxBaseURLs:
		return nil, errors.New("client: Config.BaseURLs holds " + strconv.Itoa(len(bases)) + " URLs, more than " + strconv.Itoa(maxBaseURLs))
	}
	if cfg.Lease == nil {
		return nil, errors.New("client: Config.Lease is required")
	}
	if cfg.MaxWait < 0 || cfg.MaxWait > wire.MaxWaitMillis*time.Millisecond {
		return nil, errors.New("client: Config.MaxWait must be from 0 to MaxWaitMillis milliseconds, got " + cfg.MaxWait.String())
	}
	if cfg.Sessions && cfg.HTTPClient != nil {
		return nil, errors.New("client: Config.Sessions needs the client's own connections: set it or HTTPClient, not both")
	}
	if cfg.TLS != nil && cfg.HTTPClient != nil {
		return nil, errors.New("client: set Config.TLS or HTTPClient, not both (configure TLS in the HTTPClient's transport)")
	}
	for _, c := range []byte(cfg.Token) {
		if c <= ' ' || c > '~' {
			return nil, errors.New("client: Config.Token must be visible ASCII (no spaces or line breaks)")
		}
	}
	c := &Client{lc: cfg.Lease, hc: cfg.HTTPClient, backoff: cfg.Backoff,
		attempts: cmp.Or(max(cfg.Attempts, 0), max(4, len(bases)+1)), timeout: cmp.Or(max(cfg.AttemptTimeout, 0), 5*time.Second),
		maxWait: cmp.Or(cfg.MaxWait.Truncate(time.Millisecond), defaultMaxWait), after: cfg.AfterFunc, stream: cfg.HTTPClient}
	if cfg.TLS != nil {
		c.tls = cfg.TLS.Clone()
	}
	if c.after == nil {
		c.after = clock.RealAfterFunc
	}
	own := c.hc == nil
	for i, b := range bases {
		name := "BaseURL"
		if cfg.BaseURL == "" {
			name = "BaseURLs[" + strconv.Itoa(i) + "]"
		}
		u, err := checkBaseURL(b, name)
		if err != nil {
			return nil, err
		}
		b = strings.TrimRight(b, "/")
		c.bases = append(c.bases, b)
		if !own {
			c.conns = append(c.conns, nil)
			continue
		}
		p := &connPool{host: u.Host, prefix: strings.TrimRight(u.EscapedPath(), "/"), sessions: cfg.Sessions}
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
	}
	if cfg.Token != "" {
		c.auth = []string{"Bearer " + cfg.Token}
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

// defaultMaxWait is the default Config.MaxWait.
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

// baseURLExample is what the refusals of a base URL show.
const baseURLExample = `"http://127.0.0.1:8787" or "https://leases.example.com/prefix"`

// checkBaseURL checks one of Config's base URLs (name is its field):
// an http:// or https:// URL with a host, a valid port if any, and at most
// a path, which the calls' paths are appended to. Each mistake is named, as
// lease-fence/service-client names them.
func checkBaseURL(s, name string) (*url.URL, error) {
	bad := func(why string) error { return errors.New("client: Config." + name + " " + why) }
	if s == "" {
		return nil, bad("is empty: it must be an http:// or https:// URL with a host, such as " + baseURLExample)
	}
	shown := wire.QuoteShort(s)
	u, err := url.Parse(s)
	scheme, _, hasSep := strings.Cut(s, "://")
	if !hasSep || !validScheme(scheme) {
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			// "localhost:8787" parses as the scheme "localhost".
			return nil, bad(shown + " has no scheme: write it with http:// or https:// in front, such as " + baseURLExample)
		}
	}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if strings.Contains(s, "@") {
			// Neither it nor net/url's error is shown: a password may be
			// in them.
			return nil, bad("is not a URL: it must be an http:// or https:// URL with a host, such as " + baseURLExample)
		}
		return nil, bad(shown + " is not a URL (" + err.Error() + "): it must be an http:// or https:// URL with a host, such as " + baseURLExample)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, bad(shown + " has the scheme " + strconv.Quote(u.Scheme) + ": it must be http or https")
	}
	if u.User != nil {
		// Not shown: the password would be in the message.
		return nil, bad("has a user name or password in it: a base URL is a scheme, a host and a path; send a token with Config.Token")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, bad(shown + " has no host: it must be an http:// or https:// URL with a host, such as " + baseURLExample)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return nil, bad(shown + " has the port " + p + ": a port is from 1 to 65535")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, bad(shown + " has an empty port: write the port after the colon, or no colon")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "?#") {
		return nil, bad(shown + " has a query or a fragment: a base URL is a scheme, a host and a path, to which /v1/acquire and the like are appended")
	}
	return u, nil
}

// validScheme reports whether s is a URL scheme's syntax (RFC 3986).
func validScheme(s string) bool {
	for i, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// maxIdleConns is how many idle connections the default transport keeps.
const maxIdleConns = 64

// maxBaseURLs bounds Config.BaseURLs.
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
	req, secret, err := c.beginAcquire(resource)
	if err != nil {
		return nil, err
	}
	return c.decide(ctx, wire.Message{Op: wire.OpAcquire, Request: req, Secret: secret}, nil,
		func(reply wire.Reply) error { return denied(resource, reply) }, c.lc.CompleteAcquire)
}

// beginAcquire begins an acquisition of resource, with the secret its
// calls carry.
func (c *Client) beginAcquire(resource string) (lease.Request, string, error) {
	req, err := c.lc.BeginAcquire(resource)
	if err != nil {
		return lease.Request{}, "", err
	}
	secret, err := random(32)
	return req, secret, err
}

// decide sends m (see sendUntil) and makes a lease of the grant it is
// answered with, through fn; a refusal's error is refused's.
func (c *Client) decide(ctx context.Context, m wire.Message, until func() clock.Instant, refused func(wire.Reply) error, fn func(lease.Request, lease.Grant) (*lease.Lease, error)) (*Lease, error) {
	reply, err := c.sendUntil(ctx, m, until)
	if err != nil {
		return nil, err
	}
	if !reply.OK {
		return nil, refused(reply)
	}
	return c.complete(m.Request, reply, m.Secret, fn)
}

// denied is the error of an acquisition of resource that reply refused: a
// *DeniedError naming the holder, if it names one.
func denied(resource string, reply wire.Reply) error {
	if reply.HeldBy == "" {
		return errors.New("client: acquisition refused without a holder (reason " + strconv.Quote(reply.Reason) + ")")
	}
	return &DeniedError{Resource: resource, HeldBy: reply.HeldBy, RetryAfter: clock.FromMillis(reply.RetryAfterMillis)}
}

// Renew extends l. It returns a new Lease with the same fence and a deadline
// anchored at this renewal's send instant, or ErrExpired if l is no longer
// the current lease (an error that is also ErrLeaseRevoked if an operator
// revoked it).
func (c *Client) Renew(ctx context.Context, l *Lease) (*Lease, error) {
	return c.renew(ctx, l, nil)
}

// renew is Renew whose attempts share the time left before until (see
// send).
func (c *Client) renew(ctx context.Context, l *Lease, until func() clock.Instant) (*Lease, error) {
	if l == nil {
		return nil, errors.New("client: Renew needs a lease")
	}
	req, err := c.lc.BeginRenewal(l.Lease)
	if err != nil {
		return nil, err
	}
	return c.decide(ctx, wire.Message{Op: wire.OpRenew, Request: req, Secret: l.secret}, until,
		func(reply wire.Reply) error { return refusedReason(reply.Reason) }, c.lc.CompleteRenewal)
}

// Release ends l. It returns nil when the coordinator ended it (or already
// had, for a retry whose first reply was lost) and ErrExpired when l was no
// longer the current lease (also ErrLeaseRevoked if it was revoked).
func (c *Client) Release(ctx context.Context, l *Lease) error {
	return c.release(ctx, l, clock.Instant{})
}

// release is Release whose attempts share the time left before until (see
// send).
func (c *Client) release(ctx context.Context, l *Lease, until clock.Instant) error {
	return c.tokenCall(ctx, "Release", l, wire.Message{Op: wire.OpRelease}, until)
}

// tokenCall sends m, an operation on l named by its token (release,
// proclaim), under a fresh request id.
func (c *Client) tokenCall(ctx context.Context, name string, l *Lease, m wire.Message, until clock.Instant) error {
	if l == nil {
		return errors.New("client: " + name + " needs a lease")
	}
	tok := l.Token()
	id, err := random(16)
	if err != nil {
		return err
	}
	m.Secret, m.Request = l.secret, lease.Request{RequestID: id, Resource: tok.Resource, HolderID: tok.HolderID, Fence: tok.Fence}
	reply, err := c.send(ctx, m, until)
	if err != nil {
		return err
	}
	if !reply.OK {
		return refusedReason(reply.Reason)
	}
	return nil
}

func (c *Client) complete(req lease.Request, reply wire.Reply, secret string, fn func(lease.Request, lease.Grant) (*lease.Lease, error)) (*Lease, error) {
	g := reply.Grant
	if g == nil {
		return nil, errors.New("client: a granted reply without a grant")
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
// the wait m asks the coordinator for. until, unless zero, is an instant
// of the holder's clock after which the answer is of no use (a renewal's:
// when its lease counts as lost): see deliver.
func (c *Client) send(ctx context.Context, m wire.Message, until clock.Instant) (wire.Reply, error) {
	var untilFn func() clock.Instant
	if until.Domain != "" {
		untilFn = func() clock.Instant { return until }
	}
	return c.sendUntil(ctx, m, untilFn)
}

// sendUntil is send with until as deliver takes it: nil, or a function
// (read at each hedge) that may return the zero Instant for none.
func (c *Client) sendUntil(ctx context.Context, m wire.Message, until func() clock.Instant) (wire.Reply, error) {
	body, err := wire.EncodeMessage(m)
	if err != nil {
		return wire.Reply{}, err
	}
	var reply wire.Reply
	err = c.deliver(ctx, m.Op, m.Op.Path(), body, m.Wait, until, func(data []byte) error {
		return wire.DecodeReply(data, &reply) // a cycle's answer by hand: 0.57 µs a grant against 1.09
	})
	return reply, err
}

// deliver posts body to path until an answer with status 200 that parse
// takes, a refusal that will not change, or it runs out of attempts or
// ctx. Without until, the attempts are sent one after the other. With
// until (it returns an instant of the holder's clock after which the
// answer is of no use), an attempt left without an answer for
// attemptFraction of the time left to until is not given up: a second one
// is sent beside it (a hedge), and so on while time is left, at most
// Attempts open at once (the oldest is given up for a new one), and
// whichever answers first is taken; so a reply that is merely slow is
// still taken while a lost one leaves time for another attempt. op names
// the call in errors.
func (c *Client) deliver(ctx context.Context, op wire.Op, path string, body []byte, wait time.Duration, until func() clock.Instant, parse func([]byte) error) error {
	if until != nil {
		return c.hedged(ctx, op, path, body, wait, until, parse)
	}
	var last error
	start := int(c.cur.Load())
	for n := 1; n <= c.attempts; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		i := (start + n - 1) % len(c.bases)
		if err := c.backoffBefore(ctx, n); err != nil {
			return err
		}
		data, retry, err := c.attempt(ctx, i, op, path, body, c.timeout+wait, wait == 0)
		if err == nil {
			if err = parse(data); err == nil {
				c.cur.Store(int32(i))
				return nil
			}
			err, retry = errors.New("client: unreadable reply: "+err.Error()), true
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retry {
			return err
		}
		last = err
	}
	return errors.Join(errors.New("client: "+string(op)+" got no answer after "+strconv.Itoa(c.attempts)+" attempts"), last)
}

// backoffBefore waits before the n-th attempt of a call when it returns to
// a coordinator the call already tried (the pause of the back-th retry of
// a client with one URL).
func (c *Client) backoffBefore(ctx context.Context, n int) error {
	back := n - len(c.bases)
	if back < 1 {
		return nil
	}
	d := c.backoff(back + 1)
	if d <= 0 {
		return nil
	}
	return pause(ctx, d)
}

// pause waits d, or until ctx ends (its error).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attemptFraction is the part of the time left before a call's until (see
// deliver) after which an attempt without an answer gets a hedge.
const attemptFraction = 0.5

// hedged is deliver with until.
func (c *Client) hedged(ctx context.Context, op wire.Op, path string, body []byte, wait time.Duration, until func() clock.Instant, parse func([]byte) error) error {
	type result struct {
		id, base int
		data     []byte
		retry    bool
		err      error
	}
	type open struct {
		id     int
		cancel context.CancelFunc
	}
	actx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	done := make(chan struct{})
	defer close(done)
	results := make(chan result)
	hedges := make(chan int)
	var (
		opened           []open
		launched, failed int
		gen              int
		hedge            clock.Timer
		last             error
	)
	start := int(c.cur.Load())
	launch := func() {
		i := (start + launched) % len(c.bases)
		launched++
		id := launched
		a, cancel := context.WithCancel(actx)
		opened = append(opened, open{id, cancel})
		go func() {
			data, retry, err := c.attempt(a, i, op, path, body, c.timeout+wait, wait == 0)
			select {
			case results <- result{id, i, data, retry, err}:
			case <-done:
			}
		}()
	}
	arm := func() {
		if hedge != nil {
			hedge.Stop()
			hedge = nil
		}
		gen++
		now, err := c.lc.Now()
		if err != nil {
			return
		}
		u := until()
		if u.Domain == "" {
			return
		}
		left, err := u.Since(now)
		if err != nil {
			return
		}
		// Past until (a hold whose loss ends its wait has not left yet),
		// the next hedge after MinRetry.
		g := gen
		hedge = c.after(max(ceilDuration(max(left, 0)*attemptFraction), lease.MinRetry), func() {
			go func() {
				select {
				case hedges <- g:
				case <-done:
				}
			}()
		})
	}
	defer func() {
		if hedge != nil {
			hedge.Stop()
		}
	}()
	launch()
	arm()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case g := <-hedges:
			if g != gen {
				continue // a timer stopped too late
			}
			if until().Domain == "" {
				// The call's end went away meanwhile (a hold's first
				// renewal, past the loss): it awaits the attempts it has.
				continue
			}
			if len(opened) >= c.attempts {
				opened[0].cancel()
				opened = opened[1:]
			}
			launch()
			arm()
		case r := <-results:
			k := slices.IndexFunc(opened, func(o open) bool { return o.id == r.id })
			if k < 0 {
				continue // given up for a newer one
			}
			opened[k].cancel()
			opened = slices.Delete(opened, k, k+1)
			if r.err == nil {
				if r.err = parse(r.data); r.err == nil {
					c.cur.Store(int32(r.base))
					return nil
				}
				r.err, r.retry = errors.New("client: unreadable reply: "+r.err.Error()), true
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !r.retry {
				return r.err
			}
			failed++
			last = r.err
			if len(opened) > 0 {
				continue
			}
			if failed >= c.attempts {
				return errors.Join(errors.New("client: "+string(op)+" got no answer after "+strconv.Itoa(failed)+" attempts"), last)
			}
			if err := c.backoffBefore(ctx, launched+1); err != nil {
				return err
			}
			launch()
			arm()
		}
	}
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

// finalCodes are refusals answered with a 5xx or a 429 that sending the
// same call again at once will not change: the coordinator (or the token's
// share of it) is full until some lease or wait ends, or it does not offer
// the call.
var finalCodes = map[string]bool{wire.CodeTooManyLeases: true, wire.CodeTooManyTokenLeases: true, wire.CodeTooManyTokenWaiters: true,
	wire.CodeNotSupported: true}

// attempt sends body to path once and returns the answer of status 200. It
// reports whether a failure is worth another attempt: a transport error, a
// timeout, a 5xx, 408 or 429 are (but finalCodes); a TLS certificate that
// cannot be verified (a *CertificateError), a request that cannot be built
// and any other refusal are not.
func (c *Client) attempt(ctx context.Context, base int, op wire.Op, path string, body []byte, timeout time.Duration, noWait bool) (data []byte, retry bool, err error) {
	sess := -1 // the call's number on a session, if it may go on one
	if noWait {
		sess = wire.SessionOp(op)
	}
	status, data, err := c.exchange(ctx, base, path, body, timeout, sess)
	if err != nil {
		var be buildError
		if errors.As(err, &be) {
			return nil, false, err
		}
		if cert, mismatch := certificateFailure(err); cert != nil {
			return nil, false, &CertificateError{Op: op, BaseURL: c.bases[base], NameMismatch: mismatch, Err: cert}
		}
		return nil, true, err
	}
	if status != http.StatusOK {
		e := wire.ParseError(status, data)
		if e == nil {
			e = &wire.Error{Status: status, Code: "http_" + strconv.Itoa(status), Message: "unexpected answer: " + wire.QuoteShort(string(data))}
		}
		return nil, e.Temporary() && !finalCodes[e.Code], e
	}
	return data, false, nil
}

// exchange posts body to path of the base-th coordinator once and reads
// the whole answer.
// sess is the call's number on a session (wire.SessionOps), or -1 for a
// call sent as a request whatever the client's Sessions.
func (c *Client) exchange(ctx context.Context, base int, path string, body []byte, timeout time.Duration, sess int) (int, []byte, error) {
	if p := c.conns[base]; p != nil {
		return p.call(ctx, timeout, path, body, sess)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.bases[base]+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, buildError{err}
	}
	req.Header["Content-Type"] = contentTypeJSON
	if c.auth != nil {
		req.Header["Authorization"] = c.auth
	}
	return c.do(req)
}

// buildError is exchange's error when no request can be built (a bad
// BaseURL): sending again does not help.
type buildError struct{ error }

func (e buildError) Unwrap() error { return e.error }

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
