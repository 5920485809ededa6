package bridge

import (
	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/naive"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// Call holds the numbers JavaScript passed to an operation (see Do);
// which of them it passes is the operation's Sig.
type Call struct {
	H        uint32  // h: the receiver's handle (clock_custom: the source's reader id)
	N        int32   // n: the length of the argument list in In
	ID1, ID2 uint32  // i, i: interned ids (resource, holder)
	X        float64 // x: a number passed as is (a deadline, a Seq, a fence)
	Flag     bool    // f
}

// Op is one operation JavaScript can call, exported by wasm/lib as
// lf_<Name> (exports_js.go is generated from Ops; see TestExportsFile).
// Adding an operation is adding an entry to Ops.
type Op struct {
	Name string
	// Sig is the export's parameters, a letter each, in order: h (H,
	// uint32), n (N, int32), i (ID1, then ID2; uint32), x (X, float64), f
	// (Flag, bool).
	Sig string
	// Recv is the kind of the object handle H names, which Do looks up
	// first; 0 when H is not a receiver.
	Recv convert.Kind
	// run decodes the arguments (argsOf), makes the call on o, the
	// receiver, and writes the results to Out.
	run func(b *Bridge, o any, c *Call) error
}

// Do runs op with the numbers JavaScript passed (see Call; those its Sig
// does not name are zero): it looks the receiver up, checks the argument
// list's length, runs the operation, and returns OK or writes the error to
// Out and returns its code (see status); the one error path of every
// operation. It recovers panics (see guard).
//
// The numbers come as parameters and go to the operation in b.call, not as
// a Call value: in wasm a struct of six fields is zeroed and copied with
// bulk memory instructions, which cost more than the rest of a small call.
func (b *Bridge) Do(op *Op, h uint32, n int32, id1, id2 uint32, x float64, flag bool) (st int32) {
	defer b.guard(&st)
	c := &b.call
	c.H, c.N, c.ID1, c.ID2, c.X, c.Flag = h, n, id1, id2, x, flag
	// Spelled out rather than a call to lookup: every call takes this path.
	var o any
	if k := op.Recv; k != 0 {
		if int(h) >= len(b.objs) || b.objs[h].k != k {
			return b.status(notLive(k))
		}
		o = b.objs[h].o
	}
	if n < 0 || int(n) > len(b.In) {
		return b.status(errArgsLength)
	}
	if err := op.run(b, o, c); err != nil {
		return b.status(err)
	}
	return OK
}

// Ops is every operation. Each entry's comment says its arguments (Args,
// the list in In) and its results (Out).
var Ops = []Op{
	// Makes a monotonic clock. Args: domain. Out: handle.
	{Name: "clock_monotonic", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		domain := r.NonEmpty("domain")
		if err := r.End(); err != nil {
			return err
		}
		return b.newClock(clock.NewMonotonic(domain))
	}},
	// Makes a manual clock. Args: domain, options?{start, stepPerRead}.
	// Out: handle.
	{Name: "clock_manual", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		domain := r.NonEmpty("domain")
		var opts clock.ManualOptions
		if r.Object("options", true) {
			opts.Start = r.OptFinite("options.start", 0)
			if opts.StepPerRead = r.OptFinite("options.stepPerRead", 0); opts.StepPerRead < 0 {
				r.Fail(&convert.ArgumentError{Arg: "options.stepPerRead", Reason: "must not be negative"})
			}
		}
		if err := r.End(); err != nil {
			return err
		}
		return b.newClock(clock.NewManual(domain, opts))
	}},
	// Makes a guarded clock over the JavaScript source registered as
	// reader H, which JavaScript reads when a call asks for it
	// (ReadSource; see Reading). Args: domain, readMillis (a function).
	// Out: handle.
	{Name: "clock_custom", Sig: "hn", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		domain := r.NonEmpty("domain")
		r.Function("readMillis")
		if err := r.End(); err != nil {
			return err
		}
		reader := c.H // c is the current call's, overwritten by the next
		return b.newClock(clock.New(domain, func() float64 { return b.sourceReading(reader) }))
	}},
	// Reads clock H. Out: millis.
	{Name: "clock_now", Sig: "h", Recv: convert.KindClock, run: func(b *Bridge, o any, _ *Call) error {
		now, err := o.(*clockObj).c.Now()
		if err == nil {
			b.out().F64(now.Millis)
		}
		return err
	}},
	// Moves manual clock H forward. Args: ms.
	{Name: "clock_advance", Sig: "hn", Recv: convert.KindClock, run: func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		m, ms := manualArg(o, &r)
		err := r.End()
		if err == nil && ms < 0 {
			err = &convert.ArgumentError{Arg: "ms", Reason: "must not be negative (a clock never moves backwards), got " + clock.FormatMillis(ms)}
		}
		if err != nil {
			return err
		}
		return m.Advance(ms)
	}},
	// Moves manual clock H to a reading. Args: ms.
	{Name: "clock_set", Sig: "hn", Recv: convert.KindClock, run: func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		m, ms := manualArg(o, &r)
		if err := r.End(); err != nil {
			return err
		}
		return m.Set(ms)
	}},
	// Subtracts two instants. Args: instant, earlier. Out: millis.
	{Name: "instant_since", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		t, e := r.Instant("this"), r.Instant("earlier")
		if err := r.End(); err != nil {
			return err
		}
		ms, err := t.Since(e)
		if err == nil {
			b.out().F64(ms)
		}
		return err
	}},
	// Makes a coordinator. Args: options{clock, ttlMillis, startFence}.
	// Out: handle.
	{Name: "coord_new", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		r.Object("options", false)
		cfg := lease.CoordinatorConfig{Clock: b.clockArg(&r, "options.clock"), TTL: r.Span("options.ttlMillis", true, false), StartFence: r.OptCount("options.startFence")}
		if cfg.StartFence >= lease.MaxFence {
			r.Fail(&convert.ArgumentError{Arg: "options.startFence", Reason: "leaves no fence to issue (must be below 2^53-1)"})
		}
		if err := r.End(); err != nil {
			return err
		}
		return b.newHandle(lease.NewCoordinator(cfg))
	}},
	// Processes an acquisition. Args: request. Out: outcome (putOutcome).
	{Name: "coord_acquire", Sig: "hn", Recv: convert.KindCoordinator, run: coordRequest(lease.KindAcquire)},
	// Processes a renewal. Args: request. Out: outcome (putOutcome).
	{Name: "coord_renew", Sig: "hn", Recv: convert.KindCoordinator, run: coordRequest(lease.KindRenew)},
	// Releases a lease. Args: token. Out: released (bool).
	{Name: "coord_release", Sig: "hn", Recv: convert.KindCoordinator, run: func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		tok := r.Token("token")
		if err := r.End(); err != nil {
			return err
		}
		return b.release(o.(*lease.Coordinator), tok)
	}},
	// Returns the coordinator's issued fence. Out: fence.
	{Name: "coord_issued", Sig: "h", Recv: convert.KindCoordinator, run: func(b *Bridge, o any, _ *Call) error {
		b.out().F64(float64(o.(*lease.Coordinator).IssuedFence()))
		return nil
	}},
	// Makes a client. Args: options{clock, holderId, clockSkewMillis}.
	// Out: handle.
	{Name: "client_new", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		r.Object("options", false)
		cfg := lease.ClientConfig{Clock: b.clockArg(&r, "options.clock"), HolderID: r.NonEmpty("options.holderId"), ClockSkew: r.Span("options.clockSkewMillis", false, true)}
		if err := r.End(); err != nil {
			return err
		}
		return b.newHandle(lease.NewClient(cfg))
	}},
	// Begins an acquisition. Args: resource. Out: the request's requestId
	// and sentAt.millis; the rest of it is the resource passed, the
	// client's holder id and its clock's domain, which JavaScript has.
	{Name: "client_begin_acquire", Sig: "hn", Recv: convert.KindClient, run: func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		res := r.NonEmpty("resource")
		if err := r.End(); err != nil {
			return err
		}
		return b.beginAcquire(o.(*lease.Client), res)
	}},
	// Begins a renewal. Args: lease, as its data: a lease handle tag (whose
	// number is unused: a lease has no Go object; the tag is how
	// JavaScript says that the value is a Lease it made, and any other
	// value is refused here), then the token (an object: resource,
	// holderId, fence), and the deadline's domain. Out: request.
	{Name: "client_begin_renewal", Sig: "hn", Recv: convert.KindClient, run: func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		r.Handle("lease", convert.KindLease, "a lease returned by completeAcquire or completeRenewal")
		tok, domain := r.Token("lease.token"), r.NonEmpty("lease.deadline.domain")
		if err := r.End(); err != nil {
			return err
		}
		req, err := o.(*lease.Client).BeginRenewalOf(tok, domain)
		if err != nil {
			return err
		}
		b.strings.Add(req.RequestID) // it comes back with the request and its grant
		b.out().PutRequest(req)
		return nil
	}},
	// Completes an acquisition. Args: request, grant. Out: the lease
	// (putLease).
	{Name: "client_complete_acquire", Sig: "hn", Recv: convert.KindClient, run: complete(lease.KindAcquire)},
	// Completes a renewal, like client_complete_acquire.
	{Name: "client_complete_renewal", Sig: "hn", Recv: convert.KindClient, run: complete(lease.KindRenew)},
	// Reports whether a lease whose deadline is X (milliseconds in the
	// domain of clock H, the clock of the client that made the lease) has
	// expired: whether a fresh reading of clock H is at or past it, as
	// lease.Lease.HasExpired answers. Out: bool.
	{Name: "lease_has_expired", Sig: "hx", Recv: convert.KindClock, run: func(b *Bridge, o any, c *Call) error {
		now, err := o.(*clockObj).c.Now()
		if err != nil {
			return err
		}
		left, err := clock.At(now.Domain, c.X).Since(now)
		if err == nil {
			b.out().Bool(left <= 0)
		}
		return err
	}},
	// Reports whether a gate would admit a lease's token now. Args: the
	// lease's token (an object: resource, holderId, fence), gate. Out:
	// bool.
	{Name: "lease_would_admit", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		tok := r.Token("lease.token")
		g, err := b.lastHandle(&r, "gate", convert.KindGate, "a FenceGate")
		var ok bool
		if err == nil {
			ok, err = g.(*fence.Gate).WouldAdmit(tok)
		}
		if err == nil {
			b.out().Bool(ok)
		}
		return err
	}},
	// Makes a gate. Args: resource, options?{initialFloor, maxRejections}.
	// Out: handle.
	{Name: "gate_new", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		res := r.NonEmpty("resource")
		var opts fence.Options
		if r.Object("options", true) {
			opts.InitialFloor = r.OptCount("options.initialFloor")
			// fence.NewGate checks the range; anything above it stays above it.
			opts.MaxRejections = int(min(r.OptCount("options.maxRejections"), fence.MaxMaxRejections+1))
		}
		if err := r.End(); err != nil {
			return err
		}
		return b.newHandle(fence.NewGate(res, opts))
	}},
	// Checks a write's token against gate H and raises its floor; the
	// JavaScript wrapper runs the write after an OK. Args: token, fn
	// (which must be a function; it is checked first so that a bad call
	// changes nothing).
	{Name: "gate_commit", Sig: "hn", Recv: convert.KindGate, run: gateAdmit(true)},
	// Raises gate H's floor to a token without writing. Args: token.
	{Name: "gate_admit", Sig: "hn", Recv: convert.KindGate, run: gateAdmit(false)},
	// Checks the arguments of a gate.commitAsync that has to wait for its
	// turn, so that a bad call is refused at once. With Flag (refuseStale)
	// set, a token already below the floor is refused too (and logged), as
	// Gate.Commit refuses an older fence while another write runs;
	// otherwise nothing changes. The check that admits is made when the
	// turn comes, by gate_commit_ids or gate_commit. Args: token, fn.
	{Name: "gate_check", Sig: "hnf", Recv: convert.KindGate, run: func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		g := o.(*fence.Gate)
		tok := r.Token("token")
		r.Function("fn")
		err := r.End()
		if err == nil {
			_, err = g.WouldAdmit(tok)
		}
		if err == nil && c.Flag && tok.Fence < g.Floor() {
			err = g.Admit(tok) // refuses and logs; the floor stays
		}
		return err
	}},
	// Returns gate H's floor. Out: floor.
	{Name: "gate_floor", Sig: "h", Recv: convert.KindGate, run: func(b *Bridge, o any, _ *Call) error {
		b.out().F64(float64(o.(*fence.Gate).Floor()))
		return nil
	}},
	// Returns the refusals gate H still keeps whose Seq is above X
	// (JavaScript passes the newest it has). Out: how many refusals there
	// have been (RejectionCount), how many the log keeps (MaxRejections),
	// the number of entries that follow, then each (putRejection), oldest
	// first. It costs O(MaxRejections), however many refusals there have
	// been.
	{Name: "gate_rejections", Sig: "hx", Recv: convert.KindGate, run: func(b *Bridge, o any, c *Call) error {
		g := o.(*fence.Gate)
		rs := g.Rejections()
		i := 0
		for i < len(rs) && float64(rs[i].Seq) <= c.X {
			i++
		}
		w := b.out()
		w.F64(float64(g.RejectionCount()))
		w.F64(float64(g.MaxRejections()))
		w.F64(float64(len(rs) - i))
		for _, rej := range rs[i:] {
			putRejection(w, rej)
		}
		return nil
	}},
	// Returns how many refusals gate H has made, including those its log
	// no longer keeps. Out: count.
	{Name: "gate_rejection_count", Sig: "h", Recv: convert.KindGate, run: func(b *Bridge, o any, _ *Call) error {
		b.out().F64(float64(o.(*fence.Gate).RejectionCount()))
		return nil
	}},
	// Starts a naive lease. Args: clock, ttlMillis. Out: handle.
	{Name: "naive_new", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		clk, ttl := b.clockArg(&r, "clock"), r.Span("ttlMillis", true, false)
		if err := r.End(); err != nil {
			return err
		}
		return b.newHandle(naive.Acquire(clk, ttl))
	}},
	// Reports now < expiresAt. Out: bool.
	{Name: "naive_valid", Sig: "h", Recv: convert.KindNaive, run: func(b *Bridge, o any, _ *Call) error {
		ok, err := o.(*naive.Lease).Valid()
		if err == nil {
			b.out().Bool(ok)
		}
		return err
	}},
	// Sets expiresAt = now + ttl.
	{Name: "naive_renewed", Sig: "h", Recv: convert.KindNaive, run: func(b *Bridge, o any, _ *Call) error {
		return o.(*naive.Lease).Renewed()
	}},
	// Returns the stored deadline. Out: instant.
	{Name: "naive_expires_at", Sig: "h", Recv: convert.KindNaive, run: func(b *Bridge, o any, _ *Call) error {
		putInstant(b.out(), o.(*naive.Lease).ExpiresAt())
		return nil
	}},
	// Registers a string for the calls that take strings by id. Args: the
	// string (at most MaxIDBytes bytes). Out: its id, from 1.
	{Name: "intern", Sig: "n", run: func(b *Bridge, _ any, c *Call) error {
		r := b.argsOf(c)
		s := r.Str("string")
		err := r.End()
		if err == nil && (len(s) > MaxIDBytes || len(b.ids) >= MaxIDs) {
			err = &convert.ArgumentError{Arg: "string", Reason: "cannot be interned (longer than 192 bytes, or the table is full)"}
		}
		if err != nil {
			return err
		}
		b.ids = append(b.ids, s)
		b.out().F64(float64(len(b.ids)))
		return nil
	}},
	// client_begin_acquire with the resource passed as interned id ID1 and
	// no argument list: JavaScript interned it, so it is a string that is
	// not empty. Out: as client_begin_acquire.
	{Name: "client_begin_acquire_id", Sig: "hi", Recv: convert.KindClient, run: func(b *Bridge, o any, c *Call) error {
		if c.ID1 == 0 || int(c.ID1) > len(b.ids) {
			return &convert.ArgumentError{Arg: "resource", Reason: "refers to a string that was not interned"}
		}
		return b.beginAcquire(o.(*lease.Client), b.ids[c.ID1-1])
	}},
	// coord_acquire of the request the last successful client_begin_acquire
	// made (see Bridge.last), which JavaScript passes unchanged: no
	// arguments. Every check and error is coord_acquire's. A grant becomes
	// Bridge.grant. Out: outcome.
	{Name: "coord_acquire_last", Sig: "h", Recv: convert.KindCoordinator, run: func(b *Bridge, o any, _ *Call) error {
		if b.last.Kind != lease.KindAcquire {
			return errNoLast("request")
		}
		out, err := o.(*lease.Coordinator).Acquire(b.last)
		if err != nil {
			return err
		}
		if out.OK {
			g := out.Grant
			b.grant = lastGrant{fence: g.Fence, ttl: g.TTL, expiry: g.CoordinatorExpiresAt.Millis, domain: g.CoordinatorExpiresAt.Domain}
		}
		b.putOutcome(out)
		return nil
	}},
	// client_complete_acquire of the last request begun and the last grant
	// coord_acquire_last made (see Bridge.last), which JavaScript passes
	// unchanged: no arguments. Every check and error is
	// client_complete_acquire's. Out: the lease (putLease).
	{Name: "client_complete_last", Sig: "h", Recv: convert.KindClient, run: func(b *Bridge, o any, _ *Call) error {
		if b.last.Kind != lease.KindAcquire || b.grant.fence == 0 {
			return errNoLast("request or grant")
		}
		g, q := b.grant, b.last
		l, err := o.(*lease.Client).CompleteAcquire(q, lease.Grant{RequestID: q.RequestID, Resource: q.Resource, HolderID: q.HolderID,
			Fence: g.fence, TTL: g.ttl, CoordinatorExpiresAt: clock.Instant{Millis: g.expiry, Domain: g.domain}})
		if err == nil {
			putLease(b.out(), l)
		}
		return err
	}},
	// coord_release with the token's strings passed as interned ids (ID1
	// resource, ID2 holder), its fence as X, and no argument list:
	// JavaScript has checked that the token is an object whose resource
	// and holderId are strings and whose fence is a number. Every other
	// check is coord_release's. Out: released (bool).
	{Name: "coord_release_ids", Sig: "hiix", Recv: convert.KindCoordinator, run: func(b *Bridge, o any, c *Call) error {
		tok, err := b.internedToken(c)
		if err != nil {
			return err
		}
		return b.release(o.(*lease.Coordinator), tok)
	}},
	// gate_commit for the common call, with the token passed as
	// coord_release_ids takes it and no argument list: JavaScript has
	// also checked that fn is a function. Every other check, and every
	// error, is gate_commit's.
	{Name: "gate_commit_ids", Sig: "hiix", run: func(b *Bridge, _ any, c *Call) error {
		// The common case, checked inline: a live gate, known ids, a
		// fence that is a whole number in range. Anything else takes the
		// checked path below, which produces the errors.
		if int(c.H) < len(b.objs) && c.ID1-1 < uint32(len(b.ids)) && c.ID2-1 < uint32(len(b.ids)) &&
			c.X >= 1 && c.X <= convert.MaxSafeInteger && c.X == float64(uint64(c.X)) {
			if g, ok := b.objs[c.H].o.(*fence.Gate); ok {
				if hid := b.ids[c.ID2-1]; hid != "" {
					return g.Admit(fence.Token{Resource: b.ids[c.ID1-1], HolderID: hid, Fence: uint64(c.X)})
				}
			}
		}
		o, err := b.lookup(c.H, convert.KindGate)
		var tok fence.Token
		if err == nil {
			tok, err = b.internedToken(c)
		}
		if err != nil {
			return err
		}
		return o.(*fence.Gate).Admit(tok)
	}},
}

