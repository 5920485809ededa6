// Package bridge is the library's JavaScript API expressed with numbers and
// byte buffers, so that it runs and is tested natively. Its operations are
// one table, Ops, run by Bridge.Do; wasm/lib (GOOS=js) exports each as
// lf_<Name> with //go:wasmexport (exports_js.go, generated from Ops);
// wasm/js/runtime.mjs calls them through instance.exports.
//
// A call goes: JavaScript writes the arguments into In (see package convert),
// calls an operation with object handles and the argument length, and reads
// the results from Out. The returned status is OK, one of the Err codes, in
// which case Out holds the error (see Bridge.status), or ReadSource. Do
// recovers panics, so no input can stop the Go instance.
//
// Go never calls into JavaScript. A call that needs the reading of a
// JavaScript clock source (createClock) makes every check that does not
// depend on the time, then stops with status ReadSource and changes nothing;
// JavaScript reads the source, puts the reading in Reading, and makes the
// same call again, which checks everything again and acts on the reading
// (see Reading). So no Go code, and no Go lock, is on the stack while the
// source runs.
package bridge

import (
	"math"
	"runtime"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/naive"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// Status codes returned by every operation. JavaScript maps each error code to
// the error class of the same name.
const (
	OK                  int32 = 0
	ErrInvalidArgument  int32 = 1 // Out: message, argument
	ErrStaleFence       int32 = 2 // Out: message, rejection (see putRejection)
	ErrClockDomain      int32 = 3 // Out: message, expected domain, actual domain
	ErrClockReading     int32 = 4 // Out: message, domain, problem, value, previous
	ErrRequestCompleted int32 = 5 // Out: message, requestId
	ErrGrantMismatch    int32 = 6 // Out: message, field, want, got
	ErrInternal         int32 = 7 // Out: message; a bug, reported rather than fatal

	// ReadSource is not an error: the call needs a reading of a JavaScript
	// clock source and did nothing. Out: the source's reader id, then the
	// ticket to put in Reading with the reading before calling again.
	ReadSource int32 = 8
)

// Outcome codes written first by coord_acquire and coord_renew.
const (
	Granted = 1 // then the grant
	Denied  = 2 // then heldBy, retryAfterMillis
	Expired = 3 // renewal refused
)

// Bridge holds the objects JavaScript refers to by handle. The zero value is
// not usable; call New.
type Bridge struct {
	// In is the argument buffer JavaScript writes into; Grow replaces it.
	In []byte
	// Out holds the results of the last call.
	Out convert.Writer
	// Reading is where JavaScript puts the reading a call asked for with
	// ReadSource, before it makes the call again.
	Reading Reading

	// ticket numbers the requests for a reading (ReadSource); want is the
	// reader id a clock of the current call asked for, if any.
	ticket uint32
	want   uint32

	call Call     // the numbers of the current call (see Do)
	objs []object // index is the handle; 0 is never used
	free []uint32

	// ids holds the strings JavaScript registered with Intern, by id, for
	// the calls that take strings as numbers (gate_commit_ids).
	ids     []string
	strings convert.Interner

	// last is the request the last successful client_begin_acquire made, and
	// grant the grant of the last acquisition coord_acquire_last granted for
	// it. JavaScript keeps the objects it returned for them and, when a call
	// passes those same objects unchanged, calls coord_acquire_last or
	// client_complete_last with no arguments instead of encoding them again:
	// Go then uses these values, which are the ones the objects hold.
	last  lease.Request
	grant lastGrant
}

// lastGrant is the grant coord_acquire_last made for Bridge.last: its request
// id, resource and holder are last's, so only the rest is kept (a grant
// kept whole would cost the writes of four more pointers per lease, each
// slowed by the garbage collector's write barrier while it marks). fence is
// 0 when there is none.
type lastGrant struct {
	fence  uint64
	ttl    time.Duration
	expiry float64
	domain string
}

// MaxIDs bounds the interned-string table; JavaScript resets it (ResetIDs)
// rather than let it grow past this.
const MaxIDs = 4096

// MaxIDBytes bounds an interned string: 64 UTF-16 units, which JavaScript
// interns at most, are at most 192 bytes of UTF-8.
const MaxIDBytes = 192

// New returns an empty bridge with argument and result buffers of 4 KiB.
func New() *Bridge {
	return &Bridge{
		In:   make([]byte, 4096),
		Out:  convert.Writer{B: make([]byte, 0, 4096)},
		objs: make([]object, 1, 64),
	}
}

// Reading is a reading of a JavaScript clock source, taken by JavaScript
// for the call that asked for it with ReadSource. JavaScript writes it
// straight into the wasm memory (wasm/lib publishes its address), so its
// layout is fixed: Value at offset 0, Reader at 8, Ticket at 12.
type Reading struct {
	Value float64
	// Reader is the source's reader id; 0 means no reading.
	Reader uint32
	// Ticket is the one ReadSource returned: a reading is used only by the
	// call that asked for it, and only once.
	Ticket uint32
}

// sourceReading is the read function of the clock over JavaScript source
// reader (clock_custom). It returns the reading JavaScript supplied for this
// request, at most once; without one it notes the request (guard turns the
// call's status into ReadSource) and returns NaN, which the clock refuses,
// so the call fails before it changes anything.
func (b *Bridge) sourceReading(reader uint32) float64 {
	if r := &b.Reading; r.Reader == reader && reader != 0 && r.Ticket == b.ticket {
		r.Reader = 0
		return r.Value
	}
	b.want = reader
	return math.NaN()
}

// askReading empties Out for a request for a reading of source b.want and
// returns ReadSource.
func (b *Bridge) askReading() int32 {
	b.ticket++
	w := b.out()
	w.F64(float64(b.want))
	w.F64(float64(b.ticket))
	b.want = 0
	return ReadSource
}

// clockObj is a clock and, for a manual clock, its concrete type.
type clockObj struct {
	c      clock.Clock
	manual *clock.Manual // nil unless manual
}

// Grow makes In at least need bytes long, keeping its first used bytes, and
// returns OK.
func (b *Bridge) Grow(used, need int32) int32 {
	if need < 0 || used < 0 || int(used) > len(b.In) {
		return ErrInternal
	}
	if int(need) <= len(b.In) {
		return OK
	}
	n := 2 * len(b.In)
	if n < int(need) {
		n = int(need)
	}
	in := make([]byte, n)
	copy(in, b.In[:used])
	b.In = in
	return OK
}

// Free releases handle h; JavaScript calls it when the object's wrapper is
// garbage collected. Unknown handles are ignored.
func (b *Bridge) Free(h uint32) {
	if h == 0 || int(h) >= len(b.objs) || b.objs[h].o == nil {
		return
	}
	b.objs[h] = object{}
	b.free = append(b.free, h)
}

// ResetIDs forgets every interned string (see the operation intern).
func (b *Bridge) ResetIDs() {
	clear(b.ids)
	b.ids = b.ids[:0]
}

// object is an object JavaScript holds a handle to, and its kind.
type object struct {
	o any
	k convert.Kind
}

func (b *Bridge) add(o any) uint32 {
	obj := object{o, kindOf(o)}
	if n := len(b.free); n > 0 {
		h := b.free[n-1]
		b.free = b.free[:n-1]
		b.objs[h] = obj
		return h
	}
	b.objs = append(b.objs, obj)
	return uint32(len(b.objs) - 1)
}

// lookup returns the object handle h names if it is a live object of kind
// k.
func (b *Bridge) lookup(h uint32, k convert.Kind) (any, error) {
	if int(h) < len(b.objs) && b.objs[h].k == k {
		return b.objs[h].o, nil
	}
	return nil, notLive(k)
}

// notLive is the error of a receiver handle that is not a live object of
// kind k.
func notLive(k convert.Kind) error {
	return &convert.ArgumentError{Arg: "this", Reason: "is not a live " + k.String()}
}

// kindOf returns the kind of an object a handle is made for.
func kindOf(o any) convert.Kind {
	switch o.(type) {
	case *fence.Gate:
		return convert.KindGate
	case *lease.Coordinator:
		return convert.KindCoordinator
	case *lease.Client:
		return convert.KindClient
	case *clockObj:
		return convert.KindClock
	case *naive.Lease:
		return convert.KindNaive
	}
	return 0
}

// errArgsLength is the error of an argument list longer than In, or of a
// negative length.
var errArgsLength error = &convert.ArgumentError{Arg: "arguments", Reason: "length is out of range"}

// out empties Out for the results of the current call.
func (b *Bridge) out() *convert.Writer {
	b.Out.Reset()
	return &b.Out
}

// guard turns a panic into ErrInternal, and the status of a call that
// needs a reading of a JavaScript clock source into ReadSource. A reading
// supplied for the call is used by it or not at all. Deferred by Do.
func (b *Bridge) guard(st *int32) {
	b.Reading.Reader = 0
	if b.want != 0 {
		*st = b.askReading()
	}
	if p := recover(); p != nil {
		b.want = 0
		msg := "unexpected panic"
		switch v := p.(type) {
		case runtime.Error:
			msg = v.Error()
		case error:
			msg = v.Error()
		case string:
			msg = v
		}
		w := b.out()
		w.Str("lease-fence: internal error (please report): " + msg)
		*st = ErrInternal
	}
}

// status writes err to Out and returns its code, or OK for nil.
func (b *Bridge) status(err error) int32 {
	if err == nil {
		return OK
	}
	w := b.out()
	w.Str(err.Error())
	if stale, ok := as[*fence.StaleFenceError](err); ok {
		putRejection(w, stale.Rejection)
		return ErrStaleFence
	}
	if domain, ok := as[*clock.DomainError](err); ok {
		w.Str(domain.Want)
		w.Str(domain.Got)
		return ErrClockDomain
	}
	if reading, ok := as[*clock.ReadingError](err); ok {
		w.Str(reading.Domain)
		w.Str(string(reading.Problem))
		w.F64(reading.Value)
		w.F64(reading.Previous)
		return ErrClockReading
	}
	if done, ok := as[*lease.CompletedError](err); ok {
		w.Str(done.RequestID)
		return ErrRequestCompleted
	}
	if mismatch, ok := as[*lease.MismatchError](err); ok {
		w.Str(mismatch.Field)
		w.Str(mismatch.Want)
		w.Str(mismatch.Got)
		return ErrGrantMismatch
	}
	if invalid, ok := as[interface{ InvalidArgument() bool }](err); ok && invalid.InvalidArgument() {
		w.Str(argName(err))
		return ErrInvalidArgument
	}
	return ErrInternal
}

// argName returns the argument an invalid-argument error names, if its type
// says.
func argName(err error) string {
	if c, ok := as[*convert.ArgumentError](err); ok {
		return c.Arg
	}
	if k, ok := as[*clock.ArgumentError](err); ok {
		return k.Arg
	}
	if f, ok := as[*fence.ArgumentError](err); ok {
		return f.Arg
	}
	if l, ok := as[*lease.ArgumentError](err); ok {
		return l.Arg
	}
	return ""
}

// as is errors.As for the library's errors, which have no As methods: the
// first error in err's tree (Unwrap() error and Unwrap() []error, depth
// first, as errors.As walks it) that is a T. errors.As does this through
// reflection, which would link internal/reflectlite into the wasm; here it
// is a type assertion.
func as[T any](err error) (T, bool) {
	for err != nil {
		if t, ok := err.(T); ok {
			return t, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if t, ok := as[T](e); ok {
					return t, true
				}
			}
			err = nil
		default:
			err = nil
		}
	}
	var zero T
	return zero, false
}

