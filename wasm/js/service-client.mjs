// lease-fence/service-client: a client for the coordinator service (the
// native coordinator or the Cloudflare Worker, docs/service.md) over
// node:http and node:https with keep-alive agents on Node, fetch elsewhere.
//
// With several coordinators (baseURLs: replicas over one PostgreSQL
// database), an attempt that gets no answer or a 5xx moves the call to the
// next one with the same body.
//
// Each call is begun with the library's LeaseClient before anything is sent,
// so a lease's deadline is anchored at the first send of its request, then
// sent as one JSON body that every retry repeats byte for byte, request id
// included: the coordinator answers a repeated request with the answer it
// already gave, so a retry never mints a second fence. The holder secret that
// renewing and releasing a lease takes lives in a private field of the
// client and is never part of a message, a log line or a printed object.
//
// On top of the four calls: hold (a lease kept alive by its own renewals,
// with an AbortSignal that ends at the holder's deadline when they fail),
// withLease, inspect, and elections. Their timing is the holder's clock (the
// LeaseClient's) and the client's timers, and has the meaning of Go's
// client.Client Hold/Do/Election (service/client/hold.go).

// The modules of service/, one job each: client.mjs (LeaseServiceClient),
// transport.mjs (sending a call, retries, coordinators in turn),
// node-http.mjs (the sender on Node),
// protocol.mjs (bodies and answers), errors.mjs, options.mjs (argument
// checks), base-url.mjs, timers.mjs, lease.mjs (ServiceLease), hold.mjs
// (hold, withLease, HeldLease), election.mjs and list-watch.mjs.
export {
  isLeaseLost, LeaseDeniedError, LeaseExpiredError, LeaseLostError, LeaseReleasedError, LeaseRevokedError, LeaseServiceError,
} from './service/errors.mjs';
export { LeaseServiceClient } from './service/client.mjs';
export { ServiceLease } from './service/lease.mjs';
export { HeldLease, HoldEvent } from './service/hold.mjs';
export { LeaseElection } from './service/election.mjs';

// The Lease-Fence header of fence-proxy (docs/fencing.md), for writes through it.
export { LEASE_FENCE_HEADER, MAX_HEADER_FENCE, isStaleFence, leaseFenceHeader, staleFenceError } from './fence-header.mjs';
