package bridge

import (
	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/naive"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// ClockMonotonic makes a monotonic clock. Args: domain. Out: handle.
func (b *Bridge) ClockMonotonic(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	domain, err := r.NonEmpty("domain")
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	c, err := clock.NewMonotonic(domain)
	if err != nil {
		return b.status(err)
	}
	return b.newHandle(&clockObj{c: c})
}

// ClockManual makes a manual clock. Args: domain, options?{start,
// stepPerRead}. Out: handle.
func (b *Bridge) ClockManual(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	domain, err := r.NonEmpty("domain")
	if err != nil {
		return b.status(err)
	}
	var opts clock.ManualOptions
	present, err := r.Object("options", true)
	if err == nil && present {
		if opts.Start, err = r.OptFinite("options.start", 0); err == nil {
			opts.StepPerRead, err = r.OptFinite("options.stepPerRead", 0)
			if err == nil && opts.StepPerRead < 0 {
				err = &convert.ArgumentError{Arg: "options.stepPerRead", Reason: "must not be negative"}
			}
		}
	}
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	m, err := clock.NewManual(domain, opts)
	if err != nil {
		return b.status(err)
	}
	return b.newHandle(&clockObj{c: m, manual: m})
}

// ClockCustom makes a guarded clock over the JavaScript source registered as
// reader, which JavaScript reads when a call asks for it (ReadSource; see
// Reading). Args: domain, readMillis (a function). Out: handle.
func (b *Bridge) ClockCustom(reader uint32, n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	domain, err := r.NonEmpty("domain")
	if err == nil {
		err = r.Function("readMillis")
	}
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	g, err := clock.New(domain, func() float64 { return b.sourceReading(reader) })
	if err != nil {
		return b.status(err)
	}
	return b.newHandle(&clockObj{c: g})
}

// ClockNow reads clock h. Out: millis.
func (b *Bridge) ClockNow(h uint32) (st int32) {
	defer b.guard(&st)
	c, err := get[*clockObj](b, h, convert.KindClock)
	if err != nil {
		return b.status(err)
	}
	now, err := c.c.Now()
	if err != nil {
		return b.status(err)
	}
	b.out().F64(now.Millis)
	return OK
}

func (b *Bridge) manual(h uint32) (*clock.Manual, error) {
	c, err := get[*clockObj](b, h, convert.KindClock)
	if err == nil && c.manual == nil {
		err = &convert.ArgumentError{Arg: "this", Reason: "is not a manual clock"}
	}
	if err != nil {
		return nil, err
	}
	return c.manual, nil
}

// ClockAdvance moves manual clock h forward. Args: ms.
func (b *Bridge) ClockAdvance(h uint32, n int32) (st int32) {
	defer b.guard(&st)
	m, err := b.manual(h)
	if err != nil {
		return b.status(err)
	}
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	ms, err := r.Finite("ms")
	if err == nil {
		err = r.End()
	}
	if err == nil && ms < 0 {
		err = &convert.ArgumentError{Arg: "ms", Reason: "must not be negative (a clock never moves backwards), got " + clock.FormatMillis(ms)}
	}
	if err == nil {
		err = m.Advance(ms)
	}
	return b.status(err)
}

// ClockSet moves manual clock h to a reading. Args: ms.
func (b *Bridge) ClockSet(h uint32, n int32) (st int32) {
	defer b.guard(&st)
	m, err := b.manual(h)
	if err != nil {
		return b.status(err)
	}
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	ms, err := r.Finite("ms")
	if err == nil {
		err = r.End()
	}
	if err == nil {
		err = m.Set(ms)
	}
	return b.status(err)
}

// InstantSince subtracts two instants. Args: instant, earlier. Out: millis.
func (b *Bridge) InstantSince(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	t, err := r.Instant("this")
	if err != nil {
		return b.status(err)
	}
	e, err := r.Instant("earlier")
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	ms, err := t.Since(e)
	if err != nil {
		return b.status(err)
	}
	b.out().F64(ms)
	return OK
}

// CoordNew makes a coordinator. Args: options{clock, ttlMillis, startFence}.
// Out: handle.
func (b *Bridge) CoordNew(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	var cfg lease.CoordinatorConfig
	_, err = r.Object("options", false)
	if err == nil {
		cfg.Clock, err = b.clockArg(&r, "options.clock")
	}
	if err == nil {
		cfg.TTL, err = r.Span("options.ttlMillis", true, false)
	}
	if err == nil {
		cfg.StartFence, err = r.OptCount("options.startFence")
	}
	if err == nil && cfg.StartFence >= lease.MaxFence {
		err = &convert.ArgumentError{Arg: "options.startFence", Reason: "leaves no fence to issue (must be below 2^53-1)"}
	}
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	c, err := lease.NewCoordinator(cfg)
	if err != nil {
		return b.status(err)
	}
	return b.newHandle(c)
}

// putOutcome writes an outcome: code, then the grant's numbers (fence,
// ttlMillis, coordinatorExpiresAt.millis) or heldBy and retryAfterMillis. A
// grant's strings are not written: its requestId, resource and holderId are
// the request's, which JavaScript passed, and its expiry's domain is the
// coordinator's clock's.
func (b *Bridge) putOutcome(o lease.Outcome) int32 {
	w := b.out()
	switch {
	case o.OK:
		w.F64(Granted)
		w.F64(float64(o.Grant.Fence))
		w.F64(clock.Millis(o.Grant.TTL))
		w.F64(o.Grant.CoordinatorExpiresAt.Millis)
	case o.HeldBy != "":
		w.F64(Denied)
		w.Str(o.HeldBy)
		w.F64(clock.Millis(o.RetryAfter))
	default:
		w.F64(Expired)
	}
	return OK
}

func (b *Bridge) coordRequest(h uint32, n int32, k lease.Kind) (st int32) {
	defer b.guard(&st)
	c, r, err := recv[*lease.Coordinator](b, h, convert.KindCoordinator, n)
	if err != nil {
		return b.status(err)
	}
	req, err := r.Request("request", k)
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	var o lease.Outcome
	if k == lease.KindAcquire {
		o, err = c.Acquire(req)
	} else {
		o, err = c.Renew(req)
	}
	if err != nil {
		return b.status(err)
	}
	return b.putOutcome(o)
}

// CoordAcquire processes an acquisition. Args: request. Out: outcome.
func (b *Bridge) CoordAcquire(h uint32, n int32) int32 {
	return b.coordRequest(h, n, lease.KindAcquire)
}

// CoordRenew processes a renewal. Args: request. Out: outcome.
func (b *Bridge) CoordRenew(h uint32, n int32) int32 {
	return b.coordRequest(h, n, lease.KindRenew)
}

// CoordRelease releases a lease. Args: token. Out: released (bool).
func (b *Bridge) CoordRelease(h uint32, n int32) (st int32) {
	defer b.guard(&st)
	c, r, err := recv[*lease.Coordinator](b, h, convert.KindCoordinator, n)
	if err != nil {
		return b.status(err)
	}
	tok, err := r.Token("token")
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	return b.release(c, tok)
}

// CoordReleaseIDs is CoordRelease with the token's strings passed as
// interned ids and no argument buffer: JavaScript has checked that the token
// is an object whose resource and holderId are strings and whose fence is a
// number. Every other check is CoordRelease's. Out: released (bool).
func (b *Bridge) CoordReleaseIDs(h, resource, holder uint32, fenceNum float64) (st int32) {
	defer b.guard(&st)
	c, err := get[*lease.Coordinator](b, h, convert.KindCoordinator)
	if err != nil {
		return b.status(err)
	}
	tok, err := b.internedToken(resource, holder, fenceNum)
	if err != nil {
		return b.status(err)
	}
	return b.release(c, tok)
}

// release releases tok on c. Out: released (bool).
func (b *Bridge) release(c *lease.Coordinator, tok fence.Token) int32 {
	ok, err := c.Release(tok)
	if err != nil {
		return b.status(err)
	}
	b.out().Bool(ok)
	return OK
}

// CoordIssued returns the coordinator's issued fence. Out: fence.
func (b *Bridge) CoordIssued(h uint32) (st int32) {
	defer b.guard(&st)
	c, err := get[*lease.Coordinator](b, h, convert.KindCoordinator)
	if err != nil {
		return b.status(err)
	}
	b.out().F64(float64(c.IssuedFence()))
	return OK
}

// ClientNew makes a client. Args: options{clock, holderId, clockSkewMillis}.
// Out: handle.
func (b *Bridge) ClientNew(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	var cfg lease.ClientConfig
	_, err = r.Object("options", false)
	if err == nil {
		cfg.Clock, err = b.clockArg(&r, "options.clock")
	}
	if err == nil {
		cfg.HolderID, err = r.NonEmpty("options.holderId")
	}
	if err == nil {
		cfg.ClockSkew, err = r.Span("options.clockSkewMillis", false, true)
	}
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	c, err := lease.NewClient(cfg)
	if err != nil {
		return b.status(err)
	}
	return b.newHandle(c)
}

// ClientBeginAcquire begins an acquisition. Args: resource. Out: the
// request's requestId and sentAt.millis; the rest of it is the resource
// passed, the client's holder id and its clock's domain, which JavaScript
// has.
func (b *Bridge) ClientBeginAcquire(h uint32, n int32) (st int32) {
	defer b.guard(&st)
	c, r, err := recv[*lease.Client](b, h, convert.KindClient, n)
	if err != nil {
		return b.status(err)
	}
	res, err := r.NonEmpty("resource")
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	return b.beginAcquire(c, res)
}

// ClientBeginAcquireID is ClientBeginAcquire with the resource passed as an
// interned id and no argument buffer: JavaScript interned it, so it is a
// string that is not empty. Out: as ClientBeginAcquire.
func (b *Bridge) ClientBeginAcquireID(h, resource uint32) (st int32) {
	defer b.guard(&st)
	c, err := get[*lease.Client](b, h, convert.KindClient)
	if err != nil {
		return b.status(err)
	}
	if resource == 0 || int(resource) > len(b.ids) {
		return b.status(&convert.ArgumentError{Arg: "resource", Reason: "refers to a string that was not interned"})
	}
	return b.beginAcquire(c, b.ids[resource-1])
}

func (b *Bridge) beginAcquire(c *lease.Client, res string) int32 {
	req, err := c.BeginAcquire(res)
	if err != nil {
		return b.status(err)
	}
	b.strings.Add(req.RequestID) // it comes back with the request and its grant
	b.last, b.grant.fence = req, 0
	w := b.out()
	w.Str(req.RequestID)
	w.F64(req.SentAt.Millis)
	return OK
}

// errNoLast is what CoordAcquireLast and ClientCompleteLast return when the
// request or grant they would reuse does not exist (JavaScript never calls
// them then).
func errNoLast(what string) error {
	return &convert.ArgumentError{Arg: what, Reason: "is not the last one this instance made (internal: JavaScript passed no arguments)"}
}

// CoordAcquireLast is CoordAcquire of the request the last successful
// ClientBeginAcquire made (see Bridge.last), which JavaScript passes
// unchanged: no arguments. Every check and error is CoordAcquire's. A grant
// becomes Bridge.grant. Out: outcome.
func (b *Bridge) CoordAcquireLast(h uint32) (st int32) {
	defer b.guard(&st)
	c, err := get[*lease.Coordinator](b, h, convert.KindCoordinator)
	if err != nil {
		return b.status(err)
	}
	if b.last.Kind != lease.KindAcquire {
		return b.status(errNoLast("request"))
	}
	o, err := c.Acquire(b.last)
	if err != nil {
		return b.status(err)
	}
	if o.OK {
		b.grant = lastGrant{fence: o.Grant.Fence, ttl: o.Grant.TTL, expiry: o.Grant.CoordinatorExpiresAt.Millis, domain: o.Grant.CoordinatorExpiresAt.Domain}
	}
	return b.putOutcome(o)
}

// leaseWhat names what a lease argument must be.
const leaseWhat = "a lease returned by completeAcquire or completeRenewal"

// ClientBeginRenewal begins a renewal. Args: lease, as its data: a lease
// handle tag (whose number is unused: a lease has no Go object; the tag is
// how JavaScript says that the value is a Lease it made, and any other value
// is refused here), then the token (an object: resource, holderId, fence),
// and the deadline's domain. Out: request.
func (b *Bridge) ClientBeginRenewal(h uint32, n int32) (st int32) {
	defer b.guard(&st)
	c, r, err := recv[*lease.Client](b, h, convert.KindClient, n)
	if err != nil {
		return b.status(err)
	}
	_, err = r.Handle("lease", convert.KindLease, leaseWhat)
	var tok fence.Token
	if err == nil {
		tok, err = r.Token("lease.token")
	}
	var domain string
	if err == nil {
		domain, err = r.NonEmpty("lease.deadline.domain")
	}
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	req, err := c.BeginRenewalOf(tok, domain)
	if err != nil {
		return b.status(err)
	}
	b.strings.Add(req.RequestID) // it comes back with the request and its grant
	b.out().PutRequest(req)
	return OK
}

func (b *Bridge) complete(h uint32, n int32, k lease.Kind) (st int32) {
	defer b.guard(&st)
	c, r, err := recv[*lease.Client](b, h, convert.KindClient, n)
	if err != nil {
		return b.status(err)
	}
	req, err := r.Request("request", k)
	if err != nil {
		return b.status(err)
	}
	g, err := r.GrantFor("grant", &req)
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	var l *lease.Lease
	if k == lease.KindAcquire {
		l, err = c.CompleteAcquire(req, g)
	} else {
		l, err = c.CompleteRenewal(req, g)
	}
	if err != nil {
		return b.status(err)
	}
	putLease(b.out(), l)
	return OK
}

// putLease writes the numbers of a lease: its fence, its deadline's millis,
// and its grant's ttlMillis and coordinatorExpiresAt millis. The strings are
// the request's and grant's, which the caller sent and Go checked, and the
// lease keeps no Go object: JavaScript holds it as plain data.
func putLease(w *convert.Writer, l *lease.Lease) {
	g := l.Grant()
	w.F64(float64(g.Fence))
	w.F64(l.Deadline().Millis)
	w.F64(clock.Millis(g.TTL))
	w.F64(g.CoordinatorExpiresAt.Millis)
}

// ClientCompleteAcquire completes an acquisition. Args: request, grant. Out:
// the lease (putLease).
func (b *Bridge) ClientCompleteAcquire(h uint32, n int32) int32 {
	return b.complete(h, n, lease.KindAcquire)
}

// ClientCompleteLast is ClientCompleteAcquire of the last request begun and
// the last grant CoordAcquireLast made (see Bridge.last), which JavaScript
// passes unchanged: no arguments. Every check and error is
// ClientCompleteAcquire's. Out: the lease (putLease).
func (b *Bridge) ClientCompleteLast(h uint32) (st int32) {
	defer b.guard(&st)
	c, err := get[*lease.Client](b, h, convert.KindClient)
	if err != nil {
		return b.status(err)
	}
	if b.last.Kind != lease.KindAcquire || b.grant.fence == 0 {
		return b.status(errNoLast("request or grant"))
	}
	g := b.grant
	l, err := c.CompleteAcquire(b.last, lease.Grant{RequestID: b.last.RequestID, Resource: b.last.Resource, HolderID: b.last.HolderID,
		Fence: g.fence, TTL: g.ttl, CoordinatorExpiresAt: clock.Instant{Millis: g.expiry, Domain: g.domain}})
	if err != nil {
		return b.status(err)
	}
	putLease(b.out(), l)
	return OK
}

// ClientCompleteRenewal completes a renewal, like ClientCompleteAcquire.
func (b *Bridge) ClientCompleteRenewal(h uint32, n int32) int32 {
	return b.complete(h, n, lease.KindRenew)
}

// LeaseHasExpired reports whether a lease whose deadline is deadline
// (milliseconds in the domain of clock h, the clock of the client that made
// the lease) has expired: whether a fresh reading of clock h is at or past
// it, as lease.Lease.HasExpired answers. Out: bool.
func (b *Bridge) LeaseHasExpired(h uint32, deadline float64) (st int32) {
	defer b.guard(&st)
	c, err := get[*clockObj](b, h, convert.KindClock)
	if err != nil {
		return b.status(err)
	}
	now, err := c.c.Now()
	if err != nil {
		return b.status(err)
	}
	left, err := clock.At(now.Domain, deadline).Since(now)
	if err != nil {
		return b.status(err)
	}
	b.out().Bool(left <= 0)
	return OK
}

// LeaseWouldAdmit reports whether a gate would admit a lease's token now.
// Args: the lease's token (an object: resource, holderId, fence), gate.
// Out: bool.
func (b *Bridge) LeaseWouldAdmit(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	tok, err := r.Token("lease.token")
	if err != nil {
		return b.status(err)
	}
	g, err := lastHandle[*fence.Gate](b, &r, "gate", convert.KindGate, "a FenceGate")
	if err != nil {
		return b.status(err)
	}
	ok, err := g.WouldAdmit(tok)
	if err != nil {
		return b.status(err)
	}
	b.out().Bool(ok)
	return OK
}

// GateNew makes a gate. Args: resource, options?{initialFloor, maxRejections}.
// Out: handle.
func (b *Bridge) GateNew(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	res, err := r.NonEmpty("resource")
	if err != nil {
		return b.status(err)
	}
	var opts fence.Options
	present, err := r.Object("options", true)
	if err == nil && present {
		opts.InitialFloor, err = r.OptCount("options.initialFloor")
		var max uint64
		if err == nil {
			max, err = r.OptCount("options.maxRejections")
		}
		// fence.NewGate checks the range; anything above it stays above it.
		opts.MaxRejections = int(min(max, fence.MaxMaxRejections+1))
	}
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	g, err := fence.NewGate(res, opts)
	if err != nil {
		return b.status(err)
	}
	return b.newHandle(g)
}

// GateCommit checks a write's token against gate h and raises its floor; the
// JavaScript wrapper runs the write after an OK. Args: token, fn (which must
// be a function; it is checked first so that a bad call changes nothing).
func (b *Bridge) GateCommit(h uint32, n int32) (st int32) {
	return b.gateAdmit(h, n, true)
}

// GateAdmit raises gate h's floor to a token without writing. Args: token.
func (b *Bridge) GateAdmit(h uint32, n int32) (st int32) {
	return b.gateAdmit(h, n, false)
}

func (b *Bridge) gateAdmit(h uint32, n int32, write bool) (st int32) {
	defer b.guard(&st)
	// Spelled out rather than recv: gate.commit's hot path, and the generic
	// helper is not inlined here (about 15 ns a call slower).
	g, err := get[*fence.Gate](b, h, convert.KindGate)
	if err != nil {
		return b.status(err)
	}
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	tok, err := r.Token("token")
	if err == nil && write {
		err = r.Function("fn")
	}
	if err == nil {
		err = r.End()
	}
	if err == nil {
		err = g.Admit(tok)
	}
	return b.status(err)
}

// GateCheck checks the arguments of a gate.commitAsync that has to wait for
// its turn, so that a bad call is refused at once. With refuseStale set, a
// token already below the floor is refused too (and logged), as Gate.Commit
// refuses an older fence while another write runs; otherwise nothing
// changes. The check that admits is made when the turn comes, by
// GateCommitIDs or GateCommit. Args: token, fn.
func (b *Bridge) GateCheck(h uint32, n int32, refuseStale bool) (st int32) {
	defer b.guard(&st)
	g, r, err := recv[*fence.Gate](b, h, convert.KindGate, n)
	if err != nil {
		return b.status(err)
	}
	tok, err := r.Token("token")
	if err == nil {
		err = r.Function("fn")
	}
	if err == nil {
		err = r.End()
	}
	if err == nil {
		_, err = g.WouldAdmit(tok)
	}
	if err == nil && refuseStale && tok.Fence < g.Floor() {
		err = g.Admit(tok) // refuses and logs; the floor stays
	}
	return b.status(err)
}

// GateFloor returns gate h's floor. Out: floor.
func (b *Bridge) GateFloor(h uint32) (st int32) {
	defer b.guard(&st)
	g, err := get[*fence.Gate](b, h, convert.KindGate)
	if err != nil {
		return b.status(err)
	}
	b.out().F64(float64(g.Floor()))
	return OK
}

// GateRejections returns the refusals gate h still keeps whose Seq is above
// after (JavaScript passes the newest it has). Out: how many refusals there
// have been (RejectionCount), how many the log keeps (MaxRejections), the
// number of entries that follow, then each (putRejection), oldest first. It
// costs O(MaxRejections), however many refusals there have been.
func (b *Bridge) GateRejections(h uint32, after float64) (st int32) {
	defer b.guard(&st)
	g, err := get[*fence.Gate](b, h, convert.KindGate)
	if err != nil {
		return b.status(err)
	}
	rs := g.Rejections()
	i := 0
	for i < len(rs) && float64(rs[i].Seq) <= after {
		i++
	}
	w := b.out()
	w.F64(float64(g.RejectionCount()))
	w.F64(float64(g.MaxRejections()))
	w.F64(float64(len(rs) - i))
	for _, rej := range rs[i:] {
		putRejection(w, rej)
	}
	return OK
}

// GateRejectionCount returns how many refusals gate h has made, including
// those its log no longer keeps. Out: count.
func (b *Bridge) GateRejectionCount(h uint32) (st int32) {
	defer b.guard(&st)
	g, err := get[*fence.Gate](b, h, convert.KindGate)
	if err != nil {
		return b.status(err)
	}
	b.out().F64(float64(g.RejectionCount()))
	return OK
}

// NaiveNew starts a naive lease. Args: clock, ttlMillis. Out: handle.
func (b *Bridge) NaiveNew(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	c, err := b.clockArg(&r, "clock")
	if err != nil {
		return b.status(err)
	}
	ttl, err := r.Span("ttlMillis", true, false)
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return b.status(err)
	}
	l, err := naive.Acquire(c, ttl)
	if err != nil {
		return b.status(err)
	}
	return b.newHandle(l)
}

