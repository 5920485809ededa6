// Package gatetest is the behavioural conformance suite every fence gate of
// lease-fence passes: the in-memory core/fence.Gate, gates/sqlfence on SQLite
// and PostgreSQL, gates/redisfence, and cmd/fence-proxy. A gate is whatever
// admits a write only if its fencing token is not below the highest fence it
// has admitted for the resource, and logs every refusal; the suite checks
// that it does so by the same rules everywhere.
//
// A gate is tested through a small adapter, Gate, that turns the suite's
// writes (append a value to the resource's list of values, kept in the store
// the gate guards) into the gate's own kind of write (a callback, SQL
// statements in the transaction, Redis commands in the script, an HTTP
// request forwarded upstream). Run runs every rule as a subtest:
//
//	func TestConformance(t *testing.T) {
//		gatetest.Run(t, gatetest.Config{
//			New:         func(t testing.TB, o gatetest.Options) (gatetest.Gate, string) { ... },
//			Attach:      func(t testing.TB, addr string) gatetest.Gate { ... },
//			FailedWrite: gatetest.RollsBack,
//		})
//	}
//
// The rules (subtests of Run, named as below):
//
//   - FloorRaisedBeforeWrite: an admitted write raises the floor to its
//     fence, and an older fence arriving while the write runs (Config.Inside)
//     is refused, never lands after it.
//   - EqualFenceAdmitted: the same fence writes again, from the same or
//     another holder; the floor keeps the holder that first reached it.
//   - LowerFenceRefused: a fence below the floor is refused with a
//     *fence.StaleFenceError naming both holders, both fences and a
//     per-resource sequence number, appended to Rejections; its write does
//     not land.
//   - AdmitRaisesWithoutWriting: Admit raises the floor and writes nothing;
//     an older token given to Admit is refused and logged the same way.
//   - FailedWrite: a write that fails after it began follows the gate's
//     declared rule (Config.FailedWrite): RollsBack (a transactional store:
//     nothing of the write and no raise of the floor remains) or KeepsFloor
//     (the floor stays raised, because the store may hold part of the write).
//   - InvalidInput: fence 0, a fence above the gate's ceiling (fence.MaxFence,
//     or Config.MaxFence for a gate that declares a lower one), an empty or
//     oversized resource or holder, and a missing write are refused with an
//     argument error (an error with an InvalidArgument() bool method that
//     reports true), before anything changes; the ceiling itself is
//     admitted.
//   - CancelledContext: a Commit whose context is already done returns an
//     error matching the context's error, and nothing changes.
//   - RejectionLog: refusals beyond Options.MaxRejections: a capped gate
//     (Config.Capped) keeps the newest, with their sequence numbers; an
//     uncapped one keeps all.
//   - RejectionPages (Config.Paged): the log read a page at a time
//     (Pager.RejectionsAfter) is the log read whole, each page at most its
//     limit, starting after the sequence number asked; a limit of 0 is bad
//     input.
//   - RaiseWaitsForEqualWrites (Config.Inside): once fence f is admitted,
//     no write with a lower fence runs or is admitted. Writes with the
//     floor's fence are in flight (8 at once with Config.Shared: they must
//     all be admitted together; else 1); a higher fence that arrives then
//     is not admitted until every one of them has finished, and a write
//     with the old fence that arrives after the higher one does not start
//     (it is refused once the higher one is admitted). The suite gives a
//     broken gate ShowTime to admit what it must not; a correct gate
//     passes however slow it is.
//   - ConcurrentWriters: goroutines (through several handles when Attach is
//     set) commit random fences to one resource; the values land in
//     non-decreasing fence order, every landed write is there once, no
//     refused write is, and every refusal is logged with sequence 1..n.
//   - TwoProcesses (Attach set): the same with two more OS processes
//     writing at once.
//   - KilledWriter (Attach set): a writer process killed with SIGKILL
//     mid-run leaves either all or nothing of its last write, and the gate
//     keeps working.
//   - Restart (Config.Restart set): floor, log and values survive a restart
//     of the store, and a stale fence is still refused.
//
// Writer processes are the test binary itself, started again with -test.run
// narrowed to the test that called Run and an environment variable naming
// the job: in that process Run attaches to the store (Config.Attach with the
// address New returned), writes, reports on standard output, and returns
// without running the rules. So Config.New is called only in the parent
// process; a test whose TestMain starts a server can skip that in a worker
// by checking Worker.
//
// Failures runs the same rules (the in-process ones) against a gate with a
// recording testing.TB and returns what each rule reported: a test that
// breaks a gate on purpose uses it to show that the suite catches the break.
package gatetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
)

