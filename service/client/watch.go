package client

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json"

	"github.com/lease-fence/lease-fence/internal/sse"
	"github.com/lease-fence/lease-fence/service/wire"
)

// LeaseInfo is one live lease in a list.
type LeaseInfo = wire.LeaseInfo

// ListOptions selects what List and ListPage read.
type ListOptions struct {
	// Prefix selects the resources whose names begin with it.
	Prefix string
	// Cursor is the Cursor of the page before (ListPage); "" the first.
	Cursor string
	// Limit bounds a page: 1 to 1000; zero means 1000.
	Limit int
	// Waiters asks for each lease's waiters' holder ids, in queue order.
	Waiters bool
}

// Page is one page of a list: its leases in byte order of resource, and
// the cursor of the next page ("" after the last).
type Page struct {
	Leases []LeaseInfo
	Cursor string
}

// ListPage reads one page of the live leases under opts.Prefix (POST
// /v1/list). A page may hold fewer than opts.Limit leases, even none, and
// still have a Cursor. A coordinator that cannot list (a Worker) answers
// with a *wire.Error of code not_supported.
func (c *Client) ListPage(ctx context.Context, opts ListOptions) (Page, error) {
	if opts.Limit < 0 || opts.Limit > wire.MaxListLimit {
		return Page{}, errors.New("client: ListOptions.Limit must be from 0 to " + strconv.Itoa(wire.MaxListLimit))
	}
	body, err := json.Marshal(wire.ListRequest{Prefix: opts.Prefix, Cursor: opts.Cursor, Limit: opts.Limit, Waiters: opts.Waiters})
	if err != nil {
		return Page{}, err
	}
	data, err := c.sendTo(ctx, wire.ListPath, body)
	if err != nil {
		return Page{}, err
	}
	var out wire.ListReply
	if err := json.Unmarshal(data, &out); err != nil {
		return Page{}, errors.New("client: unreadable list: " + err.Error())
	}
	return Page{Leases: out.Leases, Cursor: out.Cursor}, nil
}

// List reads every page of the live leases under opts.Prefix, one page at
// a time, and yields each lease; it stops at the first error, which it
// yields. A lease live throughout the listing is yielded exactly once.
func (c *Client) List(ctx context.Context, opts ListOptions) iter.Seq2[LeaseInfo, error] {
	return func(yield func(LeaseInfo, error) bool) {
		for {
			p, err := c.ListPage(ctx, opts)
			if err != nil {
				yield(LeaseInfo{}, err)
				return
			}
			for _, l := range p.Leases {
				if !yield(l, nil) {
					return
				}
			}
			if p.Cursor == "" {
				return
			}
			opts.Cursor = p.Cursor
		}
	}
}

// sendTo posts body to path until it gets an answer, a refusal that will
// not change, or runs out of attempts or ctx, as calls are sent (for calls
// that change nothing, so any of them may be sent again).
func (c *Client) sendTo(ctx context.Context, path string, body []byte) ([]byte, error) {
	var last error
	start := int(c.cur.Load())
	for n := 1; n <= c.attempts; n++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		i := (start + n - 1) % len(c.bases)
		if back := n - len(c.bases); back >= 1 {
			if err := c.backoffPause(ctx, back+1); err != nil {
				return nil, err
			}
		}
		status, data, err := c.exchange(ctx, i, path, body, c.timeout, -1)
		var be buildError
		if errors.As(err, &be) {
			return nil, err
		}
		if err == nil && status == http.StatusOK {
			c.cur.Store(int32(i))
			return data, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			e := wire.ParseError(status, data)
			if e == nil {
				e = &wire.Error{Status: status, Code: "http_" + strconv.Itoa(status), Message: "unexpected answer: " + wire.QuoteShort(string(data))}
			}
			if !e.Temporary() {
				return nil, e
			}
			err = e
		}
		last = err
	}
	return nil, errors.Join(errors.New("client: "+path+" got no answer after "+strconv.Itoa(c.attempts)+" attempts"), last)
}

// backoffPause waits the backoff before attempt n, or until ctx ends.
func (c *Client) backoffPause(ctx context.Context, n int) error {
	d := c.backoff(n)
	if d <= 0 {
		return ctx.Err()
	}
	return pause(ctx, d)
}

// WatchOptions selects what Watch streams.
type WatchOptions struct {
	// Prefix selects the resources whose events are sent.
	Prefix string
	// Stream and AfterSeq resume an earlier watch: the events of that
	// stream after AfterSeq, if the coordinator still holds them.
	Stream   string
	AfterSeq uint64
}

// Event is one frame of a watch: an event on a resource, or a hello
// (Type wire.EventHello) that says the watch starts afresh (Resumed is
// false): the caller must reload its picture of the leases (List), as
// events before it may be missing.
type Event struct {
	wire.Event
	// Stream is the id of the coordinator's event stream, in a hello.
	Stream string
	// Resumed is always false in a hello Watch yields.
	Resumed bool
}

