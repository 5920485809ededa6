// Types for service-client.mjs (import from 'lease-fence/service-client'): a
// client for the coordinator service over fetch. See docs/js.md, "The
// service client".

import type { Clock, FenceGate, FenceToken, Grant, Instant, Lease, LeaseClient } from './lease-fence.js';
import { LeaseFenceError } from './lease-fence.js';

// Symbol.asyncDispose, for projects whose lib lacks esnext.disposable (the
// same declaration @types/node makes).
declare global {
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol;
  }
}

export type LeaseServiceClientOptions = LeaseServiceClientCommonOptions &
  (
    | {
        /** Where the coordinator is served, e.g. "http://127.0.0.1:8787"; /v1/acquire etc. are appended. */
        baseURL: string;
        baseURLs?: undefined;
      }
    | {
        baseURL?: undefined;
        /**
         * Several coordinators serving the same leases (replicas over one PostgreSQL database), in the
         * order to try them: an attempt that gets no answer, times out or gets a 5xx moves the call to
         * the next one with the same body, request id and secret included. A call starts at the one
         * that answered last. 1 to 64 URLs.
         */
        baseURLs: readonly string[];
      }
  );

export interface LeaseServiceClientCommonOptions {
  /** The holder id; with clock and clockSkewMillis, makes the LeaseClient. Required unless leaseClient is given. */
  holderId?: string | undefined;
  /** The holder's clock; a monotonic clock whose domain is the holder id by default. */
  clock?: Clock | undefined;
  /** Subtracted from every deadline; 0 by default. */
  clockSkewMillis?: number | undefined;
  /** A LeaseClient to use instead of holderId/clock/clockSkewMillis. */
  leaseClient?: LeaseClient | undefined;
  /**
   * Sent with every call as `Authorization: Bearer <token>`, for a coordinator
   * started with -auth (or a Worker with the LEASE_TOKENS secret). Visible
   * ASCII. Never printed by the client.
   */
  token?: string | undefined;
  /**
   * The fetch to send with; globalThis.fetch by default. Pass one for TLS
   * settings the host's fetch lacks (a private CA in Node without
   * NODE_EXTRA_CA_CERTS, a client certificate): see docs/js.md.
   */
  fetch?: ((input: string, init: RequestInit) => Promise<Response>) | undefined;
  /** How many times one call is sent at most (1 to 100); 4 by default, or one more than the baseURLs if that is more. */
  attempts?: number | undefined;
  /** How long one attempt may wait for its answer before it is retried; 5000 by default. */
  attemptTimeoutMillis?: number | undefined;
  /** The default for every call's timeoutMillis; none by default (attempts bound the call). */
  timeoutMillis?: number | undefined;
  /**
   * The pause before attempt n (n >= 2), in milliseconds; 25, doubling, at most 1000 by default. With
   * several baseURLs only an attempt that returns to a coordinator already tried pauses (n counts those).
   */
  backoff?: ((attempt: number) => number) | undefined;
}

export interface CallOptions {
  /** Ends the call at once: it rejects with signal.reason. */
  signal?: AbortSignal | undefined;
  /** Bounds the whole call, retries and pauses included: it rejects with a LeaseServiceError of code 'timeout'. */
  timeoutMillis?: number | undefined;
}

/** A client of the coordinator service for one holder. */
export class LeaseServiceClient {
  constructor(options: LeaseServiceClientOptions);
  /** The base URL (the first of baseURLs), without a trailing slash. */
  readonly baseURL: string;
  /** Every base URL, in the order given, without trailing slashes. */
  readonly baseURLs: string[];
  readonly holderId: string;
  readonly leaseClient: LeaseClient;
  /** Rejects with LeaseDeniedError when the resource is held, LeaseServiceError when refused or unanswered. */
  acquire(resource: string, options?: CallOptions): Promise<ServiceLease>;
  /** A new lease with the same fence and a later deadline; LeaseExpiredError when the lease is no longer current. */
  renew(lease: ServiceLease, options?: CallOptions): Promise<ServiceLease>;
  /** Resolves when the lease was ended (a retry of a release that ended it included); LeaseExpiredError otherwise. */
  release(lease: ServiceLease, options?: CallOptions): Promise<void>;
  toString(): string;
}

/** A lease held through a LeaseServiceClient. `await using` releases it. */
export class ServiceLease {
  private constructor();
  /** The fencing token to present with every write. */
  readonly token: FenceToken;
  /** End of the lease in the client's clock domain, anchored at the first send of its request. */
  readonly deadline: Instant;
  /** The grant the lease was made from; it holds no secret. */
  readonly grant: Grant;
  /** The library's Lease underneath. */
  readonly lease: Lease;
  /** Advisory, true only for the instant it is called: never branch a write on it. */
  hasExpired(): boolean;
  /** Advisory, true only for the instant it is called: never branch a write on it. */
  wouldAdmit(gate: FenceGate): boolean;
  /** Releases the lease unless it was released or found ended already; an ended lease is not an error. */
  dispose(options?: CallOptions): Promise<void>;
  /** dispose(). */
  [Symbol.asyncDispose](): Promise<void>;
  toString(): string;
}

/**
 * The coordinator refused a call or gave no usable answer. `code` is the
 * service's stable code ('wrong_secret', 'too_many_leases', 'unavailable',
 * 'invalid_value', ...) or the client's own: 'no_answer', 'bad_reply',
 * 'timeout', 'http_<status>'.
 */
export class LeaseServiceError extends LeaseFenceError {
  constructor(message?: string, options?: { code?: string; status?: number; attempts?: number; cause?: unknown });
  readonly code: string;
  /** The answer's HTTP status; 0 when there was no answer. */
  readonly status: number;
  /** How many times the request was sent. */
  readonly attempts: number;
  /** Whether the same call may succeed later (5xx, no answer, timeout); a 4xx never will. */
  readonly retryable: boolean;
}

/** An acquisition was denied: the resource is held (by the caller itself, too). */
export class LeaseDeniedError extends LeaseFenceError {
  constructor(message?: string, options?: { resource?: string; heldBy?: string; retryAfterMillis?: number; cause?: unknown });
  readonly code: 'denied';
  readonly resource: string;
  readonly heldBy: string;
  /** How long that lease has left, by the coordinator's clock. */
  readonly retryAfterMillis: number;
}

/** A renewal or release found the lease no longer current (ran out, released or reassigned). */
export class LeaseExpiredError extends LeaseFenceError {
  constructor(message?: string, options?: { resource?: string; holderId?: string; fence?: number; cause?: unknown });
  readonly code: 'expired';
  readonly resource: string;
  readonly holderId: string;
  readonly fence: number;
}

// The Lease-Fence header of fence-proxy (docs/fencing.md).
export { LEASE_FENCE_HEADER, MAX_HEADER_FENCE, leaseFenceHeader, staleFenceError } from './fence-header.js';
