package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

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
	Grant            *Grant  `json:"grant,omitempty"`
	HeldBy           string  `json:"heldBy,omitempty"`
	RetryAfterMillis float64 `json:"retryAfterMillis,omitempty"`
	Reason           string  `json:"reason,omitempty"`
}

// field describes one member of a request object.
type field struct {
	name     string
	required bool
	set      func(m *Message, raw json.RawMessage) *Error
}

var (
	fRequestID = field{"requestId", true, func(m *Message, raw json.RawMessage) *Error {
		return decodeString("requestId", raw, &m.Request.RequestID)
	}}
	fResource = field{"resource", true, func(m *Message, raw json.RawMessage) *Error {
		return decodeString("resource", raw, &m.Request.Resource)
	}}
	fHolderID = field{"holderId", true, func(m *Message, raw json.RawMessage) *Error {
		return decodeString("holderId", raw, &m.Request.HolderID)
	}}
	fSecret = field{"secret", true, func(m *Message, raw json.RawMessage) *Error {
		if err := decodeString("secret", raw, &m.Secret); err != nil {
			return err
		}
		if n := len(m.Secret); n < MinSecretBytes || n > MaxSecretBytes {
			return errInvalid("secret", "must be "+strconv.Itoa(MinSecretBytes)+" to "+strconv.Itoa(MaxSecretBytes)+
				" bytes, got "+strconv.Itoa(n))
		}
		return nil
	}}
	fSentAt = field{"sentAt", true, func(m *Message, raw json.RawMessage) *Error {
		return decodeInstant("sentAt", raw, &m.Request.SentAt)
	}}
	fFence = field{"fence", true, func(m *Message, raw json.RawMessage) *Error {
		if err := decodeFence("fence", raw, &m.Request.Fence); err != nil {
			return err
		}
		if m.Request.Fence == 0 {
			return errInvalid("fence", "must be at least 1")
		}
		return nil
	}}
)

func kindField(want lease.Kind) field {
	quoted := `"` + string(want) + `"`
	return field{"kind", true, func(m *Message, raw json.RawMessage) *Error {
		if string(raw) == quoted { // the usual case, without a copy
			m.Request.Kind = want
			return nil
		}
		var s string
		if err := decodeString("kind", raw, &s); err != nil {
			return err
		}
		if s != string(want) {
			return errInvalid("kind", "must be "+strconv.Quote(string(want))+" on this path, got "+strconv.Quote(s))
		}
		m.Request.Kind = want
		return nil
	}}
}

var schemas = map[Op][]field{
	OpAcquire: {fRequestID, fResource, fHolderID, fSentAt, kindField(lease.KindAcquire), fSecret,
		// An acquisition request may carry the zero fence the core's
		// Request has, so a serialized lease.Request is accepted as is.
		{"fence", false, func(m *Message, raw json.RawMessage) *Error {
			if err := decodeFence("fence", raw, &m.Request.Fence); err != nil {
				return err
			}
			if m.Request.Fence != 0 {
				return errInvalid("fence", "must be 0 (or absent) in an acquisition")
			}
			return nil
		}}},
	OpRenew:   {fRequestID, fResource, fHolderID, fSentAt, kindField(lease.KindRenew), fFence, fSecret},
	OpRelease: {fRequestID, fResource, fHolderID, fFence, fSecret},
}

// DecodeMessage parses and checks the body of a request to op. It accepts
// exactly one JSON object with exactly the fields op takes, each of its
// type, each at most once, in valid UTF-8, and nothing after it. A body it
// refuses gets an *Error with a stable Code:
//
//	malformed_json   not JSON, invalid UTF-8, or more than one value
//	wrong_type       a value of the wrong JSON type (the body itself included)
//	missing_field    a required field is absent
//	unknown_field    a field op does not take (names are case-sensitive)
//	duplicate_field  a field appears twice
//	invalid_value    the right type but an unusable value (empty id, fence 0,
//	                 a kind that does not match the path, a non-finite instant)
func DecodeMessage(op Op, body []byte) (Message, *Error) {
	schema, ok := schemas[op]
	if !ok {
		return Message{}, &Error{Status: 404, Code: CodeNotFound, Message: "no such call " + strconv.Quote(string(op))}
	}
	if !utf8.Valid(body) {
		return Message{}, errCode(CodeMalformedJSON, "body is not valid UTF-8")
	}
	var m Message
	m.Op = op
	var seen uint32 // bit i: schema[i] was present
	member := func(name []byte, raw json.RawMessage) *Error {
		for i := range schema {
			if f := &schema[i]; f.name == string(name) {
				if seen&(1<<i) != 0 {
					return errCode(CodeDuplicateField, "field "+strconv.Quote(string(name))+" appears twice")
				}
				seen |= 1 << i
				return f.set(&m, raw)
			}
		}
		return errCode(CodeUnknownField, "unknown field "+quoteShort(string(name))+" in a "+string(op)+" request")
	}
	if err := decodeObject("body", body, member); err != nil {
		return Message{}, err
	}
	for i, f := range schema {
		if f.required && seen&(1<<i) == 0 {
			return Message{}, errCode(CodeMissingField, "field "+strconv.Quote(f.name)+" is required in a "+string(op)+" request")
		}
	}
	if op == OpAcquire || op == OpRenew {
		m.Request.Kind = lease.Kind(op)
	}
	return m, nil
}

