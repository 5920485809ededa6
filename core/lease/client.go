package lease

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Clock is the holder's own clock. Required; a clock with an empty domain
	// (such as a nil *clock.Manual) is refused.
	Clock clock.Clock
	// HolderID names the holder to the coordinator and in fencing tokens.
	// Required.
	HolderID string
	// ClockSkew is how much the coordinator's clock may gain on this clock
	// over one lease (equivalently, how far this clock may fall behind), an
	// estimate made in advance. It is subtracted from every deadline, so a
	// holder whose clock runs slow still stops before the coordinator lets
	// go. It is an assumption, not a measurement: nothing detects a clock
	// drifting faster than assumed. Zero or positive.
	ClockSkew time.Duration
	// NewRequestID returns a fresh, unique request id. By default ids are
	// 128 random bits in hex. Simulations set it to a seeded source. It is
	// called with the client's lock held, so it need not be safe for
	// concurrent use, and it must not call back into the client.
	NewRequestID func() string
}

// MaxPending bounds how many begun, uncompleted requests a client remembers.
// Beyond it the oldest is forgotten, and completing it is an error.
const MaxPending = 4096

// completedMemory is how many completed request ids a client remembers so a
// second completion gets a *CompletedError rather than an unknown-request error.
const completedMemory = 1024

// Client is the holder's side. It stamps the send instant into every request
// and is the only way to turn a grant into a Lease. A Client must be created
// with NewClient (the methods of a nil or zero Client return an
// *ArgumentError) and is safe for concurrent use.
type Client struct {
	clk    clock.Clock
	holder string
	skew   time.Duration
	skewMs float64
	newID  func() string

	mu sync.Mutex
	// reqs holds the open requests and the last completedMemory completed
	// ones, by id.
	reqs  reqIndex
	open  int      // how many of reqs are open
	seq   uint64   // begins so far
	order []recRef // open records, oldest first (may hold stale refs)
	done  []*reqRecord
	doneN int // completed records in done, a ring whose oldest is at doneN % completedMemory once full
	free  []*reqRecord
	spare []reqRecord // records not used yet, allocated a few at a time
}

// reqRecord is a request the client began: what its Request has besides the
// client's holder id and clock domain, which every request of the client
// has (a record with fewer strings is cheaper to write while the garbage
// collector marks). seq is the begin that made it (0 while the record is
// free); done says it was completed.
type reqRecord struct {
	id       string
	resource string
	millis   float64 // SentAt
	fence    uint64
	seq      uint64
	tag      uint32 // its id's tag in reqs
	renew    bool
	done     bool
}

// matches reports whether req, a request of this client's holder and clock
// domain (complete checked both), is the request r records.
func (r *reqRecord) matches(req *Request) bool {
	return req.RequestID == r.id && req.Resource == r.resource && req.SentAt.Millis == r.millis &&
		req.Fence == r.fence && (req.Kind == KindRenew) == r.renew
}

// recRef is a record as it was when it was begun: stale once the record
// was completed, forgotten or reused.
type recRef struct {
	r   *reqRecord
	seq uint64
}

func (o recRef) open() bool { return o.r.seq == o.seq && !o.r.done }

// NewClient returns a client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := checkClock(cfg.Clock); err != nil {
		return nil, err
	}
	if cfg.HolderID == "" {
		return nil, argErr("holderId", "must not be empty")
	}
	if cfg.ClockSkew < 0 {
		return nil, argErr("clockSkew", "must not be negative, got "+cfg.ClockSkew.String())
	}
	newID := cfg.NewRequestID
	if newID == nil {
		newID = randomID
	}
	return &Client{
		clk:    cfg.Clock,
		holder: cfg.HolderID,
		skew:   cfg.ClockSkew,
		skewMs: clock.Millis(cfg.ClockSkew),
		newID:  newID,
		reqs:   reqIndex{seed: maphash.MakeSeed()},
	}, nil
}

