//go:build !js && !wasip1

package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"strconv"
)

// The write-ahead log of a BoltStore (docs/service.md, Durable state): a
// file of fixed size, written in full with zeros when it is created, so
// that appending to it never allocates blocks or changes the file's size
// and one fdatasync makes a write durable. After a header block, a ring of
// frames: each holds the changes of one group commit, numbered by a
// sequence that only grows. The database records the sequence number and
// the log position of the last frame it holds (a checkpoint); frames after
// it are replayed into the database at open.
//
// Header (walHeaderSize bytes): the magic walMagic, the version (4 bytes),
// the ring's size (8), the id of the database it belongs to (16), then the
// CRC-32C of those bytes (4); the rest is zeros.
//
// Frame, at a multiple of frameAlign from the ring's start, never across
// the ring's end: the magic frameMagic (4 bytes), the payload length (4),
// the sequence number (8), the CRC-32C of the length, the sequence number
// and the payload (4), 4 zero bytes, the payload, then zeros up to the next
// multiple of frameAlign. All integers big-endian.
//
// The writer puts the next frame right after the previous one, or at the
// ring's start when it does not fit before the end, and never over a frame
// the database does not hold yet. So the frames to replay are found by
// following the sequence numbers from the checkpoint's position: the frame
// after n is n+1 at the position right after n, or else at the ring's
// start. The first position where neither holds n+1 ends the log (a frame
// whose write was cut short by a crash has a bad checksum). Every other
// valid frame in the file must be older; a valid frame with a higher
// number behind an unreadable one means the log is damaged, and it is
// refused.
const (
	walMagic      = "lease-fence log\n"
	walVersion    = 1
	walHeaderSize = 4096
	frameMagic    = 0x4c46574c // "LFWL"
	frameHeader   = 24
	frameAlign    = 8
)

// walRingSize is the size of the ring of a new log. A frame is at most
// maxFrame bytes; a group commit with more is written as several frames
// (with one fdatasync). Tests lower both.
var (
	walRingSize int64 = 8 << 20
	maxFrame          = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walPath is where the log of the database at path is.
func walPath(path string) string { return path + ".wal" }

type walFile struct {
	f    *os.File
	path string
	size int64 // ring size
}

// createWAL creates the log at path (refusing if it exists), writes its
// header and zeros over the whole ring, and syncs it.
func createWAL(path string, id [16]byte) (*walFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	w := &walFile{f: f, path: path, size: walRingSize}
	fail := func(err error) (*walFile, error) {
		f.Close()
		_ = os.Remove(path)
		return nil, err
	}
	hdr := make([]byte, walHeaderSize)
	copy(hdr, walMagic)
	binary.BigEndian.PutUint32(hdr[16:], walVersion)
	binary.BigEndian.PutUint64(hdr[20:], uint64(w.size))
	copy(hdr[28:44], id[:])
	binary.BigEndian.PutUint32(hdr[44:], crc32.Checksum(hdr[:44], castagnoli))
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return fail(err)
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < w.size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), w.size-off)], walHeaderSize+off); err != nil {
			return fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	return w, nil
}

// openWAL opens the log at path and checks that its header is intact and
// names the database id.
func openWAL(path string, id [16]byte) (*walFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errors.New("its log " + path + " does not exist (it may hold acknowledged changes; restore it, never start without it)")
		}
		return nil, err
	}
	bad := func(why string) (*walFile, error) {
		f.Close()
		return nil, errors.New("its log " + path + " " + why)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return bad("is not a regular file")
	}
	hdr := make([]byte, 48)
	if n, _ := f.ReadAt(hdr, 0); n != len(hdr) || string(hdr[:16]) != walMagic {
		return bad("is not a lease-fence log (no header)")
	}
	if crc32.Checksum(hdr[:44], castagnoli) != binary.BigEndian.Uint32(hdr[44:]) {
		return bad("has a damaged header")
	}
	if v := binary.BigEndian.Uint32(hdr[16:]); v != walVersion {
		return bad("has version " + strconv.FormatUint(uint64(v), 10) + ", not " + strconv.Itoa(walVersion))
	}
	if !bytes.Equal(hdr[28:44], id[:]) {
		return bad("belongs to another state database")
	}
	size := int64(binary.BigEndian.Uint64(hdr[20:]))
	if size < 2*int64(maxFrame) || size > 1<<40 || size%frameAlign != 0 {
		return bad("has a damaged header (ring size " + strconv.FormatInt(size, 10) + ")")
	}
	if fi.Size() < walHeaderSize+size {
		return bad("is truncated (" + strconv.FormatInt(fi.Size(), 10) + " bytes, its header says " + strconv.FormatInt(walHeaderSize+size, 10) + ")")
	}
	return &walFile{f: f, path: path, size: size}, nil
}

