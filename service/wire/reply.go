package wire

import (
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The answers of an acquire + release cycle (a grant, a renewal's grant, a
// refusal, a release done) are written by the coordinator and read by the
// Go client by hand, in the plain form below, and by the JSON library in
// every other case. The names they write and read are those of the struct
// tags of Reply, Grant and Instant, read once here: the tags stay their
// only source.

// tagName is the JSON name of the field goName of T, from its tag. It
// panics (at the package's start) if T has no such field, or its name is
// one the hand-written codecs could not write verbatim.
func tagName[T any](goName string) string {
	f, ok := reflect.TypeFor[T]().FieldByName(goName)
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if !ok || name == "" || strconv.Quote(name) != `"`+name+`"` || strings.ContainsAny(name, `<>&`) {
		panic("wire: no plain JSON name for " + reflect.TypeFor[T]().Name() + "." + goName)
	}
	return name
}

// The names of the members the hand-written codecs write and read.
var (
	nameOK         = tagName[Reply]("OK")
	nameGrant      = tagName[Reply]("Grant")
	nameHeldBy     = tagName[Reply]("HeldBy")
	nameRetryAfter = tagName[Reply]("RetryAfterMillis")
	nameReason     = tagName[Reply]("Reason")

	nameRequestID = tagName[Grant]("RequestID")
	nameResource  = tagName[Grant]("Resource")
	nameHolderID  = tagName[Grant]("HolderID")
	nameFence     = tagName[Grant]("Fence")
	nameTTL       = tagName[Grant]("TTLMillis")
	nameExpiresAt = tagName[Grant]("CoordinatorExpiresAt")

	nameMillis = tagName[Instant]("Millis")
	nameDomain = tagName[Instant]("Domain")
)

// AppendReply appends to b what json.Marshal writes of r (TestReplyAppend),
// without its reflection (BenchmarkReply: 0.74 µs a grant through
// json.MarshalWrite, 0.27 here): when r is a cycle's answer (only OK, Grant,
// HeldBy, RetryAfterMillis and Reason set), its strings are valid UTF-8,
// and its numbers are finite and written without an exponent (0, or an
// absolute value from 1e-6 to below 1e21). For any other r it returns b
// unchanged and false, for json.Marshal to write it.
func AppendReply(b []byte, r *Reply) ([]byte, bool) {
	rest := *r
	rest.OK, rest.Grant, rest.HeldBy, rest.RetryAfterMillis, rest.Reason = false, nil, "", 0, ""
	if rest != (Reply{}) {
		return b, false
	}
	w := appender{b: append(b, '{')}
	w.key(nameOK)
	w.b = strconv.AppendBool(w.b, r.OK)
	if g := r.Grant; g != nil {
		w.open(nameGrant)
		w.str(nameRequestID, g.RequestID)
		w.str(nameResource, g.Resource)
		w.str(nameHolderID, g.HolderID)
		w.uint(nameFence, g.Fence)
		w.float(nameTTL, g.TTLMillis)
		w.open(nameExpiresAt)
		w.float(nameMillis, g.CoordinatorExpiresAt.Millis)
		w.str(nameDomain, g.CoordinatorExpiresAt.Domain)
		w.b = append(w.b, "}}"...)
	}
	if r.HeldBy != "" {
		w.str(nameHeldBy, r.HeldBy)
	}
	if r.RetryAfterMillis != 0 { // -0 included, as omitzero omits it
		w.float(nameRetryAfter, r.RetryAfterMillis)
	}
	if r.Reason != "" {
		w.str(nameReason, r.Reason)
	}
	if w.failed {
		return b, false
	}
	return append(w.b, '}'), true
}

// appender writes an object's members, each after a comma unless it is
// the first of its object (b ends with '{'); failed is set by a value it
// cannot write as json.Marshal does.
type appender struct {
	b      []byte
	failed bool
}

func (w *appender) key(name string) {
	if w.b[len(w.b)-1] != '{' {
		w.b = append(w.b, ',')
	}
	w.b = append(append(append(w.b, '"'), name...), `":`...)
}

// open begins the object member name; its caller closes it.
func (w *appender) open(name string) {
	w.key(name)
	w.b = append(w.b, '{')
}

func (w *appender) uint(name string, v uint64) {
	w.key(name)
	w.b = strconv.AppendUint(w.b, v, 10)
}

func (w *appender) str(name, v string) {
	w.key(name)
	var err error
	if w.b, err = jsontext.AppendQuote(w.b, v); err != nil {
		w.failed = true
	}
}

func (w *appender) float(name string, v float64) {
	w.key(name)
	var ok bool
	if w.b, ok = appendFloat(w.b, v); !ok {
		w.failed = true
	}
}

// appendFloat appends v as json.Marshal writes it, if that is without an
// exponent: 0, or an absolute value from 1e-6 to below 1e21 (the JSON
// library writes others in its own exponent form, and refuses NaN and
// the infinities).
func appendFloat(b []byte, v float64) ([]byte, bool) {
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) || !finite(abs) {
		return b, false
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64), true
}

// DecodeReply decodes a call's answer into r as json.Unmarshal does (the
// zero Reply first, then data's members; unknown members ignored). A
// cycle's answer in the plain form the coordinator writes (AppendReply) is
// read by hand (TestScanReplyAgrees), without the reflection of
// json.Unmarshal (BenchmarkReply: 1.09 µs a grant through json.Unmarshal,
// 0.57 here); any other data goes to json.Unmarshal, whose error is
// returned.
func DecodeReply(data []byte, r *Reply) error {
	*r = Reply{}
	if string(data) == OKBody { // a release done, the commonest answer
		r.OK = true
		return nil
	}
	if scanReply(data, r) {
		return nil
	}
	*r = Reply{}
	return json.Unmarshal(data, r)
}

// scanReply fills the zero r from data when data is a cycle's answer in
// the plain form: one object, no whitespace, each member once, only the
// members AppendReply writes (in any order, any of them absent), each
// string without escapes or control characters and in valid UTF-8,
// numbers that strconv parses to a finite value (a fence: a whole number
// that fits uint64). For such data it gives r exactly what json.Unmarshal
// gives it (TestScanReplyAgrees). It returns false for any other data,
// leaving r in an unspecified state.
func scanReply(data []byte, r *Reply) bool {
	s := scanner{data: data}
	var seen [5]bool
	ok := s.object(func(name []byte) bool {
		i := -1
		var ok bool
		switch string(name) {
		case nameOK:
			i = 0
			r.OK, ok = s.boolean()
		case nameGrant:
			i = 1
			r.Grant = new(Grant)
			ok = s.grant(r.Grant)
		case nameHeldBy:
			i = 2
			r.HeldBy, ok = s.str()
		case nameRetryAfter:
			i = 3
			r.RetryAfterMillis, ok = s.float()
		case nameReason:
			i = 4
			r.Reason, ok = s.str()
		}
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
		return ok
	})
	return ok && s.i == len(data)
}

// grant consumes a Grant's object.
func (s *scanner) grant(g *Grant) bool {
	var seen [6]bool
	return s.object(func(name []byte) bool {
		i := -1
		var ok bool
		switch string(name) {
		case nameRequestID:
			i = 0
			g.RequestID, ok = s.str()
		case nameResource:
			i = 1
			g.Resource, ok = s.str()
		case nameHolderID:
			i = 2
			g.HolderID, ok = s.str()
		case nameFence:
			i = 3
			g.Fence, ok = s.uint()
		case nameTTL:
			i = 4
			g.TTLMillis, ok = s.float()
		case nameExpiresAt:
			i = 5
			ok = s.instantValue(&g.CoordinatorExpiresAt)
		}
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
		return ok
	})
}

// instantValue consumes an Instant's object.
func (s *scanner) instantValue(t *Instant) bool {
	var seen [2]bool
	return s.object(func(name []byte) bool {
		i := -1
		var ok bool
		switch string(name) {
		case nameMillis:
			i = 0
			t.Millis, ok = s.float()
		case nameDomain:
			i = 1
			t.Domain, ok = s.str()
		}
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
		return ok
	})
}

// boolean consumes true or false.
func (s *scanner) boolean() (bool, bool) {
	for _, lit := range [...]string{"true", "false"} {
		if len(s.data)-s.i >= len(lit) && string(s.data[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return lit == "true", true
		}
	}
	return false, false
}

// float consumes a JSON number that strconv.ParseFloat takes (as
// json.Unmarshal parses one into a float64).
func (s *scanner) float() (float64, bool) {
	text, ok := s.numRaw()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(text), 64)
	return v, err == nil
}

// uint consumes a whole number that fits uint64, without a sign, a
// fraction or an exponent.
func (s *scanner) uint() (uint64, bool) {
	start := s.i
	if !s.digits() || s.data[start] == '0' && s.i-start > 1 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.data[start:s.i]), 10, 64)
	return v, err == nil
}