// Gate is the suite's handle on a gate under test, an adapter over the
// gate's own API. It must be safe for concurrent use.
type Gate interface {
	// Commit makes w through the gate with tok: the gate checks tok and, if
	// it admits it, its write appends w.Value to the list of values of
	// tok.Resource in the guarded store. Commit returns what the gate
	// returns (a *fence.StaleFenceError for a refusal, wrapped or not).
	Commit(ctx context.Context, tok fence.Token, w Write) error
	// Admit raises the floor of tok.Resource without writing.
	Admit(ctx context.Context, tok fence.Token) error
	// Floor returns the floor of resource, 0 before anything was admitted.
	Floor(ctx context.Context, resource string) (uint64, error)
	// Rejections returns the refusals the gate logged for resource, oldest
	// first.
	Rejections(ctx context.Context, resource string) ([]fence.Rejection, error)
	// Values returns the values appended to resource's list, in the order
	// their writes landed in the store, read from the store directly.
	Values(ctx context.Context, resource string) ([]string, error)
}

// Pager is a Gate whose rejection log can be read a page at a time
// (Config.Paged).
type Pager interface {
	// RejectionsAfter returns the refusals kept for resource whose Seq is
	// above after, oldest first, at most limit of them.
	RejectionsAfter(ctx context.Context, resource string, after uint64, limit int) ([]fence.Rejection, error)
}

// Write is one write the suite makes through a Gate.
type Write struct {
	// Value is appended to the resource's list of values.
	Value string
	// Fail makes the write fail after it appended Value: the gate sees its
	// write fail part of the way through (a callback that returns an error
	// after its statement ran, a command that fails after the append, an
	// upstream that answers an error after storing the value).
	Fail bool
	// Nil asks the adapter to give the gate no write at all (a nil
	// callback, no commands): the gate must refuse it as invalid input.
	Nil bool
	// Inside, when not nil, must be called by the adapter while the write
	// is in progress: after the gate admitted the token and before the
	// write's outcome is decided (inside the callback or the transaction,
	// while the upstream holds the request). Only with Config.Inside.
	Inside func()
}

// FailedWrite is what a gate does with its floor when an admitted write
// fails part of the way through.
type FailedWrite int

const (
	// KeepsFloor: the floor stays raised to the failed write's fence,
	// because the store may hold part of the write (the in-memory gate,
	// Redis, an HTTP upstream).
	KeepsFloor FailedWrite = iota + 1
	// RollsBack: the store undoes the whole write and the raise of the
	// floor with it (a SQL transaction).
	RollsBack
)

// Options are what the suite asks of a fresh gate.
type Options struct {
	// MaxRejections is how many refusals a capped gate should keep (0: the
	// gate's default). An uncapped gate ignores it.
	MaxRejections int
}

// Config describes a gate to the suite.
type Config struct {
	// New returns a handle on a fresh gate over a fresh, empty store, and an
	// address that Attach, in another process, turns into a handle on the
	// same store ("" if the gate lives in this process only). It should
	// register its cleanup with t.Cleanup.
	New func(t testing.TB, opts Options) (Gate, string)
	// Attach returns another handle on the store at addr, as another
	// process (or another client in this one) would open it. Nil for a gate
	// that lives in one process's memory: the multi-process rules are not
	// run for it.
	Attach func(t testing.TB, addr string) Gate
	// FailedWrite is the gate's declared rule for a write that fails.
	FailedWrite FailedWrite
	// Capped: the gate keeps only the newest Options.MaxRejections refusals.
	Capped bool
	// Paged: the Gate is a Pager, and RejectionPages checks its pages.
	Paged bool
	// Inside: the adapter calls Write.Inside while the write runs (a gate
	// whose writes run as one indivisible step in the store, such as a
	// Redis script, cannot).
	Inside bool
	// Restart, if set, restarts the store behind addr (stop, start again on
	// the same data) and returns once it serves again; handles made before
	// must keep working (reconnecting as they need).
	Restart func(t testing.TB, addr string)
	// MaxFence is the highest fence the gate can carry, for a gate whose
	// protocol cannot carry every valid fence (fence-proxy's header: an
	// RFC 8941 integer has at most 15 digits). Zero means fence.MaxFence.
	// Below it, InvalidInput requires every fence from MaxFence+1 up to
	// fence.MaxFence to be refused as invalid input before anything changes
	// (it tries both ends), and MaxFence itself to be admitted. At least
	// MinMaxFence: the other rules use fences up to about a thousand.
	MaxFence uint64
	// Shared: the gate admits writes with the fence of the floor in
	// parallel (shared admission), so RaiseWaitsForEqualWrites runs 8 of
	// them at once; a gate that runs them one at a time runs it with 1.
	Shared bool
	// Unordered: writes waiting for the gate are not served in the order
	// they arrived (SQLite's busy handler retries them in no order;
	// PostgreSQL may wake the waiters for a row lock in any order), so a
	// write with the old fence that arrives after a waiting raise may run
	// before it; RaiseWaitsForEqualWrites then does not require it to be
	// refused. Once the raise is admitted nothing lower runs, still.
	Unordered bool
}

