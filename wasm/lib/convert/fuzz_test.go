package convert

import (
	"errors"
	"math"
	"sort"
	"testing"

	"github.com/lease-fence/lease-fence/core/lease"
)

// decoders is every schema decoder, each run from the start of the buffer.
var decoders = map[string]func(r *Reader) (valid func() error, err error){
	"Str":       func(r *Reader) (func() error, error) { r.Str("a"); return nil, r.Err() },
	"NonEmpty":  func(r *Reader) (func() error, error) { r.NonEmpty("a"); return nil, r.Err() },
	"Finite":    func(r *Reader) (func() error, error) { return finiteCheck(r.Finite("a"), r.Err()) },
	"OptFinite": func(r *Reader) (func() error, error) { return finiteCheck(r.OptFinite("a", 0), r.Err()) },
	"Count":     func(r *Reader) (func() error, error) { r.Count("a"); return nil, r.Err() },
	"OptCount":  func(r *Reader) (func() error, error) { r.OptCount("a"); return nil, r.Err() },
	"Span": func(r *Reader) (func() error, error) {
		d := r.Span("a", true, false)
		return func() error {
			if d <= 0 {
				return errors.New("non-positive duration accepted")
			}
			return nil
		}, r.Err()
	},
	"OptSpan":  func(r *Reader) (func() error, error) { r.Span("a", false, true); return nil, r.Err() },
	"Object":   func(r *Reader) (func() error, error) { r.Object("a", true); return nil, r.Err() },
	"Function": func(r *Reader) (func() error, error) { r.Function("a"); return nil, r.Err() },
	"Handle":   func(r *Reader) (func() error, error) { r.Handle("a", KindGate, "a gate"); return nil, r.Err() },
	"Instant":  func(r *Reader) (func() error, error) { return r.Instant("a").Validate, r.Err() },
	"Token":    func(r *Reader) (func() error, error) { return r.Token("a").Validate, r.Err() },
	"Acquire":  func(r *Reader) (func() error, error) { return requestCheck(r.Request("a", lease.KindAcquire)), r.Err() },
	"Renew":    func(r *Reader) (func() error, error) { return requestCheck(r.Request("a", lease.KindRenew)), r.Err() },
	"Grant": func(r *Reader) (func() error, error) {
		g := r.Grant("a")
		return func() error {
			if g.TTL <= 0 || g.Fence == 0 || g.RequestID == "" || g.Resource == "" || g.HolderID == "" {
				return errors.New("grant with an empty or zero field accepted")
			}
			return g.CoordinatorExpiresAt.Validate()
		}, r.Err()
	},
}

var decoderNames = func() []string {
	var names []string
	for name := range decoders {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}()

func finiteCheck(v float64, err error) (func() error, error) {
	return func() error {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("non-finite number accepted")
		}
		return nil
	}, err
}

func requestCheck(q lease.Request) func() error {
	return func() error {
		if q.RequestID == "" || q.Resource == "" || q.HolderID == "" || (q.Kind == lease.KindRenew) != (q.Fence != 0) {
			return errors.New("request with an empty field or a wrong fence accepted")
		}
		return q.SentAt.Validate()
	}
}

// FuzzArgs runs every decoder over arbitrary bytes. None may panic; each
// returns either a value the core accepts or an *ArgumentError.
func FuzzArgs(f *testing.F) {
	var w ArgWriter
	f.Add(w.PutArgRequest(req).B)
	w = ArgWriter{}
	f.Add(w.PutArgRequest(ren).B)
	w = ArgWriter{}
	f.Add(w.PutArgGrant(grt).B)
	w = ArgWriter{}
	f.Add(w.Object().Number(1).String("d").B)
	w = ArgWriter{}
	f.Add(w.Number(math.NaN()).B)
	f.Add([]byte{})
	var in Interner
	f.Fuzz(func(t *testing.T, data []byte) {
		for i := 0; i < 2*len(decoders); i++ {
			name, decode := decoderNames[i/2], decoders[decoderNames[i/2]]
			r := NewReader(data)
			if i%2 == 1 {
				r.Strings = &in // the same decode with interned strings
			}
			valid, err := decode(r)
			if err != nil {
				var ae *ArgumentError
				if !errors.As(err, &ae) || ae.Arg == "" || ae.Reason == "" {
					t.Fatalf("%s: error %v is not a complete *ArgumentError", name, err)
				}
				continue
			}
			if valid != nil {
				if err := valid(); err != nil {
					t.Fatalf("%s: decoded a value the core refuses: %v", name, err)
				}
			}
		}
	})
}

// FuzzRequestRoundTrip encodes arbitrary requests the way JavaScript does and
// checks that they decode to themselves, and that results read back intact.
func FuzzRequestRoundTrip(f *testing.F) {
	f.Add("r1", "slot", "agent-a", 1000.5, "agent-a", uint64(0))
	f.Add("r2", "slot", "agent-a", -1.0, "d", uint64(MaxSafeInteger))
	f.Fuzz(func(t *testing.T, id, res, holder string, ms float64, domain string, fence uint64) {
		q := lease.Request{Kind: lease.KindAcquire, RequestID: id, Resource: res, HolderID: holder, Fence: fence}
		q.SentAt.Millis, q.SentAt.Domain = ms, domain
		if fence != 0 {
			q.Kind = lease.KindRenew
		}
		var w ArgWriter
		r := NewReader(w.PutArgRequest(q).B)
		got, err := r.Request("request", q.Kind), r.Err()
		ok := id != "" && res != "" && holder != "" && domain != "" && q.SentAt.Validate() == nil && fence <= MaxSafeInteger
		if ok != (err == nil) {
			t.Fatalf("request %+v: error %v, want valid=%v", q, err, ok)
		}
		if ok && got != q {
			t.Fatalf("request %+v decoded as %+v", q, got)
		}
		var out Writer
		out.PutRequest(q)
		back := (&OutReader{B: out.B}).GetRequest()
		if back.RequestID != id || back.Resource != res || back.HolderID != holder || back.SentAt.Domain != domain ||
			math.Float64bits(back.SentAt.Millis) != math.Float64bits(ms) || (fence <= MaxSafeInteger && back.Fence != fence) {
			t.Fatalf("result %+v read back as %+v", q, back)
		}
	})
}
