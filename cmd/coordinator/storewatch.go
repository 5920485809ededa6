//go:build !js && !wasip1

package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lease-fence/lease-fence/service"
)

// watchedStore logs when the store starts refusing changes (once, with the
// cause) and when it takes them again (once), instead of a line per refused
// call. A failure the store reports itself (reported) is not logged again:
// pebblestore logs its full disk when it notices it, with the free space.
type watchedStore struct {
	service.Store
	log      *slog.Logger
	reported func(error) bool
	failing  atomic.Bool
	silent   atomic.Bool // the failure was the store's to report, and so is its end
	// syncs, if set, times each decision that asked for a synced write, as
	// the store's sync latency (for a store whose commit cannot be timed
	// apart: PostgreSQL's).
	syncs prometheus.Histogram
}

// Unwrap returns the store watched, for its optional interfaces
// (service.Lister and others).
func (w *watchedStore) Unwrap() service.Store { return w.Store }

func (w *watchedStore) Update(ctx context.Context, resource string, fn func(*service.Txn) error) error {
	if w.syncs != nil {
		start := time.Now()
		synced := false
		err := w.update(ctx, resource, func(t *service.Txn) error {
			err := fn(t)
			_, synced, _ = t.Next()
			return err
		})
		if err == nil && synced {
			w.syncs.Observe(time.Since(start).Seconds())
		}
		return err
	}
	return w.update(ctx, resource, fn)
}

func (w *watchedStore) update(ctx context.Context, resource string, fn func(*service.Txn) error) error {
	if !w.failing.Load() {
		err := w.Store.Update(ctx, resource, fn)
		w.failed(err)
		return err
	}
	// While failing, a decision that writes and succeeds is the news that
	// the store takes changes again (one that writes nothing says nothing).
	wrote := false
	err := w.Store.Update(ctx, resource, func(t *service.Txn) error {
		err := fn(t)
		_, _, wrote = t.Next()
		return err
	})
	if err == nil && wrote {
		w.cleared()
	}
	w.failed(err)
	return err
}

func (w *watchedStore) Sweep(ctx context.Context) (int, error) {
	n, err := w.Store.Sweep(ctx)
	if err == nil && n > 0 {
		w.cleared()
	}
	w.failed(err)
	return n, err
}

// Ready passes the store's readiness on.
func (w *watchedStore) Ready(ctx context.Context) error {
	if r, ok := w.Store.(service.Readier); ok {
		return r.Ready(ctx)
	}
	return nil
}

func (w *watchedStore) failed(err error) {
	if !errors.Is(err, service.ErrUnavailable) && !errors.Is(err, service.ErrOutcomeUnknown) {
		return
	}
	if !w.failing.CompareAndSwap(false, true) {
		return
	}
	if w.reported != nil && w.reported(err) {
		w.silent.Store(true)
	} else {
		w.silent.Store(false)
		w.log.Error("the store refuses changes: acquisitions, renewals and releases are answered 503 unavailable until it takes them again",
			"cause", err.Error())
	}
}

func (w *watchedStore) cleared() {
	if w.failing.CompareAndSwap(true, false) && !w.silent.Load() {
		w.log.Info("store writable again: changes are made and answered")
	}
}
