//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pgstore"
)

// TestReady: a store whose database is reachable is ready; cut off (a
// proxy that stops forwarding), it is not, within the caller's time, with
// a reason; healed, it is ready again.
func TestReady(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	px, st := g.throughProxy()
	ready := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return st.Ready(ctx)
	}
	// Reachable: ready, once connected. The first call makes the store's
	// connection through the proxy, which a loaded machine can take longer
	// than the 500 ms over; the deadline is a guard against a store that
	// never gets ready.
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := ready()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reachable: %v", err)
		}
	}
	px.Partition()
	err := ready()
	if err == nil || !errors.Is(err, service.ErrUnavailable) {
		t.Fatalf("cut off: %v", err)
	}
	px.Heal()
	for deadline := time.Now().Add(10 * time.Second); ready() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("healed: %v", ready())
		}
	}
}
