//go:build !js && !wasip1

package pgstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/lease-fence/lease-fence/service"
)

var (
	// decideEachFunction creates lease_fence_decide_each (schema version 6).
	decideEachFunction = decideStatement("decide_each")
	// qDecideEach calls it.
	qDecideEach = decideStatement("call_each")
)

// batchWorkers bounds the decisions of a batch that UpdateEach leaves to
// Update, run at once.
const batchWorkers = 16

// UpdateEach decides each of fns on its resource's row as Update does, each
// on its own (service.BatchUpdater). The decisions on rows this store
// knows that take no fence and change no count (a renewal, a renewal
// refused) are sent together to lease_fence_decide_each: one statement,
// one transaction, one commit, each decision in a subtransaction of its
// own. A decision that function refuses (its row changed, a premise no
// longer holds) wrote nothing and is decided again through Update, as is
// every other decision of the batch.
func (s *Store) UpdateEach(ctx context.Context, resources []string, fns []func(*service.Txn) error) []error {
	errs := make([]error, len(resources))
	var calls []*fastCall
	var at []int // the index in resources of each of calls
	var rest []int
	seen := make(map[string]bool, len(resources))
	for i, resource := range resources {
		if row, ok := s.known.get(resource); ok && !seen[resource] {
			if c, ok := s.prepare(resource, row, fns[i]); ok && c.batchable() {
				seen[resource] = true
				calls, at = append(calls, c), append(at, i)
				continue
			}
		}
		rest = append(rest, i)
	}
	if len(calls) == 1 {
		rest, calls, at = append(rest, at[0]), nil, nil
	}
	if len(calls) > 0 {
		for j, out := range s.decideEach(ctx, calls) {
			switch out.fastOutcome {
			case fastDone:
				s.paths[3].Add(1)
				errs[at[j]] = out.err
			default:
				rest = append(rest, at[j])
			}
		}
	}
	var g errgroup.Group
	g.SetLimit(batchWorkers)
	for _, i := range rest {
		g.Go(func() error {
			errs[i] = s.Update(ctx, resources[i], fns[i])
			return nil
		})
	}
	_ = g.Wait() // each decision's error is its own, in errs
	return errs
}

// batchable reports whether c can be decided with others by
// lease_fence_decide_each: it writes the row or nothing, takes no fence,
// changes no count and dates no release at the reading.
func (c *fastCall) batchable() bool {
	return c.write != 2 && !c.grant && c.dl == 0 && c.dr == 0 && c.dk == 0 && len(c.owners) == 0 && len(c.pos) == 0
}

// eachOutcome is the outcome of one decision of a batch.
type eachOutcome struct {
	fastOutcome
	err error
}

// decideEach sends calls (at least two, of distinct resources) to
// lease_fence_decide_each, in byte order of resource.
func (s *Store) decideEach(ctx context.Context, calls []*fastCall) []eachOutcome {
	outs := make([]eachOutcome, len(calls))
	for i := range outs {
		outs[i].fastOutcome = fastSlow
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(calls[a].resource, calls[b].resource) })
	// One offset for the batch (the tests step the clock through it): a
	// call prepared at another is decided through Update.
	offset := calls[order[0]].offset
	order = slices.DeleteFunc(order, func(i int) bool { return calls[i].offset != offset })
	n := len(order)
	var (
		resources, holders, requests, owners, values, rholders []string
		versions, fences, lasts, rfences                       []int64
		nows, untils, expires, sweeps, rats                    []float64
		writes                                                 []int32
		secrets, releases                                      [][]byte
		shiftE, shiftR                                         []bool
	)
	for _, i := range order {
		c := calls[i]
		nx := c.next
		resources, versions, nows, untils, writes = append(resources, c.resource), append(versions, c.row.version), append(nows, c.now), append(untils, c.u), append(writes, int32(c.write))
		holders, requests, fences, expires = append(holders, nx.HolderID), append(requests, nx.RequestID), append(fences, int64(nx.Fence)), append(expires, nx.ExpiresAt)
		secrets, releases, lasts, sweeps = append(secrets, c.hash), append(releases, c.rel), append(lasts, int64(nx.LastFence)), append(sweeps, sweepAt(nx, s.ttl))
		owners, values, rholders = append(owners, nx.Owner), append(values, nx.Value), append(rholders, nx.Revoked.HolderID)
		rfences, rats = append(rfences, int64(nx.Revoked.Fence)), append(rats, nx.Revoked.At)
		shiftE, shiftR = append(shiftE, c.sh.expires), append(shiftR, c.sh.revoked)
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return outs
	}
	defer pc.Release()
	conn := pc.Conn()
	states := make([]string, n)
	res := make([]fastResult, n)
	rows, err := conn.Query(ctx, qDecideEach, resources, versions, nows, offset, untils, writes,
		holders, requests, fences, expires, secrets, releases, lasts, sweeps, owners, values, rholders, rfences, rats,
		int64(s.limits.MaxLeases), int64(s.limits.ReleaseMemory), int64(s.limits.FenceMemory), s.countKey, shiftE, shiftR)
	k := 0
	if err == nil {
		for rows.Next() {
			if k == n {
				err = errors.New("pgstore: lease_fence_decide_each answered more rows than decisions")
				break
			}
			var st string
			var r fastResult
			var (
				version, fence, issued, leases, rels, lsts *int64
				now, reading                               *float64
				listening                                  *bool
			)
			if err = rows.Scan(&st, &version, &fence, &now, &reading, &issued, &leases, &rels, &lsts, &listening); err != nil {
				break
			}
			if st == "" {
				if version == nil || fence == nil || now == nil || reading == nil || issued == nil || leases == nil || rels == nil || lsts == nil || listening == nil {
					err = errors.New("pgstore: lease_fence_decide_each answered a decision without its state")
					break
				}
				r = fastResult{version: *version, fence: *fence, now: *now, reading: *reading, issued: *issued, leases: *leases, releases: *rels, lasts: *lsts, listening: *listening}
			}
			states[k], res[k] = st, r
			k++
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		if err == nil && k != n {
			err = errors.New("pgstore: lease_fence_decide_each answered fewer rows than decisions")
		}
	}
	at := time.Now()
	if err != nil {
		// Nothing is known of any of them: each is decided again on its
		// row read afresh, or, if it wrote, answered "may or may not".
		unknown := sqlState(err) == "" && !pgconn.SafeToRetry(err)
		if sqlState(err) == "" {
			conn.Close(context.WithoutCancel(ctx))
		}
		for _, i := range order {
			c := calls[i]
			s.known.forget(c.resource)
			if unknown {
				if c.write != 0 {
					outs[i] = eachOutcome{fastDone, errors.Join(service.ErrOutcomeUnknown, errors.New("pgstore: committing a batch: "+err.Error()))}
				}
			}
		}
		return outs
	}
	_, warned := s.unreplicated.LoadAndDelete(conn.PgConn())
	for k, i := range order {
		c := calls[i]
		if states[k] != "" {
			// Nothing of it was written: Update decides it again.
			s.known.forget(c.resource)
			continue
		}
		r := &res[k]
		s.watch.heard.Store(r.listening)
		s.known.heard(r.now-offset, at, uint64(max(r.issued, 0)), r.leases, r.releases, r.lasts)
		if warned && c.write != 0 {
			s.known.forget(c.resource)
			outs[i] = eachOutcome{fastDone, errUnreplicated}
			continue
		}
		out, err := s.finish(c, r)
		outs[i] = eachOutcome{out, err}
	}
	if warned {
		conn.Close(context.WithoutCancel(ctx))
	}
	return outs
}
