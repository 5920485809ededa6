package wire

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Op names one of the three calls.
type Op string

// The three calls, each served at /v1/<op>.
const (
	OpAcquire Op = "acquire"
	OpRenew   Op = "renew"
	OpRelease Op = "release"
)

// Path returns the URL path op is served at.
func (op Op) Path() string { return "/v1/" + string(op) }

// MaxBodyBytes is the largest request body the handler reads. Larger bodies
// are refused with status 413 and code "body_too_large".
const MaxBodyBytes = 64 << 10

// MaxStringBytes bounds every string field of a request. The handler
// applies lower limits to ids (HandlerOptions.MaxIDBytes).
const MaxStringBytes = 1024

// MinSecretBytes and MaxSecretBytes bound the secret a holder chooses at
// acquisition and presents to renew or release.
const (
	MinSecretBytes = 16
	MaxSecretBytes = 256
)

// Message is a decoded request body.
//
// For acquire and renew, Request is the request exactly as lease.Client
// began it. For release, Request carries RequestID, Resource, HolderID and
// Fence, and Kind and SentAt are zero. Secret is chosen by the holder for
// each acquisition (MinSecretBytes to MaxSecretBytes, random) and presented
// again to renew or release that lease; the coordinator keeps only its
// SHA-256.
type Message struct {
	Op      Op
	Request lease.Request
	Secret  string
}

// Instant is a clock.Instant as JSON: {"millis": ..., "domain": ...}.
type Instant struct {
	Millis float64 `json:"millis"`
	Domain string  `json:"domain"`
}

// FromInstant converts a clock.Instant.
func FromInstant(t clock.Instant) Instant { return Instant{Millis: t.Millis, Domain: t.Domain} }

// Clock converts back to a clock.Instant.
func (t Instant) Clock() clock.Instant { return clock.At(t.Domain, t.Millis) }

// Grant is a lease.Grant as JSON. It carries no secret: the holder chose
// the secret and the coordinator only keeps its hash.
type Grant struct {
	RequestID            string  `json:"requestId"`
	Resource             string  `json:"resource"`
	HolderID             string  `json:"holderId"`
	Fence                uint64  `json:"fence"`
	TTLMillis            float64 `json:"ttlMillis"`
	CoordinatorExpiresAt Instant `json:"coordinatorExpiresAt"`
}

// GrantOf converts a lease.Grant.
func GrantOf(g lease.Grant) *Grant {
	return &Grant{RequestID: g.RequestID, Resource: g.Resource, HolderID: g.HolderID, Fence: g.Fence,
		TTLMillis: clock.Millis(g.TTL), CoordinatorExpiresAt: FromInstant(g.CoordinatorExpiresAt)}
}

// Lease converts g to the lease.Grant a lease.Client completes.
func (g Grant) Lease() lease.Grant {
	return lease.Grant{
		RequestID:            g.RequestID,
		Resource:             g.Resource,
		HolderID:             g.HolderID,
		Fence:                g.Fence,
		TTL:                  clock.FromMillis(g.TTLMillis),
		CoordinatorExpiresAt: g.CoordinatorExpiresAt.Clock(),
	}
}

// Reply is the body of every 200 answer. Exactly one shape is filled in:
//
//	{"ok": true, "grant": {...}}                          acquire or renew granted
//	{"ok": false, "heldBy": "b", "retryAfterMillis": 120} acquire denied
//	{"ok": false, "reason": "expired"}                    renew or release refused
//	{"ok": true}                                          release done
type Reply struct {
	OK               bool    `json:"ok"`
	Grant            *Grant  `json:"grant,omitzero"`
	HeldBy           string  `json:"heldBy,omitzero"`
	RetryAfterMillis float64 `json:"retryAfterMillis,omitzero"`
	Reason           string  `json:"reason,omitzero"`
}

// body is every member a request may have, each of a type that refuses
// null and values of the wrong JSON type, checks its value, and records
// that it was present. Which members a call takes is checked after
// decoding (schemas).
type body struct {
	RequestID idField     `json:"requestId"`
	Resource  idField     `json:"resource"`
	HolderID  idField     `json:"holderId"`
	SentAt    instantBody `json:"sentAt"`
	Kind      idField     `json:"kind"`
	Fence     fenceField  `json:"fence"`
	Secret    idField     `json:"secret"`
}

// member is what every field type reports.
type member interface{ present() bool }

