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

// Str decodes a string.
func (r *Reader) Str(arg string) (string, error) {
	return r.str(arg, "")
}

func (r *Reader) str(arg, field string) (string, error) {
	// The common case without building a Value (hot in wasm): a string
	// that lies within the buffer. Anything else goes through Next.
	if p := r.p; p+5 <= len(r.b) && Tag(r.b[p]) == TagString {
		if n := int(le32(r.b[p+1:])); n <= len(r.b)-p-5 {
			b := r.b[p+5 : p+5+n]
			r.p = p + 5 + n
			if r.Strings != nil {
				return r.Strings.String(b), nil
			}
			return string(b), nil
		}
	}
	v, err := r.Next()
	if err != nil {
		return "", err
	}
	if v.Tag != TagString {
		return "", argErr(path(arg, field), "must be a string, got "+describe(v))
	}
	return v.Str, nil
}

// NonEmpty decodes a string that must not be empty.
func (r *Reader) NonEmpty(arg string) (string, error) {
	return r.nonEmpty(arg, "")
}

func (r *Reader) nonEmpty(arg, field string) (string, error) {
	s, err := r.str(arg, field)
	if err == nil && s == "" {
		err = argErr(path(arg, field), "must not be empty")
	}
	return s, err
}

// Finite decodes a finite number.
func (r *Reader) Finite(arg string) (float64, error) {
	return r.finite(arg, "")
}

func (r *Reader) finite(arg, field string) (float64, error) {
	if p := r.p; p+9 <= len(r.b) && Tag(r.b[p]) == TagNumber { // the common case, as in str
		if v := math.Float64frombits(le64(r.b[p+1:])); v-v == 0 {
			r.p = p + 9
			return v, nil
		}
	}
	v, err := r.Next()
	if err != nil {
		return 0, err
	}
	if v.Tag != TagNumber || math.IsNaN(v.Num) || math.IsInf(v.Num, 0) {
		return 0, argErr(path(arg, field), "must be a finite number, got "+describe(v))
	}
	return v.Num, nil
}

// OptFinite decodes a finite number, or def when the value is undefined.
func (r *Reader) OptFinite(arg string, def float64) (float64, error) {
	return r.optFinite(arg, "", def)
}

func (r *Reader) optFinite(arg, field string, def float64) (float64, error) {
	v, err := r.Next()
	if err != nil {
		return 0, err
	}
	if v.Tag == TagUndefined {
		return def, nil
	}
	if v.Tag != TagNumber || math.IsNaN(v.Num) || math.IsInf(v.Num, 0) {
		return 0, argErr(path(arg, field), "must be a finite number, got "+describe(v))
	}
	return v.Num, nil
}

func countOf(arg, field string, v Value) (uint64, error) {
	if v.Tag != TagNumber || v.Num < 0 || v.Num > MaxSafeInteger || v.Num != math.Trunc(v.Num) {
		return 0, argErr(path(arg, field), "must be an integer from 0 to 2^53-1, got "+describe(v))
	}
	return uint64(v.Num), nil
}

// Count decodes a non-negative safe integer (a fence or a floor).
func (r *Reader) Count(arg string) (uint64, error) {
	return r.count(arg, "")
}

func (r *Reader) count(arg, field string) (uint64, error) {
	v, err := r.Next()
	if err != nil {
		return 0, err
	}
	return countOf(arg, field, v)
}

// OptCount decodes a non-negative safe integer, or 0 when undefined.
func (r *Reader) OptCount(arg string) (uint64, error) {
	return r.optCount(arg, "")
}

func (r *Reader) optCount(arg, field string) (uint64, error) {
	v, err := r.Next()
	if err != nil || v.Tag == TagUndefined {
		return 0, err
	}
	return countOf(arg, field, v)
}

// Span decodes a number of milliseconds as a Duration: finite, at least min
// and at most MaxMillis. Undefined is def when optional.
func (r *Reader) Span(arg string, positive, optional bool) (time.Duration, error) {
	return r.span(arg, "", positive, optional)
}

func (r *Reader) span(arg, field string, positive, optional bool) (time.Duration, error) {
	v, err := r.Next()
	if err != nil {
		return 0, err
	}
	if optional && v.Tag == TagUndefined {
		return 0, nil
	}
	if v.Tag != TagNumber || !(v.Num >= 0 && v.Num <= MaxMillis) {
		return 0, argErr(path(arg, field), "must be a number of milliseconds from 0 to "+
			strconv.FormatFloat(MaxMillis, 'g', -1, 64)+", got "+describe(v))
	}
	d := clock.FromMillis(v.Num)
	if positive && d <= 0 {
		return 0, argErr(path(arg, field), "must be positive (at least 0.000001 ms), got "+describe(v))
	}
	return d, nil
}

// Object decodes the tag of an object whose fields follow. An optional
// object may be undefined or null; present reports which.
func (r *Reader) Object(arg string, optional bool) (present bool, err error) {
	return r.object(arg, "", optional)
}

func (r *Reader) object(arg, field string, optional bool) (present bool, err error) {
	if r.p < len(r.b) && Tag(r.b[r.p]) == TagObject { // the common case, as in str
		r.p++
		return true, nil
	}
	v, err := r.Next()
	if err != nil {
		return false, err
	}
	switch {
	case v.Tag == TagObject:
		return true, nil
	case optional && (v.Tag == TagUndefined || v.Tag == TagNull):
		return false, nil
	}
	return false, argErr(path(arg, field), "must be an object, got "+describe(v))
}

// Function decodes a value that must be a function.
func (r *Reader) Function(arg string) error {
	v, err := r.Next()
	if err == nil && v.Tag != TagFunction {
		err = argErr(arg, "must be a function, got "+describe(v))
	}
	return err
}

