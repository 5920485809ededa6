package service

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// Waiting calls.
//
// The Service keeps, for each resource that has waiting calls, a queue:
// the places of waiting acquisitions in arrival order, and the observers
// (inspections waiting for the fence to change). Every decision on such a
// resource, whatever the call, first hands a resource that has no live
// lease to the first place that has a call attached (serve): the place's
// acquisition is decided in the same transaction, so its grant is made
// durable before anything is answered, and a release hands over in its own
// write. Once the store has returned, the outcome is settled: the served
// place is answered, places passed over are forgotten, observers whose
// fence changed are answered, and a timer is armed for the live lease's
// expiry, whose firing decides again (the expiry hands over by itself, not
// at the next request). The store's Watch reports changes decided by other
// processes, which are decided again the same way.

// waits is the Service's waiting calls, by resource.
type waits struct {
	mu     sync.Mutex
	queues map[string]*queue
	// n counts waiting calls (acquisitions and observers) and places
	// kept with no call attached: what MaxWaiters bounds; byOwner counts
	// them by the caller's token (wire.Caller.MaxWaiters bounds those).
	n       int
	byOwner map[string]int
	// active is len(queues), so that calls on resources without waiters
	// can skip the lock while no resource has any.
	active atomic.Int64
	// stop is closed by StopWaiting; stopped says it was.
	stop    chan struct{}
	stopped bool
}

func (w *waits) init() {
	w.queues = map[string]*queue{}
	w.byOwner = map[string]int{}
	w.stop = make(chan struct{})
}

// add counts d more waiting calls or kept places of owner (with w.mu
// held).
func (w *waits) add(owner string, d int) {
	w.n += d
	if owner != "" {
		if n := w.byOwner[owner] + d; n > 0 {
			w.byOwner[owner] = n
		} else {
			delete(w.byOwner, owner)
		}
	}
}

// room returns the refusal of one more waiting call by caller, or nil
// (with w.mu held).
func (s *Service) room(caller wire.Caller) error {
	if s.w.n >= s.maxWaiters {
		return s.tooManyWaiters()
	}
	if caller.MaxWaiters > 0 && s.w.byOwner[caller.Name] >= caller.MaxWaiters {
		return refuse(wire.RefusedTooManyTokenWaiters, "the token "+quote(caller.Name)+" has its maximum of "+
			strconv.Itoa(caller.MaxWaiters)+" waiting calls; other tokens are not affected; retry later, or without waiting")
	}
	return nil
}

// queue is what waits on one resource.
type queue struct {
	resource  string
	places    []*place
	observers []*observer
	stopWatch func()
	// seq numbers the decisions taken on the resource while the queue
	// exists (under the store's lock for the resource, so in the order
	// they were made durable); settled is the highest settled, so that a
	// decision settled late does not undo a later one's effects.
	seq, settled uint64
	expiry       clock.Timer // armed for the live lease's expiry
	expiryAt     float64     // coordinator milliseconds
	kicking      bool        // a decision for the queue runs in the background
	again        bool        // another one is needed once it is done
}

func (q *queue) empty() bool { return len(q.places) == 0 && len(q.observers) == 0 }

// place is a waiting acquisition's place in its queue.
type place struct {
	q      *queue
	req    lease.Request
	value  string // the lease's value, once granted
	hash   [32]byte
	caller wire.Caller
	calls  int         // calls attached (the first, and retries with its request id)
	keep   clock.Timer // while no call is attached: forgets the place
	done   chan struct{}
	reply  wire.Reply
	err    error
	gone   bool // answered or forgotten: no longer in q.places
}

// observer is an inspection waiting for the fence to differ from after
// (or, with hasValue, the value from value).
type observer struct {
	q        *queue
	owner    string
	after    uint64
	value    string
	hasValue bool
	done     chan struct{}
	reply    wire.Reply
	gone     bool
}

// outcome is what one decision did, to settle once it is durable.
type outcome struct {
	reply wire.Reply // the answer to the call that made the decision
	// q is the resource's queue when the decision was made (nil if there
	// was none), and seq the decision's number in it.
	q   *queue
	seq uint64
	// snapshot is q's places, and whether each had a call attached.
	snapshot []seen
	served   *place     // the place handed the resource
	answer   wire.Reply // its grant
	refused  []refused  // places whose acquisition was refused
	skipped  []*place   // places passed over for having no call attached
	removed  *place     // a place a revoke removed
	before   Entry      // the entry the decision was made on
	final    Entry      // the entry as decided
	now      float64    // the reading the decision acted on
	resource string
	// ended is the event type of the end of a live lease by this
	// decision, if not wire.EventReleased (a revocation); extra are
	// events no change of the entry shows (a proclamation), published
	// after the entry's. published: they were (publishOutcome).
	ended     string
	extra     []wire.Event
	renewed   bool // a renewal granted
	published bool
}

