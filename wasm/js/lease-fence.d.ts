// Types for lease-fence.mjs: leases whose holders can be proven wrong.
//
// `lease-fence` loads its WebAssembly once, at import (top-level await);
// `lease-fence/init` has the same exports but loads nothing until `init` is
// called. Every function and method below except `init` is synchronous. It
// works in Node 20+, Deno, Bun, Cloudflare Workers and browsers that support
// top-level await in modules and WebAssembly (serve lease-fence.wasm as
// application/wasm for streaming compilation; other content types fall back
// to compiling from the bytes). docs/js.md has the table of hosts and bundlers.
//
// Every function checks its arguments and throws InvalidArgumentError for
// wrong types or values, leaving all state unchanged.

/** A clock reading: milliseconds since the clock's origin, and the clock's domain. */
export interface InstantLike {
  readonly millis: number;
  readonly domain: string;
}

/**
 * A reading of a clock. JSON turns it into a plain
 * `{ millis, domain }` object, which every function accepts as well.
 */
export interface Instant extends InstantLike {
  /** `this.millis - earlier.millis`; throws ClockDomainError if the domains differ. */
  since(earlier: InstantLike): number;
  toString(): string;
}

/** A source of instants in one domain. */
export interface Clock {
  readonly domain: string;
  /** Throws ClockReadingError if the source gave NaN, an infinite or a backwards reading. */
  now(): Instant;
}

/** A deterministic clock for tests, simulations and the playground. */
export interface ManualClock extends Clock {
  /** Moves forward by `ms` (finite, >= 0). */
  advance(ms: number): void;
  /** Moves to `ms`; moving backwards throws ClockReadingError and changes nothing. */
  set(ms: number): void;
}

export interface ManualClockOptions {
  /** The first reading; 0 by default. */
  start?: number | undefined;
  /** How far every read moves the clock forward; 0 by default. */
  stepPerRead?: number | undefined;
}

/** A clock backed by the host's monotonic clock; readings start near 0. */
export function createMonotonicClock(domain: string): Clock;
/** A clock that moves only by advance and set, and by stepPerRead on every read. */
export function createManualClock(domain: string, options?: ManualClockOptions): ManualClock;
/**
 * Wraps any millisecond source (`() => Date.now()`, `() => performance.now()`)
 * with the guard: a NaN, infinite or lower-than-before reading throws
 * ClockReadingError. An exception thrown by readMillis reaches the caller
 * unchanged.
 */
export function createClock(domain: string, readMillis: () => number): Clock;

/**
 * What a holder presents with every write. resource and holderId are at most
 * 1024 bytes of UTF-8 each (the wire protocol's bound); a longer one is an
 * InvalidArgumentError.
 */
export interface FenceToken {
  readonly resource: string;
  readonly holderId: string;
  readonly fence: number;
}

/** A client's request: plain, JSON-safe data. A request completes once. */
export interface LeaseRequest {
  kind: 'acquire' | 'renew';
  requestId: string;
  resource: string;
  holderId: string;
  /** The client's reading when the request was made, in the client's domain. */
  sentAt: InstantLike;
  /** The fence being renewed; present on renewals only. */
  fence?: number;
}

/** The coordinator's grant: plain, JSON-safe data. */
export interface Grant {
  requestId: string;
  resource: string;
  holderId: string;
  fence: number;
  ttlMillis: number;
  /** For logs only: it is in the coordinator's domain, so measuring against it throws. */
  coordinatorExpiresAt: InstantLike;
}

export interface Granted {
  ok: true;
  grant: Grant;
}

export interface Denied {
  ok: false;
  /** Who holds the resource. */
  heldBy: string;
  /** How long that lease has left, by the coordinator's clock. */
  retryAfterMillis: number;
}

export interface RenewalExpired {
  ok: false;
  reason: 'expired';
}

export type AcquireOutcome = Granted | Denied;
export type RenewOutcome = Granted | RenewalExpired;

export interface LeaseCoordinatorOptions {
  clock: Clock;
  /** Lease length, from the moment the coordinator processes a request. */
  ttlMillis: number;
  /** The last fence already issued (a persisted issuedFence); the next is startFence + 1. */
  startFence?: number | undefined;
}

/** Grants, renews and releases leases, each with a strictly increasing fence. State is in memory only. */
export class LeaseCoordinator {
  constructor(options: LeaseCoordinatorOptions);
  readonly clock: Clock;
  readonly ttlMillis: number;
  /** The highest fence issued so far; persist it and pass it back as startFence. */
  readonly issuedFence: number;
  /**
   * Grants a free resource with a new fence; denies a held one (even to its
   * holder); answers a retried requestId with its existing grant while that
   * lease is current.
   */
  acquire(request: LeaseRequest): AcquireOutcome;
  /** Extends the current lease, keeping its fence; an expired lease is never resurrected. */
  renew(request: LeaseRequest): RenewOutcome;
  /** Ends the lease the token names if it is current; returns whether it did. */
  release(token: FenceToken): boolean;
}

