// Package wire puts a lease coordinator on HTTP with JSON bodies, and gives Go
// holders a client for it.
//
// The protocol is three POST endpoints, /v1/acquire, /v1/renew and
// /v1/release, whose bodies and answers use the same names as the plain-data
// requests, grants and outcomes of package lease (requestId, resource,
// holderId, sentAt {millis, domain}, kind, fence, ttlMillis,
// coordinatorExpiresAt, ok, grant, heldBy, retryAfterMillis, reason). Every
// call also carries a secret the holder chose for the acquisition; the
// coordinator keeps only its SHA-256, so knowing a holder's id, a fence or a
// request id is not enough to act for it.
//
// NewHandler turns any Backend into an http.Handler. Service is the backend
// most callers want: one lease.Coordinator for every resource, whose state a
// Store keeps (BoltStore on disk, MemoryStore in memory, or the Worker's
// Durable Object storage) before any answer, so a restarted service issues
// fences above every fence it issued and remembers who holds what. The same
// handler runs in the native server (cmd/coordinator) and inside the
// Cloudflare Worker (wasm/worker).
//
// Client does what the spec asks of a holder on the far side of a network: it
// stamps the send instant before the request leaves, retries a lost or timed
// out reply with the same request id (so a retry never mints a second fence),
// and completes the grant into a lease anchored at that first send.
package wire
