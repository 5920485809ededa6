package httpapi

import (
	"context"
	"net/http"

	"github.com/lease-fence/lease-fence/service/wire"
)

// Renewer is a Backend that answers a batch of renewals (POST
// /v1/renewals): CallEach answers each message as Call would, each on its
// own (one's refusal never affects another's answer). A Backend that is
// not one answers 501 not_supported, and clients renew one lease per call
// (a Worker: each resource is its own Durable Object).
type Renewer interface {
	CallEach(ctx context.Context, ms []wire.Message) ([]wire.Reply, []error)
}

// renewalsOp names a batch in Answered and the log when it is refused as a
// whole; each renewal of a batch is answered as wire.OpRenew.
const renewalsOp = wire.Op("renewals")

// serveRenewals answers POST /v1/renewals: each renewal is checked,
// authorized, decided and logged as a call to /v1/renew would be, and
// answered in its own result.
func (h *handler) serveRenewals(w http.ResponseWriter, r *http.Request) {
	limit := max(h.maxBody, wire.MaxRenewalsBodyBytes)
	data, ok := h.body(w, r, renewalsOp, int64(limit))
	if !ok {
		return
	}
	rb, ok := h.b.(Renewer)
	if !ok {
		h.fail(w, r, renewalsOp, wire.NewError(wire.CodeNotSupported, "this server does not offer batches of renewals: send each to "+wire.OpRenew.Path()))
		return
	}
	ms, errs, derr := wire.DecodeRenewals(data)
	if derr != nil {
		h.fail(w, r, renewalsOp, derr)
		return
	}
	var send []wire.Message
	var at []int // the index in ms of each of send
	for i := range ms {
		if errs[i] == nil {
			errs[i] = h.checkIDs(&ms[i])
		}
		if errs[i] == nil {
			if h.authorize != nil {
				errs[i] = h.authorize(r, &ms[i])
			}
		}
		if errs[i] != nil {
			h.logCall(r, ms[i], errs[i], wire.Reply{})
			continue
		}
		send, at = append(send, ms[i]), append(at, i)
	}
	out := wire.RenewalsReply{OK: true, Results: make([]wire.Result, len(ms))}
	if len(send) > 0 {
		replies, cerrs := rb.CallEach(r.Context(), send)
		for j, i := range at {
			if cerrs[j] != nil {
				errs[i] = ErrorOf(cerrs[j])
			}
			h.logCall(r, ms[i], errs[i], replies[j])
			out.Results[i] = wire.ResultOf(replies[j], errs[i])
		}
	}
	for i, e := range errs {
		if e != nil {
			out.Results[i] = wire.ResultOf(wire.Reply{}, e)
		}
	}
	writeJSON(w, http.StatusOK, &out)
}