export interface LeaseClientOptions {
  clock: Clock;
  holderId: string;
  /** Subtracted from every deadline: an assumption about drift, not a measurement. 0 by default. */
  clockSkewMillis?: number | undefined;
}

/** A grant as its holder sees it. */
export interface Lease {
  readonly token: FenceToken;
  /** `request.sentAt + grant.ttlMillis - clockSkewMillis`, in the client's domain. */
  readonly deadline: Instant;
  readonly grant: Grant;
  /** Advisory, true only for the instant it is called: never branch a write on it. */
  hasExpired(): boolean;
  /** Advisory, true only for the instant it is called: never branch a write on it. */
  wouldAdmit(gate: FenceGate): boolean;
}

/** The holder's side: stamps the send instant and turns grants into leases. */
export class LeaseClient {
  constructor(options: LeaseClientOptions);
  readonly clock: Clock;
  readonly holderId: string;
  /** Call immediately before sending: the request carries the send instant. */
  beginAcquire(resource: string): LeaseRequest;
  /** Throws RequestCompletedError the second time, GrantMismatchError for someone else's grant. */
  completeAcquire(request: LeaseRequest, grant: Grant): Lease;
  beginRenewal(lease: Lease): LeaseRequest;
  completeRenewal(request: LeaseRequest, grant: Grant): Lease;
}

/** One refusal in a gate's log: the only evidence that two holders overlapped. */
export interface Rejection {
  /** 1 for the gate's first refusal, then 2, 3, ... */
  readonly seq: number;
  readonly resource: string;
  readonly refusedHolderId: string;
  readonly refusedFence: number;
  /** Holder of the floor, or null if the floor came from initialFloor. */
  readonly admittedHolderId: string | null;
  readonly admittedFence: number;
}

export interface FenceGateOptions {
  /** A persisted floor, so a restarted resource keeps refusing superseded fences. */
  initialFloor?: number | undefined;
  /**
   * How many of the most recent refusals `rejections` keeps: 1 to 1,048,576;
   * absent or 0 means 1,000. Older entries are dropped; `rejectionCount`
   * keeps counting all of them.
   */
  maxRejections?: number | undefined;
  /**
   * Run commitAsync writes one at a time whatever their fences. By default
   * writes with the fence of the running ones start alongside them when
   * nothing waits, and a higher fence waits for all of them.
   */
  exclusive?: boolean | undefined;
}

/**
 * The part of an `AbortSignal` that commitAsync uses; any AbortSignal (DOM,
 * Node, Deno, Workers) fits.
 */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason?: any;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

export interface CommitAsyncOptions {
  /**
   * Cancels the commit while it waits for its turn: the promise rejects
   * with a GateBusyError naming the running write (its holder, fence and
   * how long it has run), whose cause is `signal.reason`; fn never runs,
   * nothing is logged and the floor does not move. An already-aborted
   * signal rejects at once with `signal.reason`. A write that has started is
   * not interrupted by this signal.
   */
  signal?: AbortSignalLike | undefined;
}

/**
 * The signal a commitAsync write's fn receives: the host's AbortSignal
 * (DOM, Node, Deno, Workers). Pass it to the write's own I/O (fetch, a
 * database driver). It aborts, with a SupersededError as its reason, as
 * soon as a newer fence reaches the gate while the write runs.
 */
export type WriteSignal = typeof globalThis extends { AbortSignal: { prototype: infer S } } ? S : AbortSignalLike;

/**
 * A callback for the synchronous gate.commit: any function whose result is
 * not a promise or other thenable. For an async write use commitAsync.
 */
export type SyncWrite<T> = (() => T) & (T extends PromiseLike<unknown> ? never : unknown);

