package wire

import (
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/lease-fence/lease-fence/internal/sse/overflow"
)

// The paths of list and watch. They are not calls (Op): their bodies and
// answers have shapes of their own.
const (
	ListPath  = "/v1/list"
	WatchPath = "/v1/watch"
)

// Bounds of list and watch requests.
const (
	// MaxPrefixBytes bounds the prefix of a list or a watch.
	MaxPrefixBytes = 1024
	// MaxListLimit is the largest page a list answers, and its default.
	MaxListLimit = 1000
)

// ListRequest is the body of POST /v1/list.
type ListRequest struct {
	// Prefix selects the resources whose names begin with it ("" all).
	Prefix string `json:"prefix,omitzero"`
	// Cursor is the last answer's Cursor: the page after it. Opaque.
	Cursor string `json:"cursor,omitzero"`
	// Limit bounds the page: 1 to MaxListLimit; zero means MaxListLimit.
	Limit int `json:"limit,omitzero"`
	// Waiters asks for each lease's waiters' holder ids.
	Waiters bool `json:"waiters,omitzero"`
}

// ListReply is the answer to a list: live leases in byte order of their
// resource, and the cursor of the next page (absent on the last).
type ListReply struct {
	OK     bool        `json:"ok"`
	Leases []LeaseInfo `json:"leases"`
	Cursor string      `json:"cursor,omitzero"`
}

// LeaseInfo is one live lease in a list. It never carries a secret nor a
// hash of one.
type LeaseInfo struct {
	Resource        string   `json:"resource"`
	HolderID        string   `json:"holderId"`
	Fence           uint64   `json:"fence"`
	RemainingMillis float64  `json:"remainingMillis"`
	Waiters         int      `json:"waiters"`
	WaiterIDs       []string `json:"waiterIds,omitzero"`
	Value           *string  `json:"value,omitzero"`
}

// WatchRequest is the body of POST /v1/watch.
type WatchRequest struct {
	// Prefix selects the resources whose events are sent ("" all).
	Prefix string `json:"prefix,omitzero"`
	// Stream and AfterSeq resume a watch: with Stream the id of this
	// server's event stream (Hello.Stream) and AfterSeq still in its
	// history, the events after AfterSeq are sent first.
	Stream   string  `json:"stream,omitzero"`
	AfterSeq *uint64 `json:"afterSeq,omitzero"`
}

// The event types of a watch (Event.Type), and the two frames that are
// not events of a resource: the first (hello) and the last of a watcher
// too slow for its buffer (overflow).
const (
	EventGranted    = "granted"
	EventRenewed    = "renewed"
	EventReleased   = "released"
	EventExpired    = "expired"
	EventRevoked    = "revoked"
	EventWaiting    = "waiting"    // a waiter joined the queue
	EventLeft       = "left"       // a waiter left without being granted
	EventProclaimed = "proclaimed" // an election's value changed
	EventHello      = "hello"
	EventOverflow   = overflow.Event
)

// Event is one decision on a resource, as a watch sends it.
type Event struct {
	// Seq numbers the events of one stream (one coordinator process),
	// from 1, strictly increasing by 1.
	Seq      uint64 `json:"seq"`
	Type     string `json:"type"`
	Resource string `json:"resource"`
	HolderID string `json:"holderId,omitzero"`
	Fence    uint64 `json:"fence,omitzero"`
	// RemainingMillis: the lease's time left (granted, renewed).
	RemainingMillis float64 `json:"remainingMillis,omitzero"`
	// Value: the lease's election value (granted, proclaimed).
	Value *string `json:"value,omitzero"`
	// Waiters is the queue's length after the event, when the deciding
	// coordinator knows it.
	Waiters *int `json:"waiters,omitzero"`
	// At is the server's wall clock, Unix milliseconds.
	At int64 `json:"at"`
}

// Hello is the first frame of a watch.
type Hello struct {
	// Stream is the id of this coordinator process's event stream.
	Stream string `json:"stream"`
	// Seq is the last sequence number assigned in the stream.
	Seq uint64 `json:"seq"`
	// Resumed: the events after the request's afterSeq follow (none is
	// missing). Without it the client must reload its picture (list).
	Resumed bool `json:"resumed"`
}

// Overflow is the last frame of a watcher whose buffer filled: resume
// from ResumeFrom, the last sequence number it was sent. The frame is
// defined once for every event stream of the project (package
// internal/sse/overflow).
type Overflow = overflow.Frame

