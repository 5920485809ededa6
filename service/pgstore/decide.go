//go:build !js && !wasip1

package pgstore

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/service"
)

// maxAttempts bounds the transactions one Update runs: again after a
// connection that failed before anything was decided, after a row deleted
// between its check and its lock, to take the counts' lock (or an owner's)
// exclusively, after a sweep for a full store (or owner), after a
// deadlock.
const maxAttempts = 8

// outcome of one attempt at a decision.
type outcome int

const (
	done      outcome = iota // the decision is made (or failed for good)
	again                    // run a fresh transaction
	ensure                   // run a fresh transaction that makes the row exist first
	exclusive                // run a fresh transaction holding the counts' lock exclusively
	reclaim                  // the store is full: sweep, then run again exclusively
	owners                   // run a fresh transaction holding the locks of attempt.owners exclusively (after sweeping attempt.sweep's records)
)

// attempt is what the next transaction of a decision does first.
type attempt struct {
	excl, ensureRow bool
	// owners are the owners whose count's lock the transaction takes
	// exclusively before it locks the row, in order (sorted, no repeats).
	owners []string
	// sweep is an owner at its limit whose expired records to sweep
	// before the transaction.
	sweep string
}

// addOwner adds owner to a.owners, keeping them sorted.
func (a *attempt) addOwner(owner string) {
	i, found := slices.BinarySearch(a.owners, owner)
	if !found {
		a.owners = slices.Insert(a.owners, i, owner)
	}
}

// Update runs fn on resource's row, in one transaction that holds the row
// locked from before the decision until it commits. The reading in
// Txn.Now is the database server's clock, read once the row is locked, and
// never below the reading of the last decision that wrote the row. A new
// fence fn puts is taken from the database's sequence (fn runs again with
// it if it is not the one fn put); a grant with FenceTable raises the
// resource's floor in the same transaction. What fn puts is committed
// before Update returns, synchronously even when fn did not ask for it (a
// release): the commit is then on the disk of the primary and of the
// standbys its synchronous_standby_names requires, so no replica, restart
// or failover sees an answered call undone.
func (s *Store) Update(ctx context.Context, resource string, fn func(*service.Txn) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if handled, err := s.fastUpdate(ctx, resource, fn); handled {
		return err
	}
	// The transaction that locks the row: it makes what this store knows
	// of the row afresh.
	s.known.forget(resource)
	s.paths[2].Add(1)
	var a attempt
	var last error
	for range maxAttempts {
		out, err := s.decide(ctx, resource, fn, &a)
		switch out {
		case done:
			return err
		case ensure:
			a.ensureRow = true
		case reclaim:
			s.reclaim(ctx, "")
			a.excl = true
		case exclusive:
			a.excl = true
		case owners:
			if a.sweep != "" {
				s.reclaim(ctx, a.sweep)
				a.sweep = ""
			}
		}
		last = err
		if ctx.Err() != nil {
			return unavailable("deciding", errors.Join(ctx.Err(), last))
		}
	}
	return unavailable("no decision after "+strconv.Itoa(maxAttempts)+" transactions", last)
}

// revokedCols are a row's columns of version 4, as scanned.
type revokedCols struct {
	value, holder string
	fence         int64
	at            float64
}

// args are the columns as qUpdate's $12 to $15.
func (c revokedCols) args() []any { return []any{c.value, c.holder, c.fence, c.at} }

func colsOf(e service.Entry) revokedCols {
	return revokedCols{value: e.Value, holder: e.Revoked.HolderID, fence: int64(e.Revoked.Fence), at: e.Revoked.At}
}

func scanEntry(resource, owner, holder, requestID string, f int64, expires float64, hash []byte, released []byte, last int64, rc revokedCols) (service.Entry, error) {
	e := service.Entry{Resource: resource, Owner: owner, HolderID: holder, RequestID: requestID, Fence: uint64(max(f, 0)), ExpiresAt: expires,
		LastFence: uint64(max(last, 0)), Value: rc.value,
		Revoked: service.Revocation{HolderID: rc.holder, Fence: uint64(max(rc.fence, 0)), At: rc.at}}
	if len(hash) != 0 && len(hash) != 32 {
		return e, errors.Join(service.ErrInconsistent, errors.New("pgstore: the row of "+strconv.Quote(resource)+" has a secret hash of "+strconv.Itoa(len(hash))+" bytes"))
	}
	copy(e.SecretHash[:], hash)
	var err error
	if e.Released, err = service.DecodeReleasesBinary(resource, released); err != nil {
		return e, err
	}
	return e, nil
}

