//go:build !js && !wasip1

package pebblestore

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/lease-fence/lease-fence/service"
)

// The stored form of an entry (the value of a "lease/<resource>" key) is
// binary, laid out in a fixed order (an entry is written on every grant,
// and JSON cost about 8% of the server's CPU per cycle; docs/service.md):
//
//	byte     entryVersion (1)
//	uvarint  fence (0: no lease record)
//	         if fence != 0: string holder id, string request id,
//	         8 bytes expiry (float64 bits, big-endian), 32 bytes secret hash
//	uvarint  last fence
//	uvarint  number of releases (at most service.MaxReleases), then each:
//	         string request id, string holder id, uvarint fence,
//	         8 bytes time (float64 bits), 32 bytes secret hash
//
// where a string is a uvarint length and that many bytes of UTF-8. There is
// exactly one encoding of each entry: decodeEntry refuses another version,
// a varint that is not the shortest, invalid UTF-8, a length or count
// beyond the bounds, and bytes left over, and service.CheckEntry then
// checks the values.
const entryVersion = 1

// maxStoredString bounds a stored id (the handler allows at most
// wire.MaxStringBytes).
const maxStoredString = 1024

// appendEntry appends the stored form of e to b.
func appendEntry(b []byte, e *service.Entry) []byte {
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, e.Fence)
	if e.Fence != 0 {
		b = appendString(b, e.HolderID)
		b = appendString(b, e.RequestID)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.ExpiresAt))
		b = append(b, e.SecretHash[:]...)
	}
	b = binary.AppendUvarint(b, e.LastFence)
	b = binary.AppendUvarint(b, uint64(len(e.Released)))
	for i := range e.Released {
		r := &e.Released[i]
		b = appendString(b, r.RequestID)
		b = appendString(b, r.HolderID)
		b = binary.AppendUvarint(b, r.Fence)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.At))
		b = append(b, r.SecretHash[:]...)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// entryReader reads a stored entry, remembering the first problem.
type entryReader struct {
	d   []byte
	err error
}

func (r *entryReader) fail(why string) {
	if r.err == nil {
		r.err = errors.New(why)
	}
	r.d = nil
}

func (r *entryReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.d)
	switch {
	case n <= 0:
		r.fail("a number is cut short or too large")
		return 0
	case n != len(binary.AppendUvarint(nil, v)):
		r.fail("a number is not written in its shortest form")
		return 0
	}
	r.d = r.d[n:]
	return v
}

func (r *entryReader) bytes(n int) []byte {
	if len(r.d) < n {
		r.fail("it is cut short")
		return make([]byte, n)
	}
	b := r.d[:n]
	r.d = r.d[n:]
	return b
}

func (r *entryReader) string() string {
	n := r.uvarint()
	if n > maxStoredString {
		r.fail("an id is longer than 1024 bytes")
		return ""
	}
	s := string(r.bytes(int(n)))
	if !utf8.ValidString(s) {
		r.fail("an id is not valid UTF-8")
		return ""
	}
	return s
}

func (r *entryReader) float() float64 {
	return math.Float64frombits(binary.BigEndian.Uint64(r.bytes(8)))
}

// decodeEntry reads what appendEntry wrote for resource, strictly; the
// error wraps service.ErrInconsistent.
func decodeEntry(resource string, data []byte) (service.Entry, error) {
	e := service.Entry{Resource: resource}
	r := entryReader{d: data}
	if v := r.bytes(1)[0]; r.err == nil && v != entryVersion {
		r.fail("it has the unknown version " + strconv.Itoa(int(v)))
	}
	if e.Fence = r.uvarint(); e.Fence != 0 {
		e.HolderID, e.RequestID, e.ExpiresAt = r.string(), r.string(), r.float()
		copy(e.SecretHash[:], r.bytes(32))
	}
	e.LastFence = r.uvarint()
	n := r.uvarint()
	if n > service.MaxReleases {
		r.fail("it holds more than " + strconv.Itoa(service.MaxReleases) + " releases")
	}
	if n > 0 && r.err == nil {
		e.Released = make([]service.Release, n)
		for i := range e.Released {
			rel := &e.Released[i]
			rel.RequestID, rel.HolderID, rel.Fence, rel.At = r.string(), r.string(), r.uvarint(), r.float()
			copy(rel.SecretHash[:], r.bytes(32))
		}
	}
	if r.err == nil && len(r.d) > 0 {
		r.fail("it has bytes after its end")
	}
	if r.err != nil {
		return service.Entry{}, damaged("the entry of " + quote(resource) + " is damaged: " + r.err.Error())
	}
	return e, nil
}

// quote quotes s, cut to a length that is safe to put in a message.
func quote(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}