// NaiveValid reports now < expiresAt. Out: bool.
func (b *Bridge) NaiveValid(h uint32) (st int32) {
	defer b.guard(&st)
	l, err := get[*naive.Lease](b, h, convert.KindNaive)
	if err != nil {
		return b.status(err)
	}
	ok, err := l.Valid()
	if err != nil {
		return b.status(err)
	}
	b.out().Bool(ok)
	return OK
}

// NaiveRenewed sets expiresAt = now + ttl.
func (b *Bridge) NaiveRenewed(h uint32) (st int32) {
	defer b.guard(&st)
	l, err := get[*naive.Lease](b, h, convert.KindNaive)
	if err != nil {
		return b.status(err)
	}
	return b.status(l.Renewed())
}

// NaiveExpiresAt returns the stored deadline. Out: instant.
func (b *Bridge) NaiveExpiresAt(h uint32) (st int32) {
	defer b.guard(&st)
	l, err := get[*naive.Lease](b, h, convert.KindNaive)
	if err != nil {
		return b.status(err)
	}
	putInstant(b.out(), l.ExpiresAt())
	return OK
}

// Intern registers a string for the calls that take strings by id. Args:
// the string (at most MaxIDBytes bytes). Out: its id, from 1.
func (b *Bridge) Intern(n int32) (st int32) {
	defer b.guard(&st)
	r, err := b.args(n)
	if err != nil {
		return b.status(err)
	}
	s, err := r.Str("string")
	if err == nil {
		err = r.End()
	}
	if err == nil && (len(s) > MaxIDBytes || len(b.ids) >= MaxIDs) {
		err = &convert.ArgumentError{Arg: "string", Reason: "cannot be interned (longer than 192 bytes, or the table is full)"}
	}
	if err != nil {
		return b.status(err)
	}
	b.ids = append(b.ids, s)
	b.out().F64(float64(len(b.ids)))
	return OK
}

