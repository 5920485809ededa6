// Types for service-client.mjs (import from 'lease-fence/service-client'): a
// client for the coordinator service over node:http (on Node) or fetch. See docs/js.md, "The
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
        /**
         * Where the coordinator is served: an http: or https: URL with a host and, behind a reverse
         * proxy, a path prefix ("https://host/leases"); /v1/acquire etc. are appended. No user name,
         * password, query or fragment. A mistake is InvalidArgumentError at construction.
         */
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
   * A fetch to send every call with, instead of the transport's choice (a
   * fetch with a dispatcher of your own, a recording wrapper). Not with
   * agent, nor with transport 'node'.
   */
  fetch?: ((input: string, init: RequestInit) => Promise<Response>) | undefined;
  /**
   * What calls are sent with: 'auto' (the default) is node:http and
   * node:https with keep-alive agents on Node 20.16 and later, and
   * globalThis.fetch elsewhere (browsers, Workers, Deno, Bun); 'node'
   * insists on node:http (InvalidArgumentError where there is none);
   * 'fetch' always uses globalThis.fetch.
   */
  transport?: 'auto' | 'node' | 'fetch' | undefined;
  /**
   * With the node transport: an http.Agent or https.Agent of your own (for
   * the base URLs of its protocol), or { http, https }; a private CA or a
   * client certificate goes in an https.Agent's ca, cert and key. By
   * default every client shares one keep-alive agent per protocol.
   */
  agent?: object | { http?: object | undefined; https?: object | undefined } | undefined;
  /** How many times one call is sent at most (1 to 100); 4 by default, or one more than the baseURLs if that is more. */
  attempts?: number | undefined;
  /**
   * How long one attempt may wait for its answer before it is retried; 5000 by default. A hold's
   * renewal's attempt waits at most half the time left before its lease would count as lost, and so does an
   * attempt of the release a hold sends after a loss (within its 2 s), so a lost answer leaves time
   * for another attempt.
   */
  attemptTimeoutMillis?: number | undefined;
  /** The default for every call's timeoutMillis; none by default (attempts bound the call). */
  timeoutMillis?: number | undefined;
  /**
   * The pause before attempt n (n >= 2), in milliseconds; 25, doubling, at most 1000 by default. With
   * several baseURLs only an attempt that returns to a coordinator already tried pauses (n counts those).
   */
  backoff?: ((attempt: number) => number) | undefined;
  /**
   * The longest wait one call asks the coordinator for (1 to 2**31 ms); 30000 by default. hold and
   * observe wait longer as several calls, each a retry of the first (it keeps its place in the
   * queue). It must not be more than the coordinator's -max-wait (60 s by default).
   */
  maxWaitMillis?: number | undefined;
  /**
   * The timers a hold's renewals, its deadline, attempt timeouts and backoff pauses run on; the
   * host's setTimeout/clearTimeout by default. They must follow the holder's clock: tests with a
   * manual clock pass timers that fire as that clock moves.
   */
  timers?: Timers | undefined;
}

/** What LeaseServiceClientOptions.timers takes: setTimeout(fn, ms) returning a handle clearTimeout(handle) cancels. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: any): void;
}

export interface CallOptions {
  /** Ends the call at once: it rejects with signal.reason. */
  signal?: AbortSignal | undefined;
  /** Bounds the whole call, retries and pauses included: it rejects with a LeaseServiceError of code 'timeout'. */
  timeoutMillis?: number | undefined;
}

