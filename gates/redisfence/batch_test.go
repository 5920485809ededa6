//go:build !js

package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/redisfence"
)

// scriptHook counts the fence scripts (EVALSHA) a client sends, and holds
// the next one before it is sent when asked (hold).
type scriptHook struct {
	sent      atomic.Int32
	next      atomic.Pointer[held]
	panicNext atomic.Bool // the next script panics before it is sent
}

type held struct{ entered, release chan struct{} }

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			if h.panicNext.Swap(false) {
				panic("scriptHook: a hook's panic")
			}
			h.sent.Add(1)
			if p := h.next.Swap(nil); p != nil {
				close(p.entered)
				<-p.release
			}
		}
		return next(ctx, cmd)
	}
}

// hold makes the next script wait before it is sent until release is
// closed; entered is closed when it has begun to wait.
func (h *scriptHook) hold() *held {
	p := &held{entered: make(chan struct{}), release: make(chan struct{})}
	h.next.Store(p)
	return p
}

// hooked returns a Store whose client has a scriptHook.
func hooked(t *testing.T, opts redisfence.Options) (*redisfence.Store, *redis.Client, string, *scriptHook) {
	t.Helper()
	s, rdb, ns := newStore(t, opts)
	h := &scriptHook{}
	rdb.AddHook(h)
	return s, rdb, ns, h
}

func rpush(keys []string, k, v string) redisfence.Write {
	return redisfence.Write{Keys: keys, Commands: [][]string{{"RPUSH", k, v}}}
}

// start runs f in a goroutine; its error comes on the channel.
func start(f func() error) chan error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return c
}

// waitJoined waits until the commit whose answer comes on c has joined a
// batch (true), or was answered without joining one (false; its answer is
// put back on c).
func waitJoined(joined chan struct{}, c chan error) bool {
	select {
	case <-joined:
		return true
	case err := <-c:
		c <- err
		return false
	}
}

// batchOf holds the group's next script (first's, sent alone) before it is
// sent, makes the commits while it is held, each after the one before has
// joined the batch that waits for it, then lets it go: the commits go as
// one batch after it. It returns first's error then the commits', and the
// scripts sent from the release on.
func batchOf(t *testing.T, s *redisfence.Store, h *scriptHook, first func() error, commits ...func() error) ([]error, int32) {
	t.Helper()
	p := h.hold()
	joined := make(chan struct{}, len(commits))
	redisfence.OnJoin(s, func() { joined <- struct{}{} })
	defer redisfence.OnJoin(s, nil)
	results := []chan error{start(first)}
	<-p.entered
	// first joined a waiting batch if its group was still busy (the
	// driver that answered the commit before it had not yet found the
	// list empty): not one of the commits'.
	drain(joined)
	for i, f := range commits {
		results = append(results, start(f))
		if !waitJoined(joined, results[i+1]) {
			t.Errorf("commit %d was answered while its group's script was in flight: it did not wait for the next batch", i)
		}
	}
	sent := h.sent.Load()
	close(p.release)
	errs := make([]error, len(results))
	for i, c := range results {
		errs[i] = <-c
	}
	return errs, h.sent.Load() - sent
}

// drain empties c.
func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func values(t *testing.T, rdb *redis.Client, k string) []string {
	t.Helper()
	v, err := rdb.LRange(bg, k, 0, -1).Result()
	must(t, err)
	return v
}

// Commits of one token declaring the same keys, made while one of theirs
// is in flight, go as one script after it, in the order they joined.
func TestBatchOneScript(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"list")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	commit := func(v string) func() error {
		return func() error { return s.Commit(bg, tok, rpush([]string{k}, k, v)) }
	}
	must(t, commit("first")())
	errs, scripts := batchOf(t, s, h, commit("held"), commit("a"), commit("b"), commit("c"))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if scripts != 1 {
		t.Errorf("three commits made while a script was in flight sent %d scripts after it, want 1", scripts)
	}
	if got := values(t, rdb, k); !slices.Equal(got, []string{"first", "held", "a", "b", "c"}) {
		t.Errorf("values %q", got)
	}
}

