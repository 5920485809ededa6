//go:build !js && !wasip1

package pgstore

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/internal/sqltext"
	"github.com/lease-fence/lease-fence/service"
)

// One round trip per decision. Update first decides on the state this
// store last read or wrote of the resource (its row's version, the xmin of
// its tuple), at a reading of the database's clock estimated from the last
// answer and never ahead of it, and sends the decision to the server-side
// function lease_fence_decide (decide.sql): one statement that locks the
// row, checks that it is still that version and that the decision's
// premises still hold at the server's own reading, dates the decision at
// that reading, writes the row, the counts and the owners' counts, takes a
// grant's fence from the sequence, and commits. The decision is then made
// again in Go at that reading, with that fence: it must be what was
// written, and it is what is answered. A decision whose premises no longer
// hold writes nothing and is made again on the row read afresh (two round
// trips more), then, if that fails too, by the transaction that locks the
// row first (decide, two round trips). That transaction also decides on a
// row this store does not know yet (and makes it known), and every
// decision this path leaves to it: one that asks about an owner's limit
// (Txn.Owners), one near the store's bounds (lease records within
// max_connections of MaxLeases, releases or last fences at theirs), one
// that raises a fence table's floor (FenceTable), one refused by the
// server for any other reason.

//go:embed decide.sql
var decideSQL string

var decideStatements = sqltext.Parse(decideSQL)

func decideStatement(name string) string {
	q, ok := decideStatements[name]
	if !ok {
		panic("pgstore: decide.sql has no statement " + name)
	}
	return expandDecide(q)
}

// expandDecide replaces the tokens of decide.sql in q.
func expandDecide(q string) string {
	return strings.NewReplacer("{clock}", clockSQL("$2"), "{clock_p}", clockSQL("p_offset"), "{slots}", strconv.Itoa(countSlots)).Replace(q)
}

var (
	// qRead reads a resource's row and the state of a decision (decide.sql).
	qRead = decideStatement("read")
	// decideFunction creates lease_fence_decide (schema version 5).
	decideFunction = decideStatement("decide")
	// qDecide calls it.
	qDecide = decideStatement("call")
)

// stale is lease_fence_decide's SQLSTATE for a decision whose state or
// premises no longer hold (nothing was written).
const stale = "LF000"

// maxCached bounds the rows a store remembers; past it, it forgets them all.
const maxCached = 1 << 16

// known is what a store remembers of the database for the one-round-trip
// path: the rows it last read or wrote, and the last answer's clock,
// counter and counts.
type known struct {
	mu   sync.Mutex
	rows map[string]knownRow
	// clockBase is the last clock the database answered (whole
	// milliseconds, without the tests' offset), at the local monotonic
	// clockAt.
	clockBase float64
	clockAt   time.Time
	issued    uint64
	leases    int64
	releases  int64
	lasts     int64
	maxConns  int64
	counted   bool
}

// knownRow is a row as this store last read or wrote it.
type knownRow struct {
	e         service.Entry // Fence 0 and nothing else: no row (version 0)
	version   int64         // the tuple's xmin; 0: no row
	decidedAt float64
}

func (k *known) get(resource string) (knownRow, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.rows[resource]
	return r, ok
}

func (k *known) put(resource string, r knownRow) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.rows == nil || len(k.rows) >= maxCached {
		k.rows = map[string]knownRow{}
	}
	k.rows[resource] = r
}

func (k *known) forget(resource string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.rows, resource)
}

// heard notes an answer's clock (with offset subtracted), counter and
// counts. Counts below 0 were not read (lease_fence_decide sums them only
// for a decision that adds to one): the last ones read are kept, as the
// counts a later decision starts from are always an earlier answer's.
func (k *known) heard(rawNow float64, at time.Time, issued uint64, leases, releases, lasts int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if at.After(k.clockAt) {
		k.clockBase, k.clockAt = rawNow, at
	}
	k.issued = max(k.issued, issued)
	if leases >= 0 && releases >= 0 && lasts >= 0 {
		k.leases, k.releases, k.lasts, k.counted = leases, releases, lasts, true
	}
}

