package service

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/wire"
)

func inspectMsg(resource string) wire.Message {
	return wire.Message{Op: wire.OpInspect, Request: requestOf(resource)}
}

func observeMsg(resource string, after uint64, wait time.Duration) wire.Message {
	return wire.Message{Op: wire.OpInspect, Request: requestOf(resource), After: after, HasAfter: true, Wait: wait}
}

// TestInspect: who holds a resource, for how long; its last fence once
// free, also after the sweep; 0 for one never held. An inspection changes
// nothing and writes nothing, and needs no secret.
func TestInspect(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	check := func(resource, want string) {
		t.Helper()
		st, out := r.do("POST", "/v1/inspect", `{"resource":"`+resource+`"}`)
		if got := mustJSON(t, out); st != 200 || got != want {
			t.Fatalf("inspect %s: %d %s, want %s", resource, st, got, want)
		}
	}
	check("never", `{"held":false,"lastFence":0,"ok":true}`)
	f, s := r.grant(wire.OpAcquire, acquireMsg("q1", "slot", "a"))
	r.clk.Advance(250)
	writes := len(r.disk.writes)
	check("slot", `{"fence":1,"held":true,"holderId":"a","ok":true,"remainingMillis":750}`)
	r.released(releaseMsg("rel", "slot", "a", f, s))
	check("slot", `{"held":false,"lastFence":1,"ok":true}`)
	f2, _ := r.grant(wire.OpAcquire, acquireMsg("q2", "slot", "b"))
	r.clk.Advance(1000) // expired, not yet swept
	check("slot", `{"held":false,"lastFence":2,"ok":true}`)
	if _, err := r.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(5000)
	if _, err := r.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("slot", `{"held":false,"lastFence":`+strconv.FormatUint(f2, 10)+`,"ok":true}`)
	if len(r.disk.writes) != writes+4 { // the release, the grant, two sweeps
		t.Fatalf("%d writes, want %d: inspections wrote", len(r.disk.writes), writes+4)
	}
	for _, bad := range []struct{ body, code string }{
		{`{"resource":"slot","secret":"0123456789abcdef"}`, wire.CodeUnknownField},
		{`{"resource":"slot","holderId":"a"}`, wire.CodeUnknownField},
		{`{}`, wire.CodeMissingField},
		{`{"resource":"slot","waitMillis":10}`, wire.CodeInvalidValue},
		{`{"resource":"slot","afterFence":-1}`, wire.CodeInvalidValue},
		{`{"resource":"slot","afterFence":1,"waitMillis":1.5}`, wire.CodeInvalidValue},
		{`{"resource":"slot","afterFence":1,"waitMillis":60001}`, wire.CodeInvalidValue},
		{`{"resource":"slot","afterFence":null}`, wire.CodeWrongType},
	} {
		if st, out := r.do("POST", "/v1/inspect", bad.body); st != 400 || errCodeOf(t, out) != bad.code {
			t.Fatalf("%s: %d %v, want %s", bad.body, st, out, bad.code)
		}
	}
}

// TestObserve: an inspection with afterFence answers as soon as the fence
// differs from it: at once if it already does, at a grant, at a release, at
// an expiry (by the service's own timer), and with the current state when
// its wait ends.
func TestObserve(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	if reply, err := r.svc.Call(ctx, observeMsg("slot", 5, time.Minute)); err != nil || reply.Current() != 0 || *reply.LastFence != 0 {
		t.Fatalf("a fence that already differs: %+v %v", reply, err)
	}
	ob := r.callAsync(ctx, observeMsg("slot", 0, time.Minute))
	eventually(t, "the observer", func() bool { return r.svc.Waiting() == 1 })
	f, s := r.grant(wire.OpAcquire, acquireMsg("q1", "slot", "a"))
	if a := got(t, ob); a.err != nil || a.reply.Current() != f || a.reply.HolderID != "a" || a.reply.RemainingMillis != 1000 {
		t.Fatalf("at the grant: %+v %v", a.reply, a.err)
	}
	ob = r.callAsync(ctx, observeMsg("slot", f, time.Minute))
	eventually(t, "the observer", func() bool { return r.svc.Waiting() == 1 })
	r.grant(wire.OpRenew, renewMsg("q2", "slot", "a", f, s)) // the fence stays
	pending(t, "the observer after a renewal", ob)
	r.released(releaseMsg("rel", "slot", "a", f, s))
	if a := got(t, ob); a.err != nil || a.reply.Current() != 0 || *a.reply.LastFence != f {
		t.Fatalf("at the release: %+v %v", a.reply, a.err)
	}
	f2, _ := r.grant(wire.OpAcquire, acquireMsg("q3", "slot", "b"))
	ob = r.callAsync(ctx, observeMsg("slot", f2, time.Minute))
	eventually(t, "the observer", func() bool { return r.svc.Waiting() == 1 })
	r.clk.Advance(999)
	pending(t, "the observer before the expiry", ob)
	r.clk.Advance(1)
	if a := got(t, ob); a.err != nil || a.reply.Current() != 0 || *a.reply.LastFence != f2 {
		t.Fatalf("at the expiry: %+v %v", a.reply, a.err)
	}
	ob = r.callAsync(ctx, observeMsg("slot", 0, 200*time.Millisecond))
	eventually(t, "the observer", func() bool { return r.svc.Waiting() == 1 })
	r.clk.Advance(200)
	if a := got(t, ob); a.err != nil || a.reply.Current() != 0 {
		t.Fatalf("at the end of the wait: %+v %v", a.reply, a.err)
	}
	// An observer whose client goes away leaves nothing.
	gone, leave := context.WithCancel(ctx)
	ob = r.callAsync(gone, observeMsg("slot", 0, time.Minute))
	eventually(t, "the observer", func() bool { return r.svc.Waiting() == 1 })
	leave()
	got(t, ob)
	r.noWaiters()
}

