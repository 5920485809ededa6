// Package client is the Go client of the coordinator's protocol (package
// wire) over HTTP.
//
// Client does what the spec asks of a holder across a network: it stamps
// the send instant before the request leaves, retries a lost or timed-out
// reply with the same request id (so a retry never mints a second fence),
// and completes the grant into a lease anchored at that first send. Hold,
// Do and Election keep a lease renewed on top of it.
package client
