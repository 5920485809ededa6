//go:build !js && !wasip1

package pgstore

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
)

// Group commit of the one-round-trip path. Concurrent decisions on
// distinct resources each cost a statement, a transaction and a commit of
// their own: a round trip, a backend's wakeup, an executor's start and a
// wait for the disk each. While groupSlots statements of the path are in
// flight, the decisions that arrive wait in a group, sent as one call of
// lease_fence_decide_group (one statement, one transaction, one commit,
// each decision in a subtransaction of its own) by the group's first
// decision's caller when a statement in flight has been answered; a
// decision that arrives while fewer are in flight is sent at once, alone
// (one client's calls never wait). A group holds at most groupMax
// decisions, of distinct resources, at most one of which adds a lease
// record (every transaction adds at most one: the counts' margin of
// max_connections, which every coordinator keeps, assumes so); one that
// does not fit the last group waits in the next. Each decision of a group
// is answered as it would be alone: one the function refused wrote
// nothing and is decided again on its own (a deadlock between two groups,
// which lock their rows in byte order of resource, and so only over the
// counts' slot two backends share, is one such refusal); a lost answer
// leaves each decision that writes unknown, as for one.

const (
	// groupMax bounds the decisions of a group.
	groupMax = 16
	// groupSlots is how many of the path's statements may be in flight at
	// once before a decision waits in a group.
	groupSlots = 1
)

// combiner is the state of a store's group commit.
type combiner struct {
	mu      sync.Mutex
	busy    int      // the path's statements in flight
	waiting []*group // the groups to send, in order
	slots   int      // 0: groupSlots (the tests set others)
}

// group is decisions sent as one statement.
type group struct {
	calls []*fastCall
	outs  []eachOutcome
	adds  bool          // one of calls adds a lease record
	turn  chan struct{} // closed when it is the group's turn to be sent
	done  chan struct{} // closed once outs are known
}

// groupable reports whether c can be decided with others: it changes no
// owner's count.
func (c *fastCall) groupable() bool { return len(c.owners) == 0 }

// fits reports whether c can join g.
func (g *group) fits(c *fastCall) bool {
	if len(g.calls) >= groupMax || (c.dl > 0 && g.adds) || c.offset != g.calls[0].offset {
		return false
	}
	for _, o := range g.calls {
		if o.resource == c.resource {
			return false
		}
	}
	return true
}

// combine decides c alone at once if fewer than the slots are in flight,
// else with the group it joins.
func (s *Store) combine(ctx context.Context, c *fastCall) (fastOutcome, error) {
	m := &s.comb
	m.mu.Lock()
	if m.busy < cmp.Or(m.slots, envSlots, groupSlots) {
		m.busy++
		m.mu.Unlock()
		defer m.next()
		return s.decideOne(ctx, c)
	}
	var g *group
	if n := len(m.waiting); n > 0 && m.waiting[n-1].fits(c) {
		g = m.waiting[n-1]
	}
	leader := g == nil
	if leader {
		g = &group{turn: make(chan struct{}), done: make(chan struct{})}
		m.waiting = append(m.waiting, g)
	}
	i := len(g.calls)
	g.calls = append(g.calls, c)
	g.adds = g.adds || c.dl > 0
	if len(g.calls) >= cmp.Or(envEager, groupMax) {
		// Full enough to go without waiting for a slot.
		m.waiting = slices.DeleteFunc(m.waiting, func(w *group) bool { return w == g })
		m.busy++
		close(g.turn)
	}
	m.mu.Unlock()
	if leader {
		<-g.turn // next took g off the waiting list: no call joins it now
		s.send(ctx, g)
		close(g.done)
		m.next()
	} else {
		<-g.done
	}
	return g.outs[i].fastOutcome, g.outs[i].err
}

// next ends a statement in flight: the first waiting group takes its slot.
func (m *combiner) next() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.waiting) == 0 {
		m.busy--
		return
	}
	g := m.waiting[0]
	m.waiting = m.waiting[1:]
	close(g.turn)
}

// send decides g's decisions, with its first caller's context (not its
// cancellation: the others wait for the answer).
func (s *Store) send(ctx context.Context, g *group) {
	ctx = context.WithoutCancel(ctx)
	if len(g.calls) == 1 {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		out, err := s.decideOne(ctx, g.calls[0])
		g.outs = []eachOutcome{{out, err}}
		return
	}
	g.outs = s.decideEach(ctx, g.calls)
	for _, o := range g.outs {
		if o.fastOutcome == fastDone {
			s.paths[4].Add(1)
		}
	}
}

var envSlots, _ = strconv.Atoi(os.Getenv("PGSTORE_GROUP_SLOTS")) // TEMP experiment
var envEager, _ = strconv.Atoi(os.Getenv("PGSTORE_GROUP_EAGER")) // TEMP experiment