// argsOf returns a reader over the argument list of c, whose length Do has
// checked.
func (b *Bridge) argsOf(c *Call) convert.Reader {
	r := convert.Reader{Strings: &b.strings}
	r.Reset(b.In[:c.N])
	return r
}

// manualArg returns manual clock o and the argument ms, the last one; o
// that is not a manual clock is r's error.
func manualArg(o any, r *convert.Reader) (*clock.Manual, float64) {
	m := o.(*clockObj).manual
	if m == nil {
		r.Fail(&convert.ArgumentError{Arg: "this", Reason: "is not a manual clock"})
		return nil, 0
	}
	return m, r.Finite("ms")
}

// putOutcome writes an outcome: code, then the grant's numbers (fence,
// ttlMillis, coordinatorExpiresAt.millis) or heldBy and retryAfterMillis. A
// grant's strings are not written: its requestId, resource and holderId are
// the request's, which JavaScript passed, and its expiry's domain is the
// coordinator's clock's.
func (b *Bridge) putOutcome(o lease.Outcome) {
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
}

// coordRequest is the run of an operation that decodes a request of kind k,
// the one argument, and processes it on the coordinator. Out: outcome.
func coordRequest(k lease.Kind) func(b *Bridge, o any, c *Call) error {
	return func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		req := r.Request("request", k)
		err := r.End()
		if err != nil {
			return err
		}
		var out lease.Outcome
		if coord := o.(*lease.Coordinator); k == lease.KindAcquire {
			out, err = coord.Acquire(req)
		} else {
			out, err = coord.Renew(req)
		}
		if err == nil {
			b.putOutcome(out)
		}
		return err
	}
}