/** Stands in front of one resource and admits a write only if its fence is not below the floor. */
export class FenceGate {
  constructor(resource: string, options?: FenceGateOptions);
  readonly resource: string;
  /** The highest fence admitted so far, or the initial floor. */
  readonly floor: number;
  /**
   * A copy of the most recent refusals (at most maxRejections), oldest
   * first; their seq numbers tell how many older ones were dropped. Costs
   * O(maxRejections), however many refusals there have been.
   */
  readonly rejections: Rejection[];
  /** How many refusals the gate has made, including those `rejections` no longer keeps. */
  readonly rejectionCount: number;
  /**
   * Checks the token and raises the floor, then runs fn and returns what it
   * returns. A stale token throws StaleFenceError and fn does not run. If fn
   * throws, the exception reaches the caller unchanged and the floor stays
   * raised. Inside fn, a commit with an older fence is refused; one with the
   * same or a newer fence runs.
   *
   * For synchronous writes only. An `async function` is refused with
   * InvalidArgumentError before anything happens (use commitAsync). A plain
   * function that returns a thenable anyway keeps the gate busy until it
   * settles, and commit then returns a promise that settles as the thenable
   * does once the gate is free. While a write is still running (such a
   * thenable, or a commitAsync write), commit throws a LeaseFenceError and
   * fn does not run.
   */
  commit<T>(token: FenceToken, fn: SyncWrite<T>): T;
  /**
   * Runs an async write under the gate; always returns a promise. A write
   * with the fence of the running commitAsync writes starts alongside them
   * when nothing waits; any other waits until the running writes' promises
   * settle and the writes queued before it have had their turn, and the
   * writes with its fence queued right behind it start with it (the gate's
   * exclusive option: one at a time).
   * The token is checked when its turn comes, so a token that went stale
   * while it waited is refused (one already below the floor is refused at
   * once): the promise rejects with StaleFenceError (logged in rejections),
   * never a synchronous throw. The floor is raised
   * before fn runs and stays raised if fn throws or its promise rejects; the
   * promise settles with fn's value or error. Bad arguments reject at once.
   *
   * fn is called with a WriteSignal that aborts, with a SupersededError, as soon as a newer
   * fence reaches the gate while the write runs: admit raises the floor past
   * it, or a commitAsync with a higher fence starts waiting for it (or
   * already waited when this write got its turn). Never for an equal fence,
   * never after the write's promise settled. The gate still waits for the
   * write to finish.
   */
  commitAsync<T>(token: FenceToken, fn: (signal: WriteSignal) => T | PromiseLike<T>, options?: CommitAsyncOptions): Promise<T>;
  /**
   * Raises the floor to token's fence without writing (a coordinator pushing
   * a reassignment). It never waits: while a write runs it raises the floor
   * at once; the running write finishes, and waiting writes below the new
   * floor are refused when their turn comes. A token below the floor throws
   * StaleFenceError and is logged.
   */
  admit(token: FenceToken): void;
}

/**
 * THE LEASE THAT FAILS, kept for demonstrations: `now < expiresAt` checked
 * before a write and `expiresAt = now + ttl` on renewal. Never guard anything
 * with it.
 */
export interface NaiveLease {
  /** now < expiresAt: true when evaluated, meaningless by the time a write lands. */
  valid(): boolean;
  /** expiresAt = now + ttl, dated from when the reply arrived. */
  renewed(): void;
  readonly expiresAt: Instant;
}

/** Starts a naive lease on clock; for showing the failure only. */
export function createNaiveLease(clock: Clock, ttlMillis: number): NaiveLease;

/** Options every error class takes: Error's, plus the class's own fields. */
export interface LeaseFenceErrorOptions {
  cause?: unknown;
}

/** Base class of every error the library throws. */
export class LeaseFenceError extends Error {
  constructor(message?: string, options?: LeaseFenceErrorOptions);
}

export interface InvalidArgumentErrorOptions extends LeaseFenceErrorOptions {
  argument?: string | undefined;
}

/** A wrong argument type or value; nothing changed. */
export class InvalidArgumentError extends LeaseFenceError {
  /** `argument` may be given as a string in place of the options. */
  constructor(message?: string, options?: InvalidArgumentErrorOptions | string);
  /** The argument's path, e.g. "request.sentAt.millis"; '' when not given. */
  readonly argument: string;
}

// The library's own errors always carry their fields; a caller constructing
// one (to rethrow, or in a test double) passes them in the options.

/** A gate refused a token below its floor; the refusal is in gate.rejections. */
export class StaleFenceError extends LeaseFenceError {
  constructor(message: string, options: LeaseFenceErrorOptions & { rejection: Rejection });
  readonly rejection: Rejection;
}

/**
 * Whether err is a gate's refusal of a stale fence (a StaleFenceError),
 * however deeply it is wrapped: through `cause` chains and the `errors` of an
 * AggregateError. Plain JavaScript: it needs no WebAssembly. Also exported
 * from lease-fence/sql, lease-fence/redis and lease-fence/service-client.
 */
export function isStaleFence(err: unknown): boolean;

/** Instants from two clock domains were compared or subtracted. */
export class ClockDomainError extends LeaseFenceError {
  constructor(message: string, options: LeaseFenceErrorOptions & { expectedDomain: string; actualDomain: string });
  readonly expectedDomain: string;
  readonly actualDomain: string;
}

