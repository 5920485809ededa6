//go:build js && wasm

package main

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall/js"

	"github.com/go-json-experiment/json"
	"github.com/syumai/workers/cloudflare"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/auth"
	"github.com/lease-fence/lease-fence/service/wire"
)

// A token's maxLeases on the Worker. Each resource is its own Durable
// Object, so a token's leases are counted in one more object of the token's
// own (the TOKENS binding, class TokenObject, named after the token), which
// holds a place for each live lease of the token: the resource's object
// takes one (Reserve) before it writes a new lease of a token that has a
// maxLeases, moves it with each renewal (Renewed), and gives it back after
// a release, a new grant over it or the sweep of it (Ended, not awaited). A place lapses by
// itself a second (placeSkew) after the lease's expiry, so an expired lease,
// or a place whose Ended was lost, holds no place for long. Only tokens
// with a maxLeases are counted: the leases of others never reach a token
// object. A token object that cannot be reached refuses: the grant or the
// renewal is answered 503 unavailable and nothing is written (docs/service.md,
// "Cloudflare Worker").

// tokensBinding is the Durable Object binding of the token objects.
const tokensBinding = "TOKENS"

// callerHeader carries the caller (its token's name and limits) from the
// Worker's front to the resource's object, which only the front calls.
const callerHeader = "x-lease-fence-caller"

// placeSkew is how long after its lease's expiry a place lapses: the
// resource's object and the token's may read different clocks.
const placeSkew = 1000 // milliseconds

func encodeCaller(c wire.Caller) string {
	return c.Name + " " + strconv.Itoa(c.MaxLeases) + " " + strconv.Itoa(c.MaxWaiters)
}

func decodeCaller(s string) (wire.Caller, bool) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return wire.Caller{}, false
	}
	leases, err1 := strconv.Atoi(f[1])
	waiters, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || leases < 0 || waiters < 0 {
		return wire.Caller{}, false
	}
	return wire.Caller{Name: f[0], MaxLeases: leases, MaxWaiters: waiters}, true
}

// tokenSet is the tokens file of the LEASE_TOKENS secret, read once; nil
// when the secret is not set.
var tokenSet = sync.OnceValues(func() (*auth.Set, error) {
	file := cloudflare.Getenv(tokensSecret)
	if file == "" {
		return nil, nil
	}
	set, err := auth.Parse([]byte(file))
	if err != nil {
		return nil, errors.New("the " + tokensSecret + " secret: " + err.Error())
	}
	return set, nil
})

// tokenLedger is the service.Ledger of a resource's object: the token
// objects.
type tokenLedger struct {
	limited map[string]bool // the tokens with a maxLeases
	once    sync.Once
	ns      js.Value
	err     error
}

// newTokenLedger returns the ledger of the tokens in set that have a
// maxLeases, or nil if none has.
func newTokenLedger(set *auth.Set) *tokenLedger {
	l := &tokenLedger{limited: map[string]bool{}}
	for _, t := range set.Tokens() {
		if t.MaxLeases > 0 {
			l.limited[t.Name] = true
		}
	}
	if len(l.limited) == 0 {
		return nil
	}
	return l
}

var _ service.Ledger = (*tokenLedger)(nil)

// placeCall is a call to a token object.
type placeCall struct {
	Op       string  `json:"op"` // reserve, renewed or ended
	Limit    int     `json:"limit,omitzero"`
	Resource string  `json:"resource"`
	Fence    uint64  `json:"fence"`
	Until    float64 `json:"until,omitzero"` // the lease's expiry, coordinator milliseconds
}

// placeAnswer is a token object's answer.
type placeAnswer struct {
	OK   bool `json:"ok"`
	Held int  `json:"held,omitzero"` // the live places, when a reserve is refused
}

// Reserve takes a place in owner's object; a record without a limit (one
// of a token without a maxLeases, or one the resource's object loaded,
// whose place the token's object keeps) takes none here. now is not sent:
// the token's object reads its own clock (placeSkew).
func (l *tokenLedger) Reserve(_ context.Context, owner string, limit int, e service.Entry, _ float64) (bool, error) {
	if limit < 1 {
		return true, nil
	}
	a, err := l.send(owner, placeCall{Op: "reserve", Limit: limit, Resource: e.Resource, Fence: e.Fence, Until: e.ExpiresAt})
	return a.OK, err
}