// randomID returns 128 random bits as 32 lowercase hex digits. It does not
// use encoding/hex, which would pull fmt into the wasm module.
func randomID() string {
	const digits = "0123456789abcdef"
	var b [32]byte
	for i := 0; i < len(b); i += 16 {
		v := rand.Uint64()
		for j := 0; j < 16; j++ {
			b[i+j] = digits[v&0xf]
			v >>= 4
		}
	}
	return string(b[:])
}

func (c *Client) usable() bool { return c != nil && c.clk != nil }

func errNoClient() error { return argErr("client", "was not made by NewClient") }

// HolderID returns the holder's id ("" for a nil or zero Client).
func (c *Client) HolderID() string {
	if c == nil {
		return ""
	}
	return c.holder
}

// Domain returns the client's clock domain ("" for a nil or zero Client).
func (c *Client) Domain() string {
	if !c.usable() {
		return ""
	}
	return c.clk.Domain()
}

// Now reads the client's clock: the reading a request begun now would be
// stamped with.
func (c *Client) Now() (clock.Instant, error) {
	if !c.usable() {
		return clock.Instant{}, errNoClient()
	}
	return c.clk.Now()
}

// ClockSkew returns the assumed skew.
func (c *Client) ClockSkew() time.Duration {
	if c == nil {
		return 0
	}
	return c.skew
}

// BeginAcquire is shorthand for BeginAcquireAt with a fresh reading of the
// client's clock. Call it immediately before sending.
func (c *Client) BeginAcquire(resource string) (Request, error) {
	if !c.usable() {
		return Request{}, errNoClient()
	}
	if resource == "" {
		return Request{}, argErr("resource", "must not be empty")
	}
	now, err := c.clk.Now()
	if err != nil {
		return Request{}, err
	}
	return c.begin(now, Request{Kind: KindAcquire, Resource: resource}, true)
}

// BeginAcquireAt makes an acquisition request for resource, stamped as sent
// at now, a reading of the client's clock. An anchor from the future (later
// than the clock's current reading, which BeginAcquireAt takes to check) is
// an *ArgumentError: it would date the lease from a send that has not
// happened yet and put its deadline past the coordinator's.
func (c *Client) BeginAcquireAt(now clock.Instant, resource string) (Request, error) {
	if !c.usable() {
		return Request{}, errNoClient()
	}
	if resource == "" {
		return Request{}, argErr("resource", "must not be empty")
	}
	return c.begin(now, Request{Kind: KindAcquire, Resource: resource}, false)
}

// BeginRenewal is shorthand for BeginRenewalAt with a fresh reading of the
// client's clock.
func (c *Client) BeginRenewal(l *Lease) (Request, error) {
	if err := c.owns(l); err != nil {
		return Request{}, err
	}
	now, err := c.clk.Now()
	if err != nil {
		return Request{}, err
	}
	return c.begin(now, Request{Kind: KindRenew, Resource: l.token.Resource, Fence: l.token.Fence}, true)
}

// BeginRenewalAt makes a renewal request for l, stamped as sent at now. Like
// BeginAcquireAt it reads the client's clock and refuses an anchor from the
// future.
func (c *Client) BeginRenewalAt(now clock.Instant, l *Lease) (Request, error) {
	if err := c.owns(l); err != nil {
		return Request{}, err
	}
	return c.begin(now, Request{Kind: KindRenew, Resource: l.token.Resource, Fence: l.token.Fence}, false)
}

