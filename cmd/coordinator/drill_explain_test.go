//go:build linux

package main

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/sim"
	"github.com/lease-fence/lease-fence/service/wire"
)

// killedRenewal is a history the kill -9 drill recorded (times in
// milliseconds after t0 = 1796619961000): holder-2 is granted r2's fence
// 509 at reading 638 and sends a renewal at 638 to a coordinator that is
// killed before it answers (the attempt ends at 661); the statement it
// sent commits anyway, at 681. The client retries the renewal (same body)
// at another coordinator, which renews again at 1046. In between, holder-3
// is denied r2 at [988, 998], told the lease ends 3599683 ms later: the
// expiry of the renewal at 681, the first attempt's.
func killedRenewal() (map[string][]audited, []porcupine.Operation, []attempt) {
	const t0, ttl = 1796619961000.0, float64(drillTTLMs)
	row := func(seq int64, at float64) audited {
		return audited{seq: seq, resource: "r2", holder: "holder-2", requestID: "g", fence: 509, expiresAt: t0 + at + ttl, decidedAt: t0 + at}
	}
	by := map[string][]audited{"r2": {row(1, 638), row(2, 681), row(3, 1046)}}
	op := func(client int, call, ret int64, in sim.OpInput, lo, hi float64, out sim.OpOutput) porcupine.Operation {
		in.Resource, in.Lo, in.Hi = "r2", t0+lo, t0+hi
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	acquire := sim.OpInput{Kind: sim.OpAcquire, Holder: "holder-2", RequestID: "g"}
	renew := sim.OpInput{Kind: sim.OpRenew, Holder: "holder-2", RequestID: "r", Fence: 509}
	ops := []porcupine.Operation{
		op(2, 1, 2, acquire, 637, 638, sim.OpOutput{OK: true, Fence: 509, ExpiresAt: t0 + 638 + ttl}),
		op(2, 5, 10, renew, 661, 1330, sim.OpOutput{OK: true, Fence: 509, ExpiresAt: t0 + 1046 + ttl}),
		op(3, 6, 7, sim.OpInput{Kind: sim.OpAcquire, Holder: "holder-3", RequestID: "d"}, 988, 998,
			sim.OpOutput{HeldBy: "holder-2", RetryAfterMs: 3599683}),
	}
	unsure := []attempt{{client: 2, call: 3, ret: 4, lo: t0 + 638, hi: t0 + 661, noAnswer: true,
		m: wire.Message{Op: wire.OpRenew, Request: lease.Request{Kind: lease.KindRenew, RequestID: "r", Resource: "r2", HolderID: "holder-2", Fence: 509}}}}
	return by, ops, unsure
}

// TestExplainKilledRenewal: the renewal without an answer made the version
// at 681 (after its attempt failed), not its grant's at 638 (decided in the
// millisecond it was sent); so placed, the history is linearizable, and
// placed on the grant's version it is not.
func TestExplainKilledRenewal(t *testing.T) {
	by, ops, unsure := killedRenewal()
	done, unchanged, _, unexplained := explain(by, ops, unsure)
	if len(done) != 1 || unchanged != 0 || len(unexplained) != 0 {
		t.Fatalf("done %v, %d unchanged, unexplained %v", done, unchanged, unexplained)
	}
	got := done[0]
	if out := got.Output.(sim.OpOutput); out.ExpiresAt != by["r2"][1].expiresAt || got.Input.(sim.OpInput).Hi != by["r2"][1].decidedAt || got.Return != math.MaxInt64 {
		t.Fatalf("the renewal without an answer is placed as %+v", got)
	}
	model := sim.LeaseModel(time.Hour)
	if !porcupine.CheckOperations(model, append(ops, got)) {
		t.Fatal("the history with the renewal at 681 is not linearizable")
	}
	wrong := got
	wrong.Output = sim.OpOutput{OK: true, Fence: 509, ExpiresAt: by["r2"][0].expiresAt}
	wrong.Return = unsure[0].ret
	in := wrong.Input.(sim.OpInput)
	in.Hi = unsure[0].hi
	wrong.Input = in
	if porcupine.CheckOperations(model, append(ops, wrong)) {
		t.Fatal("the history with the renewal on its grant's version is linearizable: the case is not the one the drill met")
	}
}

// TestExplainCommittedTwice: a version no attempt made (here a renewal
// committed twice inside the retry's span) is reported, whatever the
// history's linearizability.
func TestExplainCommittedTwice(t *testing.T) {
	by, ops, unsure := killedRenewal()
	extra := by["r2"][2]
	extra.seq, extra.decidedAt, extra.expiresAt = 4, extra.decidedAt+5, extra.expiresAt+5
	by["r2"] = append(by["r2"], extra)
	_, _, _, unexplained := explain(by, ops, unsure)
	if len(unexplained) != 1 || unexplained[0].seq != 4 || unexplained[0].kind != rowRenewal {
		t.Fatalf("unexplained %+v", unexplained)
	}
	// A grant over the live lease, which no attempt was answered: reported
	// too.
	by, ops, unsure = killedRenewal()
	over := by["r2"][2]
	over.seq, over.holder, over.requestID, over.fence = 4, "holder-3", "d", 510
	over.decidedAt, over.expiresAt = over.decidedAt+10, over.expiresAt+10
	by["r2"] = append(by["r2"], over)
	_, _, _, unexplained = explain(by, ops, unsure)
	if len(unexplained) != 1 || unexplained[0].seq != 4 || unexplained[0].kind != rowGrant {
		t.Fatalf("unexplained %+v", unexplained)
	}
}