// ResetIDs forgets every interned string.
func (b *Bridge) ResetIDs() {
	clear(b.ids)
	b.ids = b.ids[:0]
}

// GateCommitIDs is GateCommit for the common call, with the token's strings
// passed as interned ids and no argument buffer: JavaScript has checked that
// the token is an object whose resource and holderId are strings and whose
// fence is a number, and that fn is a function. Every other check, and every
// error, is GateCommit's.
func (b *Bridge) GateCommitIDs(h, resource, holder uint32, fenceNum float64) (st int32) {
	defer b.guard(&st)
	// The common case, checked inline: a live gate, known ids, a fence that
	// is a whole number in range. Anything else takes the checked path
	// below, which produces the errors.
	if int(h) < len(b.objs) && resource-1 < uint32(len(b.ids)) && holder-1 < uint32(len(b.ids)) &&
		fenceNum >= 1 && fenceNum <= convert.MaxSafeInteger && fenceNum == float64(uint64(fenceNum)) {
		if g, ok := b.objs[h].(*fence.Gate); ok {
			if hid := b.ids[holder-1]; hid != "" {
				tok := fence.Token{Resource: b.ids[resource-1], HolderID: hid, Fence: uint64(fenceNum)}
				if err := g.Admit(tok); err != nil {
					return b.status(err)
				}
				return OK
			}
		}
	}
	g, err := get[*fence.Gate](b, h, convert.KindGate)
	if err != nil {
		return b.status(err)
	}
	tok, err := b.internedToken(resource, holder, fenceNum)
	if err == nil {
		err = g.Admit(tok)
	}
	return b.status(err)
}

// internedToken builds the token of a call that passed its resource and
// holder as interned ids, with every check and error of the argument path.
func (b *Bridge) internedToken(resource, holder uint32, fenceNum float64) (fence.Token, error) {
	if resource == 0 || holder == 0 || int(resource) > len(b.ids) || int(holder) > len(b.ids) {
		return fence.Token{}, &convert.ArgumentError{Arg: "token", Reason: "refers to strings that were not interned"}
	}
	return convert.TokenOf("token", b.ids[resource-1], b.ids[holder-1], fenceNum)
}
