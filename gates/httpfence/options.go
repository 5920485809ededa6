// What a Proxy is configured with: its Options and the Store it keeps
// floors and refusals in.

package httpfence

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
)

// Store keeps each resource's floor and its refusals durably. Admit raises
// the floor to the token's fence, or refuses a token below it with a
// *fence.StaleFenceError after logging the refusal; both are durable when it
// returns. RejectionsAfter returns the refusals whose Seq is above after,
// oldest first, at most limit of them. *sqlfence.Store is one.
//
// The Proxy must be the only writer of the floors it reads: two Proxies, or
// a Proxy and another program, raising the same floors would each forward
// writes to one resource without waiting for the other's.
type Store interface {
	Admit(ctx context.Context, tok fence.Token) error
	Floor(ctx context.Context, resource string) (uint64, error)
	RejectionsAfter(ctx context.Context, resource string, after uint64, limit int) ([]fence.Rejection, error)
}

// FloorLister is a Store that lists its floors a page at a time, for GET
// /.lease-fence/floors (*sqlfence.Store is one): those of the resources
// that start with prefix and sort after after, in order, at most limit.
type FloorLister interface {
	FloorsAfter(ctx context.Context, prefix, after string, limit int) ([]fence.Floor, error)
}

// RejectionCounter is a Store that counts the refusals it has logged, across
// resources (*sqlfence.Store is one). The refusal stream's sequence
// numbers continue from that count, so that they keep rising across
// restarts of the proxy.
type RejectionCounter interface {
	RejectionTotal(ctx context.Context) (uint64, error)
}

// MaxFloorsPage is the most floors GET /.lease-fence/floors returns in one
// answer, and its default limit.
const MaxFloorsPage = 1000

// MaxRejectionsPage is the most refusals GET /.lease-fence/rejections
// returns in one answer, and its default limit.
const MaxRejectionsPage = 1000

// Defaults of Options.
const (
	DefaultUpstreamTimeout = 30 * time.Second
	DefaultMaxBodyBytes    = 4 << 20
	DefaultMaxBufferBytes  = 256 << 20
	DefaultMaxQueue        = 64
)

// Options configures a Proxy. Upstream and Store are required.
type Options struct {
	// Upstream is the API the proxy stands in front of; a request's path is
	// appended to Upstream's path.
	Upstream *url.URL
	// Store holds the floors and the refusals (sqlfence on SQLite in
	// cmd/fence-proxy).
	Store Store
	// Transport sends requests to the upstream. Nil means, for an http://
	// upstream, HTTP/1.1 over up to 256 kept-alive connections with each
	// request written and its answer read on the goroutine that forwards it
	// (see upstream.go), and for https:// an http.Transport with
	// ProxyFromEnvironment off, 256 idle connections and UpstreamTimeout as
	// its response header timeout.
	Transport http.RoundTripper
	// UpstreamTimeout bounds one request to the upstream, from sending it to
	// the end of its answer's body. Zero means DefaultUpstreamTimeout.
	UpstreamTimeout time.Duration
	// QueueTimeout bounds how long a write waits for its resource's turn.
	// Zero means UpstreamTimeout.
	QueueTimeout time.Duration
	// MaxBodyBytes is the largest write body accepted (413 above). A write's
	// body is read whole before the write takes its turn, so a slow sender
	// never holds up its resource. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBufferBytes bounds the write bodies held in memory at once, across
	// all resources; a write that does not fit is answered 503 busy. Zero
	// means DefaultMaxBufferBytes; it is raised to MaxBodyBytes if below.
	MaxBufferBytes int64
	// MaxQueue is how many writes may wait for their turn on a resource
	// (behind writes with another fence, or, with Exclusive, any write);
	// one more is answered 503 queue_full. Zero means DefaultMaxQueue.
	MaxQueue int
	// Exclusive forwards the writes to a resource one at a time whatever
	// their fences, as the proxy did before shared admission: a write with
	// the floor's fence then waits for a running write with the same
	// fence. By default such writes are forwarded together (see Proxy).
	Exclusive bool
	// Logger receives a line per refusal and per upstream failure (Warn and
	// Error) and per forwarded write (Info). Nil logs nothing.
	Logger *slog.Logger
	// OnAdmit, if set, is called for each write after its floor is durably
	// raised and before it is forwarded, on the request's goroutine: where
	// tests stop the proxy to kill it.
	OnAdmit func(ctx context.Context, tok fence.Token)
	// RejectionHistory is how many of the newest refusals the proxy keeps
	// in memory for GET /.lease-fence/rejections/stream to resume from.
	// Zero means DefaultRejectionHistory.
	RejectionHistory int
	// MaxStreams bounds the refusal streams served at once (503 above).
	// Zero means DefaultMaxStreams.
	MaxStreams int
	// StreamBuffer is how many refusals may wait for one stream's reader; a
	// stream whose reader falls further behind is closed with an overflow
	// event. Zero means DefaultStreamBuffer.
	StreamBuffer int
	// Now is the clock of the refusals' "at" in the stream; nil means
	// time.Now.
	Now func() time.Time
}