// snapshot returns the estimated clock (whole milliseconds, not ahead of
// the database's: the last answer's, plus the whole milliseconds since it
// arrived), the counter, the counts and whether they leave room (the
// function checks that they still do).
func (k *known) snapshot(s *Store) (raw float64, issued uint64, c service.Counts, room bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c = service.Counts{Leases: k.leases, Releases: k.releases, Lasts: k.lasts}
	room = k.counted && k.maxConns > 0 && c.Leases < int64(s.limits.MaxLeases)-k.maxConns && s.limits.KeepRelease(c) && s.limits.KeepLast(c)
	return k.clockBase + float64(time.Since(k.clockAt).Milliseconds()), k.issued, c, room
}

// fastUpdate decides in one round trip when the store knows the row, or in
// two (a read first); handled is false when the decision is left to the
// transaction that locks the row (nothing was written).
func (s *Store) fastUpdate(ctx context.Context, resource string, fn func(*service.Txn) error) (handled bool, err error) {
	row, ok := s.known.get(resource)
	if !ok {
		return false, nil // the transaction that locks the row reads it
	}
	read := false
	for try := 0; try < 2; try++ {
		if !ok {
			if row, ok = s.readRow(ctx, resource); !ok {
				return false, nil
			}
			read = true
		}
		out, err := s.fastDecide(ctx, resource, row, fn)
		switch out {
		case fastDone:
			if read {
				s.paths[1].Add(1)
			} else {
				s.paths[0].Add(1)
			}
			return true, err
		case fastSlow:
			return false, nil
		}
		ok = false // fastStale: read it again
	}
	return false, nil
}

type fastOutcome int

const (
	fastDone  fastOutcome = iota // decided (or failed for good)
	fastStale                    // the state changed: read it again
	fastSlow                     // leave it to the transaction that locks the row
)

// readRow reads resource's row and the state, and remembers them.
func (s *Store) readRow(ctx context.Context, resource string) (knownRow, bool) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return knownRow{}, false
	}
	defer pc.Release()
	var (
		version                    int64
		holder, reqID, owner       *string
		f, last, rfence            *int64
		expires, decidedAt, rat    *float64
		hash, released             []byte
		value, rholder             *string
		now                        float64
		lastValue                  int64
		called, listening          bool
		leases, releases, lasts, n int64
	)
	offset := s.offset()
	err = pc.Conn().QueryRow(ctx, qRead, resource, offset).Scan(&version, &holder, &reqID, &f, &expires, &hash, &released, &last, &decidedAt,
		&owner, &value, &rholder, &rfence, &rat, &now, &lastValue, &called, &leases, &releases, &lasts, &n, &listening)
	at := time.Now()
	if err != nil {
		if sqlState(err) == "" {
			pc.Conn().Close(context.WithoutCancel(ctx))
		}
		return knownRow{}, false
	}
	s.watch.heard.Store(listening)
	issued := uint64(0)
	if called {
		issued = uint64(lastValue)
	}
	r := knownRow{e: service.Entry{Resource: resource}, version: version}
	if version != 0 {
		rc := revokedCols{value: *value, holder: *rholder, fence: *rfence, at: *rat}
		if r.e, err = scanEntry(resource, *owner, *holder, *reqID, *f, *expires, hash, released, *last, rc); err != nil {
			return knownRow{}, false
		}
		if service.CheckEntry(r.e, max(issued, uint64(lastValue))) != nil {
			return knownRow{}, false
		}
		r.decidedAt = *decidedAt
	}
	s.known.mu.Lock()
	s.known.maxConns = n
	s.known.mu.Unlock()
	s.known.heard(now-offset, at, issued, leases, releases, lasts)
	s.known.put(resource, r)
	return r, true
}

// decision is what fn made of a Txn.
type decision struct {
	next  service.Entry
	put   bool
	err   error
	asked bool // fn asked about an owner's limit
	floor uint64
}

