package service

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
)

// TestClientRevoke: Client.Revoke ends a Held's lease; the hold's next
// renewal is answered "revoked", and its context ends with a cause that is
// both ErrLeaseRevoked and ErrLeaseLost; Renew and Release of the revoked
// lease are ErrExpired and ErrLeaseRevoked; a second revoke is not_held; a
// revoke naming a waiter removes it.
func TestClientRevoke(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newHoldRig(t, &holdTransport{rng: rand.New(rand.NewPCG(1, 1))})
		ctx := context.Background()
		h, err := r.client.Hold(ctx, "r", client.HoldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tok := h.Token()
		rv, err := r.client.Revoke(ctx, "r", client.RevokeOptions{})
		if err != nil || rv != (client.Revoked{HolderID: "a", Fence: tok.Fence}) {
			t.Fatalf("revoke: %+v %v", rv, err)
		}
		if h.Context().Err() != nil {
			t.Fatal("the hold ended before its next renewal")
		}
		r.settle(h)
		r.toNextTimer()
		eventually(t, "the hold lost", func() bool { return h.Context().Err() != nil })
		cause := context.Cause(h.Context())
		var lost *client.LostError
		if !errors.Is(cause, client.ErrLeaseRevoked) || !errors.Is(cause, client.ErrLeaseLost) || !errors.As(cause, &lost) || !lost.Revoked {
			t.Fatalf("cause %v", cause)
		}
		if err := r.client.Release(ctx, h.Lease()); !errors.Is(err, client.ErrLeaseRevoked) || !errors.Is(err, client.ErrExpired) {
			t.Fatalf("release of the revoked lease: %v", err)
		}
		if _, err := r.client.Renew(ctx, h.Lease()); !errors.Is(err, client.ErrLeaseRevoked) || !errors.Is(err, client.ErrExpired) {
			t.Fatalf("renew of the revoked lease: %v", err)
		}
		var we *wire.Error
		if _, err := r.client.Revoke(ctx, "r", client.RevokeOptions{Fence: tok.Fence}); !errors.As(err, &we) || we.Code != wire.CodeNotHeld {
			t.Fatalf("second revoke: %v", err)
		}
		// A waiter removed: its Hold ends with the revoke.
		f, _ := r.grant(wire.OpAcquire, acquireMsg("q0", "r", "b"))
		got := make(chan error, 1)
		go func() {
			_, err := r.client.Hold(ctx, "r", client.HoldOptions{Wait: 10 * time.Second})
			got <- err
		}()
		eventually(t, "a waiting", func() bool { return r.svc.Waiting() == 1 })
		if rv, err := r.client.Revoke(ctx, "r", client.RevokeOptions{HolderID: "a"}); err != nil || rv.RemovedWaiter != "a" {
			t.Fatalf("revoke of the waiter: %+v %v", rv, err)
		}
		if err := <-got; !errors.Is(err, client.ErrLeaseRevoked) {
			t.Fatalf("the removed waiter's Hold: %v", err)
		}
		if e, _ := r.store.Entry("r"); e.Fence != f {
			t.Fatalf("removing the waiter changed the lease: %+v", e)
		}
	})
}

// TestClientElectionValues: Campaign's value is the Leader's; Proclaim
// changes it, and Observe yields the leader again with each new value.
func TestClientElectionValues(t *testing.T) {
	r := newHoldRig(t, &holdTransport{rng: rand.New(rand.NewPCG(1, 1))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := client.NewElection(r.client, "leader")
	if err := e.Proclaim(ctx, "x"); err == nil {
		t.Fatal("Proclaim before Campaign")
	}
	h, err := e.Campaign(ctx, "10.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok, err := e.Leader(ctx); err != nil || !ok || l != (client.Leader{HolderID: "a", Fence: h.Token().Fence, Value: "10.0.0.1:80"}) {
		t.Fatalf("leader %+v %v %v", l, ok, err)
	}
	seen := make(chan client.Leader, 4)
	go func() {
		for l := range e.Observe(ctx) {
			seen <- l
		}
	}()
	next := func() client.Leader {
		select {
		case l := <-seen:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no leader observed after 10s")
		}
		return client.Leader{}
	}
	if l := next(); l.Value != "10.0.0.1:80" {
		t.Fatalf("first observed %+v", l)
	}
	eventually(t, "the observer waiting", func() bool { return r.svc.Waiting() == 1 })
	if err := e.Proclaim(ctx, "10.0.0.2:80"); err != nil {
		t.Fatal(err)
	}
	if l := next(); l.Value != "10.0.0.2:80" || l.Fence != h.Token().Fence {
		t.Fatalf("after Proclaim observed %+v", l)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Proclaim(ctx, "late"); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("Proclaim after resigning: %v", err)
	}
}
