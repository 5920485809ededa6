//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// The tests of a token's limits (wire.Caller, set by the tokens of a
// server with -auth) over PostgreSQL: every lease record carries its owner
// and lease_fence_owners counts them, in the decisions' own transactions,
// so a token's maxLeases holds across replicas.

// as is m made by the token name with the limit maxLeases (0: none).
func as(m wire.Message, name string, maxLeases int) wire.Message {
	m.Caller = wire.Caller{Name: name, MaxLeases: maxLeases}
	return m
}

// call answers m on replica i (its Service, as its handler would after the
// token's check).
func (g *rig) call(i int, m wire.Message) (wire.Reply, error) {
	return g.r[i].svc.Call(context.Background(), m)
}

// granted calls m on replica i and returns its fence, failing unless it is
// granted.
func (g *rig) granted(i int, m wire.Message) uint64 {
	g.t.Helper()
	reply, err := g.call(i, m)
	if err != nil || !reply.OK || reply.Grant == nil {
		g.t.Fatalf("%s %s by %s (%s) on replica %d: not granted: %+v %v", m.Op, m.Request.Resource, m.Request.HolderID, m.Caller.Name, i, reply, err)
	}
	return reply.Grant.Fence
}

// isCode reports whether err is a refusal that the HTTP layer answers with
// code.
func isCode(err error, code string) bool {
	var rf *wire.Refusal
	return errors.As(err, &rf) && httpapi.ErrorOf(rf).Code == code
}

