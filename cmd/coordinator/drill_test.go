//go:build linux

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"

	"github.com/lease-fence/lease-fence/core/sim"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
	"github.com/lease-fence/lease-fence/test/rig/wirehist"
)

// The drills of replicas_test.go run coordinator processes over one
// PostgreSQL database (-store) and break things under load. Clients call
// through client.Client with every coordinator's URL; each HTTP attempt is
// an operation of the history, bounded by the wall clock around it in
// whole milliseconds, which is the clock the database server reads (the
// test runs on its machine). An attempt that gets no answer (its
// coordinator was killed, the database was down) or a 5xx may or may not
// have changed something: a trigger the drill adds to the state's table
// records every committed version of a row with its reading, and after
// the run each version is matched to the attempt that made it (explain):
// an answered attempt made the version it was answered with; an unsure
// one, the version of its call left over in its span (or just after it,
// if its coordinator was killed with the statement sent), or none (it
// changed nothing and is left out). A version no attempt made fails the
// drill. Porcupine then checks the history against the lease-register
// model of core/sim.
//
// A renewal retried with the same body after its first attempt committed
// renews twice: the retry is decided again on the row (renewals are not
// looked up by request id; docs/service.md, what a retry does), so the
// lease gets two expiries, each its reading plus the TTL, and a call in
// between may see the first. Both attempts are operations of the history,
// each a renewal at its own reading: the model allows it, the lease only
// gets longer, and the fence and the holder are unchanged.

// drillTTL is long enough that no lease ends by itself during a drill: a
// renewal answered "expired" or a release answered "not held" then means
// an acknowledged change was lost.
const drillTTL = "1h"

const drillTTLMs = 3_600_000