type seen struct {
	p       *place
	present bool
}

type refused struct {
	p   *place
	err error
}

// errStopped ends the waits of a Service that StopWaiting stopped.
var errStopped = errors.New("service: the coordinator is shutting down")

// update runs decide on resource's entry through the store and settles
// its outcome once the store made it durable.
func (s *Service) update(ctx context.Context, resource string, decide func(t *Txn, rules lease.Rules, o *outcome) error) (outcome, error) {
	var o outcome
	err := s.store.Update(ctx, resource, s.decider(resource, decide, &o))
	if err == nil {
		s.decided(&o)
	}
	return o, err
}

// decider is the function a store runs for decide on resource: it makes
// *o the outcome.
func (s *Service) decider(resource string, decide func(t *Txn, rules lease.Rules, o *outcome) error, o *outcome) func(*Txn) error {
	return func(t *Txn) error {
		*o = outcome{resource: resource}
		s.look(resource, o)
		rules := lease.Rules{Domain: t.Now.Domain, TTL: s.ttl}
		if err := decide(t, rules, o); err != nil {
			return err
		}
		o.before, o.final, o.now = t.Entry, *t.current(), t.Now.Millis
		t.svc, t.committed = s, o
		return nil
	}
}

// decided publishes, counts and settles a durable decision.
func (s *Service) decided(o *outcome) {
	s.publishOutcome(o)
	s.tally(o)
	s.settle(o)
}

