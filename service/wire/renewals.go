package wire

import (
	"errors"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// RenewalsPath is where a batch of renewals is posted: several leases'
// renewals in one request, each with its own secret, each decided and
// answered on its own (a refusal of one never affects another). It is not a
// call (Op): its body and answer have shapes of their own.
//
//	request  {"renewals": [<renew body>, ...]}   1 to MaxRenewals bodies of /v1/renew
//	answer   {"ok": true, "results": [<result>, ...]}   one per body, in order
//
// A result is a renewal's Reply ({"ok": true, "grant": {...}} or {"ok":
// false, "reason": "expired"}), or {"ok": false, "error": {"code",
// "message", "status"}} for a renewal refused as /v1/renew would refuse it
// with that error status. A server that does not offer batches answers 501
// not_supported (a Worker: one Durable Object per resource); a client then
// sends each renewal to /v1/renew.
const RenewalsPath = "/v1/renewals"

// MaxRenewals bounds the renewals of one batch; a client sends more as
// several batches.
const MaxRenewals = 256

// MaxRenewalsBodyBytes bounds the body of a batch of renewals.
const MaxRenewalsBodyBytes = 1 << 20

// Result is one renewal's answer in a batch: Reply, or Error when the
// renewal was refused (what /v1/renew answers with an error status).
type Result struct {
	Reply `json:",inline"`
	Error *ErrorDetail `json:"error,omitzero"`
}

// ErrorDetail is a refusal inside an answer: its stable code, message,
// and the HTTP status the same call alone is answered with.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status"`
}

// Err returns the refusal, or nil for an answer.
func (r *Result) Err() *Error {
	if r.Error == nil {
		return nil
	}
	e := NewError(r.Error.Code, r.Error.Message)
	if r.Error.Status >= 400 && r.Error.Status <= 599 {
		e.Status = r.Error.Status
	}
	return e
}

// ResultOf is the result of a renewal answered with reply, or refused
// with e.
func ResultOf(reply Reply, e *Error) Result {
	if e != nil {
		return Result{Error: &ErrorDetail{Code: e.Code, Message: e.Message, Status: e.Status}}
	}
	return Result{Reply: reply}
}

// RenewalsReply is the answer to a batch of renewals.
type RenewalsReply struct {
	OK      bool     `json:"ok"`
	Results []Result `json:"results"`
}

// EncodeRenewals is the body of a batch of the renewals ms (each an
// OpRenew Message, as EncodeMessage takes it).
func EncodeRenewals(ms []Message) ([]byte, error) {
	if len(ms) == 0 || len(ms) > MaxRenewals {
		return nil, errors.New("wire: a batch holds 1 to " + strconv.Itoa(MaxRenewals) + " renewals, got " + strconv.Itoa(len(ms)))
	}
	out := struct {
		Renewals []jsontext.Value `json:"renewals"`
	}{Renewals: make([]jsontext.Value, len(ms))}
	for i, m := range ms {
		if m.Op != OpRenew {
			return nil, errors.New("wire: a batch holds renewals only, got " + strconv.Quote(string(m.Op)))
		}
		b, err := EncodeMessage(m)
		if err != nil {
			return nil, err
		}
		out.Renewals[i] = b
	}
	return json.Marshal(out)
}

// DecodeRenewals parses the body of a batch of renewals. A body that is
// not a batch is refused as a whole (err, with the codes of DecodeMessage;
// an empty batch or one of more than MaxRenewals is invalid_value); a
// renewal in it that /v1/renew would refuse is refused on its own
// (errs[i], ms[i] then zero).
func DecodeRenewals(data []byte) (ms []Message, errs []*Error, err *Error) {
	var b *struct {
		Renewals *[]jsontext.Value `json:"renewals"`
	}
	if e := json.Unmarshal(data, &b, json.RejectUnknownMembers(true)); e != nil {
		var se *json.SemanticError
		switch {
		case errors.Is(e, jsontext.ErrDuplicateName):
			return nil, nil, errCode(CodeDuplicateField, "a field appears twice: "+e.Error())
		case errors.Is(e, json.ErrUnknownName):
			return nil, nil, errCode(CodeUnknownField, "a batch of renewals has one field, \"renewals\": "+e.Error())
		case errors.As(e, &se) && se.JSONKind != 0:
			return nil, nil, errCode(CodeWrongType, "a batch of renewals is {\"renewals\": [...]}: "+e.Error())
		}
		return nil, nil, errCode(CodeMalformedJSON, "invalid JSON: "+e.Error())
	}
	switch {
	case b == nil:
		return nil, nil, errCode(CodeWrongType, "the body must be a JSON object, got null")
	case b.Renewals == nil:
		return nil, nil, errCode(CodeMissingField, "field \"renewals\" is required in a batch of renewals")
	case len(*b.Renewals) == 0 || len(*b.Renewals) > MaxRenewals:
		return nil, nil, InvalidField("renewals", "must hold 1 to "+strconv.Itoa(MaxRenewals)+" renewals, got "+strconv.Itoa(len(*b.Renewals)))
	}
	ms, errs = make([]Message, len(*b.Renewals)), make([]*Error, len(*b.Renewals))
	for i, v := range *b.Renewals {
		ms[i], errs[i] = DecodeMessage(OpRenew, v)
	}
	return ms, errs, nil
}