// BeginRenewalOf is BeginRenewal for a lease known by its data rather than
// its *Lease: t is the lease's Token and domain its Deadline's domain, as a
// wrapper that keeps leases as plain data (the JavaScript library) holds
// them. It refuses what BeginRenewal refuses for a lease of another client
// (another holder or clock domain) and a token no lease could have (an empty
// resource, a fence of 0 or above MaxFence); the renewal it begins is the one
// BeginRenewal would, and the coordinator refuses it unless t is the current
// lease. It makes no Lease: that is still only CompleteAcquire's and
// CompleteRenewal's.
func (c *Client) BeginRenewalOf(t fence.Token, domain string) (Request, error) {
	if !c.usable() {
		return Request{}, errNoClient()
	}
	if t.Resource == "" || t.Fence == 0 || t.Fence > MaxFence {
		return Request{}, errNoLease()
	}
	if err := c.ownsData(t.HolderID, domain); err != nil {
		return Request{}, err
	}
	now, err := c.clk.Now()
	if err != nil {
		return Request{}, err
	}
	return c.begin(now, Request{Kind: KindRenew, Resource: t.Resource, Fence: t.Fence}, true)
}

func (c *Client) owns(l *Lease) error {
	if !c.usable() {
		return errNoClient()
	}
	if !l.usable() {
		return errNoLease()
	}
	return c.ownsData(l.token.HolderID, l.domain)
}

func (c *Client) ownsData(holder, domain string) error {
	if holder != c.holder || domain != c.clk.Domain() {
		return argErr("lease", "belongs to another client")
	}
	return nil
}