// look takes, for a decision on resource, its queue and a snapshot of it.
func (s *Service) look(resource string, o *outcome) {
	if s.w.active.Load() == 0 {
		return
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	q := s.w.queues[resource]
	if q == nil {
		return
	}
	q.seq++
	o.q, o.seq = q, q.seq
	for _, p := range q.places {
		o.snapshot = append(o.snapshot, seen{p, p.calls > 0})
	}
}

// serve hands the resource, if no lease on it is live, to the first place
// of its queue that has a call attached, deciding that place's acquisition
// as if it arrived now: its grant is put (synced) with this decision.
// Places with no call attached are passed over. A place whose acquisition
// is refused is answered with the refusal, and the next one is tried
// (unless the store is full).
func (s *Service) serve(t *Txn, rules lease.Rules, o *outcome) {
	if len(o.snapshot) == 0 {
		return
	}
	if e := t.current(); e.Fence != 0 && t.Now.Millis < e.ExpiresAt {
		return
	}
	for _, sp := range o.snapshot {
		if !sp.present {
			o.skipped = append(o.skipped, sp.p)
			continue
		}
		var r wire.Reply
		if sp.p == o.removed {
			continue
		}
		if err := s.acquire(t, rules, sp.p.req, sp.p.value, sp.p.hash, sp.p.caller, &r); err != nil {
			o.refused = append(o.refused, refused{sp.p, err})
			var rf *wire.Refusal
			if errors.As(err, &rf) && rf.Reason == wire.RefusedTooManyLeases {
				return
			}
			continue
		}
		if r.OK {
			o.served, o.answer = sp.p, r
		}
		return
	}
}

// settle applies a durable decision to the waiting calls of its resource.
func (s *Service) settle(o *outcome) {
	q := o.q
	if q == nil {
		return
	}
	var orphan *place
	var stopWatch func()
	s.w.mu.Lock()
	for _, p := range o.skipped {
		if !p.gone && p.calls == 0 {
			s.forget(p)
			s.queueEvent(wire.EventLeft, p)
		}
	}
	for _, r := range o.refused {
		if !r.p.gone {
			s.answer(r.p, wire.Reply{}, refusal(r.err))
			s.queueEvent(wire.EventLeft, r.p)
		}
	}
	if p := o.removed; p != nil && !p.gone {
		if p.calls == 0 {
			s.forget(p)
		} else {
			s.answer(p, wire.Reply{Reason: wire.ReasonRevoked}, nil)
		}
		s.queueEvent(wire.EventLeft, p)
	}
	if p := o.served; p != nil {
		if p.gone || p.calls == 0 {
			// Its client went away while the grant was being made
			// durable: nobody will use the lease, so it is released.
			orphan = p
			if !p.gone {
				s.forget(p)
			}
		} else {
			s.answer(p, o.answer, nil)
		}
	}
	if o.seq > q.settled {
		q.settled = o.seq
		live := o.final.Fence != 0 && o.now < o.final.ExpiresAt
		status := statusOf(o.final, o.now)
		for i := 0; i < len(q.observers); {
			if ob := q.observers[i]; ob.changed(status) {
				ob.reply, ob.gone = status, true
				close(ob.done)
				q.observers = slices.Delete(q.observers, i, i+1)
				continue
			}
			i++
		}
		switch {
		case !live || q.empty():
			if q.expiry != nil {
				q.expiry.Stop()
				q.expiry = nil
			}
		case q.expiry == nil || q.expiryAt != o.final.ExpiresAt:
			if q.expiry != nil {
				q.expiry.Stop()
			}
			res := q.resource
			q.expiry, q.expiryAt = s.after(clock.FromMillis(o.final.ExpiresAt-o.now), func() { s.kick(res) }), o.final.ExpiresAt
		}
	}
	stopWatch = s.dropIfEmpty(q)
	s.w.mu.Unlock()
	if stopWatch != nil {
		stopWatch()
	}
	if orphan != nil {
		go s.releaseOrphan(orphan, o.answer.Grant.Fence)
	}
}

// statusOf is an inspection's answer for e at now.
func statusOf(e Entry, now float64) wire.Reply {
	if e.Fence != 0 && now < e.ExpiresAt {
		r := wire.HeldReply(e.HolderID, e.Fence, e.ExpiresAt-now)
		r.Value = e.Value
		return r
	}
	return wire.FreeReply(e.last())
}

// changed reports whether an inspection answered r differs from what ob
// waits to see change.
func (ob *observer) changed(r wire.Reply) bool {
	return r.Current() != ob.after || (ob.hasValue && r.Value != ob.value)
}

// answer completes p (with s.w.mu held): its calls return reply or err.
func (s *Service) answer(p *place, reply wire.Reply, err error) {
	p.reply, p.err = reply, err
	s.remove(p)
	close(p.done)
}

// forget removes p, which has no call attached (with s.w.mu held).
func (s *Service) forget(p *place) {
	s.w.add(p.caller.Name, -1) // the place counted while kept without a call
	s.remove(p)
	close(p.done)
}

func (s *Service) remove(p *place) {
	p.gone = true
	if p.keep != nil {
		p.keep.Stop()
		p.keep = nil
	}
	if i := slices.Index(p.q.places, p); i >= 0 {
		p.q.places = slices.Delete(p.q.places, i, i+1)
	}
}

// dropIfEmpty deletes q if nothing waits on it any more (with s.w.mu held)
// and returns the function that ends its watch, to call without the lock.
func (s *Service) dropIfEmpty(q *queue) func() {
	if !q.empty() || s.w.queues[q.resource] != q {
		return nil
	}
	delete(s.w.queues, q.resource)
	s.w.active.Add(-1)
	if q.expiry != nil {
		q.expiry.Stop()
		q.expiry = nil
	}
	return q.stopWatch
}

// queueOf returns resource's queue, making it if needed (with s.w.mu
// held).
func (s *Service) queueOf(resource string) *queue {
	q := s.w.queues[resource]
	if q == nil {
		q = &queue{resource: resource}
		s.w.queues[resource] = q
		s.w.active.Add(1)
		// Watch must not block: it is called with the lock held, before
		// the decision that follows a new waiter is made.
		q.stopWatch = s.store.Watch(resource, func() { s.kick(resource) })
	}
	return q
}

// kick decides again on resource in the background (its lease expired, or
// another process changed it): a free resource is handed to its first
// waiter and observers see the change. Kicks that come while one runs are
// folded into one more run.
func (s *Service) kick(resource string) {
	s.w.mu.Lock()
	q := s.w.queues[resource]
	if q == nil || s.w.stopped {
		s.w.mu.Unlock()
		return
	}
	if q.kicking {
		q.again = true
		s.w.mu.Unlock()
		return
	}
	q.kicking = true
	s.w.mu.Unlock()
	go func() {
		for {
			_, err := s.update(context.Background(), resource, func(t *Txn, rules lease.Rules, o *outcome) error {
				s.serve(t, rules, o)
				return nil
			})
			s.w.mu.Lock()
			if err != nil && !q.empty() && !s.w.stopped {
				// The store could not decide: try again a little later.
				s.after(kickRetry, func() { s.kick(resource) })
			}
			if !q.again || err != nil {
				q.kicking = false
				s.w.mu.Unlock()
				return
			}
			q.again = false
			s.w.mu.Unlock()
		}
	}()
}

// kickRetry is how long a kick that failed waits before trying again.
const kickRetry = 100 * time.Millisecond

// releaseOrphan ends the lease with fence f granted to p after p's calls
// had gone, and hands the resource on.
func (s *Service) releaseOrphan(p *place, f uint64) {
	_, _ = s.update(context.Background(), p.req.Resource, func(t *Txn, rules lease.Rules, o *outcome) error {
		e := t.current()
		if e.Fence == f && e.HolderID == p.req.HolderID && hashEqual(e.SecretHash, p.hash) && t.Now.Millis < e.ExpiresAt {
			t.Put(e.cleared(t.keepLast()), false)
		}
		s.serve(t, rules, o)
		return nil
	})
}

// acquireWaiting answers an acquisition that may wait.
func (s *Service) acquireWaiting(ctx context.Context, m wire.Message, hash [32]byte) (wire.Reply, error) {
	res := m.Request.Resource
	decide := func(t *Txn, rules lease.Rules, o *outcome) error {
		s.serve(t, rules, o)
		return s.acquire(t, rules, m.Request, m.Value, hash, m.Caller, &o.reply)
	}
	o, err := s.update(ctx, res, decide)
	if err != nil {
		return wire.Reply{}, refusal(err)
	}
	if o.reply.OK || o.reply.HeldBy == "" {
		return o.reply, nil
	}
	// The wait's timer first: once the call counts as waiting (join), its
	// end is armed (a manual clock advanced by someone who saw it waiting
	// ends it).
	end := make(chan struct{})
	timer := s.after(m.Wait, func() { close(end) })
	defer timer.Stop()
	p, err := s.join(m.Request, m.Value, hash, m.Caller)
	if err != nil {
		return o.reply, err
	}
	defer s.leave(p)
	// Decide once more now that the place is in the queue: a release
	// made between the decision above and joining found nobody waiting.
	if _, err := s.update(ctx, res, func(t *Txn, rules lease.Rules, o *outcome) error {
		s.serve(t, rules, o)
		return nil
	}); err != nil {
		return wire.Reply{}, refusal(err)
	}
	select {
	case <-p.done:
		return p.reply, p.err
	case <-ctx.Done():
		return wire.Reply{}, refusal(ctx.Err())
	case <-end:
	case <-s.w.stop:
	}
	// The wait is over: answer as a call that does not wait would, with
	// the place still in the queue (it is served first if its turn came).
	o, err = s.update(ctx, res, decide)
	if err != nil {
		return wire.Reply{}, refusal(err)
	}
	return o.reply, nil
}

// join attaches a call with req to its place in the queue of its resource:
// the place of the same request id if there is one (a retry keeps the
// place), else a new place at the end.
func (s *Service) join(req lease.Request, value string, hash [32]byte, caller wire.Caller) (*place, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.stopped {
		return nil, refusal(errStopped)
	}
	if q := s.w.queues[req.Resource]; q != nil {
		for _, p := range q.places {
			if p.req.RequestID != req.RequestID {
				continue
			}
			switch {
			case p.req.HolderID != req.HolderID:
				return nil, refuse(wire.RefusedRequestIDReused, "this request id is waiting for "+quote(req.Resource)+" for another holder")
			case !hashEqual(p.hash, hash):
				return nil, refuse(wire.RefusedWrongSecret, "this request id is waiting with another secret")
			}
			if p.calls == 0 {
				p.keep.Stop()
				p.keep = nil
			} else {
				s.w.add(p.caller.Name, 1)
			}
			p.calls++
			return p, nil
		}
	}
	if err := s.room(caller); err != nil {
		return nil, err
	}
	q := s.queueOf(req.Resource)
	p := &place{q: q, req: req, value: value, hash: hash, caller: caller, calls: 1, done: make(chan struct{})}
	q.places = append(q.places, p)
	s.w.add(caller.Name, 1)
	s.queueEvent(wire.EventWaiting, p)
	return p, nil
}

func (s *Service) tooManyWaiters() error {
	return refuse(wire.RefusedTooManyWaiters, "the coordinator has its maximum of waiting calls; retry later, or without waiting")
}

// leave detaches a call from p. The last call to leave a place still in
// its queue keeps it for KeepPlace, for a retry.
func (s *Service) leave(p *place) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if p.gone {
		s.w.add(p.caller.Name, -1)
		return
	}
	p.calls--
	if p.calls > 0 {
		s.w.add(p.caller.Name, -1)
		return
	}
	// The call's count now stands for the kept place.
	p.keep = s.after(s.keepPlace, func() {
		var stop func()
		s.w.mu.Lock()
		if !p.gone && p.calls == 0 {
			s.forget(p)
			s.queueEvent(wire.EventLeft, p)
			stop = s.dropIfEmpty(p.q)
		}
		s.w.mu.Unlock()
		if stop != nil {
			stop()
		}
	})
}