// run runs c's fn on e at now with the counter at issued and the counts c
// (with room: the function checks that there still is), in c's Txn: one
// allocation a call, not one a run.
func (s *Store) run(c *fastCall, e service.Entry, now float64, issued uint64, counts service.Counts) decision {
	c.asked = false
	c.t = service.Txn{Now: clock.At(s.domain, now), Issued: issued, Entry: e, Counts: counts, Limits: s.limits, Owners: &c.asked}
	err := c.fn(&c.t)
	d := decision{err: err, asked: bool(c.asked)}
	d.next, _, d.put = c.t.Next()
	d.floor = c.t.Floor()
	return d
}

// asked is an OwnerCounter that notes fn asked about an owner's limit.
type asked bool

func (a *asked) Owned(_ string, limit int) int { *a = true; return limit }

// shifts compares a decision made at now (a) with the one made a
// millisecond later (b): which of its instants are now's (they move with
// the reading); ok is false when anything else differs.
type shifts struct {
	expires, revoked bool
	released         []bool
}

func shiftsOf(a, b service.Entry) (sh shifts, ok bool) {
	moved := func(x, y float64) (bool, bool) { return y == x+1, y == x || y == x+1 }
	var okE, okR bool
	sh.expires, okE = moved(a.ExpiresAt, b.ExpiresAt)
	sh.revoked, okR = moved(a.Revoked.At, b.Revoked.At)
	if !okE || !okR || len(a.Released) != len(b.Released) {
		return sh, false
	}
	b.ExpiresAt, b.Revoked.At = a.ExpiresAt, a.Revoked.At
	for i, ra := range a.Released {
		rb := b.Released[i]
		m, okI := moved(ra.At, rb.At)
		if rb.At = ra.At; !okI || rb != ra {
			return sh, false
		}
		sh.released = append(sh.released, m)
	}
	b.Released = a.Released
	return sh, sameEntry(a, b)
}

// at is e with its instants that are the reading's moved by d.
func (sh shifts) at(e service.Entry, d float64) service.Entry {
	if sh.expires {
		e.ExpiresAt += d
	}
	if sh.revoked {
		e.Revoked.At += d
	}
	e.Released = slices.Clone(e.Released)
	for i, m := range sh.released {
		if m {
			e.Released[i].At += d
		}
	}
	return e
}

// releasePositions returns rels in the binary layout and, for each release
// whose time is the reading's, the position (from 1) of its 8 bytes of time
// and that time; ok is false if the layout is not the one expected.
func releasePositions(rels []service.Release, moved []bool) (b []byte, pos []int32, at []float64, ok bool) {
	n := binary.MaxVarintLen64
	for _, r := range rels {
		n += 3*binary.MaxVarintLen64 + len(r.RequestID) + len(r.HolderID) + 8 + len(r.SecretHash)
	}
	b = binary.AppendUvarint(make([]byte, 0, n), uint64(len(rels)))
	for i, r := range rels {
		b = binary.AppendUvarint(b, uint64(len(r.RequestID)))
		b = append(b, r.RequestID...)
		b = binary.AppendUvarint(b, uint64(len(r.HolderID)))
		b = append(b, r.HolderID...)
		b = binary.AppendUvarint(b, r.Fence)
		if moved[i] {
			pos, at = append(pos, int32(len(b)+1)), append(at, r.At)
		}
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.At))
		b = append(b, r.SecretHash[:]...)
	}
	return b, pos, at, bytes.Equal(b, service.AppendReleasesBinary(make([]byte, 0, len(b)), rels))
}

// fastCall is a decision made on a row this store knows, ready to be sent
// to lease_fence_decide (or, with others, to lease_fence_decide_each).
type fastCall struct {
	resource   string
	fn         func(*service.Txn) error
	row        knownRow
	e, cur     service.Entry // the row's entry; cur: the entry of the row (zero: none)
	now, u     float64
	offset     float64
	issued     uint64
	counts     service.Counts
	d          decision
	next       service.Entry
	write      int // 0: nothing, 1: the row, 2: its deletion
	grant      bool
	dl, dr, dk int64
	owners     []string
	deltas     []int64
	rel, hash  []byte
	sh         shifts
	pos        []int32
	ats        []float64
	t          service.Txn // run's
	asked      asked
}