// listBody and watchBody are the members of the requests, each refusing
// null and values of another JSON type.
type listBody struct {
	Prefix  str  `json:"prefix"`
	Cursor  str  `json:"cursor"`
	Limit   num  `json:"limit"`
	Waiters flag `json:"waiters"`
}

type watchBody struct {
	Prefix   str `json:"prefix"`
	Stream   str `json:"stream"`
	AfterSeq num `json:"afterSeq"`
}

// flag is a JSON boolean member.
type flag struct {
	v, set bool
}

func (f *flag) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if k := dec.PeekKind(); k != 't' && k != 'f' && k != 0 {
		return errCode(CodeWrongType, "must be a boolean, got "+kindNames[k])
	}
	tok, err := dec.ReadToken()
	if err == nil {
		f.v, f.set = tok.Bool(), true
	}
	return err
}

// DecodeList parses the body of a list strictly (as DecodeMessage does):
// unknown, repeated or null members, a prefix over MaxPrefixBytes, a
// cursor over MaxStringBytes and a limit that is not 1 to MaxListLimit are
// refused.
func DecodeList(data []byte) (ListRequest, *Error) {
	var b *listBody
	if err := json.Unmarshal(data, &b, json.RejectUnknownMembers(true)); err != nil {
		return ListRequest{}, decodeError("list", err)
	}
	if b == nil {
		return ListRequest{}, errCode(CodeWrongType, "the body must be a JSON object, got null")
	}
	q := ListRequest{Prefix: b.Prefix.v, Cursor: b.Cursor.v, Waiters: b.Waiters.v, Limit: MaxListLimit}
	if err := checkPrefix(q.Prefix); err != nil {
		return ListRequest{}, err
	}
	if len(q.Cursor) > MaxStringBytes {
		return ListRequest{}, InvalidField("cursor", "must be at most "+strconv.Itoa(MaxStringBytes)+" bytes long")
	}
	if b.Limit.set {
		n, err := strconv.Atoi(b.Limit.v)
		if err != nil || n < 1 || n > MaxListLimit {
			return ListRequest{}, InvalidField("limit", "must be a whole number from 1 to "+strconv.Itoa(MaxListLimit)+", got "+QuoteShort(b.Limit.v))
		}
		q.Limit = n
	}
	return q, nil
}

// DecodeWatch parses the body of a watch strictly.
func DecodeWatch(data []byte) (WatchRequest, *Error) {
	var b *watchBody
	if err := json.Unmarshal(data, &b, json.RejectUnknownMembers(true)); err != nil {
		return WatchRequest{}, decodeError("watch", err)
	}
	if b == nil {
		return WatchRequest{}, errCode(CodeWrongType, "the body must be a JSON object, got null")
	}
	q := WatchRequest{Prefix: b.Prefix.v, Stream: b.Stream.v}
	if err := checkPrefix(q.Prefix); err != nil {
		return WatchRequest{}, err
	}
	if len(q.Stream) > MaxStringBytes {
		return WatchRequest{}, InvalidField("stream", "must be at most "+strconv.Itoa(MaxStringBytes)+" bytes long")
	}
	if b.AfterSeq.set {
		n, err := strconv.ParseUint(b.AfterSeq.v, 10, 64)
		if err != nil || n > 1<<53-1 {
			return WatchRequest{}, InvalidField("afterSeq", "must be a whole number from 0 to 2^53-1, got "+QuoteShort(b.AfterSeq.v))
		}
		q.AfterSeq = &n
	}
	return q, nil
}

func checkPrefix(p string) *Error {
	if len(p) > MaxPrefixBytes {
		return InvalidField("prefix", "must be at most "+strconv.Itoa(MaxPrefixBytes)+" bytes long, got "+strconv.Itoa(len(p)))
	}
	return nil
}

// EventStream is one watcher's events, as a server's backend gives them
// to the HTTP handler (service.Watch).
type EventStream interface {
	// Hello is the first frame.
	Hello() Hello
	// Replay is the events of the history to send after Hello.
	Replay() []Event
	// Events delivers the events as they are published; it is closed
	// when the stream ends (the watcher overflowed, or the server stops).
	Events() <-chan Event
	// Overflow reports, once Events is closed, whether the watcher's
	// buffer overflowed, and the last sequence number it was sent.
	Overflow() (resumeFrom uint64, overflowed bool)
	// Close ends the stream.
	Close()
}