// schemas lists, for each call, the members it takes in the order they are
// reported missing; required ones first. An acquisition may carry the zero
// fence a serialized lease.Request has.
var schemas = map[Op]struct{ required, optional []string }{
	OpAcquire: {[]string{"requestId", "resource", "holderId", "sentAt", "kind", "secret"}, []string{"fence"}},
	OpRenew:   {[]string{"requestId", "resource", "holderId", "sentAt", "kind", "fence", "secret"}, nil},
	OpRelease: {[]string{"requestId", "resource", "holderId", "fence", "secret"}, nil},
}

func (b *body) member(name string) member {
	switch name {
	case "requestId":
		return &b.RequestID
	case "resource":
		return &b.Resource
	case "holderId":
		return &b.HolderID
	case "sentAt":
		return &b.SentAt
	case "kind":
		return &b.Kind
	case "fence":
		return &b.Fence
	}
	return &b.Secret
}

var strict = json.RejectUnknownMembers(true)

// DecodeMessage parses and checks the body of a request to op with
// github.com/go-json-experiment/json (encoding/json/v2), strictly. It
// accepts exactly one JSON object with exactly the fields op takes, each of
// its type, each at most once, in valid UTF-8 (a lone surrogate escape such
// as \ud800 included), and nothing after it. A body it refuses gets an
// *Error with a stable Code:
//
//	malformed_json   not JSON, invalid UTF-8, or more than one value
//	wrong_type       a value of the wrong JSON type (null and the body itself included)
//	missing_field    a required field is absent
//	unknown_field    a field op does not take (names are case-sensitive)
//	duplicate_field  a field appears twice
//	invalid_value    the right type but an unusable value (empty id, fence 0,
//	                 a kind that does not match the path, a non-finite instant)
func DecodeMessage(op Op, data []byte) (Message, *Error) {
	schema, ok := schemas[op]
	if !ok {
		return Message{}, errCode(CodeNotFound, "no such call "+strconv.Quote(string(op)))
	}
	var b *body
	if err := json.Unmarshal(data, &b, strict); err != nil {
		return Message{}, decodeError(op, err)
	}
	if b == nil {
		return Message{}, errCode(CodeWrongType, "the body must be a JSON object, got null")
	}
	for _, name := range []string{"requestId", "resource", "holderId", "sentAt", "kind", "fence", "secret"} {
		if b.member(name).present() && !has(schema.required, name) && !has(schema.optional, name) {
			return Message{}, errCode(CodeUnknownField, "unknown field "+strconv.Quote(name)+" in a "+string(op)+" request")
		}
	}
	for _, name := range schema.required {
		if !b.member(name).present() {
			return Message{}, errCode(CodeMissingField, "field "+strconv.Quote(name)+" is required in a "+string(op)+" request")
		}
	}
	if n := len(b.Secret.v); n < MinSecretBytes || n > MaxSecretBytes {
		return Message{}, errInvalid("secret", "must be "+strconv.Itoa(MinSecretBytes)+" to "+strconv.Itoa(MaxSecretBytes)+
			" bytes, got "+strconv.Itoa(n))
	}
	m := Message{Op: op, Secret: b.Secret.v, Request: lease.Request{RequestID: b.RequestID.v, Resource: b.Resource.v,
		HolderID: b.HolderID.v, Fence: b.Fence.v}}
	switch {
	case op == OpAcquire && m.Request.Fence != 0:
		return Message{}, errInvalid("fence", "must be 0 (or absent) in an acquisition")
	case op != OpAcquire && m.Request.Fence == 0:
		return Message{}, errInvalid("fence", "must be at least 1")
	case op != OpRelease && b.Kind.v != string(op):
		return Message{}, errInvalid("kind", "must be "+strconv.Quote(string(op))+" on this path, got "+strconv.Quote(b.Kind.v))
	}
	if op != OpRelease {
		m.Request.Kind, m.Request.SentAt = lease.Kind(op), clock.At(b.SentAt.Domain.v, b.SentAt.Millis.v)
	}
	return m, nil
}

func has(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// decodeError turns an error of json.Unmarshal into a refusal.
func decodeError(op Op, err error) *Error {
	var we *Error
	var se *json.SemanticError
	field := ""
	if errors.As(err, &se) {
		field = strings.ReplaceAll(strings.TrimPrefix(string(se.JSONPointer), "/"), "/", ".")
	}
	switch {
	case errors.As(err, &we): // a field's own check
		if field != "" {
			we.Message = "field " + strconv.Quote(field) + " " + we.Message
		}
		return we
	case errors.Is(err, jsontext.ErrDuplicateName):
		return errCode(CodeDuplicateField, "a field appears twice: "+err.Error())
	case errors.Is(err, json.ErrUnknownName):
		return errCode(CodeUnknownField, "unknown field "+quoteShort(field)+" in a "+string(op)+" request")
	case se != nil && se.JSONKind != 0 && field == "":
		return errCode(CodeWrongType, "the body must be a JSON object, got "+kindName(se.JSONKind))
	}
	return errCode(CodeMalformedJSON, "invalid JSON: "+err.Error())
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '[':
		return "an array"
	}
	return "an object"
}