// fastResult is what lease_fence_decide answers.
type fastResult struct {
	version, fence, issued  int64
	now, reading            float64
	leases, releases, lasts int64
	listening               bool
}

func (r *fastResult) dest() []any {
	return []any{&r.version, &r.fence, &r.now, &r.reading, &r.issued, &r.leases, &r.releases, &r.lasts, &r.listening}
}

// prepare runs fn on row; ok is false when the decision is left to the
// transaction that locks the row.
func (s *Store) prepare(resource string, row knownRow, fn func(*service.Txn) error) (c *fastCall, ok bool) {
	raw, issued, counts, room := s.known.snapshot(s)
	if !room {
		return nil, false
	}
	c = &fastCall{resource: resource, fn: fn, row: row, e: row.e, counts: counts, offset: s.offset()}
	e := row.e
	c.issued = max(issued, e.Fence, e.LastFence)
	c.now = max(raw+c.offset, row.decidedAt)
	c.u = until(e, c.now, s.ttl)
	d := s.run(c, e, c.now, c.issued, counts)
	c.d = d
	if d.asked || c.now+1 >= c.u {
		return nil, false
	}
	c.next = d.next
	if d.err == nil && d.put && !(row.version == 0 && empty(c.next)) {
		c.write = 1
		if empty(c.next) {
			c.write = 2
		}
	}
	c.grant = c.write == 1 && c.next.Fence > c.issued
	if c.grant && (s.raise != "" || c.next.Fence != c.issued+1) || (c.write != 0 && d.floor != 0 && s.raise != "") {
		return nil, false
	}
	if row.version != 0 {
		c.cur = e
	}
	if c.write != 0 {
		// The same decision a millisecond later: which instants are the
		// reading's.
		d1 := s.run(c, e, c.now+1, c.issued, counts)
		var ok bool
		if c.sh, ok = shiftsOf(c.next, d1.next); !ok || d1.err != nil || !d1.put || d1.asked {
			return nil, false
		}
		if c.rel, c.pos, c.ats, ok = releasePositions(c.next.Released, c.sh.released); !ok {
			return nil, false
		}
		ch := service.Change(c.cur, c.next)
		c.dl, c.dr, c.dk = ch.Leases, ch.Releases, ch.Lasts
		for _, d := range ownerDeltas(c.cur, c.next) {
			c.owners, c.deltas = append(c.owners, d.owner), append(c.deltas, d.n)
		}
		if c.next.Fence != 0 {
			c.hash = c.next.SecretHash[:]
		}
	}
	return c, true
}

// fastDecide runs fn on row and sends what it decided to lease_fence_decide.
func (s *Store) fastDecide(ctx context.Context, resource string, row knownRow, fn func(*service.Txn) error) (fastOutcome, error) {
	c, ok := s.prepare(resource, row, fn)
	if !ok {
		return fastSlow, nil
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fastSlow, nil
	}
	defer pc.Release()
	conn := pc.Conn()
	next := c.next
	var r fastResult
	err = conn.QueryRow(ctx, qDecide, resource, c.row.version, c.now, c.offset, c.u, c.write, c.grant,
		next.HolderID, next.RequestID, int64(next.Fence), next.ExpiresAt, c.hash, c.rel, int64(next.LastFence), sweepAt(next, s.ttl), next.Owner,
		next.Value, next.Revoked.HolderID, int64(next.Revoked.Fence), next.Revoked.At,
		c.dl, c.dr, c.dk, c.owners, c.deltas, int64(s.limits.MaxLeases), int64(s.limits.ReleaseMemory), int64(s.limits.FenceMemory), s.countKey,
		c.sh.expires, c.sh.revoked, c.pos, c.ats).
		Scan(pgtype.CompositeFields(r.dest()))
	at := time.Now()
	if err != nil {
		s.known.forget(resource)
		switch {
		case sqlState(err) == stale:
			return fastStale, nil
		case sqlState(err) != "" || c.write == 0 || pgconn.SafeToRetry(err):
			// Nothing was committed: the transaction that locks the row
			// decides.
			if sqlState(err) == "" {
				conn.Close(context.WithoutCancel(ctx))
			}
			return fastSlow, nil
		}
		// The connection failed once the decision was sent: it may have
		// committed. Its retry is decided on the row.
		conn.Close(context.WithoutCancel(ctx))
		return fastDone, errors.Join(service.ErrOutcomeUnknown, errors.New("pgstore: committing: "+err.Error()))
	}
	s.watch.heard.Store(r.listening)
	s.known.heard(r.now-c.offset, at, uint64(max(r.issued, 0)), r.leases, r.releases, r.lasts)
	if _, warned := s.unreplicated.LoadAndDelete(conn.PgConn()); warned && c.write != 0 {
		s.known.forget(resource)
		conn.Close(context.WithoutCancel(ctx))
		return fastDone, errUnreplicated
	}
	return s.finish(c, &r)
}

