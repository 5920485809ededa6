package service

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// AppendEntryBinary appends e (without its resource, which stores keep as
// the key) to b in a binary layout, for stores that keep entries as bytes
// (package pebblestore; an entry is written on every grant, and JSON cost
// several percent of the native server's CPU per cycle, docs/service.md):
//
//	byte     EntryBinaryVersion (2)
//	uvarint  fence (0: no lease record)
//	         if fence != 0: string owner, string holder id, string request id,
//	         8 bytes expiry (float64 bits, big-endian), 32 bytes secret hash,
//	         string value
//	uvarint  last fence
//	releases (AppendReleasesBinary)
//	uvarint  revoked fence (0: no revocation)
//	         if not 0: string holder id, 8 bytes time (float64 bits, big-endian)
//
// where a string is a uvarint length and that many bytes of UTF-8. There is
// exactly one encoding of each entry: DecodeEntryBinary refuses another
// version, a varint that is not the shortest, invalid UTF-8, a length or
// count beyond the bounds, and bytes left over. It also reads version 1,
// written before values and revocations (without the value and the
// revocation): a state written then opens as it is, and each entry is
// written in version 2 at its next change.
func AppendEntryBinary(b []byte, e *Entry) []byte { return appendEntry(b, e, EntryBinaryVersion) }

// appendEntry appends e in layout version v: version 1 lacks the value and
// the revocation.
func appendEntry(b []byte, e *Entry, v byte) []byte {
	b = append(b, v)
	b = binary.AppendUvarint(b, e.Fence)
	if e.Fence != 0 {
		b = appendString(b, e.Owner)
		b = appendString(b, e.HolderID)
		b = appendString(b, e.RequestID)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.ExpiresAt))
		b = append(b, e.SecretHash[:]...)
		if v >= 2 {
			b = appendString(b, e.Value)
		}
	}
	b = binary.AppendUvarint(b, e.LastFence)
	b = AppendReleasesBinary(b, e.Released)
	if v < 2 {
		return b
	}
	b = binary.AppendUvarint(b, e.Revoked.Fence)
	if e.Revoked.Fence != 0 {
		b = appendString(b, e.Revoked.HolderID)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.Revoked.At))
	}
	return b
}

// EntryBinaryVersion is the first byte of AppendEntryBinary's layout;
// entryBinaryV1 the previous layout's, which DecodeEntryBinary still reads.
const (
	EntryBinaryVersion = 2
	entryBinaryV1      = 1
)

// AppendEntryBinaryV1 appends e in version 1 of the layout (no value, no
// revocation): what the previous version wrote, for upgrade tests.
func AppendEntryBinaryV1(b []byte, e *Entry) []byte { return appendEntry(b, e, entryBinaryV1) }

// AppendReleasesBinary appends rels to b in a binary layout (a store that
// keeps the rest of an entry in columns of its own keeps its releases so:
// package pgstore): a uvarint count (at most MaxReleases), then each
// release: string request id, string holder id, uvarint fence, 8 bytes
// time (float64 bits, big-endian), 32 bytes secret hash.
func AppendReleasesBinary(b []byte, rels []Release) []byte {
	b = binary.AppendUvarint(b, uint64(len(rels)))
	for i := range rels {
		r := &rels[i]
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

// maxStoredString bounds a stored id (the handler allows at most
// wire.MaxStringBytes), maxStoredValue a stored value (wire.MaxValueBytes).
const (
	maxStoredString = 1024
	maxStoredValue  = 4096
)

// DecodeEntryBinary reads what AppendEntryBinary wrote for resource,
// strictly: the error wraps ErrInconsistent and says what is wrong. The
// entry's values are checked by CheckEntry.
func DecodeEntryBinary(resource string, data []byte) (Entry, error) {
	e := Entry{Resource: resource}
	r := binReader{d: data}
	v := r.bytes(1)[0]
	if r.err == nil && v != EntryBinaryVersion && v != entryBinaryV1 {
		r.fail("it has the unknown version " + strconv.Itoa(int(v)))
	}
	if e.Fence = r.uvarint(); e.Fence != 0 {
		e.Owner, e.HolderID, e.RequestID, e.ExpiresAt = r.string(), r.string(), r.string(), r.float()
		copy(e.SecretHash[:], r.bytes(32))
		if v == EntryBinaryVersion {
			e.Value = r.text(maxStoredValue, "a value")
		}
	}
	e.LastFence = r.uvarint()
	e.Released = r.releases()
	if v == EntryBinaryVersion {
		if e.Revoked.Fence = r.uvarint(); e.Revoked.Fence != 0 {
			e.Revoked.HolderID, e.Revoked.At = r.string(), r.float()
		}
	}
	if err := r.end(); err != nil {
		return Entry{}, inconsistent("the entry of " + quote(resource) + " is damaged: " + err.Error())
	}
	return e, nil
}

// DecodeReleasesBinary reads what AppendReleasesBinary wrote, strictly (as
// DecodeEntryBinary); nil if there are none.
func DecodeReleasesBinary(resource string, data []byte) ([]Release, error) {
	r := binReader{d: data}
	rels := r.releases()
	if err := r.end(); err != nil {
		return nil, inconsistent("the releases of " + quote(resource) + " are damaged: " + err.Error())
	}
	return rels, nil
}

// binReader reads the binary layout, remembering the first problem.
type binReader struct {
	d   []byte
	err error
}

func (r *binReader) fail(why string) {
	if r.err == nil {
		r.err = errors.New(why)
	}
	r.d = nil
}

func (r *binReader) end() error {
	if r.err == nil && len(r.d) > 0 {
		r.fail("it has bytes after its end")
	}
	return r.err
}

func (r *binReader) uvarint() uint64 {
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

func (r *binReader) bytes(n int) []byte {
	if len(r.d) < n {
		r.fail("it is cut short")
		return make([]byte, n)
	}
	b := r.d[:n]
	r.d = r.d[n:]
	return b
}

func (r *binReader) string() string { return r.text(maxStoredString, "an id") }

// text reads a string of at most limit bytes; what names it in a message.
func (r *binReader) text(limit uint64, what string) string {
	n := r.uvarint()
	if n > limit {
		r.fail(what + " is longer than " + strconv.FormatUint(limit, 10) + " bytes")
		return ""
	}
	s := string(r.bytes(int(n)))
	if !utf8.ValidString(s) {
		r.fail(what + " is not valid UTF-8")
		return ""
	}
	return s
}

func (r *binReader) float() float64 { return math.Float64frombits(binary.BigEndian.Uint64(r.bytes(8))) }

func (r *binReader) releases() []Release {
	n := r.uvarint()
	if n > MaxReleases {
		r.fail("it holds more than " + strconv.Itoa(MaxReleases) + " releases")
	}
	if n == 0 || r.err != nil {
		return nil
	}
	rels := make([]Release, n)
	for i := range rels {
		rel := &rels[i]
		rel.RequestID, rel.HolderID, rel.Fence, rel.At = r.string(), r.string(), r.uvarint(), r.float()
		copy(rel.SecretHash[:], r.bytes(32))
	}
	return rels
}
