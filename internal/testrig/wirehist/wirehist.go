// Package wirehist turns the coordinator's HTTP exchanges into core/sim
// history operations, for the linearizability tests over HTTP
// (test/httpcheck, service/pgstore's replicas, cmd/coordinator's drill):
// what an attempt asked, what it was answered, and where porcupine draws a
// history that fails.
package wirehist

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/internal/testrig/repodir"

	"github.com/anishathalye/porcupine"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/sim"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
)

// ReadRequest reads the body of a request to /v1/OP, puts it back for the
// next transport, and decodes it.
func ReadRequest(r *http.Request) (wire.Message, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return wire.Message{}, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	m, werr := wire.DecodeMessage(wire.Op(strings.TrimPrefix(r.URL.Path, "/v1/")), body)
	if werr != nil {
		return wire.Message{}, werr
	}
	return m, nil
}

// InputOf describes a request (acquire, renew or release) for the history.
func InputOf(m wire.Message) sim.OpInput {
	if m.Op == wire.OpRelease {
		return sim.OpInput{Kind: sim.OpRelease, Resource: m.Request.Resource, Holder: m.Request.HolderID,
			RequestID: m.Request.RequestID, Fence: m.Request.Fence}
	}
	return sim.InputOf(m.Request)
}

// OutputOf turns an HTTP answer into the model's output.
func OutputOf(status int, data []byte) sim.OpOutput {
	var rep wire.Reply
	if status != http.StatusOK || json.Unmarshal(data, &rep) != nil {
		return sim.OpOutput{Err: fmt.Sprintf("status %d: %s", status, data)}
	}
	switch {
	case rep.OK && rep.Grant != nil:
		return sim.OpOutput{OK: true, Fence: rep.Grant.Fence, ExpiresAt: rep.Grant.CoordinatorExpiresAt.Millis}
	case rep.OK:
		return sim.OpOutput{OK: true} // release done
	case rep.HeldBy != "":
		return sim.OpOutput{HeldBy: rep.HeldBy, RetryAfterMs: rep.RetryAfterMillis}
	case rep.Reason == string(lease.Expired):
		return sim.OpOutput{Expired: true}
	}
	return sim.OpOutput{Err: "unrecognised reply " + string(data)}
}

// PorcupineDir is where failing histories are drawn: out/test/porcupine at
// the module root (gitignored).
func PorcupineDir(t testing.TB) string { return repodir.Out(t, "test", "porcupine") }

// Walk makes calls of c, seeded by rng: an acquire of one of resources
// ("r0", "r1", ...) while it holds nothing, else a renewal (two times in
// three) or the release. Before a call, one time in four, it calls
// advance with a number of milliseconds below ttl. Refusals and errors are
// the history's to judge, so Walk ignores them.
func Walk(ctx context.Context, c *client.Client, rng *rand.Rand, calls, resources int, ttl time.Duration, advance func(ms float64)) {
	var held *client.Lease
	for range calls {
		if rng.IntN(4) == 0 {
			advance(float64(rng.IntN(int(ttl.Milliseconds()))))
		}
		switch {
		case held == nil:
			held, _ = c.Acquire(ctx, "r"+strconv.Itoa(rng.IntN(resources)))
		case rng.IntN(3) < 2:
			held, _ = c.Renew(ctx, held)
		default:
			_ = c.Release(ctx, held)
			held = nil
		}
	}
}

// Tally counts the outcomes of the histories it checked.
type Tally struct {
	Attempts, Granted, Denied, Expired int
}

// Check counts the outcomes of ops, reports each failed attempt as an
// error of t, and checks ops against the lease-register model with the TTL
// ttl (drawing them under PorcupineDir if they are not linearizable).
func (ta *Tally) Check(t testing.TB, name string, ttl time.Duration, ops []porcupine.Operation) {
	t.Helper()
	for _, op := range ops {
		switch out := op.Output.(sim.OpOutput); {
		case out.Err != "":
			t.Errorf("%s: an attempt failed: %s", name, out.Err)
		case out.OK:
			ta.Granted++
		case out.HeldBy != "":
			ta.Denied++
		case out.Expired:
			ta.Expired++
		}
	}
	if _, err := sim.CheckHistory(name, PorcupineDir(t), ttl, ops, time.Minute); err != nil {
		t.Fatal(err)
	}
	ta.Attempts += len(ops)
}