// putRejection writes seq, resource, refusedHolderId, refusedFence,
// admittedHolderId, admittedFence.
func putRejection(w *convert.Writer, r fence.Rejection) {
	w.F64(float64(r.Seq))
	w.Str(r.Resource)
	w.Str(r.RefusedHolderID)
	w.F64(float64(r.RefusedFence))
	w.Str(r.AdmittedHolderID)
	w.F64(float64(r.AdmittedFence))
}

func putInstant(w *convert.Writer, t clock.Instant) {
	w.F64(t.Millis)
	w.Str(t.Domain)
}

const clockWhat = "a clock made by createMonotonicClock, createManualClock or createClock"

// clockArg decodes a clock handle; one that names no live clock is r's
// error.
func (b *Bridge) clockArg(r *convert.Reader, arg string) clock.Clock {
	h := r.Handle(arg, convert.KindClock, clockWhat)
	if r.Err() != nil {
		return nil
	}
	o, err := b.lookup(h, convert.KindClock)
	if err != nil {
		r.Fail(err)
		return nil
	}
	return o.(*clockObj).c
}

// newHandle makes a handle for o, the object a constructor returned with
// err, and writes it as the result; or returns err.
func (b *Bridge) newHandle(o any, err error) error {
	if err != nil {
		return err
	}
	b.out().F64(float64(b.add(o)))
	return nil
}

// newClock is newHandle for a clock.
func (b *Bridge) newClock(c clock.Clock, err error) error {
	if err != nil {
		return err
	}
	m, _ := c.(*clock.Manual)
	return b.newHandle(&clockObj{c: c, manual: m}, nil)
}

// lastHandle reads the final argument, a handle of kind k (described by what
// in errors), ends the argument list, and looks the handle up.
func (b *Bridge) lastHandle(r *convert.Reader, arg string, k convert.Kind, what string) (any, error) {
	h := r.Handle(arg, k, what)
	if err := r.End(); err != nil {
		return nil, err
	}
	return b.lookup(h, k)
}