// MinMaxFence is the lowest Config.MaxFence the suite accepts.
const MinMaxFence = 1 << 20

// maxFence is the highest fence c's gate must admit.
func (c Config) maxFence() uint64 {
	if c.MaxFence == 0 {
		return fence.MaxFence
	}
	return c.MaxFence
}

type rule struct {
	name    string
	process bool // needs Attach and OS processes; not run by Failures
	run     func(t testing.TB, c Config)
}

var rules = []rule{
	{"FloorRaisedBeforeWrite", false, floorRaisedBeforeWrite},
	{"EqualFenceAdmitted", false, equalFenceAdmitted},
	{"LowerFenceRefused", false, lowerFenceRefused},
	{"AdmitRaisesWithoutWriting", false, admitRaisesWithoutWriting},
	{"FailedWrite", false, failedWrite},
	{"InvalidInput", false, invalidInput},
	{"CancelledContext", false, cancelledContext},
	{"RejectionLog", false, rejectionLog},
	{"RejectionPages", false, rejectionPages},
	{"RaiseWaitsForEqualWrites", false, raiseWaitsForEqualWrites},
	{"ConcurrentWriters", false, concurrentWriters},
	{"TwoProcesses", true, twoProcesses},
	{"KilledWriter", true, killedWriter},
	{"Restart", false, restart},
}

func (c Config) check(t testing.TB) {
	t.Helper()
	if c.New == nil {
		t.Fatal("gatetest: Config.New is nil")
	}
	if c.FailedWrite != KeepsFloor && c.FailedWrite != RollsBack {
		t.Fatal("gatetest: Config.FailedWrite must be KeepsFloor or RollsBack")
	}
	if c.MaxFence != 0 && (c.MaxFence < MinMaxFence || c.MaxFence > fence.MaxFence) {
		t.Fatalf("gatetest: Config.MaxFence must be 0 or from %d to fence.MaxFence, not %d", MinMaxFence, c.MaxFence)
	}
}

// Run runs every rule that applies to the gate as a subtest of t (the
// others are named in t's log with the reason). In a
// writer process started by the suite it does the job it was started for
// instead, and returns.
func Run(t *testing.T, c Config) {
	t.Helper()
	if job, ok := workerJob(); ok {
		if job.Test == t.Name() {
			runWorker(t, c, job)
		}
		return
	}
	c.check(t)
	for _, r := range rules {
		if why := r.applies(c); why != "" {
			t.Logf("gatetest: rule %s does not apply: %s", r.name, why)
			continue
		}
		t.Run(r.name, func(t *testing.T) { r.run(t, c) })
	}
}

// applies says why r does not apply to c ("" if it does). These are
// properties the gate declares about itself, not missing dependencies.
func (r rule) applies(c Config) string {
	switch {
	case r.process && c.Attach == nil:
		return "the gate lives in one process's memory (Config.Attach is nil): writers in other processes have their own gate"
	case r.name == "Restart" && c.Restart == nil:
		return "Config.Restart is nil: the gate has no store to restart"
	case r.name == "RejectionPages" && !c.Paged:
		return "Config.Paged is false: the gate's log is read whole"
	case r.name == "RaiseWaitsForEqualWrites" && !c.Inside:
		return "Config.Inside is false: the gate's writes are indivisible steps in the store, none is in flight when another arrives"
	}
	return ""
}

// Failures runs the in-process rules against c, each with a testing.TB that
// records what it reports instead of failing t, and returns the reports of
// each rule that failed, by rule name. Cleanups still go to t. A test that
// breaks a gate on purpose asserts that the result is not empty.
func Failures(t *testing.T, c Config) map[string][]string {
	t.Helper()
	c.check(t)
	out := map[string][]string{}
	for _, r := range rules {
		if r.process || r.applies(c) != "" {
			continue
		}
		rec := &recorder{TB: t, name: t.Name() + "/" + r.name}
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.run(rec, c)
		}()
		<-done
		if msgs := rec.reports(); len(msgs) != 0 {
			out[r.name] = msgs
		}
	}
	return out
}

// recorder is a testing.TB that records failures. Fatal and FailNow end the
// rule's goroutine, as they do a test's.
type recorder struct {
	testing.TB
	name string
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, s)
}

func (r *recorder) reports() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