func (w *walFile) close() error { return w.f.Close() }

// frameSize is the bytes a frame with n payload bytes takes in the ring.
func frameSize(n int) int64 {
	return (frameHeader + int64(n) + frameAlign - 1) / frameAlign * frameAlign
}

// appendFrame appends the frame of seq with payload to buf.
func appendFrame(buf []byte, seq uint64, payload []byte) []byte {
	start := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, frameMagic)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(payload)))
	buf = binary.BigEndian.AppendUint64(buf, seq)
	crc := crc32.Update(crc32.Checksum(buf[start+4:start+16], castagnoli), castagnoli, payload)
	buf = binary.BigEndian.AppendUint32(buf, crc)
	buf = append(buf, 0, 0, 0, 0)
	buf = append(buf, payload...)
	for (len(buf)-start)%frameAlign != 0 {
		buf = append(buf, 0)
	}
	return buf
}

// walFrame is a valid frame read from the ring.
type walFrame struct {
	seq      uint64
	pos, end int64 // ring offsets
	payload  []byte
}

// frameAt checks the frame whose header h was read at pos; ring, if not
// nil, is the whole ring already read.
func (w *walFile) frameAt(pos int64, h, ring []byte) (walFrame, bool, error) {
	if binary.BigEndian.Uint32(h) != frameMagic {
		return walFrame{}, false, nil
	}
	n := int64(binary.BigEndian.Uint32(h[4:]))
	if n > int64(maxFrame) || pos+frameSize(int(n)) > w.size {
		return walFrame{}, false, nil
	}
	var payload []byte
	if ring != nil {
		payload = ring[pos+frameHeader : pos+frameHeader+n]
	} else {
		payload = make([]byte, n)
		if _, err := w.f.ReadAt(payload, walHeaderSize+pos+frameHeader); err != nil {
			return walFrame{}, false, err
		}
	}
	crc := crc32.Update(crc32.Checksum(h[4:16], castagnoli), castagnoli, payload)
	if crc != binary.BigEndian.Uint32(h[16:]) {
		return walFrame{}, false, nil
	}
	return walFrame{seq: binary.BigEndian.Uint64(h[8:]), pos: pos, end: pos + frameSize(int(n)), payload: payload}, true, nil
}

// recover returns the frames after the checkpoint (sequence number last,
// ring position pos), in order, and refuses a damaged log: a valid frame
// numbered above the last one found, behind one that is not readable.
func (w *walFile) recover(last uint64, pos int64) ([]walFrame, error) {
	ring := make([]byte, w.size)
	if _, err := w.f.ReadAt(ring, walHeaderSize); err != nil {
		return nil, errors.New("reading the log " + w.path + ": " + err.Error())
	}
	at := func(p int64) (walFrame, bool) {
		if p < 0 || p+frameHeader > w.size {
			return walFrame{}, false
		}
		fr, ok, _ := w.frameAt(p, ring[p:p+frameHeader], ring)
		return fr, ok
	}
	if pos < 0 || pos > w.size || pos%frameAlign != 0 {
		return nil, inconsistent("the checkpoint's log position " + strconv.FormatInt(pos, 10) + " is outside the log")
	}
	var frames []walFrame
	expect := last + 1
	for {
		fr, ok := at(pos)
		if !ok || fr.seq != expect {
			if fr, ok = at(0); !ok || fr.seq != expect {
				break
			}
		}
		frames = append(frames, fr)
		pos = fr.end
		expect++
		if expect == math.MaxUint64 {
			return nil, inconsistent("the log's sequence numbers ran out")
		}
	}
	for p := int64(0); p+frameHeader <= w.size; p += frameAlign {
		if binary.BigEndian.Uint32(ring[p:]) != frameMagic {
			continue
		}
		if fr, ok := at(p); ok && fr.seq >= expect {
			return nil, inconsistent("the log " + w.path + " is damaged: frame " + strconv.FormatUint(expect, 10) +
				" is missing or unreadable, but frame " + strconv.FormatUint(fr.seq, 10) + " after it is intact (at byte " +
				strconv.FormatInt(walHeaderSize+p, 10) + ")")
		}
	}
	return frames, nil
}