// release releases tok on c. Out: released (bool).
func (b *Bridge) release(c *lease.Coordinator, tok fence.Token) error {
	ok, err := c.Release(tok)
	if err == nil {
		b.out().Bool(ok)
	}
	return err
}

func (b *Bridge) beginAcquire(c *lease.Client, res string) error {
	req, err := c.BeginAcquire(res)
	if err != nil {
		return err
	}
	b.strings.Add(req.RequestID) // it comes back with the request and its grant
	b.last, b.grant.fence = req, 0
	w := b.out()
	w.Str(req.RequestID)
	w.F64(req.SentAt.Millis)
	return nil
}

// errNoLast is what coord_acquire_last and client_complete_last return when
// the request or grant they would reuse does not exist (JavaScript never
// calls them then).
func errNoLast(what string) error {
	return &convert.ArgumentError{Arg: what, Reason: "is not the last one this instance made (internal: JavaScript passed no arguments)"}
}

// complete is the run of an operation that decodes a request of kind k and
// its grant, the arguments, and completes them on the client. Out: the lease
// (putLease).
func complete(k lease.Kind) func(b *Bridge, o any, c *Call) error {
	return func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		req := r.Request("request", k)
		g := r.GrantFor("grant", &req)
		err := r.End()
		if err != nil {
			return err
		}
		var l *lease.Lease
		if client := o.(*lease.Client); k == lease.KindAcquire {
			l, err = client.CompleteAcquire(req, g)
		} else {
			l, err = client.CompleteRenewal(req, g)
		}
		if err == nil {
			putLease(b.out(), l)
		}
		return err
	}
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

// gateAdmit is the run of an operation that decodes a token (and, for a
// write, fn) and admits it to the gate.
func gateAdmit(write bool) func(b *Bridge, o any, c *Call) error {
	return func(b *Bridge, o any, c *Call) error {
		r := b.argsOf(c)
		tok := r.Token("token")
		if write {
			r.Function("fn")
		}
		if err := r.End(); err != nil {
			return err
		}
		return o.(*fence.Gate).Admit(tok)
	}
}

// internedToken builds the token of a call that passed its resource and
// holder as interned ids and its fence as a number, with every check and
// error of the argument path.
func (b *Bridge) internedToken(c *Call) (fence.Token, error) {
	resource, holder := c.ID1, c.ID2
	if resource == 0 || holder == 0 || int(resource) > len(b.ids) || int(holder) > len(b.ids) {
		return fence.Token{}, &convert.ArgumentError{Arg: "token", Reason: "refers to strings that were not interned"}
	}
	return convert.TokenOf("token", b.ids[resource-1], b.ids[holder-1], c.X)
}