// decide is one transaction, as a says. It reports again, ensure,
// exclusive, reclaim or owners (and updates a) when the caller should run
// another one; a failure before the commit changed nothing.
func (s *Store) decide(ctx context.Context, resource string, fn func(*service.Txn) error, a *attempt) (outcome, error) {
	excl, ensureRow := a.excl, a.ensureRow
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return again, unavailable("connecting", err)
	}
	defer pc.Release() // a connection left in a transaction is closed, not reused
	conn := pc.Conn()

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if excl {
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, s.countKey)
	}
	// The owners' locks after the counts' lock, in the owners' order: a
	// transaction waits for these only here, before it holds any row, so
	// transactions that wait for one another always do it in one order.
	for _, o := range a.owners {
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, s.ownerKey(o))
	}
	var placeholder bool
	if ensureRow {
		b.Queue(qEnsure, resource).Exec(func(ct pgconn.CommandTag) error {
			placeholder = ct.RowsAffected() == 1
			return nil
		})
	}
	var (
		holder, reqID      string
		released           []byte
		owner              string
		f, last            int64
		expires, decidedAt float64
		hash               []byte
		found              bool
		shared             *bool
		rc                 revokedCols
		version            int64
	)
	b.Queue(qLock, resource, s.countKey).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&holder, &reqID, &f, &expires, &hash, &released, &last, &decidedAt, &owner, &rc.value, &rc.holder, &rc.fence, &rc.at, &shared,
			&version)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	var (
		listening        bool
		dbNow            float64
		lastValue        int64
		called           bool
		spec             *int64
		leases, releases int64
		lasts, maxConns  int64
	)
	b.Queue(qState, resource, s.offset()).QueryRow(func(r pgx.Row) error {
		return r.Scan(&listening, &dbNow, &lastValue, &called, &spec, &leases, &releases, &lasts, &maxConns)
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return s.failed(ctx, conn, err)
	}
	at := time.Now()
	s.watch.heard.Store(listening)
	if !found {
		// No row to lock: decide again, making one first. (With the
		// insert, the row was deleted between the insert that found it and
		// the lock.)
		s.rollback(ctx, conn)
		return ensure, errors.New("pgstore: the row of " + strconv.Quote(resource) + " went away before it was locked")
	}
	e := service.Entry{Resource: resource}
	if !placeholder {
		if e, err = scanEntry(resource, owner, holder, reqID, f, expires, hash, released, last, rc); err != nil {
			s.rollback(ctx, conn)
			return done, err
		}
	}
	issued := uint64(0)
	if called {
		issued = uint64(lastValue)
	}
	if spec != nil {
		issued = uint64(*spec) - 1
	}
	s.known.mu.Lock()
	s.known.maxConns = maxConns
	s.known.mu.Unlock()
	s.known.heard(dbNow-s.offset(), at, issued, leases, releases, lasts)
	if !placeholder {
		if err := service.CheckEntry(e, max(issued, uint64(lastValue))); err != nil {
			s.rollback(ctx, conn)
			return done, err
		}
	}
	// The clock's guard: never below the last reading that wrote the row.
	now := max(dbNow, decidedAt)
	counts := service.Counts{Leases: leases, Releases: releases, Lasts: lasts}
	if e.Fence == 0 {
		// A decision that may add a lease record. With the counts' lock
		// shared, a count more than max_connections below the bound
		// leaves room for every transaction that can be running at once;
		// nearer the bound, the lock is taken exclusively and the count is
		// exact.
		if !excl && (shared == nil || !*shared || leases >= int64(s.limits.MaxLeases)-maxConns) {
			s.rollback(ctx, conn)
			return exclusive, nil
		}
		if excl && s.limits.Full(counts) && s.reclaims.Take("", now, s.ttl) {
			s.rollback(ctx, conn)
			return reclaim, nil
		}
	}
	oc := &ownerCheck{s: s, ctx: ctx, conn: conn, now: now, margin: maxConns, excl: a.owners, cur: &e}
	t := service.Txn{Now: clock.At(s.domain, now), Issued: issued, Entry: e, Counts: counts, Limits: s.limits, Owners: oc}
	err = fn(&t)
	if out, err := oc.settle(ctx, a); out != done || err != nil {
		return out, err
	}
	if err != nil {
		s.rollback(ctx, conn)
		return done, err
	}
	next, _, ok := t.Next()
	if !ok || (placeholder && empty(next)) {
		s.rollback(ctx, conn)
		if placeholder {
			s.known.put(resource, knownRow{e: service.Entry{Resource: resource}})
		} else {
			s.known.put(resource, knownRow{e: e, version: version, decidedAt: decidedAt})
		}
		return done, nil
	}
	grant := next.Fence > issued
	if grant {
		if spec == nil {
			var fresh int64
			if err := conn.QueryRow(ctx, qNextval).Scan(&fresh); err != nil {
				return s.failed(ctx, conn, err)
			}
			t = service.Txn{Now: t.Now, Issued: uint64(fresh) - 1, Entry: e, Counts: counts, Limits: s.limits, Owners: oc}
			err := fn(&t)
			if out, err := oc.settle(ctx, a); out != done || err != nil {
				return out, err
			}
			if err != nil {
				s.rollback(ctx, conn)
				return done, err
			}
			issued = t.Issued
			next, _, ok = t.Next()
		}
		if !ok || next.Fence != issued+1 {
			s.rollback(ctx, conn)
			return done, errors.Join(service.ErrInconsistent, errors.New("pgstore: the decision did not take the fence the counter gave it"))
		}
	}
	return s.write(ctx, conn, e, placeholder, next, grant, t.Floor(), now, listening)
}

