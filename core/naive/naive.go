// Package naive is the lease that lease-fence exists to replace, kept so tests
// and the playground can show it failing.
//
// It stores expiresAt, checks now < expiresAt right before a write, and on a
// renewal reply sets expiresAt = now + ttl. The check is true when it is made
// and says nothing about when the write lands; the renewal dates the lease
// from when the reply arrived rather than when the coordinator processed it.
// Nothing here records a conflict. Do not use it to guard anything.
package naive

import (
	"time"

	"github.com/lease-fence/lease-fence/core/argerr"
	"github.com/lease-fence/lease-fence/core/clock"
)

// ArgumentError reports an invalid argument; nothing changed. It is the one
// argument-error type of lease-fence (clock.ArgumentError and the others are
// the same type), with Pkg "naive".
type ArgumentError = argerr.Error

// Lease is an expiresAt timestamp read against the holder's own clock.
type Lease struct {
	clk       clock.Clock
	ttl       time.Duration
	expiresAt clock.Instant
}

// Acquire starts a lease that ends ttl after now (the moment the grant
// arrived, not when it was requested).
func Acquire(clk clock.Clock, ttl time.Duration) (*Lease, error) {
	if clk == nil {
		return nil, &ArgumentError{Pkg: "naive", Arg: "clock", Reason: "is required"}
	}
	if clk.Domain() == "" {
		// A typed nil or zero *clock.Manual or *clock.Guarded.
		return nil, &ArgumentError{Pkg: "naive", Arg: "clock", Reason: "has an empty domain (a nil or zero clock?)"}
	}
	if ttl <= 0 {
		return nil, &ArgumentError{Pkg: "naive", Arg: "ttl", Reason: "must be positive, got " + ttl.String()}
	}
	l := &Lease{clk: clk, ttl: ttl}
	return l, l.Renewed()
}

func (l *Lease) usable() error {
	if l == nil || l.clk == nil {
		return &ArgumentError{Pkg: "naive", Arg: "lease", Reason: "was not made by Acquire"}
	}
	return nil
}

// Valid reports now < expiresAt. The naive holder checks it immediately before
// writing, and then writes regardless of how long the write takes to land.
// A nil or zero Lease returns an *ArgumentError.
func (l *Lease) Valid() (bool, error) {
	if err := l.usable(); err != nil {
		return false, err
	}
	now, err := l.clk.Now()
	if err != nil {
		return false, err
	}
	return now.Before(l.expiresAt)
}

// Renewed sets expiresAt = now + ttl on a renewal reply, dating the lease from
// the reply's arrival. A nil or zero Lease returns an *ArgumentError.
func (l *Lease) Renewed() error {
	if err := l.usable(); err != nil {
		return err
	}
	now, err := l.clk.Now()
	if err != nil {
		return err
	}
	l.expiresAt = now.Add(l.ttl)
	return nil
}

// ExpiresAt returns the stored deadline (the zero Instant for a nil Lease).
func (l *Lease) ExpiresAt() clock.Instant {
	if l == nil {
		return clock.Instant{}
	}
	return l.expiresAt
}
