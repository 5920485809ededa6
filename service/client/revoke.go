package client

import (
	"context"
	"errors"

	"github.com/go-json-experiment/json"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// RevokeOptions narrows a revoke (Client.Revoke).
type RevokeOptions struct {
	// HolderID, if set, names the holder whose lease is ended, or the
	// waiter whose place is removed. Empty: the current lease, whoever
	// holds it.
	HolderID string
	// Fence, if not 0, ends the lease only if it has this fence. With a
	// fence, a revoke whose answer was lost is sent again (a second
	// revoke of that fence ends nothing else); without one it is sent
	// once, since sending it again could end the next holder's lease.
	Fence uint64
}

// Revoked is what a revoke did: the lease it ended (HolderID and Fence),
// or the waiter it removed (RemovedWaiter).
type Revoked struct {
	HolderID      string
	Fence         uint64
	RemovedWaiter string
}

// Revoke ends resource's live lease, or removes a waiter from its queue,
// on an operator's order: POST /v1/revoke, which needs a token with
// "admin": true (or, on a coordinator without -auth, a loopback caller).
// The holder's next renewal is answered "revoked" (its Held's context
// ends with ErrLeaseRevoked), the next grant's fence is above the revoked
// one, and the first waiter is handed the resource at once. Nothing to
// revoke is a *wire.Error with Code wire.CodeNotHeld (409); no right to,
// wire.CodeForbidden (403).
func (c *Client) Revoke(ctx context.Context, resource string, opts RevokeOptions) (Revoked, error) {
	m := wire.Message{Op: wire.OpRevoke, Request: lease.Request{Resource: resource, HolderID: opts.HolderID, Fence: opts.Fence}}
	var reply wire.Reply
	var err error
	if opts.Fence != 0 {
		reply, err = c.send(ctx, m, clock.Instant{})
	} else {
		reply, err = c.sendOnce(ctx, m)
	}
	if err != nil {
		return Revoked{}, err
	}
	switch {
	case reply.OK && reply.Revoked != nil:
		return Revoked{HolderID: reply.Revoked.HolderID, Fence: reply.Revoked.Fence}, nil
	case reply.OK && reply.RemovedWaiter != "":
		return Revoked{RemovedWaiter: reply.RemovedWaiter}, nil
	}
	return Revoked{}, errors.New("client: a revoke's answer without what it revoked")
}

// sendOnce posts m once, to the coordinator the client used last.
func (c *Client) sendOnce(ctx context.Context, m wire.Message) (wire.Reply, error) {
	body, err := wire.EncodeMessage(m)
	if err != nil {
		return wire.Reply{}, err
	}
	i := int(c.cur.Load())
	data, _, err := c.attempt(ctx, i, m.Op, m.Op.Path(), body, c.timeout, false)
	if err != nil {
		return wire.Reply{}, err
	}
	var reply wire.Reply
	if err := json.Unmarshal(data, &reply); err != nil {
		return wire.Reply{}, errors.New("client: unreadable reply: " + err.Error())
	}
	return reply, nil
}

// Proclaim changes the value of l (at most wire.MaxValueBytes; an
// election's leader's address, say). It returns ErrExpired if l is no
// longer the current lease (also ErrLeaseRevoked if it was revoked).
func (c *Client) Proclaim(ctx context.Context, l *Lease, value string) error {
	return c.tokenCall(ctx, "Proclaim", l, wire.Message{Op: wire.OpProclaim, Value: value}, clock.Instant{})
}
