package service

import (
	"context"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// revoke answers a revoke (an operator's order; the handler's
// authorization decided who may send it). Without a holder id, or with
// the holder's, it ends the live lease (only the one with m's fence, if
// given): the entry keeps a Revocation for one TTL, so the holder's next
// renew, release or proclaim is answered "revoked"; the store raises a
// fence table's floor above the revoked fence (Txn.RaiseFloor); and the
// resource is handed to its first waiter in the same decision. With the
// holder id of a waiting acquisition, it removes that place: its call is
// answered {"ok": false, "reason": "revoked"}. Anything else is 409
// not_held.
//
// Only the waiters of this Service are seen: on PostgreSQL replicas, a
// waiter waiting on another replica is not removed (not_held).
func (s *Service) revoke(ctx context.Context, m wire.Message) (wire.Reply, error) {
	q := m.Request
	o, err := s.update(ctx, q.Resource, func(t *Txn, rules lease.Rules, o *outcome) error {
		e := t.current()
		if e.Fence != 0 && t.Now.Millis < e.ExpiresAt && (q.HolderID == "" || q.HolderID == e.HolderID) && (q.Fence == 0 || q.Fence == e.Fence) {
			next := e.cleared(t.keepLast())
			next.Revoked = Revocation{HolderID: e.HolderID, Fence: e.Fence, At: t.Now.Millis}
			t.Put(next, true)
			t.RaiseFloor(e.Fence)
			o.ended = wire.EventRevoked
			o.reply = wire.Reply{OK: true, Revoked: &wire.Revoked{HolderID: e.HolderID, Fence: e.Fence}}
			s.serve(t, rules, o)
			return nil
		}
		if q.HolderID != "" && q.Fence == 0 {
			for _, sp := range o.snapshot {
				if sp.p.req.HolderID == q.HolderID {
					o.removed = sp.p
					o.reply = wire.Reply{OK: true, RemovedWaiter: q.HolderID}
					s.serve(t, rules, o)
					return nil
				}
			}
		}
		return refuse(wire.RefusedNotHeld, notHeld(q))
	})
	if err != nil {
		return wire.Reply{}, refusal(err)
	}
	return o.reply, nil
}

// notHeld says what a revoke of q did not find.
func notHeld(q lease.Request) string {
	msg := "nothing to revoke: " + quote(q.Resource) + " has no live lease"
	switch {
	case q.Fence != 0 && q.HolderID != "":
		msg += " of holder " + quote(q.HolderID) + " with that fence"
	case q.Fence != 0:
		msg += " with that fence"
	case q.HolderID != "":
		msg += " of holder " + quote(q.HolderID) + " and no waiter with that holder id"
	}
	return msg
}