// Handle decodes a library object of kind k. what names the constructors
// that make one, for the error message.
func (r *Reader) Handle(arg string, k Kind, what string) (uint32, error) {
	v, err := r.Next()
	if err != nil {
		return 0, err
	}
	if v.Tag != TagHandle || v.Kind != k {
		got := describe(v)
		if v.Tag == TagHandle {
			got = "a " + v.Kind.String()
		}
		return 0, argErr(arg, "must be "+what+", got "+got)
	}
	return v.Handle, nil
}

// Instant decodes { millis, domain }.
func (r *Reader) Instant(arg string) (clock.Instant, error) {
	return r.instant(arg, "")
}

func (r *Reader) instant(arg, field string) (clock.Instant, error) {
	if _, err := r.object(arg, field, false); err != nil {
		return clock.Instant{}, err
	}
	ms, err := r.finite(path(arg, field), "millis")
	if err != nil {
		return clock.Instant{}, err
	}
	d, err := r.nonEmpty(path(arg, field), "domain")
	if err != nil {
		return clock.Instant{}, err
	}
	return clock.At(d, ms), nil
}

// Token decodes { resource, holderId, fence }.
func (r *Reader) Token(arg string) (fence.Token, error) {
	var t fence.Token
	if _, err := r.Object(arg, false); err != nil {
		return t, err
	}
	var err error
	if t.Resource, err = r.nonEmpty(arg, "resource"); err != nil {
		return t, err
	}
	if t.HolderID, err = r.nonEmpty(arg, "holderId"); err != nil {
		return t, err
	}
	if t.Fence, err = r.count(arg, "fence"); err == nil && t.Fence == 0 {
		err = argErr(arg+".fence", "must be at least 1")
	}
	return t, err
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
func (r *Reader) Request(arg string, k lease.Kind) (lease.Request, error) {
	var q lease.Request
	if _, err := r.Object(arg, false); err != nil {
		return q, err
	}
	kind, err := r.str(arg, "kind")
	if err != nil {
		return q, err
	}
	if kind != string(k) {
		return q, argErr(arg+".kind", "must be "+strconv.Quote(string(k))+", got "+describe(Value{Tag: TagString, Str: kind}))
	}
	q.Kind = k
	if q.RequestID, err = r.nonEmpty(arg, "requestId"); err != nil {
		return q, err
	}
	if q.Resource, err = r.nonEmpty(arg, "resource"); err != nil {
		return q, err
	}
	if q.HolderID, err = r.nonEmpty(arg, "holderId"); err != nil {
		return q, err
	}
	if q.SentAt, err = r.instant(arg, "sentAt"); err != nil {
		return q, err
	}
	if k == lease.KindAcquire {
		// An acquisition carries no fence; JSON may carry an explicit 0.
		if q.Fence, err = r.optCount(arg, "fence"); err == nil && q.Fence != 0 {
			err = argErr(arg+".fence", "must be absent or 0 for an acquisition")
		}
		return q, err
	}
	if q.Fence, err = r.count(arg, "fence"); err == nil && q.Fence == 0 {
		err = argErr(arg+".fence", "must be at least 1 for a renewal")
	}
	return q, err
}

// Grant decodes { requestId, resource, holderId, fence, ttlMillis,
// coordinatorExpiresAt }.
func (r *Reader) Grant(arg string) (lease.Grant, error) {
	return r.GrantFor(arg, nil)
}

// GrantFor decodes a grant passed beside req, the request decoded before it:
// its requestId, resource, holderId and coordinatorExpiresAt.domain may be
// TagSame, standing for req's requestId, resource, holderId and
// sentAt.domain. With req nil, TagSame is refused as malformed.
func (r *Reader) GrantFor(arg string, req *lease.Request) (lease.Grant, error) {
	var g lease.Grant
	if _, err := r.Object(arg, false); err != nil {
		return g, err
	}
	var q lease.Request // with req nil, TagSame is refused
	if req != nil {
		q = *req
	}
	same := req != nil
	var err error
	if g.RequestID, err = r.sameOrNonEmpty(arg, "requestId", same, q.RequestID); err != nil {
		return g, err
	}
	if g.Resource, err = r.sameOrNonEmpty(arg, "resource", same, q.Resource); err != nil {
		return g, err
	}
	if g.HolderID, err = r.sameOrNonEmpty(arg, "holderId", same, q.HolderID); err != nil {
		return g, err
	}
	if g.Fence, err = r.count(arg, "fence"); err == nil && g.Fence == 0 {
		err = argErr(arg+".fence", "must be at least 1")
	}
	if err != nil {
		return g, err
	}
	if g.TTL, err = r.span(arg, "ttlMillis", true, false); err != nil {
		return g, err
	}
	const at = "coordinatorExpiresAt"
	if _, err = r.object(arg, at, false); err != nil {
		return g, err
	}
	ms, err := r.finite(path(arg, at), "millis")
	if err != nil {
		return g, err
	}
	d, err := r.sameOrNonEmpty(path(arg, at), "domain", same, q.SentAt.Domain)
	if err != nil {
		return g, err
	}
	g.CoordinatorExpiresAt = clock.At(d, ms)
	return g, nil
}

// sameOrNonEmpty decodes a non-empty string, or, when same is true,
// TagSame standing for value.
func (r *Reader) sameOrNonEmpty(arg, field string, same bool, value string) (string, error) {
	if same && r.p < len(r.b) && Tag(r.b[r.p]) == TagSame {
		r.p++
		return value, nil
	}
	return r.nonEmpty(arg, field)
}

// End checks that every byte was consumed: a longer buffer means the two
// sides disagree on the schema.
func (r *Reader) End() error {
	if r.p != len(r.b) {
		return errMalformed
	}
	return nil
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
