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
	if err := ready(); err != nil {
		t.Fatalf("reachable: %v", err)
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