// readToken reads the next token, refusing any of another kind than want.
func readToken(dec *jsontext.Decoder, want jsontext.Kind, what string) (jsontext.Token, error) {
	if k := dec.PeekKind(); k != want && k != 0 {
		return jsontext.Token{}, errCode(CodeWrongType, "must be "+what+", got "+kindName(k))
	}
	return dec.ReadToken()
}

// idField is a non-empty string of at most MaxStringBytes.
type idField struct {
	v   string
	set bool
}

func (f *idField) present() bool { return f.set }

func (f *idField) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := readToken(dec, '"', "a string")
	if err != nil {
		return err
	}
	f.v, f.set = tok.String(), true
	switch {
	case f.v == "":
		return errCode(CodeInvalidValue, "must not be empty")
	case len(f.v) > MaxStringBytes:
		return errCode(CodeInvalidValue, "is longer than "+strconv.Itoa(MaxStringBytes)+" bytes")
	}
	return nil
}

// fenceField is a JSON integer from 0 to lease.MaxFence, written as digits.
type fenceField struct {
	v   uint64
	set bool
}

func (f *fenceField) present() bool { return f.set }

func (f *fenceField) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := readToken(dec, '0', "an integer")
	if err != nil {
		return err
	}
	f.set = true
	n, err := strconv.ParseUint(tok.String(), 10, 64)
	if err != nil || n > lease.MaxFence {
		return errCode(CodeInvalidValue, "must be a whole number from 0 to "+strconv.FormatUint(lease.MaxFence, 10)+
			", got "+quoteShort(tok.String()))
	}
	f.v = n
	return nil
}

// millisField is a finite JSON number.
type millisField struct {
	v   float64
	set bool
}

func (f *millisField) present() bool { return f.set }

func (f *millisField) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := readToken(dec, '0', "a number")
	if err != nil {
		return err
	}
	f.set = true
	v, err := strconv.ParseFloat(tok.String(), 64)
	if err != nil || !finite(v) {
		return errCode(CodeInvalidValue, "must be a finite number")
	}
	f.v = v
	return nil
}

// instantBody is an instant {millis, domain} in a request.
type instantBody struct {
	Millis millisField `json:"millis"`
	Domain idField     `json:"domain"`
	set    bool
}

func (f *instantBody) present() bool { return f.set }

func (f *instantBody) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if k := dec.PeekKind(); k != '{' && k != 0 {
		_, err := readToken(dec, '{', "an object {millis, domain}")
		return err
	}
	var in struct {
		Millis millisField `json:"millis"`
		Domain idField     `json:"domain"`
	}
	if err := json.UnmarshalDecode(dec, &in, strict); err != nil {
		return err
	}
	f.Millis, f.Domain, f.set = in.Millis, in.Domain, true
	switch {
	case !f.Millis.set:
		return errCode(CodeMissingField, "needs its millis")
	case !f.Domain.set:
		return errCode(CodeMissingField, "needs its domain")
	}
	return nil
}

// EncodeMessage is the inverse of DecodeMessage: the body a client sends.
func EncodeMessage(m Message) ([]byte, error) {
	r := m.Request
	if _, ok := schemas[m.Op]; !ok {
		return nil, errors.New("wire: unknown op " + strconv.Quote(string(m.Op)))
	}
	out := wireBody{RequestID: r.RequestID, Resource: r.Resource, HolderID: r.HolderID, Secret: m.Secret}
	if m.Op != OpRelease {
		if !finite(r.SentAt.Millis) {
			return nil, errors.New("wire: sentAt.millis is not a finite number")
		}
		out.SentAt, out.Kind = &Instant{Millis: r.SentAt.Millis, Domain: r.SentAt.Domain}, string(m.Op)
	}
	if m.Op != OpAcquire {
		out.Fence = &r.Fence
	}
	return json.Marshal(out)
}

// wireBody is the JSON shape of every request body; EncodeMessage leaves
// out what the call does not take.
type wireBody struct {
	RequestID string   `json:"requestId"`
	Resource  string   `json:"resource"`
	HolderID  string   `json:"holderId"`
	SentAt    *Instant `json:"sentAt,omitzero"`
	Kind      string   `json:"kind,omitzero"`
	Fence     *uint64  `json:"fence,omitzero"`
	Secret    string   `json:"secret"`
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// quoteShort quotes s, cut to a length that is safe to echo in an error.
func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}
