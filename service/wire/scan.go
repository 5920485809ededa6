package wire

import (
	"bytes"
	"unicode/utf8"
)

// scanBody fills b from data when data is a body in the plain form
// clients write: one object, no whitespace, each member once, each string
// without escapes or control characters and in valid UTF-8, each member's
// value of the JSON type body gives it (a string, a number, or sentAt's
// object of millis and domain). For such a body it gives b exactly what
// json.Unmarshal gives it (TestScanBodyAgrees) without the reflection of
// its unmarshalers (BenchmarkDecodeMessage in package service: 3.1 µs an
// acquisition's body through json.Unmarshal, 0.9 with scanBody). It
// returns false for any other data, leaving b in an unspecified state:
// DecodeMessage then decodes it with json.Unmarshal, which refuses or
// accepts it with its own errors.
func scanBody(data []byte, b *body) bool {
	s := scanner{data: data}
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return s.i == len(data)
	}
	for {
		name, ok := s.raw()
		if !ok || !s.byte(':') {
			return false
		}
		var f *str
		switch string(name) {
		case "requestId":
			f = &b.RequestID
		case "resource":
			f = &b.Resource
		case "holderId":
			f = &b.HolderID
		case "kind":
			f = &b.Kind
		case "secret":
			f = &b.Secret
		case "value":
			f = &b.Value
		case "afterValue":
			f = &b.AfterVal
		case "fence":
			f = (*str)(&b.Fence)
		case "waitMillis":
			f = (*str)(&b.Wait)
		case "afterFence":
			f = (*str)(&b.After)
		case "sentAt":
			if b.SentAt.set || !s.instant(&b.SentAt) {
				return false
			}
		default:
			return false
		}
		if f != nil {
			if f.set {
				return false // twice
			}
			number := f == (*str)(&b.Fence) || f == (*str)(&b.Wait) || f == (*str)(&b.After)
			if f.v, ok = s.value(number); !ok {
				return false
			}
			f.set = true
		}
		if s.byte('}') {
			return s.i == len(data)
		}
		if !s.byte(',') {
			return false
		}
	}
}

type scanner struct {
	data []byte
	i    int
}

// byte consumes c if it comes next.
func (s *scanner) byte(c byte) bool {
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// value consumes a number (if number) or a string.
func (s *scanner) value(number bool) (string, bool) {
	if number {
		return s.num()
	}
	return s.str()
}

// str consumes a string without escapes or control characters, in valid
// UTF-8.
func (s *scanner) str() (string, bool) {
	v, ok := s.raw()
	return string(v), ok
}

// raw is str's bytes, for a member's name (compared without a copy).
func (s *scanner) raw() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	end := bytes.IndexByte(s.data[s.i:], '"')
	if end < 0 {
		return nil, false
	}
	v := s.data[s.i : s.i+end]
	ascii := true
	for _, c := range v {
		if c < 0x20 || c == '\\' {
			return nil, false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	s.i += end + 1
	return v, ascii || utf8.Valid(v)
}

// num consumes a JSON number and returns its text:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) num() (string, bool) {
	v, ok := s.numRaw()
	return string(v), ok
}

// numRaw is num's bytes.
func (s *scanner) numRaw() ([]byte, bool) {
	start := s.i
	s.byte('-')
	switch {
	case s.byte('0'):
	case s.i < len(s.data) && s.data[s.i] >= '1' && s.data[s.i] <= '9':
		s.digits()
	default:
		return nil, false
	}
	if s.byte('.') && !s.digits() {
		return nil, false
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if !s.digits() {
			return nil, false
		}
	}
	return s.data[start:s.i], true
}

// digits consumes one or more decimal digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// instant consumes sentAt's object: millis (a number) and domain (a
// string), each once, in either order, and nothing else.
func (s *scanner) instant(f *instant) bool {
	if !s.byte('{') {
		return false
	}
	for !f.Millis.set || !f.Domain.set {
		name, ok := s.raw()
		if !ok || !s.byte(':') {
			return false
		}
		switch {
		case string(name) == "millis" && !f.Millis.set:
			f.Millis.v, ok = s.num()
			f.Millis.set = ok
		case string(name) == "domain" && !f.Domain.set:
			f.Domain.v, ok = s.str()
			f.Domain.set = ok
		default:
			return false
		}
		if !ok {
			return false
		}
		if !f.Millis.set || !f.Domain.set {
			if !s.byte(',') {
				return false
			}
		}
	}
	f.set = true
	return s.byte('}')
}