// freeAddr returns a loopback address with a port free right now, for a
// coordinator that must come back on the same address after a kill.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// drill is a set of coordinator processes over one database, the clients
// that call them, and the history of their attempts.
type drill struct {
	t     *testing.T
	dsn   string
	addrs []string
	args  []string // every coordinator's flags but -addr and -init
	mu    sync.Mutex
	kids  []*child
	logs  []*syncio.Buffer

	ticks  atomic.Int64
	histMu sync.Mutex
	ops    []porcupine.Operation
	unsure []attempt
	// tried: every attempt, as the recorder describes it (for the dump of
	// a failing history); audit: the audit rows by resource
	tried []string
	audit map[string][]audited

	clients  []*drillClient
	answered atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

// attempt is an attempt whose outcome the client did not learn.
type attempt struct {
	client    int
	m         wire.Message
	call, ret int64
	lo, hi    float64
	// noAnswer: the attempt got no answer (its coordinator was killed):
	// the statement it sent may still commit after the attempt failed,
	// up to drillLateMs later (the database runs it to its end).
	noAnswer bool
}

// drillLateMs bounds how long after its attempt failed the decision of a
// killed coordinator may commit: the coordinators' -store-timeout, which
// is their sessions' lock_timeout.
const drillLateMs = 5000

// auditSQL records every committed change of the state's rows, in the
// order they were written (seq; the row's lock orders one resource's
// writes as their commits).
const auditSQL = `
CREATE TABLE drill_audit (seq bigserial, resource text, holder_id text, request_id text, fence bigint, expires_at float8, decided_at float8, releases bytea);
CREATE FUNCTION drill_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO drill_audit (resource, holder_id, request_id, fence, expires_at, decided_at, releases) VALUES (NEW.resource, NEW.holder_id, NEW.request_id, NEW.fence, NEW.expires_at, NEW.decided_at, NEW.releases);
	RETURN NEW;
END $$;
CREATE TRIGGER drill_audit AFTER INSERT OR UPDATE ON lease_fence_leases FOR EACH ROW EXECUTE FUNCTION drill_audit();`

// newDrill creates the state in dsn's database with the first coordinator
// (-init), adds the audit trigger, then starts the others.
func newDrill(t *testing.T, dsn string, replicas int, args ...string) *drill {
	t.Helper()
	d := &drill{t: t, dsn: dsn, args: append([]string{"-store", dsn, "-ttl", drillTTL}, args...), stop: make(chan struct{})}
	for i := range replicas {
		d.addrs = append(d.addrs, freeAddr(t))
		d.logs = append(d.logs, &syncio.Buffer{})
		d.kids = append(d.kids, nil)
		d.start(i, i == 0)
		if i == 0 {
			pgtest.Exec(t, dsn, auditSQL)
		}
	}
	return d
}

func (d *drill) start(i int, init bool) {
	d.t.Helper()
	args := append([]string{"-addr", d.addrs[i]}, d.args...)
	if init {
		args = append(args, "-init")
	}
	c := startKilledChild(d.t, d.logs[i], args...)
	d.mu.Lock()
	d.kids[i] = c
	d.mu.Unlock()
}

// kill9 kills coordinator i with SIGKILL and starts it again on its
// address.
func (d *drill) kill9(i int) {
	d.t.Helper()
	d.mu.Lock()
	c := d.kids[i]
	d.mu.Unlock()
	c.kill()
	d.start(i, false)
}

// urls returns the coordinators' URLs starting with the i-th.
func (d *drill) urls(i int) []string {
	var out []string
	for k := range d.addrs {
		out = append(out, "http://"+d.addrs[(i+k)%len(d.addrs)])
	}
	return out
}

// recorder is one client's transport: it records each attempt.
type recorder struct {
	d       *drill
	client  int
	next    http.RoundTripper
	trace   []string // the attempts of the client's current call
	release string   // its request id, if it is a release
}

func (rt *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	ms, err := wirehist.ReadRequests(r)
	if err != nil {
		return nil, err
	}
	m := ms[0] // a batch's first renewal names it in the trace
	d := rt.d
	lo := float64(time.Now().UnixMilli())
	call := d.ticks.Add(1)
	resp, err := rt.next.RoundTrip(r)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	ret := d.ticks.Add(1)
	hi := float64(time.Now().UnixMilli())
	what := fmt.Sprintf("%s %s id %s to %s [%v, %v]: ", m.Op, m.Request.Resource, m.Request.RequestID, r.URL.Host, lo, hi)
	if len(ms) > 1 {
		what = fmt.Sprintf("a batch of %d renewals from %s id %s to %s [%v, %v]: ", len(ms), m.Request.Resource, m.Request.RequestID, r.URL.Host, lo, hi)
	}
	if err != nil {
		what += err.Error()
	} else {
		what += strconv.Itoa(resp.StatusCode) + " " + string(data)
	}
	rt.trace = append(rt.trace, what)
	if m.Op == wire.OpRelease {
		rt.release = m.Request.RequestID
	}
	d.histMu.Lock()
	defer d.histMu.Unlock()
	d.tried = append(d.tried, fmt.Sprintf("c%d [%d,%d] %s", rt.client, call, ret, what))
	if err != nil || resp.StatusCode >= 500 {
		for _, m := range ms {
			d.unsure = append(d.unsure, attempt{client: rt.client, m: m, call: call, ret: ret, lo: lo, hi: hi, noAnswer: err != nil})
		}
		if err != nil {
			return nil, err
		}
	} else {
		// A batch's renewals are an operation each; one answered 5xx is
		// unsure, as a call alone answered so.
		var batch wire.RenewalsReply
		if len(ms) > 1 || r.URL.Path == wire.RenewalsPath {
			_ = json.Unmarshal(data, &batch)
		}
		for i, out := range wirehist.OutputsOf(r.URL.Path, len(ms), resp.StatusCode, data) {
			if i < len(batch.Results) && batch.Results[i].Error != nil && batch.Results[i].Error.Status >= 500 {
				d.unsure = append(d.unsure, attempt{client: rt.client, m: ms[i], call: call, ret: ret, lo: lo, hi: hi})
				continue
			}
			in := wirehist.InputOf(ms[i])
			in.Lo, in.Hi = lo, hi
			d.ops = append(d.ops, porcupine.Operation{ClientId: rt.client, Input: in, Call: call, Output: out, Return: ret})
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// audited is one committed version of a row.
type audited struct {
	seq                         int64 // the order of the writes (of one resource: their commits')
	resource, holder, requestID string
	releases                    []service.Release
	fence                       int64
	expiresAt, decidedAt        float64
	kind                        rowKind
	released                    string // rowRelease: the request id of the release
	by                          string // the attempt that made it, once found
}

// rowKind is what a version of a row records, compared with the version
// before it.
type rowKind int

const (
	rowOther   rowKind = iota // none of the below: no call of the drill writes it
	rowGrant                  // a new fence, until the reading plus the TTL
	rowRenewal                // the same lease, until the reading plus the TTL
	rowRelease                // no lease, and a release of the one before dated at the reading
)

// classify sets the kind of each of rows, one resource's versions in the
// order they were written.
func classify(rows []audited) {
	var prev audited
	for i := range rows {
		a := &rows[i]
		switch {
		case a.fence != 0 && a.fence != prev.fence && a.expiresAt == a.decidedAt+drillTTLMs:
			a.kind = rowGrant
		case a.fence != 0 && a.fence == prev.fence && a.holder == prev.holder && a.requestID == prev.requestID && a.expiresAt == a.decidedAt+drillTTLMs:
			a.kind = rowRenewal
		case a.fence == 0 && prev.fence != 0:
			for _, r := range a.releases {
				if r.At == a.decidedAt && r.Fence == uint64(prev.fence) && r.HolderID == prev.holder {
					a.kind, a.released = rowRelease, r.RequestID
				}
			}
		}
		prev = *a
	}
}

// made reports whether row a can be the change a call in made.
func made(in sim.OpInput, a *audited) bool {
	switch in.Kind {
	case sim.OpAcquire:
		return a.kind == rowGrant && a.requestID == in.RequestID && a.holder == in.Holder
	case sim.OpRenew:
		return a.kind == rowRenewal && a.fence == int64(in.Fence) && a.holder == in.Holder
	case sim.OpRelease:
		return a.kind == rowRelease && a.released == in.RequestID
	}
	return false
}

// outputOf is what the call that made row a was answered.
func (a *audited) outputOf() sim.OpOutput {
	if a.kind == rowRelease {
		return sim.OpOutput{OK: true}
	}
	return sim.OpOutput{OK: true, Fence: uint64(a.fence), ExpiresAt: a.expiresAt}
}

// resolve enters into the history, from the audit table, the attempts
// whose outcome the clients did not learn and that changed something, and
// returns how many did and how many did not, and the request ids of the
// releases they made. With strict, a version of a row that no attempt
// made (a call that committed twice, a grant or renewal nobody asked for)
// fails the drill.
func (d *drill) resolve(dsn string, strict bool) (changed, unchanged int, released map[string]bool) {
	d.t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		d.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT seq, resource, holder_id, request_id, releases, fence, expires_at, decided_at FROM drill_audit WHERE decided_at > 0 ORDER BY seq`)
	if err != nil {
		d.t.Fatal(err)
	}
	by := map[string][]audited{}
	for rows.Next() {
		var a audited
		var rels []byte
		if err := rows.Scan(&a.seq, &a.resource, &a.holder, &a.requestID, &rels, &a.fence, &a.expiresAt, &a.decidedAt); err != nil {
			d.t.Fatal(err)
		}
		if a.releases, err = service.DecodeReleasesBinary(a.resource, rels); err != nil {
			d.t.Fatal(err)
		}
		by[a.resource] = append(by[a.resource], a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		d.t.Fatal(err)
	}
	d.audit = by
	done, unchanged, released, unexplained := explain(by, d.ops, d.unsure)
	for _, a := range unexplained {
		if !strict {
			break
		}
		d.t.Errorf("a version of %s that no attempt made: %s #%d until %v, decided at %v (kind %d)", a.resource, a.holder, a.fence, a.expiresAt, a.decidedAt, a.kind)
	}
	d.ops = append(d.ops, done...)
	return len(done), unchanged, released
}

// explain finds, for each version of a row in by (each resource's in the
// order written), the attempt that made it. First the attempts answered
// (ops): the version they were answered with, decided inside their span.
// Then the attempts whose outcome is unknown (unsure), in the order they
// were made: each made the earliest version left that its call can have
// made, decided inside its span or, for an attempt without an answer, up
// to drillLateMs after it (a killed coordinator's statement still
// commits). It returns those attempts as operations of the history (one
// that committed after it failed returns when the history ends), how many
// of them made nothing, the request ids of the releases they made, and
// the versions no attempt made.
//
// Matching versions to attempts, not attempts to versions, is what makes
// this exact. A renewal and its grant, or two renewals of one lease, are
// versions alike (same holder, fence and request id, the expiry the
// reading plus the TTL) that may be decided in the same millisecond as an
// attempt's start or end: an attempt matched by its span alone can take
// its grant's version (decided in the millisecond its renewal was sent)
// for its own and leave its own renewal out of the history, and a call
// that saw that renewal's expiry then has no place in it. And a renewal
// retried with the same body after its first attempt committed (the
// coordinator was killed before it answered) is renewed twice: two
// versions, two operations of the history, each a renewal at its own
// reading, which is what the lease-register model allows.
func explain(by map[string][]audited, ops []porcupine.Operation, unsure []attempt) (done []porcupine.Operation, unchanged int, released map[string]bool, unexplained []audited) {
	released = map[string]bool{}
	for _, rows := range by {
		classify(rows)
	}
	for _, op := range ops {
		in, out := op.Input.(sim.OpInput), op.Output.(sim.OpOutput)
		if !out.OK {
			continue
		}
		rows := by[in.Resource]
		for i := range rows {
			a := &rows[i]
			if a.by == "" && made(in, a) && a.decidedAt >= in.Lo && a.decidedAt <= in.Hi &&
				(a.kind == rowRelease || out.Fence == uint64(a.fence) && out.ExpiresAt == a.expiresAt) {
				a.by = fmt.Sprintf("c%d [%d,%d]", op.ClientId, op.Call, op.Return)
				break
			}
		}
	}
	unsure = slices.Clone(unsure)
	slices.SortStableFunc(unsure, func(a, b attempt) int { return cmp.Compare(a.call, b.call) })
	for _, at := range unsure {
		in := wirehist.InputOf(at.m)
		in.Lo, in.Hi = at.lo, at.hi
		ret := at.ret
		rows := by[in.Resource]
		var a *audited
		for i := range rows {
			if r := &rows[i]; r.by == "" && made(in, r) && r.decidedAt >= at.lo && (r.decidedAt <= at.hi || at.noAnswer && r.decidedAt <= at.hi+drillLateMs) {
				a = r
				break
			}
		}
		if a == nil {
			unchanged++
			continue
		}
		a.by = fmt.Sprintf("c%d [%d,%d] (unsure)", at.client, at.call, at.ret)
		if a.decidedAt > at.hi {
			// Committed after the attempt failed: it returns when the
			// history ends.
			in.Hi, ret = a.decidedAt, math.MaxInt64
		}
		if a.kind == rowRelease {
			released[in.RequestID] = true
		}
		done = append(done, porcupine.Operation{ClientId: at.client, Input: in, Call: at.call, Output: a.outputOf(), Return: ret})
	}
	var resources []string
	for r := range by {
		resources = append(resources, r)
	}
	slices.Sort(resources)
	for _, r := range resources {
		for _, a := range by[r] {
			if a.by == "" {
				unexplained = append(unexplained, a)
			}
		}
	}
	return done, unchanged, released, unexplained
}

// drillClient is one holder: a client.Client over every coordinator, which
// retries each call (same body) until it gets an answer.
type drillClient struct {
	d    *drill
	rt   *recorder
	idx  int
	id   string
	c    *client.Client
	rng  *rand.Rand
	held map[string]*client.Lease
	// what its calls were answered, for the checks after the run
	grants  []grant
	lost    []string // calls that got no answer at all
	expired []string // renewals refused and releases not done: with a TTL of an hour, a lost change
	// releases whose retry was answered "not done": lost, unless the
	// database shows an earlier attempt of theirs did it (request id to
	// complaint)
	notDone map[string]string
}

type grant struct {
	fence      uint64
	resource   string
	begin, end time.Time
}

func (d *drill) newClient(i int, seed uint64) *drillClient {
	d.t.Helper()
	id := "holder-" + strconv.Itoa(i)
	rt := &recorder{d: d, client: i, next: http.DefaultTransport.(*http.Transport).Clone()}
	wc := newClient(d.t, id, client.Config{BaseURLs: d.urls(i), Attempts: 40, AttemptTimeout: 8 * time.Second,
		HTTPClient: &http.Client{Transport: rt}})
	return &drillClient{d: d, rt: rt, idx: i, id: id, c: wc, rng: rand.New(rand.NewPCG(seed, uint64(i))), held: map[string]*client.Lease{}}
}

// drillResources are the resources every client competes for.
var drillResources = []string{"r0", "r1", "r2", "r3", "r4", "r5"}

// step makes one call. It returns false when the call got no answer at all
// (the client stops then).
func (k *drillClient) step(ctx context.Context) bool {
	k.rt.trace, k.rt.release = nil, ""
	if len(k.held) > 0 && (k.rng.IntN(3) > 0 || len(k.held) == len(drillResources)) {
		names := make([]string, 0, len(k.held))
		for n := range k.held {
			names = append(names, n)
		}
		slices.Sort(names)
		if len(names) >= 2 && k.rng.IntN(3) == 0 {
			return k.renewEach(ctx, names)
		}
		name := names[k.rng.IntN(len(names))]
		l := k.held[name]
		tok := l.Token()
		if k.rng.IntN(2) == 0 {
			l2, err := k.c.Renew(ctx, l)
			switch {
			case err == nil:
				k.held[name] = l2
			case errors.Is(err, client.ErrExpired):
				delete(k.held, name)
				k.expired = append(k.expired, fmt.Sprintf("renewal of %s #%d (attempts: %s)", name, tok.Fence, strings.Join(k.rt.trace, "; ")))
			default:
				return k.noAnswer("renew "+name, err)
			}
			return true
		}
		err := k.c.Release(ctx, l)
		switch {
		case err == nil:
		case errors.Is(err, client.ErrExpired):
			if k.notDone == nil {
				k.notDone = map[string]string{}
			}
			k.notDone[k.rt.release] = fmt.Sprintf("release of %s #%d (attempts: %s)", name, tok.Fence, strings.Join(k.rt.trace, "; "))
		default:
			return k.noAnswer("release "+name, err)
		}
		delete(k.held, name)
		return true
	}
	var free []string
	for _, r := range drillResources {
		if k.held[r] == nil {
			free = append(free, r)
		}
	}
	name := free[k.rng.IntN(len(free))]
	begin := time.Now()
	l, err := k.c.Acquire(ctx, name)
	var denied *client.DeniedError
	switch {
	case err == nil:
		k.held[name] = l
		k.grants = append(k.grants, grant{fence: l.Token().Fence, resource: name, begin: begin, end: time.Now()})
	case errors.As(err, &denied):
	default:
		return k.noAnswer("acquire "+name, err)
	}
	return true
}

// renewEach renews the leases of names in one batch (wire.RenewalsPath).
func (k *drillClient) renewEach(ctx context.Context, names []string) bool {
	ls := make([]*client.Lease, len(names))
	for i, n := range names {
		ls[i] = k.held[n]
	}
	out, errs := k.c.RenewEach(ctx, ls)
	for i, name := range names {
		switch err := errs[i]; {
		case err == nil:
			k.held[name] = out[i]
		case errors.Is(err, client.ErrExpired):
			delete(k.held, name)
			k.expired = append(k.expired, fmt.Sprintf("renewal of %s #%d in a batch (attempts: %s)", name, ls[i].Token().Fence, strings.Join(k.rt.trace, "; ")))
		default:
			return k.noAnswer("renew "+name+" in a batch", err)
		}
	}
	return true
}

func (k *drillClient) noAnswer(what string, err error) bool {
	k.lost = append(k.lost, what+": "+err.Error())
	return false
}

// run starts n clients calling until stopped.
func (d *drill) run(n int, seed uint64) {
	for i := range n {
		k := d.newClient(i, seed)
		d.clients = append(d.clients, k)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			ctx := context.Background()
			for {
				select {
				case <-d.stop:
					return
				default:
				}
				if !k.step(ctx) {
					return
				}
				d.answered.Add(1)
			}
		}()
	}
}

// waitAnswered waits until n more calls were answered.
func (d *drill) waitAnswered(n int64) {
	target := d.answered.Load() + n
	for deadline := time.Now().Add(5 * time.Minute); d.answered.Load() < target; {
		if time.Now().After(deadline) {
			d.t.Fatalf("%d calls answered, waiting for %d", d.answered.Load(), target)
		}
		time.Sleep(time.Millisecond)
	}
}

// finish stops the clients and checks what they were answered: every call
// got an answer, no fence was handed out twice or below a fence answered
// before the call began, no acknowledged lease or release was lost, and
// (if linearizable) porcupine accepts the history, with the attempts that
// got no answer resolved from the database at dsn. It returns the
// operations.
func (d *drill) finish(name, dsn string, linearizable bool) []porcupine.Operation {
	d.t.Helper()
	close(d.stop)
	d.wg.Wait()
	t := d.t
	if linearizable {
		d.verifyHeld()
	}
	d.histMu.Lock()
	changed, unchanged, releasedBefore := d.resolve(dsn, linearizable)
	d.histMu.Unlock()
	var all []grant
	forgotten := 0
	for _, k := range d.clients {
		for _, l := range k.lost {
			t.Errorf("%s: a call got no answer: %s", k.id, l)
		}
		for id, e := range k.notDone {
			if releasedBefore[id] {
				// An attempt whose answer was lost ended the lease; by the
				// time the retry came, the resource had remembered MaxReleases
				// newer releases and forgot this one (docs/service.md,
				// "Releases are idempotent").
				forgotten++
				continue
			}
			k.expired = append(k.expired, e)
		}
		if linearizable {
			for _, e := range k.expired {
				t.Errorf("%s: %s was refused: an acknowledged lease was lost", k.id, e)
			}
		}
		all = append(all, k.grants...)
	}
	if forgotten > 0 {
		t.Logf("%d releases done by an attempt whose answer was lost were answered \"not held\" on their retry: the resource's memory of releases had moved on", forgotten)
	}
	if repeated, lowered := checkFences(all); linearizable && (repeated > 0 || lowered > 0) {
		t.Errorf("%d fences handed out twice, %d below a fence answered before the call began", repeated, lowered)
	}
	d.histMu.Lock()
	defer d.histMu.Unlock()
	ops := d.ops
	if linearizable {
		if _, err := sim.CheckHistory(name, wirehist.PorcupineDir(t), time.Hour, ops, 2*time.Minute); err != nil {
			d.dumpIllegal(name, ops)
			t.Fatal(err)
		}
	}
	granted, denied := 0, 0
	for _, op := range ops {
		out := op.Output.(sim.OpOutput)
		if op.Input.(sim.OpInput).Kind == sim.OpAcquire && out.OK {
			granted++
		}
		if out.HeldBy != "" {
			denied++
		}
	}
	t.Logf("%s: %d attempts in the history (%d grants and replays, %d denials), of them %d without an answer that the database shows done; %d without an answer that changed nothing; %d clients",
		name, len(ops), granted, denied, changed, unchanged, len(d.clients))
	if granted == 0 || denied == 0 {
		t.Errorf("the run made %d grants and %d denials: it exercised nothing", granted, denied)
	}
	return ops
}

// checkFences counts fences answered to two acquisitions, and fences not
// above a fence whose grant was answered before the acquisition began.
func checkFences(all []grant) (repeated, lowered int) {
	seen := map[uint64]bool{}
	for _, g := range all {
		if seen[g.fence] {
			repeated++
		}
		seen[g.fence] = true
	}
	byEnd := slices.Clone(all)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end.Before(byEnd[j].end) })
	byBegin := slices.Clone(all)
	sort.Slice(byBegin, func(i, j int) bool { return byBegin[i].begin.Before(byBegin[j].begin) })
	var top uint64
	j := 0
	for _, g := range byBegin {
		for j < len(byEnd) && byEnd[j].end.Before(g.begin) {
			top = max(top, byEnd[j].fence)
			j++
		}
		if g.fence <= top {
			lowered++
		}
	}
	return repeated, lowered
}

// verifyHeld checks, after the run, that every lease a client holds is
// still its own: the holder renews it with the same fence, and a stranger
// is denied it.
func (d *drill) verifyHeld() {
	d.t.Helper()
	stranger := d.newClient(len(d.clients)+1, 99)
	ctx := context.Background()
	for _, k := range d.clients {
		for name, l := range k.held {
			l2, err := k.c.Renew(ctx, l)
			if err != nil || l2.Token() != l.Token() {
				d.t.Errorf("%s's lease on %s (#%d) after the run: %v", k.id, name, l.Token().Fence, err)
				continue
			}
			var denied *client.DeniedError
			if _, err := stranger.c.Acquire(ctx, name); !errors.As(err, &denied) || denied.HeldBy != k.id {
				d.t.Errorf("a stranger's acquisition of %s, held by %s: %v", name, k.id, err)
			}
		}
	}
}

// dumpIllegal logs, for each resource whose history alone is not
// linearizable, the end of porcupine's longest partial linearization and
// the operations it could not place after it.
func (d *drill) dumpIllegal(name string, ops []porcupine.Operation) {
	t := d.t
	by := map[string][]porcupine.Operation{}
	for _, op := range ops {
		r := op.Input.(sim.OpInput).Resource
		by[r] = append(by[r], op)
	}
	model := sim.LeaseModel(time.Hour)
	for r, part := range by {
		res, info := porcupine.CheckOperationsVerbose(model, part, time.Minute)
		if res == porcupine.Ok {
			continue
		}
		var longest []porcupine.Operation
		for _, p := range info.PartialLinearizationsOperations() {
			for _, l := range p {
				if len(l) > len(longest) {
					longest = l
				}
			}
		}
		var b strings.Builder
		state := model.Init()
		placed := map[int64]bool{}
		for i, op := range longest {
			_, state = model.Step(state, op.Input, op.Output)
			placed[op.Call] = true
			if i >= len(longest)-8 {
				fmt.Fprintf(&b, "  placed [%d,%d] c%d %s => %s\n", op.Call, op.Return, op.ClientId, model.DescribeOperation(op.Input, op.Output), model.DescribeState(state))
			}
		}
		var first int64 = 1 << 62
		for _, op := range part {
			if !placed[op.Call] && op.Return < first {
				first = op.Return
			}
		}
		for _, op := range part {
			if !placed[op.Call] && op.Call <= first {
				fmt.Fprintf(&b, "  next?  [%d,%d] c%d %s\n", op.Call, op.Return, op.ClientId, model.DescribeOperation(op.Input, op.Output))
			}
		}
		t.Logf("resource %s is not linearizable alone:\n%s", r, b.String())
		d.dumpResource(name, r, part)
	}
}

// dumpResource writes to the porcupine directory everything the drill knows
// of resource r: its operations in call order, the attempts that named it,
// the unsure attempts and the audit rows.
func (d *drill) dumpResource(name, r string, part []porcupine.Operation) {
	var b strings.Builder
	model := sim.LeaseModel(time.Hour)
	part = slices.Clone(part)
	slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	fmt.Fprintf(&b, "# operations\n")
	for _, op := range part {
		fmt.Fprintf(&b, "[%d,%d] c%d %s\n", op.Call, op.Return, op.ClientId, model.DescribeOperation(op.Input, op.Output))
	}
	fmt.Fprintf(&b, "# attempts\n")
	for _, s := range d.tried {
		if strings.Contains(s, " "+r+" ") || strings.Contains(s, `"resource":"`+r+`"`) {
			fmt.Fprintln(&b, s)
		}
	}
	fmt.Fprintf(&b, "# unsure\n")
	for _, at := range d.unsure {
		if at.m.Request.Resource == r {
			fmt.Fprintf(&b, "c%d [%d,%d] %s %s #%d id %s [%v,%v] noAnswer %v\n", at.client, at.call, at.ret, at.m.Op, at.m.Request.HolderID, at.m.Request.Fence, at.m.Request.RequestID, at.lo, at.hi, at.noAnswer)
		}
	}
	fmt.Fprintf(&b, "# audit\n")
	for _, a := range d.audit[r] {
		fmt.Fprintf(&b, "%d %s #%d id %s until %v decided %v (kind %d, %d releases) by %s\n", a.seq, a.holder, a.fence, a.requestID, a.expiresAt, a.decidedAt, a.kind, len(a.releases), a.by)
	}
	for i, l := range d.logs {
		fmt.Fprintf(&b, "# log of coordinator %d\n%s\n", i, l.String())
	}
	path := wirehist.PorcupineDir(d.t) + "/" + name + "-" + r + ".txt"
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		d.t.Log(err)
		return
	}
	d.t.Logf("dump of %s: %s", r, path)
}