// begin stamps req as sent at now. fresh says now was just read from the
// client's clock; otherwise the clock is read to refuse an anchor later than
// its current reading.
func (c *Client) begin(now clock.Instant, req Request, fresh bool) (Request, error) {
	if err := now.Validate(); err != nil {
		return Request{}, err
	}
	if now.Domain != c.clk.Domain() {
		return Request{}, &clock.DomainError{Want: c.clk.Domain(), Got: now.Domain}
	}
	if !fresh {
		cur, err := c.clk.Now()
		if err != nil {
			return Request{}, err
		}
		if now.Millis > cur.Millis {
			return Request{}, argErr("now", "is "+now.String()+", later than the client clock's current reading "+
				cur.String()+": a send instant from the future")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.newID()
	if id == "" {
		return Request{}, argErr("requestId", "generator returned an empty id")
	}
	req.RequestID, req.HolderID, req.SentAt = id, c.holder, now
	tag := c.reqs.tag(id)
	dup, at := c.reqs.find(id, tag)
	if dup != nil {
		return Request{}, argErr("requestId", "generator repeated id "+strconv.Quote(id))
	}
	for c.open >= MaxPending && len(c.order) > 0 {
		if o := c.order[0]; o.open() {
			c.forget(o.r)
			c.open--
			at = -1 // forgetting moves entries of the index
		}
		c.order = c.order[1:]
	}
	if len(c.order) >= 2*c.open+64 {
		// order also holds records completed since; drop them so that it
		// stays within twice the open requests (plus a little: the cost is
		// constant per begin, amortized). In place, so that a client that
		// keeps few requests open does not allocate for this.
		live := c.order[:0]
		for _, o := range c.order {
			if o.open() {
				live = append(live, o)
			}
		}
		clear(c.order[len(live):])
		c.order = live
	}
	r := c.record()
	c.seq++
	r.id, r.resource, r.millis, r.fence, r.renew = id, req.Resource, now.Millis, req.Fence, req.Kind == KindRenew
	r.seq, r.done = c.seq, false
	c.reqs.insert(r, tag, at)
	c.open++
	c.order = append(c.order, recRef{r, r.seq})
	return req, nil
}

// record returns an unused record.
func (c *Client) record() *reqRecord {
	if n := len(c.free); n > 0 {
		r := c.free[n-1]
		c.free = c.free[:n-1]
		return r
	}
	if len(c.spare) == 0 {
		c.spare = make([]reqRecord, 32)
	}
	r := &c.spare[0]
	c.spare = c.spare[1:]
	return r
}

// forget deletes r from reqs and frees it.
func (c *Client) forget(r *reqRecord) {
	c.reqs.remove(r)
	*r = reqRecord{}
	c.free = append(c.free, r)
}

// CompleteAcquire turns the grant answering req into a Lease whose deadline
// is req.SentAt + grant.TTL - ClockSkew. A request completes once; a grant
// that answers another request, resource or holder is a *MismatchError and
// leaves the request open.
func (c *Client) CompleteAcquire(req Request, g Grant) (*Lease, error) {
	l, err := c.complete(KindAcquire, req, g)
	if err != nil {
		return nil, err
	}
	return &l, nil // inlined, so a caller that keeps no pointer to it allocates nothing
}

// CompleteRenewal turns the grant answering a renewal request into a new
// Lease with the same fence and a deadline anchored at the renewal's send
// instant. The old Lease value keeps its old deadline.
func (c *Client) CompleteRenewal(req Request, g Grant) (*Lease, error) {
	l, err := c.complete(KindRenew, req, g)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

func (c *Client) complete(kind Kind, req Request, g Grant) (Lease, error) {
	if !c.usable() {
		return Lease{}, errNoClient()
	}
	if err := req.validate(kind); err != nil {
		return Lease{}, err
	}
	if req.HolderID != c.holder {
		return Lease{}, argErr("request", "was made by holder "+strconv.Quote(req.HolderID)+", not "+strconv.Quote(c.holder))
	}
	if req.SentAt.Domain != c.clk.Domain() {
		return Lease{}, &clock.DomainError{Want: c.clk.Domain(), Got: req.SentAt.Domain}
	}
	if err := g.answers(req); err != nil {
		return Lease{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, _ := c.reqs.find(req.RequestID, c.reqs.tag(req.RequestID))
	ok := r != nil
	if ok && r.done {
		return Lease{}, &CompletedError{RequestID: req.RequestID}
	}
	if !ok {
		return Lease{}, argErr("request", strconv.Quote(req.RequestID)+" was not begun by this client (or was forgotten)")
	}
	if !r.matches(&req) {
		return Lease{}, argErr("request", strconv.Quote(req.RequestID)+" was altered after it was begun")
	}
	r.done = true
	c.open--
	if len(c.done) < completedMemory {
		c.done = append(c.done, r)
	} else {
		// The ring is full: r takes the place of the oldest, forgotten.
		i := c.doneN % completedMemory
		c.forget(c.done[i])
		c.done[i] = r
	}
	c.doneN++
	return Lease{
		token:    g.Token(),
		domain:   req.SentAt.Domain,
		deadline: req.SentAt.AddMillis(clock.Millis(g.TTL) - c.skewMs),
		sent:     req.SentAt.Millis,
		clk:      c.clk,
		grant:    g,
	}, nil
}

// answers checks that g is the answer to req.
func (g Grant) answers(req Request) error {
	switch {
	case g.RequestID != req.RequestID:
		return &MismatchError{Field: "requestId", Want: req.RequestID, Got: g.RequestID}
	case g.Resource != req.Resource:
		return &MismatchError{Field: "resource", Want: req.Resource, Got: g.Resource}
	case g.HolderID != req.HolderID:
		return &MismatchError{Field: "holderId", Want: req.HolderID, Got: g.HolderID}
	case g.Fence == 0:
		return argErr("grant.fence", "must be at least 1")
	case req.Kind == KindRenew && g.Fence != req.Fence:
		return &MismatchError{Field: "fence", Want: strconv.FormatUint(req.Fence, 10), Got: strconv.FormatUint(g.Fence, 10)}
	case g.TTL <= 0:
		return argErr("grant.ttl", "must be positive")
	}
	return nil
}

// validate checks the shape of a request of kind k.
func (r *Request) validate(k Kind) error {
	// The common case in a few comparisons with constants; anything else
	// goes through invalid, which names the first problem.
	if k == KindAcquire {
		if r.Kind == KindAcquire && r.Fence == 0 && r.RequestID != "" && r.Resource != "" && r.HolderID != "" &&
			r.SentAt.Domain != "" && finite(r.SentAt.Millis) {
			return nil
		}
	} else if r.Kind == KindRenew && r.Fence != 0 && r.RequestID != "" && r.Resource != "" && r.HolderID != "" &&
		r.SentAt.Domain != "" && finite(r.SentAt.Millis) {
		return nil
	}
	return r.invalid(k)
}

// finite reports whether v is neither NaN nor infinite (v-v is NaN for both).
func finite(v float64) bool { return v-v == 0 }

// invalid returns the error of a request of kind k that validate refused.
func (r *Request) invalid(k Kind) error {
	switch {
	case r.Kind != k:
		return &MismatchError{Field: "kind", Want: string(k), Got: string(r.Kind)}
	case r.RequestID == "":
		return argErr("request.requestId", "must not be empty")
	case r.Resource == "":
		return argErr("request.resource", "must not be empty")
	case r.HolderID == "":
		return argErr("request.holderId", "must not be empty")
	case k == KindRenew && r.Fence == 0:
		return argErr("request.fence", "must be at least 1 for a renewal")
	case k == KindAcquire && r.Fence != 0:
		return argErr("request.fence", "must be zero for an acquisition")
	}
	return r.SentAt.Validate()
}

// Lease is a grant as its holder sees it: a fencing token and a deadline in
// the holder's clock domain. Token is what a write presents to a fence.Gate.
//
// HasExpired and WouldAdmit answer for the instant they are called and are
// stale by the time anything happens next. Never branch a write on them: put
// the write inside Gate.Commit instead. There is deliberately no AssertValid.
type Lease struct {
	token    fence.Token
	domain   string
	deadline clock.Instant
	sent     float64 // the anchor: the request's send instant
	clk      clock.Clock
	grant    Grant
}

// A nil or zero Lease (not made by a Client) has the zero Token, Deadline and
// Grant, which every gate and client refuses, and its other methods return
// an *ArgumentError.
func (l *Lease) usable() bool { return l != nil && l.clk != nil }

func errNoLease() error {
	return argErr("lease", "was not made by Client.CompleteAcquire or CompleteRenewal")
}

// Token returns the fencing token to present with every write.
func (l *Lease) Token() fence.Token {
	if l == nil {
		return fence.Token{}
	}
	return l.token
}

// Deadline returns the end of the lease in the holder's clock domain.
func (l *Lease) Deadline() clock.Instant {
	if l == nil {
		return clock.Instant{}
	}
	return l.deadline
}

// Anchor returns the send instant of the request the lease was completed
// from: its deadline is Anchor + TTL - ClockSkew.
func (l *Lease) Anchor() clock.Instant {
	if l == nil {
		return clock.Instant{}
	}
	return clock.At(l.domain, l.sent)
}

// Grant returns the grant the lease was made from.
func (l *Lease) Grant() Grant {
	if l == nil {
		return Grant{}
	}
	return l.grant
}

// HasExpired is shorthand for HasExpiredAt with a fresh reading of the
// holder's clock. Advisory only.
func (l *Lease) HasExpired() (bool, error) {
	if !l.usable() {
		return false, errNoLease()
	}
	now, err := l.clk.Now()
	if err != nil {
		return false, err
	}
	return l.HasExpiredAt(now)
}

// HasExpiredAt reports whether now is at or past the deadline. now must be in
// the holder's domain: measuring against the coordinator's
// CoordinatorExpiresAt, for one, is a *clock.DomainError. Advisory only.
func (l *Lease) HasExpiredAt(now clock.Instant) (bool, error) {
	if !l.usable() {
		return false, errNoLease()
	}
	if err := now.Validate(); err != nil {
		return false, err
	}
	left, err := l.deadline.Since(now)
	if err != nil {
		return false, err
	}
	return left <= 0, nil
}

// WouldAdmit reports whether g would admit a write with this lease's token at
// this instant. Advisory only: the floor may rise before the write.
func (l *Lease) WouldAdmit(g *fence.Gate) (bool, error) {
	if !l.usable() {
		return false, errNoLease()
	}
	if g == nil {
		return false, argErr("gate", "is required")
	}
	return g.WouldAdmit(l.token)
}