// encodeChanges appends the encoding of cs to buf: the count, then each
// change: the high-water mark (8 bytes), the records put (each its
// resource and encodeRecord, length-prefixed), the resources deleted, the
// releases written (each its request id and encodeRelease), the request ids
// forgotten and ForgetBefore (float64 bits, 8 bytes). Counts and lengths
// are uvarints.
func encodeChanges(buf []byte, cs []Change) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(cs)))
	for _, c := range cs {
		buf = appendChange(buf, c)
	}
	return buf
}

// appendChange appends the encoding of one change, as encodeChanges
// writes each.
func appendChange(buf []byte, c Change) []byte {
	buf = binary.BigEndian.AppendUint64(buf, c.IssuedFence)
	buf = binary.AppendUvarint(buf, uint64(len(c.Put)))
	for _, r := range c.Put {
		buf = appendLenString(buf, r.Resource)
		buf = appendLenBytes(buf, encodeRecord(r))
	}
	buf = binary.AppendUvarint(buf, uint64(len(c.Delete)))
	for _, name := range c.Delete {
		buf = appendLenString(buf, name)
	}
	buf = binary.AppendUvarint(buf, uint64(len(c.Released)))
	for _, r := range c.Released {
		buf = appendLenString(buf, r.RequestID)
		buf = appendLenBytes(buf, encodeRelease(r))
	}
	buf = binary.AppendUvarint(buf, uint64(len(c.Forget)))
	for _, id := range c.Forget {
		buf = appendLenString(buf, id)
	}
	return binary.BigEndian.AppendUint64(buf, math.Float64bits(c.ForgetBefore))
}

func appendLenString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func appendLenBytes(buf, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

// decodeChanges reads what encodeChanges wrote, checking every record as
// the database's own are checked.
func decodeChanges(b []byte) ([]Change, error) {
	bad := inconsistent("a log frame does not decode")
	r := &frameReader{b: b, ok: true}
	n := r.count()
	if !r.ok {
		return nil, bad
	}
	cs := make([]Change, 0, n)
	for range n {
		var c Change
		var err error
		c.IssuedFence = r.u64()
		if c.Put, err = readPairs(r, decodeRecord); err != nil {
			return nil, err
		}
		c.Delete = r.strs()
		if c.Released, err = readPairs(r, decodeRelease); err != nil {
			return nil, err
		}
		c.Forget = r.strs()
		c.ForgetBefore = math.Float64frombits(r.u64())
		if !r.ok {
			return nil, bad
		}
		if err := checkChange(c); err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if !r.ok || len(r.b) != 0 {
		return nil, bad
	}
	return cs, nil
}

// frameReader reads a log frame's fields from b; ok turns false at the first
// field that does not decode, and every read after that gives zero values.
type frameReader struct {
	b  []byte
	ok bool
}

func (r *frameReader) count() int {
	if !r.ok {
		return 0
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)) {
		r.ok = false
		return 0
	}
	r.b = r.b[k:]
	return int(n)
}

func (r *frameReader) str() string {
	if !r.ok {
		return ""
	}
	s, rest, ok := readLenString(r.b)
	r.b, r.ok = rest, ok
	return s
}

func (r *frameReader) u64() uint64 {
	if !r.ok || len(r.b) < 8 {
		r.ok = false
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// strs reads a count and that many strings.
func (r *frameReader) strs() []string {
	var out []string
	for range r.count() {
		if s := r.str(); r.ok {
			out = append(out, s)
		}
	}
	return out
}

// readPairs reads a count and that many key/value pairs, each checked by
// decode. A pair that does not decode leaves r.ok false and returns nil.
func readPairs[T any](r *frameReader, decode func(key, v []byte) (T, error)) ([]T, error) {
	var out []T
	for range r.count() {
		key, v := r.str(), r.str()
		if !r.ok {
			return nil, nil
		}
		x, err := decode([]byte(key), []byte(v))
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}