// write makes next the resource's row and commits, in one round trip.
// grant says next holds a fence just taken from the counter; floor, if
// not 0, is a revoked fence the fence table's floor is raised above
// (service.Txn.RaiseFloor).
func (s *Store) write(ctx context.Context, conn *pgx.Conn, cur service.Entry, placeholder bool, next service.Entry, grant bool, floor uint64, now float64, listening bool) (outcome, error) {
	resource := cur.Resource
	if placeholder {
		cur = service.Entry{}
	}
	d := service.Change(cur, next)
	counted := d != service.Counts{}
	var version int64 // the written row's, 0 if it is deleted
	b := &pgx.Batch{}
	if empty(next) {
		if counted {
			b.Queue(qDeleteCount, resource, d.Leases, d.Releases, d.Lasts)
		} else {
			b.Queue(qDelete, resource)
		}
	} else {
		rel := service.AppendReleasesBinary(nil, next.Released)
		var hash []byte
		if next.Fence != 0 {
			hash = next.SecretHash[:]
		}
		args := append([]any{resource, next.HolderID, next.RequestID, int64(next.Fence), next.ExpiresAt, hash, rel, now, sweepAt(next, s.ttl),
			int64(next.LastFence), next.Owner}, colsOf(next).args()...)
		scan := func(r pgx.Row) error { return r.Scan(&version) }
		if counted {
			b.Queue(qUpdateCountVersion, append(args, d.Leases, d.Releases, d.Lasts)...).QueryRow(scan)
		} else {
			b.Queue(qUpdateVersion, args...).QueryRow(scan)
		}
	}
	for _, d := range ownerDeltas(cur, next) {
		b.Queue(qOwnerCount, d.owner, d.n)
	}
	if grant && s.raise != "" {
		// The raise fails the statement (division by zero) when it raised
		// nothing, so the server aborts the transaction and skips the
		// COMMIT queued after it.
		b.Queue(`WITH raised AS (`+s.raise+`) SELECT 1 / count(*)::integer FROM raised`, resource, int64(next.Fence), next.HolderID).
			Exec(func(pgconn.CommandTag) error { return nil })
	}
	if floor != 0 && !grant && s.raise != "" {
		// A revoke that granted nothing: the floor is raised to a fence
		// taken from the counter for it (above the revoked one, and below
		// every later grant's, whose own raise must find the floor below
		// it), with no holder. A floor already that high stays.
		b.Queue(`WITH n AS (SELECT nextval('`+tFences+`') AS f), raised AS (`+strings.NewReplacer("$2", "(SELECT f FROM n)", "$3", "$2").Replace(s.raise)+
			`) SELECT count(*) FROM raised`, resource, "").Exec(func(pgconn.CommandTag) error { return nil })
	}
	var tag pgconn.CommandTag
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	err := conn.SendBatch(ctx, b).Close()
	if grant && s.raise != "" && sqlState(err) == "22012" {
		s.rollback(ctx, conn)
		floor := s.floorOf(ctx, resource)
		return done, errors.Join(service.ErrInconsistent, errors.New("pgstore: the fence table "+s.fenceTable+" holds the floor "+floor+
			" for "+strconv.Quote(resource)+", not below the new fence "+strconv.FormatUint(next.Fence, 10)+
			": the coordinator's fences are behind the gate's (was the state restored from a backup, or the floor raised by another coordinator?); nothing was granted"))
	}
	if err == nil && tag.String() != "COMMIT" {
		err = errors.New("pgstore: the commit was answered " + strconv.Quote(tag.String()))
	}
	// A grant or a release (not a renewal: a waiter times the expiry it
	// read) may concern waiters on other replicas: tell them once it is
	// committed, or may be, if any replica listens (its mark, read once
	// the row was locked, is in the meta row). A replica that starts to
	// listen marks it before it listens, then decides again on every
	// resource it watches: a decision that read no mark holds its row
	// until it commits, so that new decision sees its change.
	if listening && (grant || (cur.Fence != 0 && next.Fence == 0)) {
		defer s.notify(resource)
	}
	if _, warned := s.unreplicated.LoadAndDelete(conn.PgConn()); warned && err == nil {
		// Committed here, but maybe not on the synchronous standbys: not
		// answered as done. The retry waits for the row until the commit
		// is replicated (or reads the promoted standby's state).
		conn.Close(context.WithoutCancel(ctx))
		return done, errors.Join(service.ErrOutcomeUnknown, errors.New("pgstore: the commit stopped waiting for the synchronous standbys"))
	}
	if err == nil {
		s.known.put(resource, knownRow{e: next, version: version, decidedAt: now})
		return done, nil
	}
	if sqlState(err) != "" || conn.PgConn().TxStatus() == 'E' {
		// The server answered: the transaction did not commit.
		s.rollback(ctx, conn)
		if transient(err) {
			return again, err
		}
		return done, unavailable("writing", err)
	}
	// The connection failed: the commit may or may not have happened. It
	// is not looked up (pg_xact_status reports a commit as done while it
	// still waits for the synchronous standbys): the call is answered as
	// unknown, and its retry is decided on the row, which another
	// transaction sees, or can lock, only once that commit is over.
	conn.Close(context.WithoutCancel(ctx))
	return done, errors.Join(service.ErrOutcomeUnknown, errors.New("pgstore: committing: "+err.Error()))
}