// Held is 0: the token's object tells only by a Reserve, one call for
// each grant.
func (l *tokenLedger) Held(string, string, int, float64) int { return 0 }

func (l *tokenLedger) Renewed(_ context.Context, e service.Entry) error {
	if !l.limited[e.Owner] {
		return nil
	}
	_, err := l.send(e.Owner, placeCall{Op: "renewed", Resource: e.Resource, Fence: e.Fence, Until: e.ExpiresAt})
	return err
}

func (l *tokenLedger) Ended(_ context.Context, e service.Entry) {
	if !l.limited[e.Owner] {
		return
	}
	// Not awaited: a place not given back lapses at the lease's expiry.
	go func() { _, _ = l.send(e.Owner, placeCall{Op: "ended", Resource: e.Resource, Fence: e.Fence}) }()
}

// send makes call to owner's token object.
func (l *tokenLedger) send(owner string, call placeCall) (placeAnswer, error) {
	l.once.Do(func() {
		l.ns = cloudflare.GetBinding(tokensBinding)
		if l.ns.IsUndefined() {
			l.err = errors.New("no Durable Object binding " + tokensBinding + " to count the leases of tokens with a maxLeases")
		}
	})
	if l.err != nil {
		return placeAnswer{}, l.err
	}
	body, err := json.Marshal(call)
	if err != nil {
		return placeAnswer{}, err
	}
	stub := l.ns.Call("get", l.ns.Call("idFromName", owner))
	init := js.Global().Get("Object").New()
	init.Set("method", http.MethodPost)
	init.Set("body", string(body))
	resp, err := await(stub.Call("fetch", "https://lease-token/place", init))
	if err != nil {
		return placeAnswer{}, errors.New("the object of the token " + strconv.Quote(owner) + " did not answer: " + err.Error())
	}
	text, err := await(resp.Call("text"))
	if err != nil {
		return placeAnswer{}, errors.New("reading the answer of the token " + strconv.Quote(owner) + "'s object: " + err.Error())
	}
	if status := resp.Get("status").Int(); status != http.StatusOK {
		return placeAnswer{}, errors.New("the object of the token " + strconv.Quote(owner) + " answered " + strconv.Itoa(status) + ": " + text.String())
	}
	var a placeAnswer
	if err := json.Unmarshal([]byte(text.String()), &a); err != nil {
		return placeAnswer{}, errors.New("the answer of the token " + strconv.Quote(owner) + "'s object is unreadable")
	}
	return a, nil
}

// tokenObject is the Go side of one token's Durable Object: the places of
// the token's live leases, by resource, in the object's storage (one key
// each).
type tokenObject struct {
	storage js.Value
	now     func() float64
	mu      sync.Mutex
	places  map[string]place // nil until loaded
}

type place struct {
	fence uint64
	until float64
}

const placePrefix = "lease-fence/place/"

func (p place) live(now float64) bool { return now < p.until+placeSkew }

// load reads the places from storage once; a stored value that does not
// parse is refused (the token's grants are then refused too).
func (o *tokenObject) load() error {
	if o.places != nil {
		return nil
	}
	opts := js.Global().Get("Object").New()
	opts.Set("prefix", placePrefix)
	m, err := await(o.storage.Call("list", opts))
	if err != nil {
		return err
	}
	places := map[string]place{}
	var bad error
	each := js.FuncOf(func(_ js.Value, args []js.Value) any {
		key := strings.TrimPrefix(args[1].String(), placePrefix)
		p, ok := parsePlace(args[0])
		if !ok {
			bad = errors.Join(service.ErrInconsistent, errors.New("the stored place of "+strconv.Quote(key)+" is damaged"))
		}
		places[key] = p
		return nil
	})
	m.Call("forEach", each)
	each.Release()
	if bad != nil {
		return bad
	}
	o.places = places
	return nil
}

func parsePlace(v js.Value) (place, bool) {
	if v.Type() != js.TypeString {
		return place{}, false
	}
	f, u, ok := strings.Cut(v.String(), " ")
	fence, err1 := strconv.ParseUint(f, 10, 64)
	until, err2 := strconv.ParseFloat(u, 64)
	if !ok || err1 != nil || err2 != nil || fence == 0 || !finiteMs(until) {
		return place{}, false
	}
	return place{fence, until}, true
}