// Watch streams the events on resources under opts.Prefix (POST
// /v1/watch, Server-Sent Events). It yields a hello first, then each
// event, in order. After a disconnect (the coordinator went away, or
// closed a watcher too slow for its buffer) it connects again, to the next
// coordinator with several BaseURLs, and resumes from the last event it
// yielded: a hello is yielded only when the coordinator could not resume
// (another process, or events no longer held), so every event is yielded
// exactly once between two hellos. It stops when ctx ends, when the loop
// stops, or with a refusal that will not change (yielded as the error).
// After Attempts connections in a row that fail, it yields the last error
// and stops.
func (c *Client) Watch(ctx context.Context, opts WatchOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		stream, after := opts.Stream, opts.AfterSeq
		failed := 0
		base := int(c.cur.Load())
		var last error
		for ctx.Err() == nil {
			if failed > 0 {
				if failed >= c.attempts {
					yield(Event{}, errors.Join(errors.New("client: the watch could not connect after "+strconv.Itoa(failed)+" attempts"), last))
					return
				}
				base = (base + 1) % len(c.bases)
				if err := c.backoffPause(ctx, failed+1); err != nil {
					return
				}
			}
			q := wire.WatchRequest{Prefix: opts.Prefix}
			if stream != "" {
				a := after
				q.Stream, q.AfterSeq = stream, &a
			}
			got, err := c.watchOnce(ctx, base, q, func(ev Event) bool {
				if ev.Type == wire.EventHello {
					stream = ev.Stream
					after = ev.Seq
					if ev.Resumed {
						return true
					}
					return yield(ev, nil)
				}
				if ev.Type == wire.EventOverflow {
					return true // the stream ends: resume from the last event
				}
				after = ev.Seq
				return yield(ev, nil)
			})
			if got {
				failed = 0
			}
			if err == errStop {
				return
			}
			var we *wire.Error
			if errors.As(err, &we) && !we.Temporary() && we.Status != http.StatusTooManyRequests {
				yield(Event{}, err)
				return
			}
			if err != nil {
				failed++
				last = err
			}
		}
	}
}

// errStop is watchOnce's error when the caller's loop stopped.
var errStop = errors.New("client: the watch loop stopped")

// maxFrameBytes bounds one line of a watch.
const maxFrameBytes = 64 << 10

// watchOnce runs one watch connection to the base-th coordinator, calling
// fn for each frame; got reports that the coordinator answered with a
// stream. It returns when the stream ends (nil), fails, or fn returns
// false (errStop).
func (c *Client) watchOnce(ctx context.Context, base int, q wire.WatchRequest, fn func(Event) bool) (got bool, err error) {
	body, err := json.Marshal(q)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.bases[base]+wire.WatchPath, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header["Content-Type"] = contentTypeJSON
	req.Header.Set("Accept", "text/event-stream")
	if c.auth != nil {
		req.Header["Authorization"] = c.auth
	}
	resp, err := c.streamClient().Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data := make([]byte, 4096)
		n, _ := resp.Body.Read(data)
		e := wire.ParseError(resp.StatusCode, data[:n])
		if e == nil {
			e = &wire.Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: "unexpected answer"}
		}
		return false, e
	}
	var stop error // what ended the stream from here, not from reading it
	err = sse.Read(resp.Body, maxFrameBytes, func(typ string, data []byte) error {
		ev, err := parseFrame(typ, data)
		if err == nil && !fn(ev) {
			err = errStop
		}
		stop = err
		return err
	})
	if stop == nil && ctx.Err() != nil {
		return true, errStop
	}
	return true, err
}

// parseFrame reads one frame's data.
func parseFrame(typ string, data []byte) (Event, error) {
	switch typ {
	case wire.EventHello:
		var h wire.Hello
		if err := json.Unmarshal(data, &h); err != nil {
			return Event{}, errors.New("client: unreadable hello: " + err.Error())
		}
		return Event{Event: wire.Event{Type: typ, Seq: h.Seq}, Stream: h.Stream, Resumed: h.Resumed}, nil
	case wire.EventOverflow:
		var o wire.Overflow
		if err := json.Unmarshal(data, &o); err != nil {
			return Event{}, errors.New("client: unreadable overflow: " + err.Error())
		}
		return Event{Event: wire.Event{Type: typ, Seq: o.ResumeFrom}}, nil
	}
	var ev wire.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return Event{}, errors.New("client: unreadable event: " + err.Error())
	}
	return Event{Event: ev}, nil
}

// streamClient returns the client that sends watches.
func (c *Client) streamClient() *http.Client {
	c.streamOnce.Do(func() {
		if c.stream != nil {
			return
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = c.tls
		tr.DisableCompression = true
		c.stream = &http.Client{Transport: tr}
	})
	return c.stream
}
