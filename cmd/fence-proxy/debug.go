//go:build !js && !wasip1

package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
)

// checkDebugAddr checks that addr is a loopback address: the runtime's
// profiles are for the operator and the benchmarks, not for the agents
// writing through the proxy.
func checkDebugAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("-debug-addr: " + err.Error())
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("-debug-addr must be a loopback address, got " + strconv.Quote(addr))
	}
	return nil
}

// debugHandler serves the Go runtime's profiles
// (go tool pprof http://ADDR/debug/pprof/profile).
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}
