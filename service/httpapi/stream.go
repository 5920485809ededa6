package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/lease-fence/lease-fence/internal/sse"
	"github.com/lease-fence/lease-fence/service/wire"
)

// Lister is a Backend that lists its live leases (POST /v1/list). allow,
// if not nil, keeps the resources the caller may see. A Backend that is
// not one answers 501 not_supported (a Worker: one Durable Object per
// resource, no index of them all).
type Lister interface {
	List(ctx context.Context, q wire.ListRequest, allow func(resource string) bool) (wire.ListReply, error)
}

// Watcher is a Backend that streams its events (POST /v1/watch). A
// Backend that is not one answers 501 not_supported.
type Watcher interface {
	WatchEvents(q wire.WatchRequest, caller wire.Caller, allow func(resource string) bool) (wire.EventStream, error)
}

// defaultKeepalive is the default HandlerOptions.Keepalive.
const defaultKeepalive = 15 * time.Second

// watchWriteSlack bounds how long one write of a watch may take: a
// client that reads nothing for that long is cut off.
const watchWriteSlack = 30 * time.Second

// serveStream answers POST /v1/list and /v1/watch.
func (h *handler) serveStream(w http.ResponseWriter, r *http.Request) {
	op := wire.Op(r.URL.Path[len("/v1/"):])
	data, ok := h.body(w, r, op, h.maxBody)
	if !ok {
		return
	}
	var lq wire.ListRequest
	var wq wire.WatchRequest
	var derr *wire.Error
	if r.URL.Path == wire.ListPath {
		lq, derr = wire.DecodeList(data)
	} else {
		wq, derr = wire.DecodeWatch(data)
	}
	if derr != nil {
		h.fail(w, r, op, derr)
		return
	}
	var caller wire.Caller
	var allow func(string) bool
	if h.scope != nil {
		var e *wire.Error
		if caller, allow, e = h.scope(r); e != nil {
			h.fail(w, r, op, e)
			return
		}
	}
	if r.URL.Path == wire.ListPath {
		ls, ok := h.b.(Lister)
		if !ok {
			h.fail(w, r, op, notSupported("list"))
			return
		}
		out, err := ls.List(r.Context(), lq, allow)
		if err != nil {
			h.fail(w, r, op, ErrorOf(err))
			return
		}
		if h.answered != nil {
			h.answered(op, ResultOK, nil)
		}
		writeJSON(w, http.StatusOK, &out)
		return
	}
	wb, ok := h.b.(Watcher)
	if !ok {
		h.fail(w, r, op, notSupported("watch"))
		return
	}
	st, err := wb.WatchEvents(wq, caller, allow)
	if err != nil {
		h.fail(w, r, op, ErrorOf(err))
		return
	}
	defer st.Close()
	if h.answered != nil {
		h.answered(op, ResultOK, nil)
	}
	if h.log != nil {
		h.log.LogAttrs(r.Context(), slog.LevelInfo, "watch", slog.String("prefix", wq.Prefix), slog.String("token", caller.Name))
	}
	h.stream(w, r, st)
}

func notSupported(what string) *wire.Error {
	return wire.NewError(wire.CodeNotSupported, "this server does not offer "+what+
		" (a Worker keeps each resource in its own Durable Object, with no index of them all)")
}

// stream writes st as Server-Sent Events until it ends, the client goes
// away or a write stalls.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, st wire.EventStream) {
	out := sse.Start(w, watchWriteSlack)
	hello := st.Hello()
	out.Event(hello.Seq, wire.EventHello, &hello)
	for i := range st.Replay() {
		ev := &st.Replay()[i]
		out.Event(ev.Seq, ev.Type, ev)
	}
	if !out.Flush() {
		return
	}
	keep := time.NewTicker(h.keepalive)
	defer keep.Stop()
	events := st.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				if from, over := st.Overflow(); over {
					out.Overflow(from)
				}
				return
			}
			out.Event(ev.Seq, ev.Type, &ev)
			// Whatever else is ready goes in the same write.
		more:
			for out.Buffered() < 32<<10 {
				select {
				case ev, ok := <-events:
					if !ok {
						break more
					}
					out.Event(ev.Seq, ev.Type, &ev)
				default:
					break more
				}
			}
			if !out.Flush() {
				return
			}
		case <-keep.C:
			out.Comment("keepalive")
			if !out.Flush() {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