func (r *recorder) Name() string                    { return r.name }
func (r *recorder) Helper()                         {}
func (r *recorder) Log(args ...any)                 {}
func (r *recorder) Logf(format string, args ...any) {}
func (r *recorder) Fail()                           { r.add("Fail") }
func (r *recorder) Failed() bool                    { return len(r.reports()) != 0 }
func (r *recorder) Error(args ...any)               { r.add(fmt.Sprint(args...)) }
func (r *recorder) Errorf(f string, args ...any)    { r.add(fmt.Sprintf(f, args...)) }
func (r *recorder) FailNow()                        { r.add("FailNow"); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)               { r.add(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(f string, args ...any)    { r.add(fmt.Sprintf(f, args...)); runtime.Goexit() }
func (r *recorder) SkipNow()                        { r.add("skipped"); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                { r.add("skipped: " + fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Skipf(f string, args ...any) {
	r.add("skipped: " + fmt.Sprintf(f, args...))
	runtime.Goexit()
}

// ---------------------------------------------------------------- helpers

const res = "deploy-slot"

func tk(holder string, f uint64) fence.Token {
	return fence.Token{Resource: res, HolderID: holder, Fence: f}
}

func value(holder string, f uint64, i int) string {
	return holder + "#" + strconv.FormatUint(f, 10) + "#" + strconv.Itoa(i)
}

// fenceOf reads the fence out of a value made by value.
func fenceOf(v string) (uint64, bool) {
	parts := strings.Split(v, "#")
	if len(parts) != 3 {
		return 0, false
	}
	f, err := strconv.ParseUint(parts[1], 10, 64)
	return f, err == nil
}

type state struct {
	floor      uint64
	rejections []fence.Rejection
	values     []string
}

func snapshot(t testing.TB, g Gate, resource string) state {
	t.Helper()
	ctx := context.Background()
	var s state
	var err error
	if s.floor, err = g.Floor(ctx, resource); err != nil {
		t.Fatalf("Floor(%q): %v", resource, err)
	}
	if s.rejections, err = g.Rejections(ctx, resource); err != nil {
		t.Fatalf("Rejections(%q): %v", resource, err)
	}
	if s.values, err = g.Values(ctx, resource); err != nil {
		t.Fatalf("Values(%q): %v", resource, err)
	}
	return s
}

func sameState(t testing.TB, what string, before, after state) {
	t.Helper()
	if before.floor != after.floor {
		t.Errorf("%s: floor moved from %d to %d", what, before.floor, after.floor)
	}
	if fmt.Sprint(before.rejections) != fmt.Sprint(after.rejections) {
		t.Errorf("%s: rejections changed from %+v to %+v", what, before.rejections, after.rejections)
	}
	if fmt.Sprint(before.values) != fmt.Sprint(after.values) {
		t.Errorf("%s: values changed from %q to %q", what, before.values, after.values)
	}
}

func mustCommit(t testing.TB, g Gate, tok fence.Token, v string) {
	t.Helper()
	if err := g.Commit(context.Background(), tok, Write{Value: v}); err != nil {
		t.Fatalf("Commit(%v, %q) = %v, want it admitted", tok, v, err)
	}
}

// wantStale checks that err is a refusal carrying want.
func wantStale(t testing.TB, what string, err error, want fence.Rejection) {
	t.Helper()
	var se *fence.StaleFenceError
	if !errors.As(err, &se) {
		t.Fatalf("%s: err = %v, want a *fence.StaleFenceError", what, err)
	}
	if se.Rejection != want {
		t.Fatalf("%s: refusal %+v, want %+v", what, se.Rejection, want)
	}
	if msg := (&fence.StaleFenceError{Rejection: want}).Error(); !strings.Contains(err.Error(), msg) {
		t.Errorf("%s: message %q does not contain the gate's %q", what, err.Error(), msg)
	}
}

func wantFloor(t testing.TB, g Gate, resource string, want uint64) {
	t.Helper()
	if got, err := g.Floor(context.Background(), resource); err != nil || got != want {
		t.Fatalf("Floor(%q) = %d, %v; want %d", resource, got, err, want)
	}
}

func wantValues(t testing.TB, g Gate, resource string, want ...string) {
	t.Helper()
	got, err := g.Values(context.Background(), resource)
	if err != nil {
		t.Fatalf("Values(%q): %v", resource, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
		t.Fatalf("Values(%q) = %q, want %q", resource, got, want)
	}
}

func wantRejections(t testing.TB, g Gate, resource string, want ...fence.Rejection) {
	t.Helper()
	got, err := g.Rejections(context.Background(), resource)
	if err != nil {
		t.Fatalf("Rejections(%q): %v", resource, err)
	}
	if len(got) != len(want) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Rejections(%q) = %+v, want %+v", resource, got, want)
	}
}

func isInvalidArgument(err error) bool {
	var ia interface{ InvalidArgument() bool }
	return errors.As(err, &ia) && ia.InvalidArgument()
}

// Worker reports whether this process is a writer process started by the
// suite. A TestMain that starts a server for the tests can skip that in a
// worker, which only attaches to the parent's store.
func Worker() bool {
	_, ok := workerJob()
	return ok
}

func getenv(k string) string { return os.Getenv(k) }
