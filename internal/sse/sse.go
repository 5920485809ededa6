// Package sse writes Server-Sent Events (the coordinator's watch stream,
// the console's relay of gate refusals, fence-proxy's refusal stream) and
// reads them (the Go client's watch, the relay's connections to the gates).
package sse

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/lease-fence/lease-fence/internal/sse/overflow"
)

// Writer buffers events and writes them to one response on Flush, so that
// several ready events go out in one write.
type Writer struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	slack time.Duration
	buf   bytes.Buffer
}

// Start answers 200 with the headers of an event stream and clears the
// read deadline: the stream outlives the server's read timeout, which
// would otherwise end the request. Each Flush may take up to slack (0: no
// deadline), so that a client that reads nothing is cut off.
func Start(w http.ResponseWriter, slack time.Duration) *Writer {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &Writer{w: w, rc: rc, slack: slack}
}

// Event buffers one event: its id (if not zero), type and v as JSON
// (invalid UTF-8 in strings becomes U+FFFD; a value that cannot be
// marshalled is sent as {}).
func (s *Writer) Event(id uint64, typ string, v any) {
	buf := &s.buf
	if id != 0 {
		buf.WriteString("id: ")
		buf.WriteString(strconv.FormatUint(id, 10))
		buf.WriteByte('\n')
	}
	buf.WriteString("event: ")
	buf.WriteString(typ)
	buf.WriteString("\ndata: ")
	data, err := json.Marshal(v, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		data = []byte("{}")
	}
	buf.Write(data)
	buf.WriteString("\n\n")
}

// Overflow writes the last frame of a stream whose reader fell behind
// (package overflow): resume after resumeFrom, the last sequence number
// sent. The caller then ends the stream.
func (s *Writer) Overflow(resumeFrom uint64) {
	s.Event(0, overflow.Event, overflow.Frame{ResumeFrom: resumeFrom})
	s.Flush()
}

// Comment buffers a comment line (": text"), which clients ignore: a
// keepalive that stops proxies from closing an idle stream.
func (s *Writer) Comment(text string) {
	s.buf.WriteString(": ")
	s.buf.WriteString(text)
	s.buf.WriteString("\n\n")
}

// Buffered is how many bytes wait for Flush.
func (s *Writer) Buffered() int { return s.buf.Len() }

// Flush writes what is buffered (if anything) and flushes the response;
// false means the client is gone or stalled, and the stream should end.
func (s *Writer) Flush() bool {
	if s.slack > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.slack))
	}
	if s.buf.Len() > 0 {
		_, err := s.w.Write(s.buf.Bytes())
		s.buf.Reset()
		if err != nil {
			return false
		}
	}
	return s.rc.Flush() == nil
}

// Read reads events from r until it ends, and calls fn with the type and
// the data (its lines joined by newlines) of each event that has either;
// data is only valid during the call. Comments are skipped. It returns
// fn's first error, or what reading r failed with (bufio.ErrTooLong for a
// line longer than maxLine), or nil at the end of r.
func Read(r io.Reader, maxLine int, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	var event string
	var data []byte
	var typed, hasData bool
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if typed || hasData {
				if err := fn(event, data); err != nil {
					return err
				}
			}
			event, data, typed, hasData = "", data[:0], false, false
			continue
		}
		name, val, _ := bytes.Cut(line, []byte(":"))
		val = bytes.TrimPrefix(val, []byte(" "))
		switch string(name) {
		case "event":
			event, typed = string(val), true
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, val...), true
		}
	}
	return sc.Err()
}
