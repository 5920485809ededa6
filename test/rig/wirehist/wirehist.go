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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/repodir"

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

// ReadRequests reads the body of a request to /v1/OP or to
// wire.RenewalsPath (a batch: each renewal its own message), puts it back
// for the next transport, and decodes it.
func ReadRequests(r *http.Request) ([]wire.Message, error) {
	if r.URL.Path != wire.RenewalsPath {
		m, err := ReadRequest(r)
		if err != nil {
			return nil, err
		}
		return []wire.Message{m}, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ms, errs, werr := wire.DecodeRenewals(body)
	if werr != nil {
		return nil, werr
	}
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	return ms, nil
}

// OutputsOf turns the HTTP answer to the n requests ReadRequests read from
// a request to path into the model's outputs, one each.
func OutputsOf(path string, n, status int, data []byte) []sim.OpOutput {
	outs := make([]sim.OpOutput, n)
	if path != wire.RenewalsPath {
		outs[0] = OutputOf(status, data)
		return outs
	}
	var rep wire.RenewalsReply
	if status != http.StatusOK || json.Unmarshal(data, &rep) != nil || len(rep.Results) != n {
		for i := range outs {
			outs[i] = sim.OpOutput{Err: fmt.Sprintf("status %d: %s", status, data)}
		}
		return outs
	}
	for i, res := range rep.Results {
		if res.Error != nil {
			outs[i] = sim.OpOutput{Err: fmt.Sprintf("renewal %d refused: %s: %s", i, res.Error.Code, res.Error.Message)}
			continue
		}
		outs[i] = outputOf(res.Reply, data)
	}
	return outs
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
	return outputOf(rep, data)
}

// outputOf is the model's output of rep (data: the answer it is part of).
func outputOf(rep wire.Reply, data []byte) sim.OpOutput {
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

// WalkMany makes calls of c, seeded by rng, holding up to three of
// resources ("r0", "r1", ...) at once: an acquire of one it does not hold
// while it holds fewer than two (or, one time in three, three), else the
// renewal of every lease it holds in one batch (wire.RenewalsPath; two
// times in three) or the release of one. Before a call, one time in four,
// it calls advance with a number of milliseconds below ttl. Refusals and
// errors are the history's to judge.
func WalkMany(ctx context.Context, c *client.Client, rng *rand.Rand, calls, resources int, ttl time.Duration, advance func(ms float64)) {
	var held []*client.Lease
	for range calls {
		if rng.IntN(4) == 0 {
			advance(float64(rng.IntN(int(ttl.Milliseconds()))))
		}
		switch {
		case len(held) < 2 || (len(held) < 3 && rng.IntN(3) == 0):
			var free []string
			for i := range resources {
				name := "r" + strconv.Itoa(i)
				if !slices.ContainsFunc(held, func(l *client.Lease) bool { return l.Token().Resource == name }) {
					free = append(free, name)
				}
			}
			if len(free) == 0 {
				continue
			}
			if l, err := c.Acquire(ctx, free[rng.IntN(len(free))]); err == nil {
				held = append(held, l)
			}
		case rng.IntN(3) < 2:
			out, errs := c.RenewEach(ctx, held)
			var kept []*client.Lease
			for i := range held {
				if errs[i] == nil {
					kept = append(kept, out[i])
				}
			}
			held = kept
		default:
			i := rng.IntN(len(held))
			_ = c.Release(ctx, held[i])
			held = slices.Delete(held, i, i+1)
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