// A hook that panics as a batch's script is sent: the panic goes on in
// the commit that sent it, the batch's other commit gets an error instead
// of waiting for ever, nothing of theirs is written, and the group takes
// the next commit.
func TestBatchPanicAnswersTheGroup(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"list")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	commit := func(v string) func() error {
		return func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panicked: %v", p)
				}
			}()
			return s.Commit(bg, tok, rpush([]string{k}, k, v))
		}
	}
	arm := func(f func() error) func() error {
		return func() error {
			h.panicNext.Store(true)
			return f()
		}
	}
	errs, _ := batchOf(t, s, h, commit("held"), arm(commit("a")), commit("b"))
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "panicked: scriptHook") ||
		errs[2] == nil || !strings.Contains(errs[2].Error(), "a panic while it ran") {
		t.Fatalf("answers %v", errs)
	}
	must(t, commit("after")())
	if got := values(t, rdb, k); !slices.Equal(got, []string{"held", "after"}) {
		t.Errorf("values %q", got)
	}
}

// A command failing as it runs in the second commit of a batch: the first
// commit landed, the second stops at its command (its index within its own
// write) with the floor raised, the third is sent again alone and lands.
func TestBatchCommandFails(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k, n := redisfence.Key("r", ns+"list"), redisfence.Key("r", ns+"n")
	keys := []string{k, n}
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	commit := func(w redisfence.Write) func() error { return func() error { return s.Commit(bg, tok, w) } }
	must(t, rdb.Set(bg, n, "not a number", 0).Err())
	errs, scripts := batchOf(t, s, h, commit(rpush(keys, k, "held")),
		commit(rpush(keys, k, "d")),
		commit(redisfence.Write{Keys: keys, Commands: [][]string{{"RPUSH", k, "e"}, {"INCR", n}, {"RPUSH", k, "never"}}}),
		commit(rpush(keys, k, "f")))
	var ce *redisfence.CommandError
	if !errors.As(errs[2], &ce) || ce.Index != 1 || ce.Command != "INCR" || ce.Fence != 2 {
		t.Errorf("the failing commit: %v", errs[2])
	}
	if err := errors.Join(errs[0], errs[1], errs[3]); err != nil {
		t.Error(err)
	}
	if scripts != 2 {
		t.Errorf("%d scripts, want 2: the batch, then the commit after the failed one alone", scripts)
	}
	if got := values(t, rdb, k); !slices.Equal(got, []string{"held", "d", "e", "f"}) {
		t.Errorf("values %q", got)
	}
	if f, _ := s.Floor(bg, "r"); f != 2 {
		t.Errorf("floor %d", f)
	}
}

// A command the script refuses in the second commit of a batch: nothing of
// it ran, it is answered with an argument error naming its own command,
// and the others are sent again alone and land.
func TestBatchCommandRefused(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k, n := redisfence.Key("r", ns+"list"), redisfence.Key("r", ns+"n")
	keys := []string{k, n}
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	commit := func(w redisfence.Write) func() error { return func() error { return s.Commit(bg, tok, w) } }
	errs, scripts := batchOf(t, s, h, commit(rpush(keys, k, "held")),
		commit(rpush(keys, k, "g")),
		commit(redisfence.Write{Keys: keys, Commands: [][]string{{"RPUSH", k, "never"}, {"SET", n}}}),
		commit(rpush(keys, k, "i")))
	var ae *fence.ArgumentError
	if !errors.As(errs[2], &ae) || ae.Arg != "write.commands[1]" {
		t.Errorf("the refused commit: %v", errs[2])
	}
	if err := errors.Join(errs[0], errs[1], errs[3]); err != nil {
		t.Error(err)
	}
	if scripts != 3 {
		t.Errorf("%d scripts, want 3: the batch, then the two others alone", scripts)
	}
	if got := values(t, rdb, k); !slices.Equal(got, []string{"held", "g", "i"}) {
		t.Errorf("values %q", got)
	}
}

// A stale token's batch: each commit is refused and logged on its own, in
// order (the batch's refusal is its first commit's; the others are sent
// again alone).
func TestBatchStale(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"list")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	must(t, s.Admit(bg, fence.Token{Resource: "r", HolderID: "new", Fence: 3}))
	commit := func(v string) func() error {
		return func() error { return s.Commit(bg, tok, rpush([]string{k}, k, v)) }
	}
	errs, scripts := batchOf(t, s, h, commit("held"), commit("x"), commit("y"), commit("z"))
	var seqs []uint64
	for _, err := range errs {
		var se *fence.StaleFenceError
		if !errors.As(err, &se) {
			t.Fatalf("err = %v, want a refusal", err)
		}
		seqs = append(seqs, se.Seq)
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3, 4}) {
		t.Errorf("refusals %v, want 1 to 4", seqs)
	}
	rs, err := s.Rejections(bg, "r")
	must(t, err)
	var want []fence.Rejection
	for i := range 4 {
		want = append(want, fence.Rejection{Seq: uint64(i + 1), Resource: "r", RefusedHolderID: "h", RefusedFence: 2, AdmittedHolderID: "new", AdmittedFence: 3})
	}
	if !slices.Equal(rs, want) {
		t.Errorf("log %+v", rs)
	}
	if scripts != 3 {
		t.Errorf("%d scripts, want 3: the batch, then the two after its refusal alone", scripts)
	}
	if got := values(t, rdb, k); len(got) != 0 {
		t.Errorf("values %q", got)
	}
}

