//go:build !js && !wasip1

package pgstore

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lease-fence/lease-fence/service"
)

// A token's maxLeases across replicas: every lease record carries its
// owner (the token's name), and lease_fence_owners counts the records of
// each owner, changed in the same transaction as the rows, by decisions
// and sweeps alike. A decision that would give an owner one more record
// asks (Txn.Owners) under the owner's advisory lock, as the total is
// kept under the counts' lock:
//
//   - shared, when the count is more than max_connections below the limit:
//     every transaction that may have taken a place and not committed yet
//     holds the lock, and there are fewer of them than that, so the limit
//     cannot be passed;
//   - exclusive, nearer the limit: no other transaction that may take the
//     owner a place runs, and the count, read after the lock is held, is
//     exact. The decision takes it without waiting if it can (no other
//     transaction holds the lock); if it cannot, it runs again, taking the
//     lock before it locks its row, as every transaction that waits for an
//     owner's lock does (in the owners' order, after the counts' lock).
//
// At the limit, the owner's expired records are swept (at most once per
// tenth of a TTL) and the decision runs again, as for -max-leases.
// Releases and sweeps only lower a count, so they take no lock: a count
// read before one of them commits is only higher than the truth.

// ownerCheck is the service.OwnerCounter (Txn.Owners) of one transaction
// of a decision.
type ownerCheck struct {
	s      *Store
	ctx    context.Context
	conn   *pgx.Conn
	now    float64
	margin int64    // max_connections
	excl   []string // the owners whose lock the transaction took at its start (sorted)
	cur    *service.Entry

	answers []ownerAnswer // what was answered, for the decision's second run
	redo    []string      // owners whose lock the next transaction must take first
	sweep   string        // an owner at its limit to sweep before it
	err     error         // a statement that failed: the transaction is over
}

type ownerAnswer struct {
	owner    string
	limit, n int
}

var _ service.OwnerCounter = (*ownerCheck)(nil)

// Owned is the count of owner's records under the owner's lock (any
// number below limit when the shared lock shows it is below). Once it has
// found that the transaction cannot decide (a lock it could not take, a
// sweep to make, a failed statement), it answers limit to everything: the
// decision is thrown away (settle).
func (c *ownerCheck) Owned(owner string, limit int) int {
	if c.cur.Replaces(owner) {
		return 0
	}
	for _, a := range c.answers {
		if a.owner == owner && a.limit == limit {
			return a.n
		}
	}
	if c.err != nil || len(c.redo) > 0 || c.sweep != "" {
		return limit
	}
	n, ok := c.count(owner, int64(limit))
	if !ok {
		return limit
	}
	c.answers = append(c.answers, ownerAnswer{owner, limit, int(n)})
	return int(n)
}

// count counts owner's records for a decision at limit; ok is false when
// the transaction cannot decide.
func (c *ownerCheck) count(owner string, limit int64) (n int64, ok bool) {
	key := c.s.ownerKey(owner)
	var locked bool
	if _, held := slices.BinarySearch(c.excl, owner); held {
		if c.err = c.conn.QueryRow(c.ctx, qOwned, owner).Scan(&n); c.err != nil {
			return 0, false
		}
	} else {
		if limit > c.margin {
			// Shared, then the count: read once the lock is held, so it
			// misses only the places of transactions holding the lock now.
			if locked, n, c.err = c.lockAndCount(`SELECT pg_try_advisory_xact_lock_shared($1)`, key, owner); c.err != nil {
				return 0, false
			}
			if locked && n < limit-c.margin {
				return n, true
			}
		}
		// Exclusive, if no other transaction holds the lock (this one's
		// shared lock does not stand in its way).
		if locked, n, c.err = c.lockAndCount(`SELECT pg_try_advisory_xact_lock($1)`, key, owner); c.err != nil {
			return 0, false
		}
		if !locked {
			c.redo = append(c.redo, owner)
			return 0, false
		}
	}
	if n >= limit && c.s.reclaims.Take(owner, c.now, c.s.ttl) {
		c.sweep = owner
		return 0, false
	}
	return n, true
}

// lockAndCount runs the lock statement, then reads owner's count, in one
// round trip (the count's statement starts once the lock's has ended).
func (c *ownerCheck) lockAndCount(lock string, key int64, owner string) (locked bool, n int64, err error) {
	b := &pgx.Batch{}
	b.Queue(lock, key).QueryRow(func(r pgx.Row) error { return r.Scan(&locked) })
	b.Queue(qOwned, owner).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
	err = c.conn.SendBatch(c.ctx, b).Close()
	return locked, n, err
}

// settle ends the transaction if the check found it cannot decide, and
// tells Update what to do next: done with a nil error means the decision
// stands.
func (c *ownerCheck) settle(ctx context.Context, a *attempt) (outcome, error) {
	switch {
	case c.err != nil:
		return c.s.failed(ctx, c.conn, c.err)
	case len(c.redo) == 0 && c.sweep == "":
		return done, nil
	}
	c.s.rollback(ctx, c.conn)
	for _, o := range c.redo {
		a.addOwner(o)
	}
	if c.sweep != "" {
		a.addOwner(c.sweep)
		a.sweep = c.sweep
	}
	return owners, nil
}

// ownerDelta is a change of an owner's count.
type ownerDelta struct {
	owner string
	n     int64
}

// ownerDeltas is how the counts by owner change when cur becomes next, in
// the owners' order (at most two owners; none when both records are the
// same owner's).
func ownerDeltas(cur, next service.Entry) []ownerDelta {
	var ds []ownerDelta
	if cur.Fence != 0 && cur.Owner != "" {
		ds = append(ds, ownerDelta{cur.Owner, -1})
	}
	if next.Fence != 0 && next.Owner != "" {
		if cur.Replaces(next.Owner) {
			return nil
		}
		ds = append(ds, ownerDelta{next.Owner, 1})
	}
	if len(ds) == 2 && strings.Compare(ds[0].owner, ds[1].owner) > 0 {
		ds[0], ds[1] = ds[1], ds[0]
	}
	return ds
}

// Owned returns how many lease records owner holds (live, and expired ones
// not yet swept), for all replicas: what its maxLeases is held to.
func (s *Store) Owned(ctx context.Context, owner string) (int, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, qOwned, owner).Scan(&n); err != nil {
		return 0, unavailable("counting", err)
	}
	return int(n), nil
}
