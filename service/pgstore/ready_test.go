//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/internal/pgtest"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pgstore"
)

// TestReady: a store whose database is reachable is ready; cut off (a
// proxy that stops forwarding), it is not, within the caller's time, with
// a reason; healed, it is ready again.
func TestReady(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	px, err := pgtest.NewProxy("127.0.0.1:" + strconv.Itoa(pg.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	dsn := strings.Replace(g.dsn, "port="+strconv.Itoa(pg.Port), "port="+strconv.Itoa(px.Port()), 1)
	st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{TTL: ttl, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ready := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return st.Ready(ctx)
	}
	if err := ready(); err != nil {
		t.Fatalf("reachable: %v", err)
	}
	px.Partition()
	err = ready()
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