// errUnreplicated is the error of a decision whose commit PostgreSQL
// answered with the warning of a cancelled wait for the standbys.
var errUnreplicated = errors.Join(service.ErrOutcomeUnknown, errors.New("pgstore: the commit stopped waiting for the synchronous standbys"))

// finish makes c's decision again at the reading it took effect at (and
// with the fence it took), as r answers them: what fn answers; it must be
// what was written.
func (s *Store) finish(c *fastCall, r *fastResult) (fastOutcome, error) {
	issued, resource := c.issued, c.resource
	if c.grant {
		issued = uint64(r.fence) - 1
	}
	dr2 := s.run(c, c.e, r.reading, issued, c.counts)
	if c.write == 0 {
		if dr2.asked || (dr2.put && !(c.row.version == 0 && empty(dr2.next))) || (dr2.err == nil) != (c.d.err == nil) {
			return fastSlow, nil // nothing was written
		}
		return fastDone, dr2.err
	}
	want := c.sh.at(c.next, r.reading-c.now)
	want.Fence = uint64(r.fence)
	if !c.grant {
		want.Fence = c.next.Fence
	}
	if dr2.err != nil || !dr2.put || dr2.asked || !sameEntry(dr2.next, want) {
		s.known.forget(resource)
		return fastDone, errors.Join(service.ErrOutcomeUnknown, errors.New("pgstore: the decision made again at the reading it took effect at differs from the one written; its retry is answered from the row"))
	}
	next := dr2.next
	if c.write == 2 {
		s.known.put(resource, knownRow{e: service.Entry{Resource: resource}})
	} else {
		s.known.put(resource, knownRow{e: next, version: r.version, decidedAt: r.reading})
	}
	if r.listening && (c.grant || (c.cur.Fence != 0 && next.Fence == 0)) {
		s.notify(resource)
	}
	return fastDone, nil
}

// until is the first reading at which a decision on e made at now could
// differ: e's expiry if it is live, the end of the memory of a release or
// of the revocation (a TTL after it, inclusive), or +Inf.
func until(e service.Entry, now, ttl float64) float64 {
	u := math.Inf(1)
	if e.Fence != 0 && e.ExpiresAt > now {
		u = e.ExpiresAt
	}
	for _, r := range e.Released {
		if b := r.At + ttl; b >= now {
			u = min(u, math.Nextafter(b, math.Inf(1)))
		}
	}
	if e.Revoked.Fence != 0 {
		if b := e.Revoked.At + ttl; b >= now {
			u = min(u, math.Nextafter(b, math.Inf(1)))
		}
	}
	return u
}

// sameEntry reports whether a and b are the same entry.
func sameEntry(a, b service.Entry) bool {
	return slices.Equal(a.Released, b.Released) && a.Resource == b.Resource && a.Owner == b.Owner && a.HolderID == b.HolderID &&
		a.RequestID == b.RequestID && a.Fence == b.Fence && a.ExpiresAt == b.ExpiresAt && a.SecretHash == b.SecretHash &&
		a.LastFence == b.LastFence && a.Value == b.Value && a.Revoked == b.Revoked
}
