//go:build !js && !wasip1

package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit works with netutil.LimitListener, which stops accepting once
// max connections are open: it keeps one slot free by closing the
// connection that has been idle longest whenever the open connections reach
// max. Without it, idle kept-alive connections (or connections that never
// send a request, until ReadHeaderTimeout) could fill every slot and leave
// a new client waiting for IdleTimeout.
type connLimit struct {
	max int

	mu   sync.Mutex
	open int
	idle map[net.Conn]time.Time // connections with no request in progress
}

func newConnLimit(max int) *connLimit {
	return &connLimit{max: max, idle: make(map[net.Conn]time.Time)}
}

// track is the http.Server's ConnState hook.
func (l *connLimit) track(c net.Conn, s http.ConnState) {
	var evict net.Conn
	l.mu.Lock()
	switch s {
	case http.StateNew:
		l.open++
		l.idle[c] = time.Now()
	case http.StateActive:
		delete(l.idle, c)
	case http.StateIdle:
		l.idle[c] = time.Now()
	case http.StateHijacked, http.StateClosed:
		l.open--
		delete(l.idle, c)
	}
	if s == http.StateNew && l.open >= l.max {
		var oldest time.Time
		for ic, at := range l.idle {
			if ic != c && (evict == nil || at.Before(oldest)) {
				evict, oldest = ic, at
			}
		}
		delete(l.idle, evict)
	}
	l.mu.Unlock()
	if evict != nil {
		_ = evict.Close()
	}
}