// floorOf reads resource's floor in the fence table, for a message.
func (s *Store) floorOf(ctx context.Context, resource string) string {
	var f int64
	if err := s.pool.QueryRow(ctx, `SELECT fence FROM `+s.fenceTable+`_floor WHERE resource = $1`, resource).Scan(&f); err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return strconv.FormatInt(f, 10)
}

// failed handles a failure before the commit: nothing was written. A
// connection that failed is closed; the decision may run again on another.
func (s *Store) failed(ctx context.Context, conn *pgx.Conn, err error) (outcome, error) {
	if sqlState(err) == "" {
		conn.Close(context.WithoutCancel(ctx))
		return again, unavailable("reading", err)
	}
	s.rollback(ctx, conn)
	if transient(err) {
		return again, err
	}
	return done, unavailable("reading", err)
}

// rollback ends conn's transaction; if it cannot, it closes conn.
func (s *Store) rollback(ctx context.Context, conn *pgx.Conn) {
	if conn.IsClosed() || conn.PgConn().TxStatus() == 'I' {
		return
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		conn.Close(context.WithoutCancel(ctx))
	}
}

// transient reports a conflict that a fresh transaction may not meet.
func transient(err error) bool {
	switch sqlState(err) {
	case "40001", "40P01":
		return true
	}
	return false
}

