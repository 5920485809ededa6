package client

import (
	"errors"
	"strconv"
	"time"
)

// DeniedError is returned by Client.Acquire when the resource is held by a
// live lease, the holder's own included.
type DeniedError struct {
	Resource   string
	HeldBy     string
	RetryAfter time.Duration
}

func (e *DeniedError) Error() string {
	return "wire: " + strconv.Quote(e.Resource) + " is held by " + strconv.Quote(e.HeldBy) +
		" for " + e.RetryAfter.String() + " more"
}

// ErrExpired is returned by Client.Renew and Client.Release when the lease is
// no longer the resource's current lease: it ran out, was released, or was
// reassigned. An expired lease is never extended; acquire again.
var ErrExpired = errors.New("wire: lease expired")
