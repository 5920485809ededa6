package wire

import (
	"maps"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json"
)

// Stable error codes. They are part of the protocol: clients branch on them,
// so they never change meaning. Messages are for people and may change.
const (
	CodeMalformedJSON    = "malformed_json"
	CodeWrongType        = "wrong_type"
	CodeMissingField     = "missing_field"
	CodeUnknownField     = "unknown_field"
	CodeDuplicateField   = "duplicate_field"
	CodeInvalidValue     = "invalid_value"
	CodeBodyTooLarge     = "body_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeNotFound         = "not_found"
	CodeWrongSecret      = "wrong_secret"
	CodeRequestIDReused  = "request_id_reused"
	CodeRejected         = "rejected"
	CodeUnavailable      = "unavailable"
	CodeTooManyLeases    = "too_many_leases"
	CodeTooManyWaiters   = "too_many_waiters"
	CodeInternal         = "internal"
	// CodeUnauthorized: the request carries no bearer token, or one the
	// server does not know (401, with a WWW-Authenticate header).
	CodeUnauthorized = "unauthorized"
	// CodeForbidden: the token is known but the call names a resource or
	// holder outside its scopes (403).
	CodeForbidden = "forbidden"
	// CodeTooManyTokenLeases and CodeTooManyTokenWaiters: the caller's
	// token holds its own maximum of leases (its maxLeases), or of waiting
	// calls (maxWaiters); other tokens are not affected (429).
	CodeTooManyTokenLeases  = "too_many_token_leases"
	CodeTooManyTokenWaiters = "too_many_token_waiters"
	// CodeTooManyWatchers: the coordinator has its maximum of watchers
	// (503); CodeTooManyTokenWatchers: the caller's token has its own
	// (429).
	CodeTooManyWatchers      = "too_many_watchers"
	CodeTooManyTokenWatchers = "too_many_token_watchers"
	// CodeNotSupported: this server does not offer the call (501), such
	// as a Worker's list and watch.
	CodeNotSupported = "not_supported"
	// CodeNotHeld: a revoke found nothing to revoke: no live lease (with
	// that holder id or fence), and no waiter with that holder id (409).
	CodeNotHeld = "not_held"
)

var codeStatus = map[string]int{
	CodeMalformedJSON: 400, CodeWrongType: 400, CodeMissingField: 400, CodeUnknownField: 400, CodeDuplicateField: 400,
	CodeInvalidValue: 400, CodeBodyTooLarge: 413, CodeUnsupportedMedia: 415, CodeMethodNotAllowed: 405, CodeNotFound: 404,
	CodeWrongSecret: 403, CodeRequestIDReused: 409, CodeRejected: 422, CodeUnavailable: 503, CodeTooManyLeases: 503,
	CodeTooManyWaiters: 503, CodeInternal: 500, CodeUnauthorized: 401, CodeForbidden: 403, CodeTooManyTokenLeases: 429,
	CodeTooManyTokenWaiters: 429, CodeTooManyWatchers: 503, CodeTooManyTokenWatchers: 429, CodeNotSupported: 501, CodeNotHeld: 409,
}

// Codes lists every stable error code, in no particular order.
func Codes() []string { return slices.Collect(maps.Keys(codeStatus)) }

// Error is a call the coordinator refused: an HTTP status, a stable Code
// and a message. On the wire it is {"error": {"code": ..., "message": ...}};
// its Error() says "coordinator:", the side that refused (the client's own
// failures say "client:"). A refused call changed nothing on the
// coordinator.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return "coordinator: " + e.Code + " (" + strconv.Itoa(e.Status) + "): " + e.Message
}

// Temporary reports whether the same call may succeed if sent again: the
// coordinator could not store its answer, or failed in a way that changed
// nothing (a 5xx), or a server on the way timed the request out (408) or
// asks for fewer requests (429). Any other 4xx will be refused the same
// way again.
func (e *Error) Temporary() bool {
	return e.Status >= 500 || e.Status == 408 || e.Status == 429
}

// ErrorBody is the JSON shape of an Error.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// NewError returns the refusal with code (one of the Code constants), the
// status that goes with it, and msg.
func NewError(code, msg string) *Error { return errCode(code, msg) }

func errCode(code, msg string) *Error {
	st, ok := codeStatus[code]
	if !ok {
		st = 500
	}
	return &Error{Status: st, Code: code, Message: msg}
}

// InvalidField returns the invalid_value refusal of the field name, which
// reason says what is wrong with.
func InvalidField(name, reason string) *Error {
	return errCode(CodeInvalidValue, "field "+strconv.Quote(name)+" "+reason)
}

// ParseError reads an error body written by the handler. It returns nil if
// body is not one.
func ParseError(status int, body []byte) *Error {
	var b ErrorBody
	if err := json.Unmarshal(body, &b); err != nil || b.Error.Code == "" {
		return nil
	}
	return &Error{Status: status, Code: b.Error.Code, Message: b.Error.Message}
}