// A batch whose reply was lost (the connection cut after the script was
// passed on, or instead): each of its commits is an *OutcomeUnknownError,
// and its writes all landed, or none did.
func TestBatchLostReply(t *testing.T) {
	_, direct, ns := newStore(t, redisfence.Options{})
	for _, forward := range []bool{true, false} {
		p := newCutProxy(t, forward)
		p.mu.Lock()
		p.skip = 1 // the held script goes through; the batch's is cut
		p.mu.Unlock()
		rdb := client(t, p.l.Addr().String(), func(o *redis.Options) { o.MaxRetries = -1 })
		h := &scriptHook{}
		rdb.AddHook(h)
		s, err := redisfence.Open(rdb, redisfence.Options{Prefix: ns})
		must(t, err)
		k := redisfence.Key("r", ns+"list"+fmt.Sprint(forward))
		tok := fence.Token{Resource: "r", HolderID: "h", Fence: 4}
		// The script is loaded, so each commit is one EVALSHA.
		must(t, direct.ScriptLoad(bg, redisfence.Script()).Err())
		commit := func(v string) func() error {
			return func() error { return s.Commit(bg, tok, rpush([]string{k}, k, v)) }
		}
		errs, _ := batchOf(t, s, h, commit("held"), commit("a"), commit("b"), commit("c"))
		if errs[0] != nil {
			t.Fatalf("the held commit: %v", errs[0])
		}
		for i, err := range errs[1:] {
			var ou *redisfence.OutcomeUnknownError
			if !errors.As(err, &ou) {
				t.Errorf("forwarded %v: commit %d: %v, want an *OutcomeUnknownError", forward, i, err)
			}
		}
		want := []string{"held"}
		if forward {
			want = append(want, "a", "b", "c")
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if got := values(t, direct, k); !cut || !slices.Equal(got, want) {
			t.Errorf("forwarded %v: cut %v, values %q, want %q", forward, cut, got, want)
		}
	}
}

// A commit that declares other keys does not join the batch of a write of
// the same token: it is sent at once, and refused if its command touches a
// key it did not declare, whatever the batch declares.
func TestBatchKeys(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	a, b := redisfence.Key("r", ns+"a"), redisfence.Key("r", ns+"b")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 1}
	set := func(keys []string, k, v string) func() error {
		return func() error {
			return s.Commit(bg, tok, redisfence.Write{Keys: keys, Commands: [][]string{{"SET", k, v}}})
		}
	}
	p := h.hold()
	joined := make(chan struct{}, 2)
	redisfence.OnJoin(s, func() { joined <- struct{}{} })
	defer redisfence.OnJoin(s, nil)
	first := start(set([]string{a}, a, "0"))
	<-p.entered
	other := start(set([]string{b}, a, "undeclared"))
	if waitJoined(joined, other) {
		t.Error("a commit declaring other keys joined the batch")
	}
	same := start(set([]string{a}, a, "1"))
	if !waitJoined(joined, same) {
		t.Error("a commit declaring the same keys did not join the batch")
	}
	close(p.release)
	must(t, <-first)
	must(t, <-same)
	var ae *fence.ArgumentError
	if err := <-other; !errors.As(err, &ae) || ae.Arg != "write.commands[0]" {
		t.Errorf("the commit on an undeclared key: %v", err)
	}
	if v, _ := rdb.Get(bg, a).Result(); v != "1" {
		t.Errorf("a = %q", v)
	}
}

// Commit returns once its script ran: reads made after it, in the same
// goroutine, see its write and its floor.
func TestBatchReadsAfterCommit(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"list")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 4}
	must(t, s.Commit(bg, fence.Token{Resource: "r", HolderID: "h", Fence: 3}, rpush([]string{k}, k, "first")))
	commitThenRead := func(v string) func() error {
		return func() error {
			if err := s.Commit(bg, tok, rpush([]string{k}, k, v)); err != nil {
				return err
			}
			f, err := s.Floor(bg, "r")
			got := values(t, rdb, k)
			if err != nil || f != 4 || !slices.Contains(got, v) {
				return fmt.Errorf("read after commit %s returned: floor %d (%v), values %q", v, f, err, got)
			}
			return nil
		}
	}
	errs, _ := batchOf(t, s, h, commitThenRead("held"), commitThenRead("a"), commitThenRead("b"))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// Calls of the store made while commits wait in a batch go at once, not