// inspect answers an inspection, waiting for the fence to change if asked.
func (s *Service) inspect(ctx context.Context, m wire.Message) (wire.Reply, error) {
	res := m.Request.Resource
	read := func() (wire.Reply, error) {
		o, err := s.update(ctx, res, func(*Txn, lease.Rules, *outcome) error { return nil })
		if err != nil {
			return wire.Reply{}, refusal(err)
		}
		return statusOf(o.final, o.now), nil
	}
	want := &observer{after: m.After, value: m.AfterValue, hasValue: m.HasAfterValue}
	r, err := read()
	if err != nil || !m.HasAfter || m.Wait == 0 || want.changed(r) {
		return r, err
	}
	end := make(chan struct{})
	timer := s.after(m.Wait, func() { close(end) })
	defer timer.Stop()
	ob, err := s.observe(res, want, m.Caller)
	if err != nil {
		return wire.Reply{}, err
	}
	defer s.unobserve(ob)
	// Read once more now that the observer is registered (this also arms
	// the expiry timer): a change made between the first read and
	// registering would be missed otherwise.
	if r, err = read(); err != nil || want.changed(r) {
		return r, err
	}
	select {
	case <-ob.done:
		return ob.reply, nil
	case <-ctx.Done():
		return wire.Reply{}, refusal(ctx.Err())
	case <-end:
	case <-s.w.stop:
	}
	return read()
}

