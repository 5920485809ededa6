//go:build !js && !wasip1

package pgstore

import (
	"context"
	"errors"

	"github.com/lease-fence/lease-fence/service"
)

var _ service.Readier = (*Store)(nil)

// Ready reports whether the store can make changes now: a connection of the
// pool reaches a database server that is not a read-only standby, within
// ctx. It is what the coordinator's /readyz asks, so a replica whose
// database is out of reach (or was demoted by a failover) is taken out of
// a load balancer's rotation.
func (s *Store) Ready(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return errors.Join(service.ErrUnavailable, errors.New("pgstore: the database cannot be reached: "+err.Error()))
	}
	defer conn.Release()
	if err := checkWritable(ctx, conn.Conn()); err != nil {
		return errors.Join(service.ErrUnavailable, err)
	}
	return nil
}