// behind it: reads, an Admit, and a commit of another token with the same
// keys (which does not join the batch). The batch then runs after them and
// its commits are answered as alone: refused by the raised floor, each
// logged on its own.
func TestBatchOtherCalls(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"list")
	keys := []string{k}
	old := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	must(t, s.Commit(bg, old, rpush(keys, k, "first")))
	p := h.hold()
	joined := make(chan struct{}, 2)
	redisfence.OnJoin(s, func() { joined <- struct{}{} })
	defer redisfence.OnJoin(s, nil)
	first := start(func() error { return s.Commit(bg, old, rpush(keys, k, "held")) })
	<-p.entered
	var waiting []chan error
	for _, v := range []string{"a", "b"} {
		c := start(func() error { return s.Commit(bg, old, rpush(keys, k, v)) })
		if !waitJoined(joined, c) {
			t.Fatal("a commit of the token did not join the batch")
		}
		waiting = append(waiting, c)
	}
	if f, err := s.Floor(bg, "r"); err != nil || f != 2 {
		t.Errorf("Floor while a batch waits: %d, %v", f, err)
	}
	must(t, s.Admit(bg, fence.Token{Resource: "r", HolderID: "x", Fence: 3}))
	other := start(func() error {
		return s.Commit(bg, fence.Token{Resource: "r", HolderID: "y", Fence: 3}, rpush(keys, k, "y3"))
	})
	if waitJoined(joined, other) {
		t.Error("a commit of another token joined the batch")
	}
	close(p.release)
	must(t, <-other)
	var seqs []uint64
	for _, c := range append([]chan error{first}, waiting...) {
		var se *fence.StaleFenceError
		if err := <-c; !errors.As(err, &se) || se.AdmittedFence != 3 {
			t.Fatalf("err = %v, want a refusal by fence 3", err)
		}
		seqs = append(seqs, se.Seq)
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3}) {
		t.Errorf("refusals %v", seqs)
	}
	if got := values(t, rdb, k); !slices.Equal(got, []string{"first", "y3"}) {
		t.Errorf("values %q", got)
	}
}

// Commits of a Store with AtMostOnce are sent one script each, at once:
// they join no batch.
func TestBatchNotWithMarker(t *testing.T) {
	_, rdb, ns, h := hooked(t, redisfence.Options{})
	once, err := redisfence.Open(rdb, redisfence.Options{Prefix: ns, AtMostOnce: true})
	must(t, err)
	k := redisfence.Key("r", ns+"list")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 1}
	p := h.hold()
	joined := make(chan struct{}, 1)
	redisfence.OnJoin(once, func() { joined <- struct{}{} })
	defer redisfence.OnJoin(once, nil)
	first := start(func() error { return once.Commit(bg, tok, rpush([]string{k}, k, "held")) })
	<-p.entered
	next := start(func() error { return once.Commit(bg, tok, rpush([]string{k}, k, "next")) })
	if waitJoined(joined, next) {
		t.Error("a commit with a marker joined a batch")
	}
	close(p.release)
	must(t, <-first)
	must(t, <-next)
	if got := values(t, rdb, k); !slices.Equal(got, []string{"next", "held"}) {
		t.Errorf("values %q", got)
	}
}

// Commits whose context has a deadline, or can be cancelled, join groups
// as those with context.Background() do: a lone one is sent at once, the
// ones made while it is in flight go as one script after it.
func TestBatchCancellableContexts(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"list")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	deadline, cancel := context.WithTimeout(bg, time.Hour)
	defer cancel()
	cancellable, cancel2 := context.WithCancel(bg)
	defer cancel2()
	commit := func(ctx context.Context, v string) func() error {
		return func() error { return s.Commit(ctx, tok, rpush([]string{k}, k, v)) }
	}
	before := h.sent.Load()
	must(t, commit(deadline, "first")())
	if n := h.sent.Load() - before; n != 1 {
		t.Errorf("a lone commit sent %d scripts", n)
	}
	errs, scripts := batchOf(t, s, h, commit(deadline, "held"),
		commit(deadline, "a"), commit(cancellable, "b"), commit(bg, "c"), commit(deadline, "d"))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if scripts != 1 {
		t.Errorf("four commits (deadline, cancel, background) made while a script was in flight sent %d scripts after it, want 1", scripts)
	}
	if got := values(t, rdb, k); !slices.Equal(got, []string{"first", "held", "a", "b", "c", "d"}) {
		t.Errorf("values %q", got)
	}
}

