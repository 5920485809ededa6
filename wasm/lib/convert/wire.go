// Package convert decodes the arguments JavaScript passes to the wasm library
// and encodes the results it returns, without syscall/js, so that every check
// runs and is fuzzed natively.
//
// Arguments travel as a sequence of tagged values in a byte buffer the
// JavaScript wrapper fills (wasm/js/codec.mjs, function put). Every
// value is a one-byte Tag followed by its payload: 8 bytes of little-endian
// float64 for a number, a 4-byte little-endian length and UTF-8 bytes for a
// string, a 1-byte Kind and 4-byte handle for an object the library made, and
// nothing for the others. An object that is not the library's is sent as
// TagObject followed by the fields the callee's schema names, in order; an
// object of any other type is sent as its tag alone. A Reader checks both the
// framing and the types, and turns anything unexpected into an
// *ArgumentError, never a panic.
//
// Results travel untagged in the order the callee documents (Writer), since
// both sides know the schema.
package convert

import "math"

// MaxString is the longest string, in UTF-16 code units, the JavaScript
// encoder passes; a longer one arrives as TagTooLong.
const MaxString = 1 << 20

// Tag is the JavaScript type of one encoded value.
type Tag byte

// The tags, as written by the JavaScript encoder.
const (
	TagUndefined Tag = iota
	TagNull
	TagFalse
	TagTrue
	TagNumber
	TagString
	TagObject   // a plain object; its schema's fields follow
	TagArray    // an array; nothing follows
	TagFunction // a function; nothing follows
	TagOther    // a symbol or a bigint; nothing follows
	TagIllFormed
	TagHandle // an object made by the library: Kind, then a uint32 handle
	TagTooLong
	tagCount
)

// TagSame stands, in a grant passed beside its request, for a string equal to
// the matching field of that request (requestId, resource, holderId, the
// domain of coordinatorExpiresAt against sentAt's), so the encoder need not
// send it twice. Anywhere else it is malformed (Next refuses it).
const TagSame = tagCount

var tagNames = [tagCount]string{
	"undefined", "null", "boolean false", "boolean true", "number", "string",
	"object", "array", "function", "symbol or bigint",
	"string that is not well-formed Unicode (lone surrogate)", "lease-fence object",
	"string longer than 1048576 characters",
}

// String names the JavaScript type, for error messages.
func (t Tag) String() string {
	if t < tagCount {
		return tagNames[t]
	}
	return "unknown tag"
}

// Kind says which class a handle belongs to.
type Kind byte

// The kinds of library objects.
const (
	KindClock Kind = iota + 1
	KindCoordinator
	KindClient
	KindLease
	KindGate
	KindNaive
	kindCount
)

var kindNames = [kindCount]string{"", "clock", "LeaseCoordinator", "LeaseClient", "lease", "FenceGate", "naive lease"}

// String names the class, for error messages.
func (k Kind) String() string {
	if k > 0 && k < kindCount {
		return kindNames[k]
	}
	return "unknown kind"
}

// Value is one decoded argument.
type Value struct {
	Tag    Tag
	Num    float64 // TagNumber
	Str    string  // TagString
	Kind   Kind    // TagHandle
	Handle uint32  // TagHandle
}

// Reader decodes tagged values from an argument buffer. Its decoders keep
// the first error (a value of the wrong type, out of range, or a malformed
// buffer) and decode nothing after it; End returns it, so a caller decodes
// every argument and checks once.
type Reader struct {
	b   []byte
	p   int
	err error
	// Strings, when set, supplies decoded strings so that a string seen
	// before is not allocated again.
	Strings *Interner
}

// Interner hands out one string per distinct byte sequence it still holds,
// so hot calls that pass the same resource and holder ids again and again
// allocate nothing, and a request id decoded by one call (acquire) is not
// allocated again by the next (complete). It is a direct-mapped cache of
// internSlots strings of up to internLen bytes, indexed by a hash of the
// length and the first and last bytes: finding a string costs a few integer
// operations and one comparison, with no map hashing (which is slow in wasm,
// where Go has no hardware-assisted string hash); a string whose slot holds
// another replaces it. The zero value is ready to use.
type Interner struct {
	slots [internSlots]string
}

const (
	internSlots = 256 // a power of two
	internLen   = 64
)

// internSlot returns the index of b's slot.
func internSlot[T ~string | ~[]byte](b T) uint32 {
	n := len(b)
	h := uint32(n) * 0x9e3779b1
	if n >= 4 {
		h ^= (uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24) * 0x85ebca6b
		h ^= (uint32(b[n-4]) | uint32(b[n-3])<<8 | uint32(b[n-2])<<16 | uint32(b[n-1])<<24) * 0xc2b2ae35
	} else {
		for i := 0; i < n; i++ {
			h = (h ^ uint32(b[i])) * 0x01000193
		}
	}
	h ^= h >> 15
	h *= 0x2c1b3c6d
	h ^= h >> 13
	return h & (internSlots - 1)
}