// EncodeMessage is the inverse of DecodeMessage: the body a client sends.
func EncodeMessage(m Message) ([]byte, error) {
	r := m.Request
	switch m.Op {
	case OpAcquire, OpRenew, OpRelease:
	default:
		return nil, errors.New("wire: unknown op " + strconv.Quote(string(m.Op)))
	}
	if m.Op != OpRelease && !finite(r.SentAt.Millis) {
		return nil, errors.New("wire: sentAt.millis is not a finite number")
	}
	body := wireBody{RequestID: r.RequestID, Resource: r.Resource, HolderID: r.HolderID, Secret: m.Secret}
	if m.Op != OpRelease {
		body.SentAt = &Instant{Millis: r.SentAt.Millis, Domain: r.SentAt.Domain}
		body.Kind = string(m.Op)
	}
	if m.Op != OpAcquire {
		body.Fence = &r.Fence
	}
	if out, ok := appendWireBody(make([]byte, 0, 256), body); ok {
		return out, nil
	}
	return json.Marshal(body)
}

// appendWireBody appends the JSON of b byte for byte as json.Marshal writes
// it, without reflection, when its strings and number are ones json.Marshal
// writes as they are (plainJSONString, plainJSONFloat); it reports false
// otherwise.
func appendWireBody(out []byte, b wireBody) ([]byte, bool) {
	if !plainJSONString(b.RequestID) || !plainJSONString(b.Resource) || !plainJSONString(b.HolderID) ||
		!plainJSONString(b.Kind) || !plainJSONString(b.Secret) ||
		(b.SentAt != nil && !plainInstant(*b.SentAt)) {
		return nil, false
	}
	out = append(out, `{"requestId":"`...)
	out = append(out, b.RequestID...)
	out = append(out, `","resource":"`...)
	out = append(out, b.Resource...)
	out = append(out, `","holderId":"`...)
	out = append(out, b.HolderID...)
	out = append(out, '"')
	if b.SentAt != nil {
		out = append(out, `,"sentAt":`...)
		out = appendInstant(out, *b.SentAt)
	}
	if b.Kind != "" {
		out = append(out, `,"kind":"`...)
		out = append(out, b.Kind...)
		out = append(out, '"')
	}
	if b.Fence != nil {
		out = append(out, `,"fence":`...)
		out = strconv.AppendUint(out, *b.Fence, 10)
	}
	out = append(out, `,"secret":"`...)
	out = append(out, b.Secret...)
	return append(out, `"}`...), true
}

