package service

import (
	"context"
	"sync"

	"github.com/lease-fence/lease-fence/service/wire"
)

// batchWorkers bounds the renewals of one batch decided at once: enough
// for a store that commits concurrent changes together (one sync for
// several), few enough not to crowd out other calls.
const batchWorkers = 16

// CallEach answers each of ms as Call answers it, each on its own: a
// batch of renewals (POST /v1/renewals). One refused never affects
// another; they are decided concurrently, so a store that syncs
// concurrent changes together syncs the batch in a few writes.
func (s *Service) CallEach(ctx context.Context, ms []wire.Message) ([]wire.Reply, []error) {
	replies, errs := make([]wire.Reply, len(ms)), make([]error, len(ms))
	if len(ms) == 1 {
		replies[0], errs[0] = s.Call(ctx, ms[0])
		return replies, errs
	}
	next := make(chan int, len(ms))
	for i := range ms {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(batchWorkers, len(ms)) {
		wg.Go(func() {
			for i := range next {
				replies[i], errs[i] = s.Call(ctx, ms[i])
			}
		})
	}
	wg.Wait()
	return replies, errs
}