func unavailable(doing string, err error) error {
	return errors.Join(service.ErrUnavailable, errors.New("pgstore: "+doing+": "+errString(err)))
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func empty(e service.Entry) bool {
	return e.Fence == 0 && len(e.Released) == 0 && e.LastFence == 0 && e.Revoked.Fence == 0
}

// sweepAt is the earliest reading at which a sweep has something to delete
// from e: its lease's expiry, or a release's end of memory (a TTL on);
// never for a row that keeps only a last fence (those are forgotten by
// count, the lowest first).
func sweepAt(e service.Entry, ttl float64) float64 {
	at := math.Inf(1)
	if e.Fence != 0 {
		at = e.ExpiresAt
	}
	for _, r := range e.Released {
		at = min(at, r.At+ttl)
	}
	if e.Revoked.Fence != 0 {
		at = min(at, e.Revoked.At+ttl)
	}
	return at
}

// reclaim sweeps a full store (owner ""), or the records of an owner at its
// limit, as paced by s.reclaims (decide and ownerCheck take a turn there).
func (s *Store) reclaim(ctx context.Context, owner string) {
	for range 16 {
		if n, err := s.sweep(ctx, owner); err != nil || n == 0 {
			return
		}
	}
}

// sweepBatch is how many rows one sweep transaction takes.
const sweepBatch = 256

// Sweep deletes, in one transaction that is not synced, up to 256 rows'
// worth of expired lease records (keeping their fences as last fences
// while FenceMemory allows) and releases older than a TTL, skipping rows
// other transactions hold (another replica's sweep, a decision); then, if
// the rows that keep only a last fence pass nine tenths of FenceMemory, it
// forgets up to 256 of the lowest. It returns how many things it deleted.
// Run it until it returns zero.
func (s *Store) Sweep(ctx context.Context) (int, error) { return s.sweep(ctx, "") }

// sweep is Sweep; with an owner, only that owner's records (and the rows
// holding them) are swept.
func (s *Store) sweep(ctx context.Context, owner string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if !s.sweepMu.TryLock() {
		return 0, nil // one sweep at a time in this process
	}
	defer s.sweepMu.Unlock()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, unavailable("connecting", err)
	}
	defer pc.Release()
	conn := pc.Conn()
	n, lasts, err := s.sweepExpired(ctx, conn, owner)
	if err != nil {
		return n, err
	}
	if forget := s.limits.LastsToForget(service.Counts{Lasts: lasts}); forget > 0 && owner == "" {
		keep := lasts - forget
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, s.countKey+1)
		var forgot int64
		b.Queue(qForget, keep).QueryRow(func(r pgx.Row) error { return r.Scan(&forgot) })
		b.Queue(qAsync)
		b.Queue("COMMIT")
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			s.rollback(ctx, conn)
			return n, unavailable("forgetting last fences", err)
		}
		n += int(forgot)
	}
	return n, nil
}

