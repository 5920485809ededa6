package bridge

import (
	"math"
	"testing"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// fuzzStep runs step op of a fuzz program: one of Ops, or Free, Grow or
// ResetIDs, with handle h and the fuzzer's n bytes of arguments; the
// numbers of a call that takes no argument list are made from h and n.
func fuzzStep(b *Bridge, op int, h uint32, n int32) int32 {
	switch op -= len(Ops); op {
	case 0:
		b.Free(h)
		return OK
	case 1:
		return b.Grow(int32(h), n)
	case 2:
		b.ResetIDs()
		return OK
	}
	return b.run(&Ops[op+len(Ops)], Call{H: h, N: n, ID1: uint32(n) & 7, ID2: uint32(n) >> 3 & 7, X: float64(n%64) - 1, Flag: n&1 == 0})
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
		handle(t, b, b.do("clock_custom", Call{H: 1, N: call(b, args().String("js").Tag(convert.TagFunction))}))
		for i := 0; i+3 <= len(data); {
			op, h, n := int(data[i])%(len(Ops)+3), uint32(data[i+1])%16, int(data[i+2])
			i += 3
			if n > len(data)-i {
				n = len(data) - i
			}
			b.Grow(0, int32(n))
			copy(b.In, data[i:i+n])
			i += n
			if st := withSource(b, read, func() int32 { return fuzzStep(b, op, h, int32(n)) }); st == ErrInternal || st == ReadSource {
				t.Fatalf("op %d on handle %d: status %d %q", op, h, st, (&convert.OutReader{B: b.Out.B}).Str())
			}
		}
		fresh := newWorld(t)
		fresh.acquire(t)
	})
}
