package wire

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// The hot path: requests are small objects, decoded on every call, and on a
// Worker every microsecond of Go costs several under wasm. DecodeMessage
// checks a body with json.Valid once and then walks it by hand here; bodies
// that are not valid JSON take the slower decoder, which words the error.

// scanObject calls member for each name and raw value of the JSON object
// data, which must already be valid JSON. It refuses a value that is not an
// object.
func scanObject(what string, data []byte, member func(name string, raw json.RawMessage) *Error) *Error {
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return errCode(CodeWrongType, what+" must be a JSON object, got "+rawType(data[i:]))
	}
	i = skipSpace(data, i+1)
	if data[i] == '}' {
		return nil
	}
	for {
		end := skipString(data, i)
		name, err := unquote(data[i:end])
		if err != nil {
			return err
		}
		i = skipSpace(data, end)
		i = skipSpace(data, i+1) // the ':'
		vend := skipValue(data, i)
		if err := member(name, json.RawMessage(data[i:vend])); err != nil {
			return err
		}
		i = skipSpace(data, vend)
		if data[i] == '}' {
			return nil
		}
		i = skipSpace(data, i+1) // the ','
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

// skipString returns the index just past the string starting at data[i].
func skipString(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// skipValue returns the index just past the value starting at data[i].
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				j = skipString(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(data)
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// unquote decodes a JSON string literal (valid, with its quotes).
func unquote(raw []byte) (string, *Error) {
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", malformed(err)
			}
			return s, nil
		}
	}
	return string(body), nil
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		// encoding/json also escapes <, > and &; fall back to it for
		// those too, so the bytes are always the ones it writes.
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat appends f the way encoding/json writes numbers.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0') // never reached: instants and TTLs are finite
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Like encoding/json: 1e-07 is written 1e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendReply encodes r as JSON, as json.Marshal would, without reflection.
func appendReply(b []byte, r Reply) []byte {
	b = append(b, `{"ok":`...)
	b = strconv.AppendBool(b, r.OK)
	if g := r.Grant; g != nil {
		b = append(b, `,"grant":{"requestId":`...)
		b = appendString(b, g.RequestID)
		b = append(b, `,"resource":`...)
		b = appendString(b, g.Resource)
		b = append(b, `,"holderId":`...)
		b = appendString(b, g.HolderID)
		b = append(b, `,"fence":`...)
		b = strconv.AppendUint(b, g.Fence, 10)
		b = append(b, `,"ttlMillis":`...)
		b = appendFloat(b, g.TTLMillis)
		b = append(b, `,"coordinatorExpiresAt":{"millis":`...)
		b = appendFloat(b, g.CoordinatorExpiresAt.Millis)
		b = append(b, `,"domain":`...)
		b = appendString(b, g.CoordinatorExpiresAt.Domain)
		b = append(b, `},"secret":`...)
		b = appendString(b, g.Secret)
		b = append(b, '}')
	}
	if r.HeldBy != "" {
		b = append(b, `,"heldBy":`...)
		b = appendString(b, r.HeldBy)
	}
	if r.RetryAfterMillis != 0 {
		b = append(b, `,"retryAfterMillis":`...)
		b = appendFloat(b, r.RetryAfterMillis)
	}
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, r.Reason)
	}
	return append(b, '}')
}

// parseReply reads the body of a 200 answer. An answer in the shape the
// handler writes (the names of Reply and Grant, nothing else, no nulls) is
// read by hand; anything else goes through encoding/json, whose rules then
// apply, so the result is always what json.Unmarshal gives.
func parseReply(data []byte) (Reply, error) {
	if r, ok := fastReply(data); ok {
		return r, nil
	}
	var r Reply
	err := json.Unmarshal(data, &r)
	return r, err
}

// errNotFast stops a hand-read answer that encoding/json must read instead.
var errNotFast = &Error{Code: "not_fast"}

func fastReply(data []byte) (r Reply, ok bool) {
	if !json.Valid(data) {
		return Reply{}, false
	}
	err := scanObject("reply", data, func(name string, raw json.RawMessage) *Error {
		ok := true
		switch name {
		case "ok":
			r.OK, ok = rawBool(raw)
		case "grant":
			if r.Grant != nil {
				return errNotFast // encoding/json merges the two
			}
			r.Grant, ok = fastGrant(raw)
		case "heldBy":
			r.HeldBy, ok = rawString(raw)
		case "retryAfterMillis":
			r.RetryAfterMillis, ok = rawFloat(raw)
		case "reason":
			r.Reason, ok = rawString(raw)
		default:
			ok = false
		}
		if !ok {
			return errNotFast
		}
		return nil
	})
	return r, err == nil
}

func fastGrant(data json.RawMessage) (*Grant, bool) {
	if data[0] != '{' {
		return nil, false
	}
	g := new(Grant)
	err := scanObject("grant", data, func(name string, raw json.RawMessage) *Error {
		ok := true
		switch name {
		case "requestId":
			g.RequestID, ok = rawString(raw)
		case "resource":
			g.Resource, ok = rawString(raw)
		case "holderId":
			g.HolderID, ok = rawString(raw)
		case "fence":
			var err error
			g.Fence, err = strconv.ParseUint(string(raw), 10, 64)
			ok = err == nil && raw[0] != '+'
		case "ttlMillis":
			g.TTLMillis, ok = rawFloat(raw)
		case "coordinatorExpiresAt":
			if raw[0] != '{' {
				return errNotFast
			}
			return scanObject("coordinatorExpiresAt", raw, func(name string, raw json.RawMessage) *Error {
				ok := true
				switch name {
				case "millis":
					g.CoordinatorExpiresAt.Millis, ok = rawFloat(raw)
				case "domain":
					g.CoordinatorExpiresAt.Domain, ok = rawString(raw)
				default:
					ok = false
				}
				if !ok {
					return errNotFast
				}
				return nil
			})
		case "secret":
			g.Secret, ok = rawString(raw)
		default:
			ok = false
		}
		if !ok {
			return errNotFast
		}
		return nil
	})
	return g, err == nil
}

func rawBool(raw json.RawMessage) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// rawString reads a JSON string; one that is not valid UTF-8 is left to
// encoding/json, which replaces the bad bytes.
func rawString(raw json.RawMessage) (string, bool) {
	if raw[0] != '"' {
		return "", false
	}
	s, err := unquote(raw)
	if err != nil || !utf8.ValidString(s) {
		return "", false
	}
	return s, true
}

func rawFloat(raw json.RawMessage) (float64, bool) {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil
}
