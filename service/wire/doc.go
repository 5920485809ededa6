// Package wire is the coordinator's protocol on HTTP with JSON bodies, and
// the Go client of it.
//
// Three POST endpoints, /v1/acquire, /v1/renew and /v1/release, take and
// answer the plain-data requests, grants and outcomes of package lease
// (requestId, resource, holderId, sentAt {millis, domain}, kind, fence,
// ttlMillis, coordinatorExpiresAt, ok, grant, heldBy, retryAfterMillis,
// reason), plus a secret the holder chose for each acquisition.
// DecodeMessage reads a request strictly; NewHandler serves any Backend
// (package service is the coordinator; the Worker routes to a Durable
// Object).
//
// Client does what the spec asks of a holder across a network: it stamps
// the send instant before the request leaves, retries a lost or timed-out
// reply with the same request id (so a retry never mints a second fence),
// and completes the grant into a lease anchored at that first send.
package wire
