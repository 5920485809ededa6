package bridge

import (
	"math"
	"testing"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// ops is every bridge method, called with a handle chosen by the fuzzer and
// the fuzzer's bytes as arguments.
var ops = []func(b *Bridge, h uint32, n int32) int32{
	func(b *Bridge, _ uint32, n int32) int32 { return b.ClockMonotonic(n) },
	func(b *Bridge, _ uint32, n int32) int32 { return b.ClockManual(n) },
	func(b *Bridge, h uint32, n int32) int32 { return b.ClockCustom(h, n) },
	func(b *Bridge, h uint32, _ int32) int32 { return b.ClockNow(h) },
	(*Bridge).ClockAdvance,
	(*Bridge).ClockSet,
	func(b *Bridge, _ uint32, n int32) int32 { return b.InstantSince(n) },
	func(b *Bridge, _ uint32, n int32) int32 { return b.CoordNew(n) },
	(*Bridge).CoordAcquire,
	(*Bridge).CoordRenew,
	(*Bridge).CoordRelease,
	func(b *Bridge, h uint32, _ int32) int32 { return b.CoordIssued(h) },
	func(b *Bridge, _ uint32, n int32) int32 { return b.ClientNew(n) },
	(*Bridge).ClientBeginAcquire,
	(*Bridge).ClientBeginRenewal,
	(*Bridge).ClientCompleteAcquire,
	(*Bridge).ClientCompleteRenewal,
	func(b *Bridge, h uint32, n int32) int32 { return b.LeaseHasExpired(h, float64(n)) },
	func(b *Bridge, _ uint32, n int32) int32 { return b.LeaseWouldAdmit(n) },
	func(b *Bridge, _ uint32, n int32) int32 { return b.GateNew(n) },
	(*Bridge).GateCommit,
	(*Bridge).GateAdmit,
	func(b *Bridge, h uint32, _ int32) int32 { return b.GateFloor(h) },
	func(b *Bridge, h uint32, n int32) int32 { return b.GateRejections(h, float64(n)) },
	func(b *Bridge, _ uint32, n int32) int32 { return b.NaiveNew(n) },
	func(b *Bridge, h uint32, _ int32) int32 { return b.NaiveValid(h) },
	func(b *Bridge, h uint32, _ int32) int32 { return b.NaiveRenewed(h) },
	func(b *Bridge, h uint32, _ int32) int32 { return b.NaiveExpiresAt(h) },
	func(b *Bridge, h uint32, _ int32) int32 { b.Free(h); return OK },
	func(b *Bridge, h uint32, n int32) int32 { return b.Grow(int32(h), n) },
	func(b *Bridge, _ uint32, n int32) int32 { return b.Intern(n) },
	func(b *Bridge, _ uint32, _ int32) int32 { b.ResetIDs(); return OK },
	func(b *Bridge, h uint32, n int32) int32 {
		return b.GateCommitIDs(h, uint32(n)&7, uint32(n)>>3&7, float64(int8(n>>6)))
	},
	func(b *Bridge, h uint32, n int32) int32 { return b.GateCheck(h, n, n&1 == 0) },
	func(b *Bridge, h uint32, n int32) int32 {
		return b.CoordReleaseIDs(h, uint32(n)&7, uint32(n)>>3&7, float64(int8(n>>6)))
	},
	func(b *Bridge, h uint32, _ int32) int32 { return b.GateRejectionCount(h) },
	func(b *Bridge, h uint32, _ int32) int32 { return b.CoordAcquireLast(h) },
	func(b *Bridge, h uint32, _ int32) int32 { return b.ClientCompleteLast(h) },
	func(b *Bridge, h uint32, n int32) int32 { return b.ClientBeginAcquireID(h, uint32(n)&7) },
}

// FuzzBridge drives the bridge with a program of (op, handle, arguments)
// steps read from the input, against a world of live objects and a
// JavaScript clock source whose readings also come from the input. No step
// may end in ErrInternal (a recovered panic), and afterwards a correct round
// trip on fresh objects still works.
func FuzzBridge(f *testing.F) {
	var seed []byte
	step := func(op, h byte, w *convert.ArgWriter) {
		seed = append(seed, op, h, byte(len(w.B)))
		seed = append(seed, w.B...)
	}
	step(13, 4, args().String("slot"))
	step(20, 5, args().PutArgToken(lease.Grant{Resource: "slot", HolderID: "a", Fence: 1}.Token()).Tag(convert.TagFunction))
	step(4, 1, args().Number(5))
	step(3, 6, args())
	f.Add(seed)
	f.Add([]byte{8, 3, 3, byte(convert.TagObject), byte(convert.TagString), 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		w := newWorld(t)
		b := w.b
		readings := data
		read := func(uint32) float64 {
			if len(readings) == 0 {
				return math.NaN()
			}
			v := float64(readings[0]) - 10
			readings = readings[1:]
			return v
		}
		handle(t, b, b.ClockCustom(1, call(b, args().String("js").Tag(convert.TagFunction))))
		for i := 0; i+3 <= len(data); {
			op, h, n := int(data[i])%len(ops), uint32(data[i+1])%16, int(data[i+2])
			i += 3
			if n > len(data)-i {
				n = len(data) - i
			}
			b.Grow(0, int32(n))
			copy(b.In, data[i:i+n])
			i += n
			if st := withSource(b, read, func() int32 { return ops[op](b, h, int32(n)) }); st == ErrInternal || st == ReadSource {
				t.Fatalf("op %d on handle %d: status %d %q", op, h, st, (&convert.OutReader{B: b.Out.B}).Str())
			}
		}
		fresh := newWorld(t)
		fresh.acquire(t)
	})
}