// Add puts s in its slot, so that decoding its bytes next returns s without
// allocating: the bridge adds the request id it has just made, which comes
// back with the request.
func (in *Interner) Add(s string) {
	if len(s) <= internLen {
		in.slots[internSlot(s)] = s
	}
}

// String returns b as a string, the same string for the same bytes while
// its slot holds it.
func (in *Interner) String(b []byte) string {
	if len(b) > internLen {
		return string(b)
	}
	i := internSlot(b)
	if s := in.slots[i]; s == string(b) { // no allocation for the comparison
		return s
	}
	s := string(b)
	in.slots[i] = s
	return s
}

// NewReader returns a Reader over b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Reset points r at b from its start.
func (r *Reader) Reset(b []byte) { r.b, r.p, r.err = b, 0, nil }

// Rest returns how many bytes are left.
func (r *Reader) Rest() int { return len(r.b) - r.p }

var errMalformed = argErr("arguments", "are malformed (truncated buffer or unknown tag)")

// Next decodes the next value.
func (r *Reader) Next() (Value, error) {
	if r.p >= len(r.b) {
		return Value{}, errMalformed
	}
	t := Tag(r.b[r.p])
	r.p++
	switch t {
	case TagNumber:
		if len(r.b)-r.p < 8 {
			return Value{}, errMalformed
		}
		v := math.Float64frombits(le64(r.b[r.p:]))
		r.p += 8
		return Value{Tag: t, Num: v}, nil
	case TagString:
		if len(r.b)-r.p < 4 {
			return Value{}, errMalformed
		}
		n := le32(r.b[r.p:])
		r.p += 4
		if uint64(n) > uint64(len(r.b)-r.p) {
			return Value{}, errMalformed
		}
		b := r.b[r.p : r.p+int(n)]
		r.p += int(n)
		if r.Strings != nil {
			return Value{Tag: t, Str: r.Strings.String(b)}, nil
		}
		return Value{Tag: t, Str: string(b)}, nil
	case TagHandle:
		if len(r.b)-r.p < 5 {
			return Value{}, errMalformed
		}
		k := Kind(r.b[r.p])
		h := le32(r.b[r.p+1:])
		r.p += 5
		return Value{Tag: t, Kind: k, Handle: h}, nil
	}
	if t >= tagCount {
		return Value{}, errMalformed
	}
	return Value{Tag: t}, nil
}

// ArgWriter encodes tagged values the way the JavaScript wrapper does. The
// library itself never uses it; tests and fuzz targets build arguments with it.
type ArgWriter struct{ B []byte }

// Tag appends a value that has no payload.
func (w *ArgWriter) Tag(t Tag) *ArgWriter { w.B = append(w.B, byte(t)); return w }

// Number appends a number.
func (w *ArgWriter) Number(v float64) *ArgWriter {
	w.B = append(w.B, byte(TagNumber))
	w.B = put64(w.B, math.Float64bits(v))
	return w
}

// String appends a string.
func (w *ArgWriter) String(s string) *ArgWriter {
	w.B = append(w.B, byte(TagString))
	w.B = put32(w.B, uint32(len(s)))
	w.B = append(w.B, s...)
	return w
}

// Object appends the tag of a plain object; its fields follow.
func (w *ArgWriter) Object() *ArgWriter { return w.Tag(TagObject) }

// Handle appends a library object.
func (w *ArgWriter) Handle(k Kind, h uint32) *ArgWriter {
	w.B = append(w.B, byte(TagHandle), byte(k))
	w.B = put32(w.B, h)
	return w
}

// Writer encodes results, untagged: the reader knows the schema.
type Writer struct{ B []byte }

// Reset empties w, keeping its capacity.
func (w *Writer) Reset() { w.B = w.B[:0] }

// F64 appends a float64.
func (w *Writer) F64(v float64) {
	w.B = put64(w.B, math.Float64bits(v))
}

// Str appends a length-prefixed UTF-8 string.
func (w *Writer) Str(s string) {
	w.B = put32(w.B, uint32(len(s)))
	w.B = append(w.B, s...)
}

// Bool appends a boolean as one byte.
func (w *Writer) Bool(b bool) {
	if b {
		w.B = append(w.B, 1)
	} else {
		w.B = append(w.B, 0)
	}
}

// OutReader decodes what a Writer wrote. It is for tests; it panics on a
// truncated buffer, which would be a bug in the library.
type OutReader struct {
	B []byte
	P int
}

// F64 reads a float64.
func (r *OutReader) F64() float64 {
	v := math.Float64frombits(le64(r.B[r.P:]))
	r.P += 8
	return v
}

// Str reads a string.
func (r *OutReader) Str() string {
	n := int(le32(r.B[r.P:]))
	r.P += 4
	s := string(r.B[r.P : r.P+n])
	r.P += n
	return s
}

// Bool reads a boolean.
func (r *OutReader) Bool() bool {
	v := r.B[r.P] != 0
	r.P++
	return v
}

// Little-endian helpers; encoding/binary would pull reflect into the wasm.

func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(le32(b)) | uint64(le32(b[4:]))<<32
}

func put32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func put64(b []byte, v uint64) []byte {
	return put32(put32(b, uint32(v)), uint32(v>>32))
}
