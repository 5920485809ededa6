// Package httpcheck holds the linearizability test of the coordinator served
// over HTTP: wire clients in goroutines against an httptest server on
// 127.0.0.1, their history checked with the lease-register model of
// core/sim. It has no code of its own outside the test.
package httpcheck