// TestObserverSeesTheHandover: a lease that expires with a waiter goes
// straight to the waiter; an observer of the old fence sees the new holder.
func TestObserverSeesTheHandover(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	f, _ := r.grant(wire.OpAcquire, acquireMsg("q1", "slot", "a"))
	w := r.join(ctx, waitingAcquire("q2", "slot", "b", time.Minute), 1)
	ob := r.callAsync(ctx, observeMsg("slot", f, time.Minute))
	eventually(t, "the observer", func() bool { return r.svc.Waiting() == 2 })
	r.clk.Advance(1000)
	fb := grantFence(t, got(t, w), "b")
	if a := got(t, ob); a.err != nil || a.reply.Current() != fb || a.reply.HolderID != "b" {
		t.Fatalf("the observer saw %+v %v, want b with fence %d", a.reply, a.err, fb)
	}
	r.noWaiters()
}

// shared is a Store that several Services use, as coordinator processes
// share a database: each Service's view calls the watchers the other views
// registered after every change it makes, as a database's NOTIFY would.
type shared struct {
	*Local
	mu       sync.Mutex
	watchers map[*sharedView]map[string][]func()
}

type sharedView struct {
	s *shared
}

func (v *sharedView) Update(ctx context.Context, resource string, fn func(*Txn) error) error {
	wrote := false
	err := v.s.Local.Update(ctx, resource, func(t *Txn) error {
		err := fn(t)
		wrote = t.write
		return err
	})
	if err == nil && wrote {
		v.s.mu.Lock()
		var notify []func()
		for other, byRes := range v.s.watchers {
			if other != v {
				notify = append(notify, byRes[resource]...)
			}
		}
		v.s.mu.Unlock()
		for _, fn := range notify {
			fn()
		}
	}
	return err
}

func (v *sharedView) Sweep(ctx context.Context) (int, error) { return v.s.Local.Sweep(ctx) }

func (v *sharedView) Watch(resource string, fn func()) func() {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if v.s.watchers[v] == nil {
		v.s.watchers[v] = map[string][]func(){}
	}
	v.s.watchers[v][resource] = append(v.s.watchers[v][resource], fn)
	n := len(v.s.watchers[v][resource]) - 1
	return func() {
		v.s.mu.Lock()
		defer v.s.mu.Unlock()
		v.s.watchers[v][resource][n] = func() {}
	}
}

// TestWatchWakesWaitersOfAnotherProcess: with a store shared by two
// coordinators, a release decided by one hands the resource to a waiter of
// the other (through Store.Watch), and its observers see it.
func TestWatchWakesWaitersOfAnotherProcess(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	sh := &shared{Local: r.store, watchers: map[*sharedView]map[string][]func(){}}
	one, _ := New(Config{TTL: ttl, Store: &sharedView{sh}, AfterFunc: r.clk.AfterFunc})
	two, _ := New(Config{TTL: ttl, Store: &sharedView{sh}, AfterFunc: r.clk.AfterFunc})
	ctx := context.Background()
	reply, err := one.Call(ctx, acquireMsg("q1", "slot", "a"))
	if err != nil || !reply.OK {
		t.Fatal(reply, err)
	}
	f := reply.Grant.Fence
	w := make(chan answer, 1)
	go func() {
		reply, err := two.Call(ctx, waitingAcquire("q2", "slot", "b", time.Minute))
		w <- answer{reply, err}
	}()
	ob := make(chan answer, 1)
	go func() {
		reply, err := two.Call(ctx, observeMsg("slot", f, time.Minute))
		ob <- answer{reply, err}
	}()
	eventually(t, "b and the observer waiting on the second coordinator", func() bool { return two.Waiting() == 2 })
	if reply, err := one.Call(ctx, releaseMsg("rel", "slot", "a", f, secretOf("a"))); err != nil || !reply.OK {
		t.Fatal(reply, err)
	}
	fb := grantFence(t, got(t, w), "b")
	if a := got(t, ob); a.reply.Current() != fb && a.reply.Current() != 0 {
		t.Fatalf("the observer saw %+v", a.reply)
	}
	if fb != f+1 {
		t.Fatalf("b got fence %d", fb)
	}
}

// TestFenceMemoryIsBounded: the store keeps the last fence of at most
// FenceMemory free resources: at the bound a lease that ends leaves none,
// and the sweep forgets the lowest down to nine tenths.
func TestFenceMemoryIsBounded(t *testing.T) {
	r := newRig(t, nil, LocalConfig{Limits: Limits{FenceMemory: 10, ReleaseMemory: 1}})
	for i := range 12 {
		res := "r" + strconv.Itoa(i)
		f, s := r.grant(wire.OpAcquire, acquireMsg("q"+strconv.Itoa(i), res, "a"))
		r.released(releaseMsg("rel"+strconv.Itoa(i), res, "a", f, s))
	}
	if n := r.store.LastFences(); n != 10 {
		t.Fatalf("%d last fences kept, want 10", n)
	}
	r.clk.Advance(1001)
	if _, err := r.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r.store.LastFences(); n != 9 {
		t.Fatalf("%d last fences after the sweep, want 9", n)
	}
	// Forgotten: the lowest (r0), and those past the bound (r10, r11).
	for i, want := range map[int]uint64{0: 0, 1: 2, 9: 10, 10: 0, 11: 0} {
		reply, err := r.svc.Call(context.Background(), inspectMsg("r"+strconv.Itoa(i)))
		if err != nil || *reply.LastFence != want {
			t.Fatalf("r%d: %+v %v, want lastFence %d", i, reply, err, want)
		}
	}
}

// mustJSON writes v back as JSON with sorted keys.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