// owned is what the store counts for owner, checked against the rows.
func (g *rig) owned(owner string) int {
	g.t.Helper()
	n, err := g.r[0].store.Owned(context.Background(), owner)
	if err != nil {
		g.t.Fatal(err)
	}
	var rows int64
	conn := g.conn()
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM lease_fence_leases WHERE fence <> 0 AND owner = $1`, owner).Scan(&rows); err != nil {
		g.t.Fatal(err)
	}
	if int64(n) != rows {
		g.t.Fatalf("the store counts %d records of %q, the rows hold %d", n, owner, rows)
	}
	return n
}

// flood sends n acquisitions of distinct resources by owner (limit max) at
// once, spread over the replicas, and fails unless exactly limit are
// granted and the others refused with too_many_token_leases.
func (g *rig) flood(owner string, limit, n int, prefix string) {
	g.t.Helper()
	got := g.atOnce(n, func(i int) wire.Message {
		h := owner + "-" + strconv.Itoa(i)
		return as(acquireMsg(prefix+h, prefix+strconv.Itoa(i), h), owner, limit)
	})
	if want := map[string]int{"granted": limit, "429 too_many_token_leases": n - limit}; !maps.Equal(got, want) {
		g.t.Fatalf("%d acquisitions of %s's at once against its limit of %d: %v, want %v", n, owner, limit, got, want)
	}
	if n := g.owned(owner); n != limit {
		g.t.Fatalf("%s owns %d, want %d", owner, n, limit)
	}
}

// TestTokenLimitAcrossReplicas: 40 acquisitions of one token (maxLeases 10)
// at once on three replicas get exactly 10 leases; other tokens and calls
// without a token are not affected; a release, an expiry and the sweep
// give places back, and a new grant over another token's expired record
// moves the place from one token to the other.
func TestTokenLimitAcrossReplicas(t *testing.T) {
	g := newRig(t, 3, pgstore.Options{})
	g.flood("a", 10, 40, "f")
	var e service.Entry
	for i := range 40 {
		reply, err := g.r[0].svc.Call(context.Background(), wire.Message{Op: wire.OpInspect, Request: reqOf("", "", "f"+strconv.Itoa(i), "", 0)})
		if err == nil && reply.HolderID != "" {
			e.Resource, e.HolderID, e.Fence = "f"+strconv.Itoa(i), reply.HolderID, reply.Fence
			break
		}
	}
	if e.Fence == 0 {
		t.Fatal("no lease of a's found")
	}
	// The refusal says which limit, and changes nothing.
	_, err := g.call(1, as(acquireMsg("more", "more", "a-more"), "a", 10))
	var rf *wire.Refusal
	if !errors.As(err, &rf) || httpapi.ErrorOf(rf).Status != 429 || !strings.Contains(rf.Message, `"a"`) {
		t.Fatalf("the eleventh: %v", err)
	}
	// Other tokens, limited or not, and calls without a token.
	g.granted(2, as(acquireMsg("b0", "b0", "b-0"), "b", 1))
	g.granted(0, as(acquireMsg("c0", "c0", "c-0"), "c", 0))
	g.granted(1, acquireMsg("n0", "n0", "n-0"))
	if _, err := g.call(0, as(acquireMsg("b1", "b1", "b-1"), "b", 1)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("b's second: %v", err)
	}
	// A renewal and a retry take no place.
	g.granted(2, as(renewMsg("n-"+e.Resource, e.Resource, e.HolderID, e.Fence), "a", 10))
	// A release, on another replica, gives a place back.
	if reply, err := g.call(1, as(releaseMsg("x", e.Resource, e.HolderID, e.Fence), "a", 10)); err != nil || !reply.OK {
		t.Fatalf("release: %+v %v", reply, err)
	}
	if n := g.owned("a"); n != 9 {
		t.Fatalf("after the release a owns %d", n)
	}
	g.granted(0, as(acquireMsg("more", "more", "a-more"), "a", 10))
	if n := g.owned("a"); n != 10 {
		t.Fatalf("a owns %d", n)
	}
	// Every lease expires; the acquisition at the limit sweeps a's
	// expired records and is granted.
	g.step(ttlMs + 1)
	g.granted(1, as(acquireMsg("after", "after", "a-after"), "a", 10))
	if n := g.owned("a"); n != 1 {
		t.Fatalf("after the sweep of a's records a owns %d", n)
	}
	// Only a's were swept: b's expired record is still there, until b
	// acquires it again (the record is replaced: b still owns one) or
	// another token takes the resource (the place moves to that token).
	if n := g.owned("b"); n != 1 {
		t.Fatalf("b owns %d", n)
	}
	g.granted(2, as(acquireMsg("b2", "b0", "b-2"), "b", 1))
	if n := g.owned("b"); n != 1 {
		t.Fatalf("b owns %d after acquiring its own expired resource", n)
	}
	g.step(2*ttlMs + 2)
	g.granted(0, as(acquireMsg("a-b0", "b0", "a-b0"), "a", 10))
	if nb, na := g.owned("b"), g.owned("a"); nb != 0 || na != 2 {
		t.Fatalf("after a's grant over b's expired record: b owns %d, a %d", nb, na)
	}
	// The periodic sweep counts out every expired record.
	g.step(3*ttlMs + 3)
	g.sweepAll(2)
	for _, o := range []string{"a", "b", "c"} {
		if n := g.owned(o); n != 0 {
			t.Fatalf("after the sweep %s owns %d", o, n)
		}
	}
}

// TestTokenLimitSharedAndExclusive: far from its limit, a token's count is
// read under its lock shared; near it, exclusive. 160 acquisitions at once
// on three replicas against a limit of 130 (max_connections is 100) take
// both paths and grant exactly 130.
func TestTokenLimitSharedAndExclusive(t *testing.T) {
	g := newRig(t, 3, pgstore.Options{})
	g.flood("big", 130, 160, "s")
}

// TestTokenLimitChanges: the limit is the call's (the tokens file in force
// when it was authenticated): raised, a token gets more; lowered below
// what it holds, it keeps its leases and gets no new one until it is
// under the new limit.
func TestTokenLimitChanges(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	var fences []uint64
	for i := range 2 {
		fences = append(fences, g.granted(i, as(acquireMsg("q"+strconv.Itoa(i), "r"+strconv.Itoa(i), "a-"+strconv.Itoa(i)), "a", 2)))
	}
	if _, err := g.call(0, as(acquireMsg("q2", "r2", "a-2"), "a", 2)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a third at 2: %v", err)
	}
	fences = append(fences, g.granted(1, as(acquireMsg("q2", "r2", "a-2"), "a", 3)))
	for _, limit := range []int{1, 2, 3} {
		if _, err := g.call(limit%2, as(acquireMsg("q3", "r3", "a-3"), "a", limit)); !isCode(err, wire.CodeTooManyTokenLeases) {
			t.Fatalf("a fourth at %d: %v", limit, err)
		}
	}
	for i := range 2 {
		if reply, err := g.call(i, as(releaseMsg("x"+strconv.Itoa(i), "r"+strconv.Itoa(i), "a-"+strconv.Itoa(i), fences[i]), "a", 1)); err != nil || !reply.OK {
			t.Fatalf("release %d: %+v %v", i, reply, err)
		}
	}
	if _, err := g.call(0, as(acquireMsg("q3", "r3", "a-3"), "a", 1)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("at 1 holding 1: %v", err)
	}
	g.granted(1, as(acquireMsg("q3", "r3", "a-3"), "a", 2))
	if n := g.owned("a"); n != 2 {
		t.Fatalf("a owns %d", n)
	}
}

// TestTokenFloodOnOneReplica: one token floods one replica (eight clients
// acquiring as fast as they can, 40 at a time) while another token
// acquires and releases on another replica; the flood gets exactly its
// limit, the other token every lease it asks for.
func TestTokenFloodOnOneReplica(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{Limits: service.Limits{MaxLeases: 60}})
	const limit = 20
	stop := make(chan struct{})
	var mu sync.Mutex
	granted, limited := 0, 0
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h := "flood-" + strconv.Itoa(c) + "-" + strconv.Itoa(i)
				reply, err := g.call(0, as(acquireMsg(h, h, h), "flood", limit))
				mu.Lock()
				switch {
				case err == nil && reply.OK:
					granted++
				case isCode(err, wire.CodeTooManyTokenLeases):
					limited++
				default:
					t.Errorf("flood: %+v %v", reply, err)
				}
				mu.Unlock()
			}
		}()
	}
	// The flood reaches its limit; then the other token, on the other
	// replica, gets and gives back 30 leases.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := limited
		mu.Unlock()
		if n >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood was not limited within 30 s (%d granted)", granted)
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 30 {
		r := "calm-" + strconv.Itoa(i)
		f := g.granted(1, as(acquireMsg(r, r, r), "calm", 40))
		if i%2 == 0 {
			if reply, err := g.call(1, as(releaseMsg("x"+r, r, r, f), "calm", 40)); err != nil || !reply.OK {
				t.Fatalf("calm's release: %+v %v", reply, err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if granted != limit {
		t.Fatalf("the flood got %d leases, want %d (%d refusals)", granted, limit, limited)
	}
	if nf, nc := g.owned("flood"), g.owned("calm"); nf != limit || nc != 15 {
		t.Fatalf("flood owns %d, calm %d; want %d and 15", nf, nc, limit)
	}
}

// TestTokenLimitWithWaiters: a waiter on one replica whose token is at its
// limit when the resource is released on another replica is answered with
// the refusal, and the resource goes to the next waiter.
func TestTokenLimitWithWaiters(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	f := g.granted(1, as(acquireMsg("h", "doc", "holder"), "h", 0))
	g.granted(0, as(acquireMsg("w-own", "w-own", "w-own"), "w", 1))
	type answer struct {
		reply wire.Reply
		err   error
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	wait := func(m wire.Message, out chan<- answer) {
		m.Wait = 20 * time.Second
		reply, err := g.call(0, m)
		out <- answer{reply, err}
	}
	go wait(as(acquireMsg("w1", "doc", "w-1"), "w", 1), first)
	waitFor(t, func() bool { return g.r[0].svc.Waiting() == 1 })
	go wait(as(acquireMsg("v1", "doc", "v-1"), "v", 1), second)
	waitFor(t, func() bool { return g.r[0].svc.Waiting() == 2 })
	if reply, err := g.call(1, as(releaseMsg("x", "doc", "holder", f), "h", 0)); err != nil || !reply.OK {
		t.Fatalf("release: %+v %v", reply, err)
	}
	a := <-first
	if !isCode(a.err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("the first waiter, at its limit: %+v %v", a.reply, a.err)
	}
	b := <-second
	if b.err != nil || !b.reply.OK || b.reply.Grant.HolderID != "v-1" {
		t.Fatalf("the second waiter: %+v %v", b.reply, b.err)
	}
	if nw, nv := g.owned("w"), g.owned("v"); nw != 1 || nv != 1 {
		t.Fatalf("w owns %d, v %d", nw, nv)
	}
}

// waitFor waits for cond, for at most 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("not within 20 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestUpgradeFromVersion1: a state of version 1 (no owners) is upgraded
// at Open, its leases kept; from then on a statement of version 1 fails
// (the counts have a new name), and tokens are counted.
func TestUpgradeFromVersion1(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	f := g.granted(0, acquireMsg("old", "old", "old-holder"))
	g.r[0].store.Close()
	// What version 1 was: no owner column, no counts by owner, the counts
	// under their first name, releases as JSON.
	downgrade(t, g.dsn, 1, "")
	g.r = []*replica{g.open(pgstore.Options{}, false), g.open(pgstore.Options{}, false)}
	if !strings.Contains(g.r[0].logs.String(), "upgraded from version 1 to 8") {
		t.Fatalf("the upgrade was not logged: %s", g.r[0].logs.String())
	}
	if strings.Contains(g.r[1].logs.String(), "upgraded") {
		t.Fatalf("the second Open upgraded again: %s", g.r[1].logs.String())
	}
	var version int64
	pgtest.QueryRow(t, g.dsn, `SELECT schema_version FROM lease_fence_meta`, &version)
	if version != 8 {
		t.Fatalf("schema version %d", version)
	}
	conn := g.conn()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `SELECT sum(leases) FROM lease_fence_counts`); err == nil {
		t.Fatal("a statement of version 1 still works")
	}
	g.granted(1, renewMsg("renew", "old", "old-holder", f))
	g.granted(0, as(acquireMsg("new", "new", "t-1"), "t", 1))
	if _, err := g.call(1, as(acquireMsg("new2", "new2", "t-2"), "t", 1)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("t's second: %v", err)
	}
	if n := g.owned("t"); n != 1 {
		t.Fatalf("t owns %d", n)
	}
}

// TestTokenWaitersPerReplica: a token's maxWaiters bounds its waiting calls
// on each replica, as -max-waiters bounds each replica's (waiting calls are
// open calls of a process, not state): at its limit on one replica, the
// token is refused there, other tokens still wait there, and the token
// still waits on another replica.
func TestTokenWaitersPerReplica(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	f := g.granted(0, acquireMsg("h", "doc", "holder"))
	waiting := func(i int, id, owner string, maxWaiters int) chan error {
		m := acquireMsg(id, "doc", id)
		m.Caller = wire.Caller{Name: owner, MaxWaiters: maxWaiters}
		m.Wait = 20 * time.Second
		out := make(chan error, 1)
		go func() {
			_, err := g.call(i, m)
			out <- err
		}()
		return out
	}
	var open []chan error
	for i := range 2 {
		open = append(open, waiting(0, "w"+strconv.Itoa(i), "w", 2))
		waitFor(t, func() bool { return g.r[0].svc.Waiting() == i+1 })
	}
	if err := <-waiting(0, "w2", "w", 2); !isCode(err, wire.CodeTooManyTokenWaiters) {
		t.Fatalf("w's third waiter on replica 0: %v", err)
	}
	open = append(open, waiting(0, "v0", "v", 2))
	waitFor(t, func() bool { return g.r[0].svc.Waiting() == 3 })
	open = append(open, waiting(1, "w3", "w", 2))
	waitFor(t, func() bool { return g.r[1].svc.Waiting() == 1 })
	// The release hands the resource to the first waiter; the others are
	// answered when their waits end: end them now.
	if reply, err := g.call(1, releaseMsg("x", "doc", "holder", f)); err != nil || !reply.OK {
		t.Fatalf("release: %+v %v", reply, err)
	}
	g.r[0].svc.StopWaiting()
	g.r[1].svc.StopWaiting()
	for _, c := range open {
		if err := <-c; err != nil {
			t.Fatalf("a waiter: %v", err)
		}
	}
}
