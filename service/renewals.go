package service

import (
	"context"
	"crypto/sha256"
	"sync"

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
// other store are decided concurrently, so a store that syncs concurrent changes together syncs
// the batch in a few writes.
func (s *Service) CallEach(ctx context.Context, ms []wire.Message) ([]wire.Reply, []error) {
	replies, errs := make([]wire.Reply, len(ms)), make([]error, len(ms))
	if len(ms) == 1 {
		replies[0], errs[0] = s.Call(ctx, ms[0])
		return replies, errs
	}
	var each []int // the calls decided together
	if _, ok := storeAs[BatchUpdater](s.store); ok {
		seen := make(map[string]bool, len(ms))
		for i, m := range ms {
			if m.Op == wire.OpRenew && m.Wait == 0 && !seen[m.Request.Resource] {
				seen[m.Request.Resource] = true
				each = append(each, i)
			}
		}
		if len(each) < 2 {
			each = nil
		}
	}
	next := make(chan int, len(ms))
	for i, j := 0, 0; i < len(ms); i++ {
		if j < len(each) && each[j] == i {
			j++
			continue
		}
		next <- i
	}
	close(next)
	if len(each) > 0 {
		// The others name a resource of the batch again: after it.
		s.renewEach(ctx, ms, each, replies, errs)
	}
	var wg sync.WaitGroup
	for range min(batchWorkers, len(next)) {
		wg.Go(func() {
			for i := range next {
				replies[i], errs[i] = s.Call(ctx, ms[i])
			}
		})
	}
	wg.Wait()
	return replies, errs
}

// renewEach decides the renewals ms[at...] (of distinct resources) through
// the store's UpdateEach, each answered into replies and errs as Call
// answers it.
func (s *Service) renewEach(ctx context.Context, ms []wire.Message, at []int, replies []wire.Reply, errs []error) {
	bu, _ := storeAs[BatchUpdater](s.store)
	outs := make([]outcome, len(at))
	resources, fns := make([]string, len(at)), make([]func(*Txn) error, len(at))
	for j, i := range at {
		m := ms[i]
		resources[j] = m.Request.Resource
		fns[j] = s.decider(m.Request.Resource, s.renewDecision(m, sha256.Sum256([]byte(m.Secret))), &outs[j])
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
