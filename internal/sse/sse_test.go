package sse

import (
	"bufio"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestFraming(t *testing.T) {
	rec := httptest.NewRecorder()
	out := Start(rec, 0)
	out.Event(7, "rejected", map[string]string{"resource": "a\xffb"})
	out.Event(0, "reset", map[string]uint64{"oldest": 3})
	out.Comment("ping")
	out.Event(0, "bad", func() {})
	if n := out.Buffered(); n == 0 || rec.Body.Len() != 0 {
		t.Fatalf("buffered %d, written %d before Flush", n, rec.Body.Len())
	}
	if !out.Flush() {
		t.Fatal("Flush failed")
	}
	want := "id: 7\nevent: rejected\ndata: {\"resource\":\"a\uFFFDb\"}\n\n" +
		"event: reset\ndata: {\"oldest\":3}\n\n" +
		": ping\n\n" +
		"event: bad\ndata: {}\n\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("body\n%q\nwant\n%q", got, want)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if rec.Code != 200 || !rec.Flushed || out.Buffered() != 0 {
		t.Fatalf("code %d flushed %v buffered %d", rec.Code, rec.Flushed, out.Buffered())
	}
}

// TestOverflow: the frame that ends a stream that fell behind goes out at
// once, after what was buffered, without an id.
func TestOverflow(t *testing.T) {
	rec := httptest.NewRecorder()
	out := Start(rec, 0)
	out.Event(4, "rejected", map[string]int{"seq": 4})
	out.Overflow(4)
	want := "id: 4\nevent: rejected\ndata: {\"seq\":4}\n\n" + "event: overflow\ndata: {\"resumeFrom\":4}\n\n"
	if got := rec.Body.String(); got != want || !rec.Flushed || out.Buffered() != 0 {
		t.Fatalf("body %q (flushed %v, %d buffered), want %q", got, rec.Flushed, out.Buffered(), want)
	}
}

func TestRead(t *testing.T) {
	in := ": keepalive\n\nid: 3\nevent: rejected\ndata: {\"a\":1}\n\n" +
		"data: one\ndata:two\n\n" + "event: bare\n\n" + "\n\n" + "event: cut\ndata: {"
	var got []string
	err := Read(strings.NewReader(in), 64, func(event string, data []byte) error {
		got = append(got, event+"|"+string(data))
		return nil
	})
	want := []string{`rejected|{"a":1}`, "|one\ntwo", "bare|"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}

	stop := errors.New("stop")
	n := 0
	err = Read(strings.NewReader(in), 64, func(string, []byte) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("fn's error: %v after %d calls", err, n)
	}
	err = Read(strings.NewReader("data: "+strings.Repeat("x", 5000)+"\n\n"), 4096, func(string, []byte) error { return nil })
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Fatalf("a long line: %v", err)
	}
}