func finiteMs(f float64) bool { return f == f && f > -1e300 && f < 1e300 }

// serve answers one call (placeCall's JSON) with a status and a body.
func (o *tokenObject) serve(body string) (int, string) {
	var call placeCall
	if err := json.Unmarshal([]byte(body), &call, json.RejectUnknownMembers(true)); err != nil || call.Resource == "" || call.Fence == 0 ||
		(call.Op == "reserve" && call.Limit < 1) || (call.Op != "ended" && !finiteMs(call.Until)) {
		return http.StatusBadRequest, `{"error":"a call of a token object is malformed"}`
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.load(); err != nil {
		return http.StatusInternalServerError, errorJSON(err)
	}
	now := o.now()
	put, del := map[string]place{}, []string{}
	a := placeAnswer{OK: true}
	cur, has := o.places[call.Resource]
	switch call.Op {
	case "reserve":
		// Lapsed places are forgotten here, where they would be counted.
		live := 0
		for r, p := range o.places {
			switch {
			case r == call.Resource: // replaced
			case !p.live(now):
				del = append(del, r)
			default:
				live++
			}
		}
		if !(has && cur.live(now)) && live >= call.Limit {
			return http.StatusOK, marshal(placeAnswer{OK: false, Held: live})
		}
		put[call.Resource] = place{call.Fence, call.Until}
	case "renewed":
		// A place that lapsed (or was never taken: the token had no
		// maxLeases then) is taken again: the lease lives.
		if !has || cur.fence <= call.Fence {
			put[call.Resource] = place{call.Fence, call.Until}
		}
	case "ended":
		if has && cur.fence == call.Fence {
			del = append(del, call.Resource)
		}
	default:
		return http.StatusBadRequest, `{"error":"unknown op"}`
	}
	if err := o.write(put, del); err != nil {
		return http.StatusServiceUnavailable, errorJSON(err)
	}
	for _, r := range del {
		delete(o.places, r)
	}
	for r, p := range put {
		o.places[r] = p
	}
	return http.StatusOK, marshal(a)
}

// write stores put and deletes del in one write (storageWrite).
func (o *tokenObject) write(put map[string]place, del []string) error {
	entries := map[string]any{}
	for r, pl := range put {
		entries[placePrefix+r] = strconv.FormatUint(pl.fence, 10) + " " + strconv.FormatFloat(pl.until, 'f', -1, 64)
	}
	keys := make([]any, len(del))
	for i, r := range del {
		keys[i] = placePrefix + r
	}
	return storageWrite(o.storage, entries, keys)
}

func marshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func errorJSON(err error) string { return marshal(map[string]string{"error": err.Error()}) }

// tokenTable holds the Go side of the token objects of this isolate.
type tokenTable struct{ handles[*tokenObject] }

// open(storage) makes the Go side of a token object and returns its
// handle.
func (t *tokenTable) open(_ js.Value, args []js.Value) (result any) {
	defer recoverTo(&result)
	if len(args) != 1 || args[0].Type() != js.TypeObject {
		return js.Global().Get("Error").New("openToken(storage) takes the object's storage")
	}
	date := js.Global().Get("Date")
	return t.add(&tokenObject{storage: args[0], now: func() float64 { return date.Call("now").Float() }})
}

// fetch(handle, body) answers a call to a token object with a promise of
// {status, body}.
func (t *tokenTable) fetch(_ js.Value, args []js.Value) (result any) {
	defer recoverTo(&result)
	if len(args) != 2 || args[0].Type() != js.TypeNumber || args[1].Type() != js.TypeString {
		return rejected(errors.New("tokenFetch(handle, body)"))
	}
	o, ok := t.get(args[0])
	if !ok {
		return rejected(errors.New("tokenFetch: unknown token object handle"))
	}
	body := args[1].String()
	return promise(func() (js.Value, error) {
		status, text := o.serve(body)
		out := js.Global().Get("Object").New()
		out.Set("status", status)
		out.Set("body", text)
		return out, nil
	})
}