/** A client of the coordinator service for one holder. Safe to use from concurrent tasks. */
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
  /**
   * Renews each lease in one call (POST /v1/renewals; several past 256), each answered on its own:
   * the i-th element is { lease } or { error } (what renew would reject with) for leases[i]. A
   * coordinator without batches (a Worker) gets one call per lease.
   */
  renewEach(leases: ServiceLease[], options?: CallOptions): Promise<Array<{ lease: ServiceLease } | { error: Error }>>;
  /** Resolves when the lease was ended (a retry of a release that ended it included); LeaseExpiredError otherwise. */
  release(lease: ServiceLease, options?: CallOptions): Promise<void>;
  /**
   * Acquires resource, waiting up to options.waitMillis for it (0 by default: LeaseDeniedError at
   * once when it is held; Infinity: until options.signal aborts; a wait that runs out is
   * LeaseDeniedError), and keeps the lease alive by renewing it until release(), a loss, or
   * options.signal. See HeldLease.
   */
  hold(resource: string, options?: HoldOptions): Promise<HeldLease>;
  /**
   * Holds resource while fn runs and releases it when fn settles, whatever the outcome. Resolves to
   * fn's value; rejects with fn's error, the LeaseLostError when the lease was lost while fn ran, or
   * an AggregateError of those (and the release's failure, in that order) when more than one
   * happened; fn's error is left out when it is the loss or an AbortError caused by it.
   * isLeaseLost(err) tells whether the lease was lost. After a loss (or options.signal) it reports the release the hold sent
   * itself, which ends within 2 s of the loss: it settles then even if the coordinator never answers.
   */
  withLease<T>(resource: string, fn: (held: HeldLease) => T | PromiseLike<T>, options?: HoldOptions): Promise<Awaited<T>>;
  /**
   * Who holds resource, changing nothing. With afterFence and waitMillis, answers as soon as the
   * current fence (the live lease's, 0 when none is live) differs from afterFence, or when the wait
   * ends, with the state then.
   */
  inspect(resource: string, options?: InspectOptions): Promise<LeaseStatus>;
  /** The election named name: the leader is the holder of its lease. */
  election(name: string, options?: ElectionOptions): LeaseElection;
  // #27: list and watch.
  /**
   * One page of the live leases under options.prefix, in byte order of resource. Pass its cursor back
   * for the next page; the last page has none. A page may hold fewer than options.limit leases, even
   * none, and still have a cursor. A Worker answers LeaseServiceError code 'not_supported'.
   */
  listPage(options?: ListOptions): Promise<LeasePage>;
  /** Every live lease under options.prefix, one page at a time; a lease live throughout is yielded once. */
  list(options?: ListOptions): AsyncIterableIterator<LeaseInfo>;
  /**
   * The events on resources under options.prefix: a hello first (and again only when a reconnect
   * could not resume: reload with list), then each event once, in sequence, across reconnects (after
   * the coordinator went away, or closed a watcher too slow for its buffer). Ends when options.signal
   * aborts or the loop stops; throws a refusal that will not change, or the last failure after
   * `attempts` failed connections in a row.
   */
  watch(options?: WatchOptions): AsyncIterableIterator<WatchHello | WatchEvent>;
  /**
   * Changes lease's value (at most 4096 bytes of UTF-8, not secret). LeaseExpiredError when the lease
   * is no longer current (revoked: true if an operator revoked it).
   */
  proclaim(lease: ServiceLease, value: string, options?: CallOptions): Promise<void>;
  /**
   * Ends resource's live lease (options.holderId: only that holder's; options.fence: only that
   * fence's), or removes the waiter options.holderId names, on an operator's order: needs a token
   * with "admin": true, or a loopback caller of a coordinator without -auth. Resolves to the lease
   * ended or the waiter removed; LeaseServiceError code 'not_held' when there is nothing to revoke,
   * 'forbidden' without the right to. Sent again after a lost answer only with a fence.
   */
  revoke(resource: string, options?: RevokeOptions): Promise<RevokeResult>;
  toString(): string;
}

export interface RevokeOptions extends CallOptions {
  /** The holder whose lease to end, or the waiter to remove. */
  holderId?: string | undefined;
  /** End the lease only if it has this fence. */
  fence?: number | undefined;
}

/** What a revoke did: the lease it ended, or the waiter it removed. */
export type RevokeResult = { readonly holderId: string; readonly fence: number } | { readonly removedWaiter: string };

// #27: list and watch.
export interface ListOptions extends CallOptions {
  /** The resources whose names begin with it ("" all). At most 1024 bytes. */
  prefix?: string | undefined;
  /** The cursor of the page before (listPage). */
  cursor?: string | undefined;
  /** 1 to 1000 leases a page; 1000 by default. */
  limit?: number | undefined;
  /** List each lease's waiters' holder ids, in queue order. */
  waiters?: boolean | undefined;
}

export interface LeaseInfo {
  readonly resource: string;
  readonly holderId: string;
  readonly fence: number;
  readonly remainingMillis: number;
  readonly waiters: number;
  readonly waiterIds?: readonly string[];
  readonly value?: string;
}

export interface LeasePage {
  readonly leases: readonly LeaseInfo[];
  readonly cursor?: string;
}

export interface WatchOptions {
  /** The resources whose events are sent ("" all). */
  prefix?: string | undefined;
  /** Resume an earlier watch: the events of stream after afterSeq, if the coordinator still holds them. */
  stream?: string | undefined;
  afterSeq?: number | undefined;
  /** Ends the watch: the iterator is done. */
  signal?: AbortSignal | undefined;
}

export interface WatchHello {
  readonly type: 'hello';
  readonly stream: string;
  readonly seq: number;
  readonly resumed: false;
}

export interface WatchEvent {
  readonly seq: number;
  readonly type: 'granted' | 'renewed' | 'released' | 'expired' | 'revoked' | 'waiting' | 'left' | 'proclaimed';
  readonly resource: string;
  readonly holderId?: string;
  readonly fence?: number;
  readonly remainingMillis?: number;
  readonly value?: string;
  readonly waiters?: number;
  /** The coordinator's wall clock, Unix milliseconds. */
  readonly at: number;
}

