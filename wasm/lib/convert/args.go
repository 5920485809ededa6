package convert

import (
	"math"
	"strconv"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// MaxSafeInteger is the largest integer a JavaScript number holds exactly.
const MaxSafeInteger = 1<<53 - 1

// MaxMillis is the longest span, in milliseconds, a time.Duration holds
// (about 106 days short of 292 years); longer TTLs and skews are refused.
const MaxMillis = float64(math.MaxInt64 / int64(time.Millisecond))

// The decoders below keep the first error on r (see Reader): after it they
// decode nothing and return zero values, and End returns it.

// fail records err as r's error unless it already has one.
func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Fail records err, a check the caller made on a decoded value, as r's
// error unless it already has one: End returns the first.
func (r *Reader) Fail(err error) { r.fail(err) }

// Err returns the first error of r's decoders since Reset.
func (r *Reader) Err() error { return r.err }

// next decodes the next value; after an error, the zero Value.
func (r *Reader) next() Value {
	if r.err != nil {
		return Value{}
	}
	v, err := r.Next()
	r.fail(err)
	return v
}

// Str decodes a string.
func (r *Reader) Str(arg string) string {
	return r.str(arg, "")
}

func (r *Reader) str(arg, field string) string {
	// The common case without building a Value (hot in wasm): a string
	// that lies within the buffer. Anything else goes through Next.
	if p := r.p; r.err == nil && p+5 <= len(r.b) && Tag(r.b[p]) == TagString {
		if n := int(le32(r.b[p+1:])); n <= len(r.b)-p-5 {
			b := r.b[p+5 : p+5+n]
			r.p = p + 5 + n
			if r.Strings != nil {
				return r.Strings.String(b)
			}
			return string(b)
		}
	}
	v := r.next()
	if v.Tag != TagString {
		r.refuse(arg, field, "must be a string, got ", v)
	}
	return v.Str
}

// refuse records that the value v of arg.field is refused because of what
// reason says: "must be ..., got " and a description of v.
func (r *Reader) refuse(arg, field, reason string, v Value) {
	if r.err == nil {
		r.err = argErr(path(arg, field), reason+describe(v))
	}
}

// NonEmpty decodes a string that must not be empty.
func (r *Reader) NonEmpty(arg string) string {
	return r.nonEmpty(arg, "")
}

func (r *Reader) nonEmpty(arg, field string) string {
	s := r.str(arg, field)
	if s == "" && r.err == nil {
		r.err = argErr(path(arg, field), "must not be empty")
	}
	return s
}

// Finite decodes a finite number.
func (r *Reader) Finite(arg string) float64 {
	return r.finite(arg, "")
}

func (r *Reader) finite(arg, field string) float64 {
	if p := r.p; r.err == nil && p+9 <= len(r.b) && Tag(r.b[p]) == TagNumber { // the common case, as in str
		if v := math.Float64frombits(le64(r.b[p+1:])); v-v == 0 {
			r.p = p + 9
			return v
		}
	}
	return r.optFinite(arg, field, false, 0)
}

// OptFinite decodes a finite number, or def when the value is undefined.
func (r *Reader) OptFinite(arg string, def float64) float64 {
	return r.optFinite(arg, "", true, def)
}

func (r *Reader) optFinite(arg, field string, optional bool, def float64) float64 {
	v := r.next()
	if optional && v.Tag == TagUndefined {
		return def
	}
	if v.Tag != TagNumber || math.IsNaN(v.Num) || math.IsInf(v.Num, 0) {
		r.refuse(arg, field, "must be a finite number, got ", v)
		return 0
	}
	return v.Num
}

func countOf(arg, field string, v Value) (uint64, error) {
	if v.Tag != TagNumber || v.Num < 0 || v.Num > MaxSafeInteger || v.Num != math.Trunc(v.Num) {
		return 0, argErr(path(arg, field), "must be an integer from 0 to 2^53-1, got "+describe(v))
	}
	return uint64(v.Num), nil
}

// Count decodes a non-negative safe integer (a fence or a floor).
func (r *Reader) Count(arg string) uint64 {
	return r.count(arg, "", false)
}

// OptCount decodes a non-negative safe integer, or 0 when undefined.
func (r *Reader) OptCount(arg string) uint64 {
	return r.count(arg, "", true)
}

func (r *Reader) count(arg, field string, optional bool) uint64 {
	v := r.next()
	if r.err != nil || (optional && v.Tag == TagUndefined) {
		return 0
	}
	n, err := countOf(arg, field, v)
	r.fail(err)
	return n
}

// fenceOf decodes arg.field as a fence: a count of at least 1 (reason says
// what the 0 is refused as).
func (r *Reader) fenceOf(arg, field, reason string) uint64 {
	n := r.count(arg, field, false)
	if n == 0 && r.err == nil {
		r.err = argErr(path(arg, field), reason)
	}
	return n
}

// Span decodes a number of milliseconds as a Duration: finite, at least min
// and at most MaxMillis. Undefined is def when optional.
func (r *Reader) Span(arg string, positive, optional bool) time.Duration {
	return r.span(arg, "", positive, optional)
}

func (r *Reader) span(arg, field string, positive, optional bool) time.Duration {
	v := r.next()
	if r.err != nil || (optional && v.Tag == TagUndefined) {
		return 0
	}
	if v.Tag != TagNumber || !(v.Num >= 0 && v.Num <= MaxMillis) {
		r.refuse(arg, field, "must be a number of milliseconds from 0 to "+
			strconv.FormatFloat(MaxMillis, 'g', -1, 64)+", got ", v)
		return 0
	}
	d := clock.FromMillis(v.Num)
	if positive && d <= 0 {
		r.refuse(arg, field, "must be positive (at least 0.000001 ms), got ", v)
	}
	return d
}

// Object decodes the tag of an object whose fields follow. An optional
// object may be undefined or null; present reports which.
func (r *Reader) Object(arg string, optional bool) (present bool) {
	return r.object(arg, "", optional)
}

func (r *Reader) object(arg, field string, optional bool) (present bool) {
	if r.err == nil && r.p < len(r.b) && Tag(r.b[r.p]) == TagObject { // the common case, as in str
		r.p++
		return true
	}
	v := r.next()
	switch {
	case r.err != nil:
		return false
	case v.Tag == TagObject:
		return true
	case optional && (v.Tag == TagUndefined || v.Tag == TagNull):
		return false
	}
	r.refuse(arg, field, "must be an object, got ", v)
	return false
}

// Function decodes a value that must be a function.
func (r *Reader) Function(arg string) {
	if v := r.next(); v.Tag != TagFunction {
		r.refuse(arg, "", "must be a function, got ", v)
	}
}

// Handle decodes a library object of kind k. what names the constructors
// that make one, for the error message.
func (r *Reader) Handle(arg string, k Kind, what string) uint32 {
	v := r.next()
	if r.err == nil && (v.Tag != TagHandle || v.Kind != k) {
		got := describe(v)
		if v.Tag == TagHandle {
			got = "a " + v.Kind.String()
		}
		r.err = argErr(arg, "must be "+what+", got "+got)
	}
	return v.Handle
}

// Instant decodes { millis, domain }.
func (r *Reader) Instant(arg string) clock.Instant {
	return r.instant(arg, "")
}

func (r *Reader) instant(arg, field string) clock.Instant {
	r.object(arg, field, false)
	ms := r.finite(path(arg, field), "millis")
	return clock.At(r.nonEmpty(path(arg, field), "domain"), ms)
}

// Token decodes { resource, holderId, fence }.
func (r *Reader) Token(arg string) fence.Token {
	r.object(arg, "", false)
	t := fence.Token{Resource: r.nonEmpty(arg, "resource"), HolderID: r.nonEmpty(arg, "holderId")}
	t.Fence = r.fenceOf(arg, "fence", "must be at least 1")
	return t
}

// TokenOf applies Token's checks to fields JavaScript passed separately.
func TokenOf(arg, resource, holder string, fenceNum float64) (fence.Token, error) {
	t := fence.Token{Resource: resource, HolderID: holder}
	var err error
	switch {
	case resource == "":
		err = argErr(path(arg, "resource"), "must not be empty")
	case holder == "":
		err = argErr(path(arg, "holderId"), "must not be empty")
	default:
		if t.Fence, err = countOf(arg, "fence", Value{Tag: TagNumber, Num: fenceNum}); err == nil && t.Fence == 0 {
			err = argErr(path(arg, "fence"), "must be at least 1")
		}
	}
	return t, err
}

// Request decodes { kind, requestId, resource, holderId, sentAt, fence } and
// checks that kind is k.
func (r *Reader) Request(arg string, k lease.Kind) lease.Request {
	r.object(arg, "", false)
	if kind := r.str(arg, "kind"); kind != string(k) && r.err == nil {
		r.err = argErr(arg+".kind", "must be "+strconv.Quote(string(k))+", got "+describe(Value{Tag: TagString, Str: kind}))
	}
	q := lease.Request{Kind: k, RequestID: r.nonEmpty(arg, "requestId"), Resource: r.nonEmpty(arg, "resource"), HolderID: r.nonEmpty(arg, "holderId")}
	q.SentAt = r.instant(arg, "sentAt")
	if k != lease.KindAcquire {
		q.Fence = r.fenceOf(arg, "fence", "must be at least 1 for a renewal")
	} else if q.Fence = r.count(arg, "fence", true); q.Fence != 0 {
		// An acquisition carries no fence; JSON may carry an explicit 0.
		r.fail(argErr(arg+".fence", "must be absent or 0 for an acquisition"))
	}
	if r.err != nil {
		return lease.Request{}
	}
	return q
}

// Grant decodes { requestId, resource, holderId, fence, ttlMillis,
// coordinatorExpiresAt }.
func (r *Reader) Grant(arg string) lease.Grant {
	return r.GrantFor(arg, nil)
}

// GrantFor decodes a grant passed beside req, the request decoded before it:
// its requestId, resource, holderId and coordinatorExpiresAt.domain may be
// TagSame, standing for req's requestId, resource, holderId and
// sentAt.domain. With req nil, TagSame is refused as malformed.
func (r *Reader) GrantFor(arg string, req *lease.Request) lease.Grant {
	r.object(arg, "", false)
	var q lease.Request // with req nil, TagSame is refused
	if req != nil {
		q = *req
	}
	same := req != nil
	g := lease.Grant{RequestID: r.sameOrNonEmpty(arg, "requestId", same, q.RequestID),
		Resource: r.sameOrNonEmpty(arg, "resource", same, q.Resource), HolderID: r.sameOrNonEmpty(arg, "holderId", same, q.HolderID)}
	g.Fence = r.fenceOf(arg, "fence", "must be at least 1")
	g.TTL = r.span(arg, "ttlMillis", true, false)
	const at = "coordinatorExpiresAt"
	r.object(arg, at, false)
	ms := r.finite(path(arg, at), "millis")
	g.CoordinatorExpiresAt = clock.At(r.sameOrNonEmpty(path(arg, at), "domain", same, q.SentAt.Domain), ms)
	if r.err != nil {
		return lease.Grant{}
	}
	return g
}

// sameOrNonEmpty decodes a non-empty string, or, when same is true,
// TagSame standing for value.
func (r *Reader) sameOrNonEmpty(arg, field string, same bool, value string) string {
	if same && r.err == nil && r.p < len(r.b) && Tag(r.b[r.p]) == TagSame {
		r.p++
		return value
	}
	return r.nonEmpty(arg, field)
}

// End returns r's first error, or, when there is none, checks that every
// byte was consumed: a longer buffer means the two sides disagree on the
// schema.
func (r *Reader) End() error {
	if r.err == nil && r.p != len(r.b) {
		return errMalformed
	}
	return r.err
}

// PutRequest encodes q for JavaScript: kind, requestId, resource, holderId,
// sentAt.millis, sentAt.domain, fence.
func (w *Writer) PutRequest(q lease.Request) {
	w.Str(string(q.Kind))
	w.Str(q.RequestID)
	w.Str(q.Resource)
	w.Str(q.HolderID)
	w.F64(q.SentAt.Millis)
	w.Str(q.SentAt.Domain)
	w.F64(float64(q.Fence))
}

// PutArgRequest encodes q as the JavaScript wrapper would pass it.
func (w *ArgWriter) PutArgRequest(q lease.Request) *ArgWriter {
	w.Object().String(string(q.Kind)).String(q.RequestID).String(q.Resource).String(q.HolderID)
	w.Object().Number(q.SentAt.Millis).String(q.SentAt.Domain)
	if q.Kind == lease.KindAcquire && q.Fence == 0 {
		return w.Tag(TagUndefined)
	}
	return w.Number(float64(q.Fence))
}

// PutArgGrant encodes g as the JavaScript wrapper would pass it.
func (w *ArgWriter) PutArgGrant(g lease.Grant) *ArgWriter {
	w.Object().String(g.RequestID).String(g.Resource).String(g.HolderID).Number(float64(g.Fence)).Number(clock.Millis(g.TTL))
	return w.Object().Number(g.CoordinatorExpiresAt.Millis).String(g.CoordinatorExpiresAt.Domain)
}

// PutArgToken encodes t as the JavaScript wrapper would pass it.
func (w *ArgWriter) PutArgToken(t fence.Token) *ArgWriter {
	return w.Object().String(t.Resource).String(t.HolderID).Number(float64(t.Fence))
}

// GetRequest decodes what PutRequest wrote (for tests).
func (r *OutReader) GetRequest() lease.Request {
	q := lease.Request{Kind: lease.Kind(r.Str()), RequestID: r.Str(), Resource: r.Str(), HolderID: r.Str()}
	ms := r.F64()
	q.SentAt = clock.At(r.Str(), ms)
	q.Fence = uint64(r.F64())
	return q
}

// path joins an argument and a field name. Error paths call it, and so does
// the decoding of the instants nested in requests and grants, whose paths are
// constants here so that a successful decode builds no strings.
func path(arg, field string) string {
	switch {
	case field == "":
		return arg
	case arg == "request" && field == "sentAt":
		return "request.sentAt"
	case arg == "grant" && field == "coordinatorExpiresAt":
		return "grant.coordinatorExpiresAt"
	}
	return arg + "." + field
}