/** A clock source gave a NaN, infinite or backwards reading. */
export class ClockReadingError extends LeaseFenceError {
  constructor(message: string, options: LeaseFenceErrorOptions & {
    domain: string;
    problem: 'not a number' | 'infinite' | 'lower than an earlier reading';
    value: number;
    previous: number;
  });
  readonly domain: string;
  readonly problem: 'not a number' | 'infinite' | 'lower than an earlier reading';
  readonly value: number;
  readonly previous: number;
}

/**
 * The reason a commitAsync write's signal aborted: a newer fence reached the
 * gate while the write ran. The write's lease was superseded; it should stop.
 */
export class SupersededError extends LeaseFenceError {
  constructor(message: string, options: LeaseFenceErrorOptions & {
    resource: string;
    holderId: string;
    fence: number;
    newerHolderId: string;
    newerFence: number;
    newerWaiting: boolean;
  });
  readonly resource: string;
  /** The running write's holder. */
  readonly holderId: string;
  /** The running write's fence. */
  readonly fence: number;
  readonly newerHolderId: string;
  readonly newerFence: number;
  /** True when a write with the newer fence waits for this one; false when gate.admit admitted it. */
  readonly newerWaiting: boolean;
}

/**
 * A commitAsync gave up waiting for its turn (its signal aborted); names the
 * write it waited for. The cause is the signal's reason.
 */
export class GateBusyError extends LeaseFenceError {
  constructor(message: string, options: LeaseFenceErrorOptions & {
    resource: string;
    holderId: string;
    fence: number;
    runningHolderId: string;
    runningFence: number;
    runningMillis: number;
  });
  readonly resource: string;
  /** The write that gave up. */
  readonly holderId: string;
  readonly fence: number;
  /** The write that held the gate. */
  readonly runningHolderId: string;
  readonly runningFence: number;
  /**
   * How long it had run, in whole milliseconds: from its start if it got the
   * gate from the queue, otherwise (it found the gate free, and the gate
   * reads no clock then) from when the first write queued behind it.
   */
  readonly runningMillis: number;
}

/** A request was completed a second time. */
export class RequestCompletedError extends LeaseFenceError {
  constructor(message: string, options: LeaseFenceErrorOptions & { requestId: string });
  readonly requestId: string;
}

/** A grant does not answer the request it was completed with. */
export class GrantMismatchError extends LeaseFenceError {
  constructor(message: string, options: LeaseFenceErrorOptions & {
    field: 'requestId' | 'resource' | 'holderId' | 'fence';
    expected: string;
    actual: string;
  });
  readonly field: 'requestId' | 'resource' | 'holderId' | 'fence';
  readonly expected: string;
  readonly actual: string;
}

/**
 * The host's compiled WebAssembly module type (`WebAssembly.Module`), found
 * through `globalThis` so that these types compile without the DOM lib (a
 * Node-only `lib: es2022` with `types: node`, which has no WebAssembly
 * namespace); `never` where the host declares none.
 */
export type WasmModule = typeof globalThis extends { WebAssembly: { Module: abstract new (...args: never) => infer M } } ? M : never;

/** The host's fetch `Response` type, found the same way. */
export type WasmResponse = typeof globalThis extends { Response: { prototype: infer R } } ? R : never;

/**
 * The WebAssembly module, as `init` accepts it: a URL (or URL string; file:
 * URLs are read from disk in Node, Deno and Bun), a fetch `Response`, the
 * bytes, an already compiled `WebAssembly.Module`, or a promise of one of
 * these. The package exports the file as `lease-fence/lease-fence.wasm`.
 */
export type WasmSource =
  | URL
  | string
  | WasmResponse
  | ArrayBuffer
  | ArrayBufferView
  | WasmModule
  | PromiseLike<URL | string | WasmResponse | ArrayBuffer | ArrayBufferView | WasmModule>;

/**
 * Starts the WebAssembly instance from `source` and resolves once the library
 * is ready. With `lease-fence/init`, call it before anything else (calls
 * before it throw LeaseFenceError); `lease-fence` has already called it.
 * While an instance is running it does nothing. After the instance died (it
 * ran out of memory, or trapped), it starts a fresh one from `source` or else
 * from the module compiled before; objects made by the dead instance keep
 * throwing. Without `source`, and nothing compiled yet, it loads
 * lease-fence.wasm from beside the module. A `source` of the wrong type
 * rejects with InvalidArgumentError, a failed load with LeaseFenceError.
 */
export function init(source?: WasmSource): Promise<void>;