export interface HoldOptions {
  /**
   * How long to wait for a resource another holder has, in whole milliseconds, or Infinity: the
   * coordinator hands it over in arrival order as soon as it is released or expires. 0 by default.
   */
  waitMillis?: number | undefined;
  /** Ends the wait (rejecting with signal.reason), or later the hold (the lease is released; HeldLease.signal aborts with signal.reason). */
  signal?: AbortSignal | undefined;
  /**
   * How often to renew, counted from each renewal's send; a third of the TTL by default. It must be
   * less than the TTL minus the clock skew and the loss margin (see HeldLease; checked at the grant:
   * InvalidArgumentError, and the lease is released).
   */
  renewEveryMillis?: number | undefined;
  /** The lease's value (at most 4096 bytes of UTF-8, not secret): what inspect and an election's leader report. */
  value?: string | undefined;
}

export interface InspectOptions extends CallOptions {
  /** Answer when the current fence (the live lease's, or 0) differs from this. */
  afterFence?: number | undefined;
  /** With afterFence: also answer when the live lease's value differs from this. */
  afterValue?: string | undefined;
  /** With afterFence: how long the coordinator may wait for the change (0 to 2**31, at most its -max-wait). */
  waitMillis?: number | undefined;
}

/** What inspect answers: the live lease, or the fence of the last one (0 if none is remembered). */
export type LeaseStatus =
  | { readonly held: true; readonly holderId: string; readonly fence: number; readonly remainingMillis: number; readonly value?: string }
  | { readonly held: false; readonly lastFence: number };

export interface ElectionOptions {
  /** The campaign's hold's renewEveryMillis. */
  renewEveryMillis?: number | undefined;
}

export interface SignalOptions {
  /** Ends the call: it rejects with (or, for observe, ends at) signal.reason. */
  signal?: AbortSignal | undefined;
}

/** The leader of an election: the holder of its lease. */
export interface Leader {
  readonly holderId: string;
  readonly fence: number;
  /** The value it campaigned with or last proclaimed; absent when it has none. */
  readonly value?: string;
}

/** The events a HeldLease dispatches. */
export interface HeldLeaseEventMap {
  /** After each successful renewal; event.lease is the new lease. */
  renewed: HoldEvent;
  /** The lease was lost; event.error is the LeaseLostError (also signal.reason). */
  lost: HoldEvent;
  /** release() or the signal given to hold ended the hold. */
  released: HoldEvent;
}

/**
 * A lease kept alive by its own renewals while the work runs: what hold resolves to and withLease's
 * fn receives.
 *
 * `signal` aborts when the lease is lost, with a LeaseLostError: when the coordinator refuses a
 * renewal, or, when no renewal succeeded, a margin before the holder's deadline (the last successful
 * renewal's send + TTL - clock skew, by the holder's clock): the margin is 5 % of the TTL, at most
 * 250 ms, so a timer that fires up to that late still aborts it before the deadline; with a
 * LeaseReleasedError when release() ends the hold; with the reason of the signal given to hold when
 * that aborts. It cannot stop a write already on its way to the resource: that write still needs
 * the resource's gate. After a loss (or the hold's signal) the hold releases the lease itself,
 * within 2 s.
 */