// sweepExpired is Sweep's first transaction. It also returns how many rows
// keep only a last fence.
func (s *Store) sweepExpired(ctx context.Context, conn *pgx.Conn, owner string) (int, int64, error) {
	var lasts int64
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(qLasts).QueryRow(func(r pgx.Row) error { return r.Scan(&lasts) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		s.rollback(ctx, conn)
		conn.Close(context.WithoutCancel(ctx))
		return 0, 0, unavailable("sweeping", err)
	}
	rows, err := conn.Query(ctx, qSweep, s.offset(), sweepBatch, owner)
	if err != nil {
		s.rollback(ctx, conn)
		return 0, 0, unavailable("sweeping", err)
	}
	type change struct {
		cur, next service.Entry
		decidedAt float64
		deleted   int
	}
	var changes []change
	var scanErr error
	kept := lasts
	for rows.Next() {
		var (
			resource, holder, reqID string
			released                []byte
			owner                   string
			f, last                 int64
			expires, decidedAt, now float64
			hash                    []byte
			rc                      revokedCols
		)
		if err := rows.Scan(&resource, &holder, &reqID, &f, &expires, &hash, &released, &last, &decidedAt, &owner,
			&rc.value, &rc.holder, &rc.fence, &rc.at, &now); err != nil {
			scanErr = err
			break
		}
		e, err := scanEntry(resource, owner, holder, reqID, f, expires, hash, released, last, rc)
		if err != nil {
			s.log.Error("a row the sweep found is damaged; it is left as it is", "resource", resource, "err", err)
			continue
		}
		next, d := e.Swept(max(now, decidedAt), s.ttl, s.limits.KeepLast(service.Counts{Lasts: kept}))
		if d == 0 {
			continue
		}
		kept += service.Change(e, next).Lasts
		changes = append(changes, change{e, next, decidedAt, d})
	}
	rows.Close()
	if err := errors.Join(scanErr, rows.Err()); err != nil {
		s.rollback(ctx, conn)
		return 0, lasts, unavailable("sweeping", err)
	}
	b = &pgx.Batch{}
	n := 0
	var dc service.Counts
	byOwner := map[string]int64{}
	for _, c := range changes {
		n += c.deleted
		d := service.Change(c.cur, c.next)
		dc = service.Counts{Leases: dc.Leases + d.Leases, Releases: dc.Releases + d.Releases, Lasts: dc.Lasts + d.Lasts}
		for _, d := range ownerDeltas(c.cur, c.next) {
			byOwner[d.owner] += d.n
		}
		if empty(c.next) {
			b.Queue(qDelete, c.cur.Resource)
			continue
		}
		rel := service.AppendReleasesBinary(nil, c.next.Released)
		var hash []byte
		if c.next.Fence != 0 {
			hash = c.next.SecretHash[:]
		}
		b.Queue(qUpdate, append([]any{c.cur.Resource, c.next.HolderID, c.next.RequestID, int64(c.next.Fence), c.next.ExpiresAt, hash,
			rel, c.decidedAt, sweepAt(c.next, s.ttl), int64(c.next.LastFence), c.next.Owner}, colsOf(c.next).args()...)...)
	}
	if n == 0 {
		s.rollback(ctx, conn)
		return 0, lasts, nil
	}
	b.Queue(qCount, dc.Leases, dc.Releases, dc.Lasts)
	// The owners' counts after the counts, in the owners' order, as a
	// decision's write takes them.
	for _, o := range slices.Sorted(maps.Keys(byOwner)) {
		if byOwner[o] != 0 {
			b.Queue(qOwnerCount, o, byOwner[o])
		}
	}
	b.Queue(qAsync)
	var tag pgconn.CommandTag
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	if err := conn.SendBatch(ctx, b).Close(); err != nil || tag.String() != "COMMIT" {
		s.rollback(ctx, conn)
		return 0, lasts, unavailable("sweeping", errors.Join(err, errors.New("commit answered "+strconv.Quote(tag.String()))))
	}
	if fn := s.onExpired; fn != nil {
		for _, c := range changes {
			if c.cur.Fence != 0 && c.next.Fence == 0 {
				fn(c.cur)
			}
		}
	}
	return n, lasts + dc.Lasts, nil
}

// Leases returns how many lease records the database holds (live leases,
// and expired ones not yet swept), for all replicas.
func (s *Store) Leases(ctx context.Context) (int, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(leases), 0)::bigint FROM `+tCounts).Scan(&n); err != nil {
		return 0, unavailable("counting", err)
	}
	return int(n), nil
}

// Issued returns the highest fence the counter has issued.
func (s *Store) Issued(ctx context.Context) (uint64, error) {
	var v int64
	var called bool
	if err := s.pool.QueryRow(ctx, `SELECT last_value, is_called FROM `+tFences).Scan(&v, &called); err != nil {
		return 0, unavailable("reading the fence counter", err)
	}
	if !called {
		return 0, nil
	}
	return uint64(v), nil
}

// Pool returns the store's connection pool (for tests and tools that read
// the state).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