func (s *Service) observe(resource string, want *observer, caller wire.Caller) (*observer, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.stopped {
		return nil, refusal(errStopped)
	}
	if err := s.room(caller); err != nil {
		return nil, err
	}
	q := s.queueOf(resource)
	ob := &observer{q: q, owner: caller.Name, after: want.after, value: want.value, hasValue: want.hasValue, done: make(chan struct{})}
	q.observers = append(q.observers, ob)
	s.w.add(caller.Name, 1)
	return ob, nil
}

func (s *Service) unobserve(ob *observer) {
	var stop func()
	s.w.mu.Lock()
	s.w.add(ob.owner, -1)
	if !ob.gone {
		ob.gone = true
		if i := slices.Index(ob.q.observers, ob); i >= 0 {
			ob.q.observers = slices.Delete(ob.q.observers, i, i+1)
		}
	}
	stop = s.dropIfEmpty(ob.q)
	s.w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// StopWaiting ends every waiting call at once, each answered as if its
// wait had ended (an acquisition with the ordinary answer, an observer
// with the current state), and refuses to let later calls wait (503
// unavailable); calls that do not wait are answered as usual. Run it before
// shutting the server down, so that waiting calls do not hold it up.
func (s *Service) StopWaiting() {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if !s.w.stopped {
		s.w.stopped = true
		close(s.w.stop)
	}
	s.h.stop()
}

// Waiting returns how many calls wait, plus the places kept for a retry:
// what Config.MaxWaiters bounds.
func (s *Service) Waiting() int {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.n
}

// WaitStats describes the waiting calls of a Service.
type WaitStats struct {
	Resources int `json:"resources"` // resources with a queue
	Places    int `json:"places"`    // places of waiting acquisitions
	Kept      int `json:"kept"`      // of which kept for a retry, with no call attached
	Observers int `json:"observers"`
}

// WaitStats counts the waiting calls (a scan of every queue: for
// operators and tests, not for every call); of the named resources only,
// if any are named.
func (s *Service) WaitStats(resources ...string) WaitStats {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	queues := s.w.queues
	if len(resources) > 0 {
		queues = make(map[string]*queue, len(resources))
		for _, r := range resources {
			if q := s.w.queues[r]; q != nil {
				queues[r] = q
			}
		}
	}
	st := WaitStats{Resources: len(queues)}
	for _, q := range queues {
		st.Places += len(q.places)
		st.Observers += len(q.observers)
		for _, p := range q.places {
			if p.calls == 0 {
				st.Kept++
			}
		}
	}
	return st
}