// wireBody is the JSON shape of every request body; EncodeMessage leaves
// out what the call does not take.
type wireBody struct {
	RequestID string   `json:"requestId"`
	Resource  string   `json:"resource"`
	HolderID  string   `json:"holderId"`
	SentAt    *Instant `json:"sentAt,omitempty"`
	Kind      string   `json:"kind,omitempty"`
	Fence     *uint64  `json:"fence,omitempty"`
	Secret    string   `json:"secret"`
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// decodeObject walks one JSON object, calling member for each name and raw
// value in order, and refuses anything else: another type, trailing data.
// data must be valid UTF-8.
//
// A body encoding/json finds valid (json.Valid, the usual case) is split
// into its members by splitObject; any other body goes through
// json.Decoder's tokens, which stop at the first thing wrong, so what is
// refused and why is the same either way.
func decodeObject(what string, data []byte, member func(name []byte, raw json.RawMessage) *Error) *Error {
	if json.Valid(data) {
		return splitObject(what, data, member)
	}
	return decodeObjectTokens(what, data, member)
}

// splitObject is decodeObject for data that json.Valid accepted: one JSON
// value and nothing but whitespace around it. It finds where each member's
// name and value begin and end; the name is unescaped by encoding/json when
// it holds an escape, and the value is passed on as it is written, without
// the whitespace around it, exactly as json.Decoder would give it.
func splitObject(what string, data []byte, member func(name []byte, raw json.RawMessage) *Error) *Error {
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return errCode(CodeWrongType, what+" must be a JSON object, got "+rawType(data[i:]))
	}
	i = skipSpace(data, i+1)
	if data[i] == '}' {
		return nil
	}
	for {
		end := stringEnd(data, i) // data[i] is the '"' of a name
		name := data[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			if err := json.Unmarshal(data[i:end], &s); err != nil {
				return malformed(err)
			}
			name = []byte(s)
		}
		i = skipSpace(data, end)
		i = skipSpace(data, i+1) // past the ':'
		vend := valueEnd(data, i)
		if err := member(name, data[i:vend]); err != nil {
			return err
		}
		i = skipSpace(data, vend)
		if data[i] == '}' {
			return nil
		}
		i = skipSpace(data, i+1) // past the ','
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the string literal starting at
// data[i].
func stringEnd(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// valueEnd returns the index just past the JSON value starting at data[i].
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = stringEnd(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// decodeObjectTokens is decodeObject through json.Decoder's tokens.
func decodeObjectTokens(what string, data []byte, member func(name []byte, raw json.RawMessage) *Error) *Error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return malformed(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errCode(CodeWrongType, what+" must be a JSON object, got "+jsonType(tok))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed(err)
		}
		name, ok := tok.(string)
		if !ok {
			return errCode(CodeMalformedJSON, "object key is not a string")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return malformed(err)
		}
		if err := member([]byte(name), raw); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return malformed(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errCode(CodeMalformedJSON, "unexpected data after the JSON object")
	}
	return nil
}

func malformed(err error) *Error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errCode(CodeMalformedJSON, "body ends before the JSON value does")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errCode(CodeMalformedJSON, "invalid JSON at byte "+strconv.FormatInt(se.Offset, 10)+": "+se.Error())
	}
	return errCode(CodeMalformedJSON, "invalid JSON: "+err.Error())
}

func jsonType(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "something else"
}

func rawType(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func wrongType(name, want string, raw json.RawMessage) *Error {
	return errCode(CodeWrongType, "field "+strconv.Quote(name)+" must be "+want+", got "+rawType(raw))
}

func decodeString(name string, raw json.RawMessage, dst *string) *Error {
	if raw[0] != '"' {
		return wrongType(name, "a string", raw)
	}
	var s string
	if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
		// No escapes: raw is a string literal the decoder already
		// checked (no control characters; the body is valid UTF-8), so
		// its value is the bytes between the quotes.
		s = string(raw[1 : len(raw)-1])
	} else if err := json.Unmarshal(raw, &s); err != nil {
		return errCode(CodeMalformedJSON, "field "+strconv.Quote(name)+": "+err.Error())
	}
	if s == "" {
		return errInvalid(name, "must not be empty")
	}
	if len(s) > MaxStringBytes {
		return errInvalid(name, "is longer than "+strconv.Itoa(MaxStringBytes)+" bytes")
	}
	*dst = s
	return nil
}

// decodeFence accepts a JSON integer from 0 to lease.MaxFence, written as
// digits only.
func decodeFence(name string, raw json.RawMessage, dst *uint64) *Error {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return wrongType(name, "an integer", raw)
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return errInvalid(name, "must be a whole number from 0 to "+strconv.FormatUint(lease.MaxFence, 10)+", got "+quoteShort(string(raw)))
	}
	if n > lease.MaxFence {
		return errInvalid(name, "must be at most "+strconv.FormatUint(lease.MaxFence, 10))
	}
	*dst = n
	return nil
}

func decodeInstant(name string, raw json.RawMessage, dst *clock.Instant) *Error {
	if raw[0] != '{' {
		return wrongType(name, "an object {millis, domain}", raw)
	}
	var t clock.Instant
	var haveMillis, haveDomain bool
	// raw is a value json.Valid or json.Decoder accepted.
	err := splitObject(name, raw, func(member []byte, v json.RawMessage) *Error {
		switch string(member) {
		case "millis":
			if haveMillis {
				return errCode(CodeDuplicateField, "field "+name+".millis appears twice")
			}
			haveMillis = true
			if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
				return wrongType(name+".millis", "a number", v)
			}
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return errInvalid(name+".millis", "must be a finite number")
			}
			t.Millis = f
		case "domain":
			if haveDomain {
				return errCode(CodeDuplicateField, "field "+name+".domain appears twice")
			}
			haveDomain = true
			return decodeString(name+".domain", v, &t.Domain)
		default:
			return errCode(CodeUnknownField, "unknown field "+quoteShort(string(member))+" in "+name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !haveMillis {
		return errCode(CodeMissingField, "field "+name+".millis is required")
	}
	if !haveDomain {
		return errCode(CodeMissingField, "field "+name+".domain is required")
	}
	*dst = t
	return nil
}

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
