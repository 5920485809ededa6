package service

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/lease-fence/lease-fence/service/wire"
)

// batchWorkers bounds the renewals of one batch decided at once: enough
// for a store that commits concurrent changes together (one sync for
// several), few enough not to crowd out other calls.
const batchWorkers = 16

// CallEach answers each of ms as Call answers it, each on its own: a
// batch of renewals (POST /v1/renewals). One refused never affects
// another. A store that is a BatchUpdater decides the renewals of the
// batch's distinct resources together (pgstore: in one transaction, one
// round trip), then the others (a resource named again); the calls of any
// other store are decided concurrently, so a store that syncs concurrent
// changes together syncs the batch in a few writes.
func (s *Service) CallEach(ctx context.Context, ms []wire.Message) ([]wire.Reply, []error) {
	replies, errs := make([]wire.Reply, len(ms)), make([]error, len(ms))
	if len(ms) == 1 {
		replies[0], errs[0] = s.Call(ctx, ms[0])
		return replies, errs
	}
	together := make([]bool, len(ms))
	if bu, ok := storeAs[BatchUpdater](s.store); ok {
		var each []int // the calls decided together
		seen := make(map[string]bool, len(ms))
		for i, m := range ms {
			if m.Op == wire.OpRenew && m.Wait == 0 && !seen[m.Request.Resource] {
				seen[m.Request.Resource] = true
				each = append(each, i)
			}
		}
		if len(each) > 1 {
			for _, i := range each {
				together[i] = true
			}
			// The others name a resource of the batch again: after it.
			s.renewEach(ctx, bu, ms, each, replies, errs)
		}
	}
	var g errgroup.Group
	g.SetLimit(batchWorkers)
	for i := range ms {
		if !together[i] {
			g.Go(func() error {
				replies[i], errs[i] = s.Call(ctx, ms[i])
				return nil
			})
		}
	}
	_ = g.Wait() // each call's error is its own, in errs
	return replies, errs
}

// renewEach decides the renewals ms[at...] (of distinct resources) through
// bu.UpdateEach, each answered into replies and errs as Call answers it.
func (s *Service) renewEach(ctx context.Context, bu BatchUpdater, ms []wire.Message, at []int, replies []wire.Reply, errs []error) {
	outs := make([]outcome, len(at))
	resources, fns := make([]string, len(at)), make([]func(*Txn) error, len(at))
	for j, i := range at {
		m := ms[i]
		resources[j] = m.Request.Resource
		fns[j] = s.decider(m.Request.Resource, s.renewDecision(m, secretHash(m.Secret)), &outs[j])
	}
	for j, err := range bu.UpdateEach(ctx, resources, fns) {
		i := at[j]
		if err != nil {
			errs[i] = refusal(err)
			continue
		}
		s.decided(&outs[j])
		replies[i] = outs[j].reply
	}
}