export class HeldLease extends EventTarget {
  private constructor();
  /** The fencing token every write presents: the same for the whole hold. */
  readonly token: FenceToken;
  /** The current lease: the last successful renewal's. */
  readonly lease: ServiceLease;
  /** The holder's deadline of the current lease. */
  readonly deadline: Instant;
  /** The work's signal (see above). */
  readonly signal: AbortSignal;
  /**
   * How many renewals succeeded, counting the one hold made before it resolved when the acquisition's
   * answer came after the first renewal was due (its `renewed` event, if any, came before hold resolved).
   */
  readonly renewals: number;
  /**
   * Ends the hold (signal aborts with a LeaseReleasedError) and releases the lease, which hands the
   * resource to the next waiter. Resolves once the coordinator ended it or it had ended (a lost hold
   * included; a second call resolves too); rejects if the release got no answer (call again). After
   * a loss it waits for the release the hold sent itself (which ends within 2 s of the loss), or sends
   * again if that one failed.
   */
  release(options?: CallOptions): Promise<void>;
  /** release(options). */
  dispose(options?: CallOptions): Promise<void>;
  /** release(): what `await using` calls. */
  [Symbol.asyncDispose](): Promise<void>;
  addEventListener<K extends keyof HeldLeaseEventMap>(type: K, listener: (this: HeldLease, event: HeldLeaseEventMap[K]) => unknown,
    options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListener | EventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  removeEventListener<K extends keyof HeldLeaseEventMap>(type: K, listener: (this: HeldLease, event: HeldLeaseEventMap[K]) => unknown,
    options?: boolean | EventListenerOptions): void;
  removeEventListener(type: string, listener: EventListener | EventListenerObject | null, options?: boolean | EventListenerOptions): void;
  toString(): string;
}

/** An event of a HeldLease: 'renewed', 'lost' or 'released'. */
export class HoldEvent extends Event {
  private constructor();
  readonly type: keyof HeldLeaseEventMap;
  /** The hold's lease when the event was dispatched. */
  readonly lease: ServiceLease;
  /** For 'lost', the LeaseLostError; null otherwise. */
  readonly error: LeaseLostError | null;
}

/** Leader election over one resource, the election's name: the leader is the holder of its lease. */
export class LeaseElection {
  private constructor();
  /** The election's name: the resource whose holder leads. */
  readonly name: string;
  /**
   * Waits, in the resource's queue, until this holder leads, or options.signal aborts. The
   * HeldLease renews itself, its signal aborts when the lead is lost, and release() resigns (the
   * next campaigner leads at once). value (at most 4096 bytes of UTF-8, not secret: the leader's
   * address, say) is the lead's value, reported with the leader.
   */
  campaign(value?: string, options?: SignalOptions): Promise<HeldLease>;
  campaign(options?: SignalOptions): Promise<HeldLease>;
  /** Changes the value of the lead this election's last campaign won; LeaseExpiredError once it is over, InvalidArgumentError if none won. */
  proclaim(value: string, options?: CallOptions): Promise<void>;
  /** The current leader, or null when nobody leads. */
  leader(options?: CallOptions): Promise<Leader | null>;
  /**
   * The leaders: the current one first (if any), then each new one as it is elected, once each, in
   * fence order, and the leader again when its value changes. Ends when options.signal aborts or the loop breaks; failures to reach the
   * coordinator are retried with the client's backoff, a refusal that will not change is thrown.
   */
  observe(options?: SignalOptions): AsyncIterableIterator<Leader>;
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
 * 'timeout', 'http_<status>', 'tls_certificate' (the server's certificate
 * cannot be verified or is not for its host; sent once, not retried).
 */
export class LeaseServiceError extends LeaseFenceError {
  constructor(message?: string, options?: { code?: string; status?: number; attempts?: number; cause?: unknown });
  readonly code: string;
  /** The answer's HTTP status; 0 when there was no answer. */
  readonly status: number;
  /** How many times the request was sent. */
  readonly attempts: number;
  /** Whether the same call may succeed later (5xx, 408, 429, no answer, timeout); another 4xx or 'tls_certificate' never will. */
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
  constructor(message?: string, options?: { resource?: string; holderId?: string; fence?: number; revoked?: boolean; cause?: unknown });
  readonly code: 'expired';
  readonly resource: string;
  readonly holderId: string;
  readonly fence: number;
  /** true when an operator revoked the lease, false otherwise. */
  readonly revoked: boolean;
}

/**
 * A held lease was lost: the coordinator refused a renewal (cause: that LeaseExpiredError), or no
 * renewal succeeded before the holder's deadline (cause: the last renewal's failure, if any).
 */
export class LeaseLostError extends LeaseFenceError {
  constructor(message?: string, options?: { resource?: string; holderId?: string; fence?: number; deadline?: Instant; cause?: unknown });
  readonly code: 'lease_lost';
  readonly resource: string;
  readonly holderId: string;
  readonly fence: number;
  /** The holder's deadline of the last lease it had: the work had to stop by then. null if not given. */
  readonly deadline: Instant | null;
}

/** A held lease was revoked by an operator (its renewal was answered "revoked"): a LeaseLostError, the signal's reason. */
export class LeaseRevokedError extends LeaseLostError {}

/** The reason a HeldLease's signal aborts with when release() ended the hold. */
export class LeaseReleasedError extends LeaseFenceError {
  constructor(message?: string, options?: { resource?: string; holderId?: string; fence?: number; cause?: unknown });
  readonly code: 'released';
  readonly resource: string;
  readonly holderId: string;
  readonly fence: number;
}

/**
 * Whether err is or holds a LeaseLostError: itself, an AggregateError's errors, a SuppressedError's
 * error or suppressed, or a cause, at any depth.
 */
export function isLeaseLost(err: unknown): boolean;

// The Lease-Fence header of fence-proxy (docs/fencing.md).
export { LEASE_FENCE_HEADER, MAX_HEADER_FENCE, isStaleFence, leaseFenceHeader, staleFenceError } from './fence-header.js';