// A commit whose context ends while its batch waits for the script in
// flight leaves the batch: it returns the context's error at once, nothing
// of it is sent, and the others go as one script and land. A batch all of
// whose commits left sends nothing.
func TestBatchLeaveWhileWaiting(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"list")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	commit := func(ctx context.Context, v string) func() error {
		return func() error { return s.Commit(ctx, tok, rpush([]string{k}, k, v)) }
	}
	for _, all := range []bool{false, true} {
		p := h.hold()
		joined := make(chan struct{}, 3)
		redisfence.OnJoin(s, func() { joined <- struct{}{} })
		first := start(commit(bg, "held"))
		<-p.entered
		drain(joined)
		var cancels []context.CancelFunc
		var leaving, staying []chan error
		for i, v := range []string{"a", "b", "c"} {
			ctx, cancel := context.WithCancel(bg)
			cancels = append(cancels, cancel)
			c := start(commit(ctx, v))
			if !waitJoined(joined, c) {
				t.Fatalf("commit %s did not join the batch", v)
			}
			if all || i != 1 {
				leaving = append(leaving, c)
			} else {
				staying = append(staying, c)
			}
		}
		for i, cancel := range cancels {
			if all || i != 1 {
				cancel()
			}
		}
		for _, c := range leaving {
			if err := <-c; !errors.Is(err, context.Canceled) {
				t.Errorf("all %v: a commit cancelled while it waited: %v, want context.Canceled", all, err)
			}
		}
		sent := h.sent.Load()
		close(p.release)
		must(t, <-first)
		for _, c := range staying {
			must(t, <-c)
		}
		// The group is idle once its last script was answered: a commit
		// after it is alone.
		must(t, commit(bg, "after")())
		want := int32(2)
		if all {
			want = 1
		}
		if n := h.sent.Load() - sent; n != want {
			t.Errorf("all %v: %d scripts after the release, want %d", all, n, want)
		}
		redisfence.OnJoin(s, nil)
		for _, cancel := range cancels {
			cancel()
		}
	}
	if got := values(t, rdb, k); !slices.Equal(got, []string{"held", "b", "after", "held", "after"}) {
		t.Errorf("values %q", got)
	}
}

// A commit whose context ends while its batch's script is in flight
// returns at once an *OutcomeUnknownError (the script was sent: it may
// have run), and the script still runs for the others, who get their
// answers. The commit cancelled is the batch's first, whose context's
// values the script is sent with.
func TestBatchCancelInFlight(t *testing.T) {
	s, rdb, ns, h := hooked(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"list")
	tok := fence.Token{Resource: "r", HolderID: "h", Fence: 2}
	commit := func(ctx context.Context, v string) func() error {
		return func() error { return s.Commit(ctx, tok, rpush([]string{k}, k, v)) }
	}
	unknown := func(what string, err error) {
		t.Helper()
		var ou *redisfence.OutcomeUnknownError
		if !errors.As(err, &ou) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want an *OutcomeUnknownError wrapping context.Canceled", what, err)
		}
	}
	// The held script's commit, then the batch's, held in turn.
	p := h.hold()
	joined := make(chan struct{}, 3)
	redisfence.OnJoin(s, func() { joined <- struct{}{} })
	defer redisfence.OnJoin(s, nil)
	first := start(commit(bg, "held"))
	<-p.entered
	drain(joined)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var cs []chan error
	for i, v := range []string{"a", "b", "c"} {
		cx := bg
		if i == 0 {
			cx = ctx
		}
		cs = append(cs, start(commit(cx, v)))
		if !waitJoined(joined, cs[i]) {
			t.Fatalf("commit %s did not join the batch", v)
		}
	}
	q := h.hold()
	close(p.release)
	must(t, <-first)
	<-q.entered
	cancel()
	unknown("the batch's first commit cancelled in flight", <-cs[0])
	close(q.release)
	if err := errors.Join(<-cs[1], <-cs[2]); err != nil {
		t.Errorf("the others: %v", err)
	}
	if got := values(t, rdb, k); !slices.Equal(got, []string{"held", "a", "b", "c"}) {
		t.Errorf("values %q", got)
	}
}
