// lease-fence/service-client: a client for the coordinator service (the
// native coordinator or the Cloudflare Worker, docs/service.md) over fetch.
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

// The package's own entry, by name: the host's export condition picks it
// (node, workerd, browser), so this module shares the one instance and the
// one set of classes with the caller's `import … from 'lease-fence'`, and
// loads the wasm the way that entry does.
import { createMonotonicClock, InvalidArgumentError, LeaseClient, LeaseFenceError } from 'lease-fence';

// ---------------------------------------------------------------- protocol

/**
 * The body of an acquisition: the request begun for it and the secret the
 * client chose for it. The coordinator keeps only the secret's hash and
 * never sends it back; renew and release present it again.
 */
function acquireBody(request, secret, value) {
  const body = {
    requestId: request.requestId,
    resource: request.resource,
    holderId: request.holderId,
    sentAt: { millis: request.sentAt.millis, domain: request.sentAt.domain },
    kind: 'acquire',
    secret,
  };
  if (value !== undefined && value !== '') body.value = value;
  return body;
}

// MAX_VALUE_BYTES bounds a lease's value (wire.MaxValueBytes).
const MAX_VALUE_BYTES = 4096;

// checkValue refuses what cannot be a lease's value before anything is sent.
function checkValue(v, name) {
  if (typeof v !== 'string' || !v.isWellFormed() || new TextEncoder().encode(v).length > MAX_VALUE_BYTES) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be a well-formed string of at most ${MAX_VALUE_BYTES} bytes of UTF-8`, name);
  }
  return v;
}

// ---------------------------------------------------------------- errors

function named(cls, name) {
  Object.defineProperty(cls.prototype, 'name', { value: name, writable: true, configurable: true });
  return cls;
}

// Every class takes (message, options), as the library's errors do: options
// is Error's ({ cause }) plus the class's own fields.

function errorOptions(options) {
  return typeof options === 'object' && options !== null && 'cause' in options ? { cause: options.cause } : undefined;
}

function field(options, key, otherwise) {
  return typeof options === 'object' && options !== null && options[key] !== undefined ? options[key] : otherwise;
}

/**
 * The coordinator refused a call, or answered in no usable way. `code` is the
 * service's stable error code (docs/service.md) or one of the client's own:
 * 'no_answer', 'bad_reply', 'timeout', 'http_<status>', 'tls_certificate'
 * (the server's certificate cannot be verified or is not for its host: not
 * retried).
 */
export class LeaseServiceError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = String(field(options, 'code', ''));
    /** The HTTP status of the answer, or 0 when there was none. */
    this.status = field(options, 'status', 0);
    /** How many times the request was sent. */
    this.attempts = field(options, 'attempts', 0);
  }

  /**
   * Whether the same call may succeed later: a 5xx, 408, 429, no answer, or
   * a timeout. Another 4xx never will, nor a certificate that cannot be
   * verified.
   */
  get retryable() {
    if (this.code === 'tls_certificate') return false;
    return this.status === 0 || this.status >= 500 || this.status === 408 || this.status === 429;
  }
}
named(LeaseServiceError, 'LeaseServiceError');

// leaseFields sets the lease's resource, holderId and fence on an error
// about one lease (expired, lost, released) from its options.
function leaseFields(e, options) {
  e.resource = field(options, 'resource', '');
  e.holderId = field(options, 'holderId', '');
  e.fence = field(options, 'fence', 0);
}

/** An acquisition was denied: the resource is held by a live lease (the caller's own included). */
export class LeaseDeniedError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'denied';
    this.resource = field(options, 'resource', '');
    this.heldBy = field(options, 'heldBy', '');
    /** How long that lease has left, by the coordinator's clock. */
    this.retryAfterMillis = field(options, 'retryAfterMillis', 0);
  }
}
named(LeaseDeniedError, 'LeaseDeniedError');

/**
 * A renewal or release found the lease no longer current: it ran out, was
 * released or was reassigned; `revoked` is true when an operator revoked it
 * (POST /v1/revoke), false otherwise.
 */
export class LeaseExpiredError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'expired';
    leaseFields(this, options);
    this.revoked = field(options, 'revoked', false) === true;
  }
}
named(LeaseExpiredError, 'LeaseExpiredError');

/**
 * A held lease was lost: the coordinator refused a renewal (the lease is
 * over there; `cause` is that LeaseExpiredError), or no renewal succeeded
 * before the holder's deadline (`cause` is the last renewal's failure, if
 * one failed). The reason of a HeldLease's signal, and part of what
 * withLease rejects with when the lease was lost while its callback ran.
 */
export class LeaseLostError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'lease_lost';
    leaseFields(this, options);
    /** The holder's deadline of the last lease it had (its clock's domain): the work had to stop by then. */
    this.deadline = field(options, 'deadline', null);
  }
}
named(LeaseLostError, 'LeaseLostError');

/**
 * A held lease was revoked by an operator (POST /v1/revoke): its renewal
 * was answered "revoked". A LeaseLostError (its code too, 'lease_lost';
 * isLeaseLost is true); the reason of the HeldLease's signal.
 */
export class LeaseRevokedError extends LeaseLostError {}
named(LeaseRevokedError, 'LeaseRevokedError');

/** The reason of a HeldLease's signal once release() ended the hold. */
export class LeaseReleasedError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'released';
    leaseFields(this, options);
  }
}
named(LeaseReleasedError, 'LeaseReleasedError');

/**
 * Whether err is, or holds, a LeaseLostError: err itself, an
 * AggregateError's errors (what withLease rejects with when the callback
 * failed and the lease was lost), a SuppressedError's error and suppressed
 * (`await using`), or a cause, to any depth (as Go's errors.Is(err,
 * client.ErrLeaseLost)).
 */
export function isLeaseLost(err) {
  const seen = new Set();
  const walk = (e) => {
    if (typeof e !== 'object' || e === null || seen.has(e)) return false;
    seen.add(e);
    if (e instanceof LeaseLostError) return true;
    if (e instanceof AggregateError && Array.isArray(e.errors) && e.errors.some(walk)) return true;
    if (typeof SuppressedError === 'function' && e instanceof SuppressedError && (walk(e.error) || walk(e.suppressed))) return true;
    return 'cause' in e && walk(e.cause);
  };
  return walk(err);
}

// ---------------------------------------------------------------- helpers

const MAX_REPLY_BYTES = 1 << 20;
const MAX_ATTEMPTS = 100;
const MAX_BASE_URLS = 64;

// Codes answered with a 5xx or a 429 that sending the same call again at once
// will not change: the coordinator (or the token's share of it) is full
// until some lease or wait ends.
const FINAL_CODES = new Set(['too_many_leases', 'too_many_token_leases', 'too_many_token_waiters']);

// Statuses worth sending the same call again for, besides 5xx: the server
// timed the request out, or asks for fewer requests. Every other 4xx is
// final: the same call will be refused the same way.
const RETRIED_4XX = new Set([408, 429]);

// The error codes (Node's, on the cause of fetch's TypeError, or on the
// error of node:https) of a TLS certificate that cannot be verified or does
// not name the host: a setting to fix, not a failure to retry. Browsers give
// no such detail (a failed handshake is a network error there, retried).
const CERTIFICATE_CODES = new Set([
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_CRL', 'UNABLE_TO_DECRYPT_CERT_SIGNATURE', 'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY', 'CERT_SIGNATURE_FAILURE', 'CRL_SIGNATURE_FAILURE', 'CERT_NOT_YET_VALID', 'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID', 'CRL_HAS_EXPIRED', 'ERROR_IN_CERT_NOT_BEFORE_FIELD', 'ERROR_IN_CERT_NOT_AFTER_FIELD', 'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'CERT_CHAIN_TOO_LONG', 'CERT_REVOKED',
  'INVALID_CA', 'PATH_LENGTH_EXCEEDED', 'INVALID_PURPOSE', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_TLS_CERT_ALTNAME_FORMAT',
]);
const NAME_MISMATCH_CODES = new Set(['HOSTNAME_MISMATCH', 'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_TLS_CERT_ALTNAME_FORMAT']);

function defaultBackoff(n) {
  return Math.min(25 * 2 ** (n - 2), 1000);
}

function randomBytes(n) {
  const b = new Uint8Array(n);
  globalThis.crypto.getRandomValues(b);
  return b;
}

function base64url(bytes) {
  let s = '';
  for (const c of bytes) s += String.fromCharCode(c);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function hex(bytes) {
  let s = '';
  for (const c of bytes) s += c.toString(16).padStart(2, '0');
  return s;
}

function positive(v, name, { integer = false, max = Infinity } = {}) {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > max || (integer && !Number.isInteger(v))) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be a ${integer ? 'whole' : 'finite'} number above 0${max < Infinity ? ` and at most ${max}` : ''}`, name);
  }
  return v;
}

// checkOptions refuses an own enumerable property of options that is not one
// of names: a misspelt option (or one this version does not have) is an
// error, not a silent default. Only the keys are read.
function checkOptions(options, names, what) {
  for (const k in options) {
    if (!names.includes(k) && Object.hasOwn(options, k)) {
      throw new InvalidArgumentError(`lease-fence: ${what} has no option ${JSON.stringify(k)}; its options are ${names.join(', ')}`, `options.${k}`);
    }
  }
}

const CLIENT_OPTIONS = ['baseURL', 'baseURLs', 'leaseClient', 'holderId', 'clock', 'clockSkewMillis', 'fetch', 'attempts', 'attemptTimeoutMillis', 'timeoutMillis', 'backoff', 'token',
  'maxWaitMillis', 'timers'];
const CALL_OPTIONS = ['signal', 'timeoutMillis'];
const HOLD_OPTIONS = ['waitMillis', 'signal', 'renewEveryMillis', 'value'];
const INSPECT_OPTIONS = ['signal', 'timeoutMillis', 'afterFence', 'waitMillis', 'afterValue'];
const REVOKE_OPTIONS = ['signal', 'timeoutMillis', 'holderId', 'fence'];
const ELECTION_OPTIONS = ['renewEveryMillis'];
const CAMPAIGN_OPTIONS = ['signal'];
const OBSERVE_OPTIONS = ['signal'];

// The longest wait one call may ask for (the protocol's bound), and the
// default: hold and observe wait longer as several calls.
const MAX_WAIT_MILLIS = 2 ** 31;
const DEFAULT_MAX_WAIT_MILLIS = 30_000;
const MAX_FENCE = Number.MAX_SAFE_INTEGER;

// setTimeout's longest delay; a timer due later is set again when it fires.
const MAX_TIMER_MILLIS = 2 ** 31 - 1;
// A failed renewal is tried again after a quarter of the lesser of the
// renewal interval and the time left, and never sooner than this.
const MIN_RETRY_MILLIS = 10;
// A hold counts its lease lost LOSS_MARGIN before the holder's deadline
// (lossMargin: 5 % of the TTL, at most 250 ms, at least 1 ms), so that a
// loss timer that fires late (by up to that margin) still aborts the signal
// before the deadline. The timer is set for that instant, and the lease
// counts as lost when its firing finds the margin plus DEADLINE_EARLY_MILLIS
// or less left: a host's timer may fire up to a millisecond before its delay
// has passed by the holder's clock, and delays are whole milliseconds.
const LOSS_MARGIN_FRACTION = 0.05;
const MAX_LOSS_MARGIN_MILLIS = 250;
const DEADLINE_EARLY_MILLIS = 1;
// An attempt of a call with an end (a renewal: the holder's deadline; the
// release a hold sends when it ends without release(): ENDING_RELEASE_MILLIS
// after the end) waits for its answer at most this fraction of the time left
// to that end, so that one lost answer still leaves time for another
// attempt; never less than MIN_RETRY_MILLIS.
const ATTEMPT_FRACTION = 0.5;
// How long the release a hold sends itself when the lease was lost (or the
// hold's signal ended it) may take, retries included.
const ENDING_RELEASE_MILLIS = 2000;

function lossMargin(ttlMillis) {
  return Math.max(DEADLINE_EARLY_MILLIS, Math.min(ttlMillis * LOSS_MARGIN_FRACTION, MAX_LOSS_MARGIN_MILLIS));
}

// durationText says ms as "12 ms", "3.4 ms" or "2.35 s".
function durationText(ms) {
  const a = Math.abs(ms);
  if (a >= 10_000) return `${(ms / 1000).toFixed(1)} s`;
  if (a >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (a >= 10) return `${Math.round(ms)} ms`;
  return `${ms.toFixed(1)} ms`;
}

const defaultTimers = Object.freeze({
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle),
});

function isOptions(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function checkSignal(signal, name) {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be an AbortSignal`, name);
  }
  return signal;
}

function callOptions(options, what) {
  if (options === undefined) return {};
  if (!isOptions(options)) {
    throw new InvalidArgumentError('lease-fence: call options must be an object', 'options');
  }
  if (what === 'client.acquire' && Object.hasOwn(options, 'waitMillis')) {
    throw new InvalidArgumentError('lease-fence: client.acquire has no option "waitMillis": it never waits; client.hold waits for a held resource (and keeps the lease alive)', 'options.waitMillis');
  }
  checkOptions(options, CALL_OPTIONS, what);
  const { signal, timeoutMillis } = options;
  checkSignal(signal, 'options.signal');
  if (timeoutMillis !== undefined) positive(timeoutMillis, 'options.timeoutMillis');
  return { signal, timeoutMillis };
}

// wholeMillis checks a count of milliseconds from 0 to max (Infinity
// allowed when infinite is set).
function wholeMillis(v, name, max, infinite = false) {
  if (infinite && v === Infinity) return v;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be a whole number of milliseconds from 0 to ${max}${infinite ? ', or Infinity' : ''}`, name);
  }
  return v;
}

// sleep waits ms on timers or until signal aborts, whichever is first.
function sleep(timers, ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      timers.clearTimeout(t);
      reject(signal.reason);
    };
    const t = timers.setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

// readBody reads at most MAX_REPLY_BYTES of res.
async function readBody(res) {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > MAX_REPLY_BYTES) {
      await reader.cancel().catch(() => {});
      throw new Error(`reply over ${MAX_REPLY_BYTES} bytes`);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

function short(s) {
  return JSON.stringify(s.length > 200 ? `${s.slice(0, 200)}…` : s);
}

// ---------------------------------------------------------------- client

const internal = Symbol('lease-fence service-client internal');
let leaseState; // (lease) => { client, record }; set in ServiceLease's static block
let clientTools; // (client) => { timers, clock, backoff, maxWait, renew, acquire, release }; set in LeaseServiceClient's static block
let heldOwnRelease; // (held) => the release a HeldLease sent itself, or undefined; set in HeldLease's static block

/**
 * A client of the coordinator service for one holder. Every method is async;
 * it is safe to use from concurrent tasks.
 */
export class LeaseServiceClient {
  #bases; // the coordinators' base URLs
  #cur = 0; // the index in #bases of the coordinator that answered last
  #lc;
  #fetch;
  #attempts;
  #attemptTimeout;
  #timeout;
  #backoff;
  #headers; // the headers of every request (the token's Authorization among them)
  #maxWait;
  #timers;
  // Acquisition record -> its secret. A lease holds its record, this map the
  // secret; a record whose lease ended is dropped from it.
  #secrets = new WeakMap();

  static {
    clientTools = (c) => ({
      timers: c.#timers, clock: c.#lc.clock, backoff: c.#backoff, maxWait: c.#maxWait, timeout: c.#timeout,
      renew: (lease, opts) => c.#renew(lease, opts),
      acquire: (resource, opts, waitMillis, value) => c.#acquire(resource, opts, waitMillis, value),
      release: (lease, opts) => c.#release(lease, opts),
    });
  }

  constructor(options) {
    if (!isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: LeaseServiceClient takes an options object', 'options');
    }
    checkOptions(options, CLIENT_OPTIONS, 'new LeaseServiceClient');
    const { baseURL, baseURLs, leaseClient, holderId, clock, clockSkewMillis, fetch: f, attemptTimeoutMillis = 5000, timeoutMillis, backoff = defaultBackoff, token,
      maxWaitMillis = DEFAULT_MAX_WAIT_MILLIS, timers = defaultTimers } = options;
    this.#bases = baseURLsOf(baseURL, baseURLs);
    const { attempts = Math.max(4, this.#bases.length + 1) } = options;
    if (leaseClient !== undefined) {
      if (holderId !== undefined || clock !== undefined || clockSkewMillis !== undefined) {
        throw new InvalidArgumentError('lease-fence: pass either options.leaseClient or holderId/clock/clockSkewMillis, not both', 'options.leaseClient');
      }
      if (!(leaseClient instanceof LeaseClient)) {
        throw new InvalidArgumentError('lease-fence: options.leaseClient must be a LeaseClient', 'options.leaseClient');
      }
      this.#lc = leaseClient;
    } else {
      if (typeof holderId !== 'string') {
        throw new InvalidArgumentError('lease-fence: options.holderId must be a string', 'options.holderId');
      }
      this.#lc = new LeaseClient({ clock: clock ?? createMonotonicClock(holderId), holderId, clockSkewMillis });
    }
    this.#fetch = f ?? globalThis.fetch;
    if (typeof this.#fetch !== 'function') {
      throw new InvalidArgumentError('lease-fence: options.fetch must be a function (this host has no global fetch)', 'options.fetch');
    }
    this.#attempts = positive(attempts, 'options.attempts', { integer: true, max: MAX_ATTEMPTS });
    this.#attemptTimeout = positive(attemptTimeoutMillis, 'options.attemptTimeoutMillis');
    if (timeoutMillis !== undefined) positive(timeoutMillis, 'options.timeoutMillis');
    this.#timeout = timeoutMillis;
    if (typeof backoff !== 'function') {
      throw new InvalidArgumentError('lease-fence: options.backoff must be a function', 'options.backoff');
    }
    this.#backoff = backoff;
    this.#headers = { 'content-type': 'application/json' };
    if (token !== undefined) {
      // Visible ASCII: what a header value may carry without being mangled.
      if (typeof token !== 'string' || !/^[\x21-\x7e]+$/.test(token)) {
        throw new InvalidArgumentError('lease-fence: options.token must be a non-empty string of visible ASCII characters', 'options.token');
      }
      this.#headers.authorization = `Bearer ${token}`;
    }
    this.#maxWait = positive(maxWaitMillis, 'options.maxWaitMillis', { integer: true, max: MAX_WAIT_MILLIS });
    if (!isOptions(timers) || typeof timers.setTimeout !== 'function' || typeof timers.clearTimeout !== 'function') {
      throw new InvalidArgumentError('lease-fence: options.timers must be an object with setTimeout(fn, ms) and clearTimeout(handle)', 'options.timers');
    }
    this.#timers = timers;
  }

  /** The coordinator's base URL (the first of baseURLs), without a trailing slash. */
  get baseURL() {
    return this.#bases[0];
  }

  /** The coordinators' base URLs, in the order given, without trailing slashes. */
  get baseURLs() {
    return [...this.#bases];
  }

  /** The holder this client acquires for. */
  get holderId() {
    return this.#lc.holderId;
  }

  /** The LeaseClient that stamps requests and makes leases. */
  get leaseClient() {
    return this.#lc;
  }

  /**
   * Acquires resource. Resolves to a ServiceLease; rejects with
   * LeaseDeniedError when the resource is held, LeaseServiceError when the
   * coordinator refused or never answered, or the signal's reason.
   */
  async acquire(resource, options) {
    const opts = callOptions(options, 'client.acquire');
    return (await this.#acquire(resource, opts, 0)).lease;
  }

  // acquire acquires resource, waiting for it up to waitMillis (0: not at
  // all; Infinity: until the call's signal aborts) in calls of at most
  // maxWaitMillis each. Every call is the same acquisition (request id and
  // secret), so the coordinator keeps its place in the queue between them.
  // Resolves to { lease, sentAt } (sentAt: the request's send instant).
  async #acquire(resource, opts, waitMillis, value) {
    const request = this.#lc.beginAcquire(resource);
    const secret = base64url(randomBytes(32));
    const body = acquireBody(request, secret, value);
    for (;;) {
      let wait = 0;
      if (waitMillis > 0) {
        wait = this.#maxWait;
        if (waitMillis !== Infinity) wait = Math.min(wait, Math.floor(waitMillis - (this.#lc.clock.now().millis - request.sentAt.millis)));
        wait = Math.max(wait, 0);
      }
      const reply = await this.#send('acquire', wait > 0 ? { ...body, waitMillis: wait } : body, { ...opts, waitMillis: wait });
      if (reply.ok === true) {
        let core;
        try {
          core = this.#lc.completeAcquire(request, reply.grant);
        } catch (e) {
          // The LeaseClient no longer knows the request (it forgets the
          // oldest of more than 4,096 begun and never completed): the
          // grant cannot be made a lease anchored at its send. End it.
          const { resource: r, holderId, fence } = reply.grant;
          this.#send('release', { requestId: hex(randomBytes(16)), resource: r, holderId, fence, secret }, {}).catch(() => {});
          throw e;
        }
        const record = { ended: false };
        this.#secrets.set(record, secret);
        return { lease: new ServiceLease(internal, this, record, core), sentAt: request.sentAt.millis };
      }
      if (reply.reason === 'revoked') {
        throw new LeaseServiceError(`lease-fence: the wait for ${JSON.stringify(request.resource)} was ended by an operator's revoke (its place in the queue was removed)`,
          { code: 'revoked', status: 200, attempts: 1 });
      }
      if (wait === 0) {
        // parseReply admits a refused acquisition only with both fields.
        const { heldBy, retryAfterMillis } = reply;
        throw new LeaseDeniedError(`lease-fence: ${JSON.stringify(request.resource)} is held by ${JSON.stringify(heldBy)} for ${retryAfterMillis} ms more`,
          { resource: request.resource, heldBy, retryAfterMillis });
      }
    }
  }

  /**
   * Renews lease. Resolves to a new ServiceLease with the same fence and a
   * deadline anchored at this renewal's first send; rejects with
   * LeaseExpiredError when it is no longer the current lease.
   */
  async renew(lease, options) {
    const opts = callOptions(options, 'client.renew');
    return (await this.#renew(lease, opts)).lease;
  }

  // renew renews lease; resolves to { lease, sentAt }. With opts.until
  // (holder millis: a hold's loss), its attempts share the time left before
  // it, a fraction each (see #send); client.renew keeps attemptTimeoutMillis,
  // as the caller's own call with its own timeouts.
  async #renew(lease, opts) {
    const record = this.#record(lease, 'renew');
    const request = this.#lc.beginRenewal(lease.lease);
    const body = {
      requestId: request.requestId,
      resource: request.resource,
      holderId: request.holderId,
      sentAt: { millis: request.sentAt.millis, domain: request.sentAt.domain },
      kind: 'renew',
      fence: request.fence,
      secret: this.#secrets.get(record),
    };
    const reply = await this.#send('renew', body, opts);
    if (reply.ok !== true) {
      record.ended = true;
      this.#secrets.delete(record);
      throw expired(lease.token, 'renewal', reply.reason);
    }
    return { lease: new ServiceLease(internal, this, record, this.#lc.completeRenewal(request, reply.grant)), sentAt: request.sentAt.millis };
  }

  /**
   * Releases lease. Resolves when the coordinator ended it (or already had,
   * for a retry whose first answer was lost); rejects with LeaseExpiredError
   * when it was no longer the current lease.
   */
  async release(lease, options) {
    return this.#release(lease, callOptions(options, 'client.release'));
  }

  // release releases lease with the options of #send.
  async #release(lease, opts) {
    const record = this.#record(lease, 'release');
    const { resource, holderId, fence } = lease.token;
    const body = { requestId: hex(randomBytes(16)), resource, holderId, fence, secret: this.#secrets.get(record) };
    const reply = await this.#send('release', body, opts);
    record.ended = true;
    this.#secrets.delete(record);
    if (reply.ok !== true) throw expired(lease.token, 'release', reply.reason);
  }

  /**
   * Changes lease's value (at most 4096 bytes of UTF-8, not secret: an
   * election's leader's address, say). Resolves when the coordinator
   * changed it; rejects with LeaseExpiredError (revoked: true if an
   * operator revoked it) when it is no longer the current lease.
   */
  async proclaim(lease, value, options) {
    const opts = callOptions(options, 'client.proclaim');
    checkValue(value, 'value');
    const record = this.#record(lease, 'proclaim');
    const { resource, holderId, fence } = lease.token;
    const body = { requestId: hex(randomBytes(16)), resource, holderId, fence, secret: this.#secrets.get(record), value };
    const reply = await this.#send('proclaim', body, opts);
    if (reply.ok !== true) throw expired(lease.token, 'proclaim', reply.reason);
  }

  /**
   * Ends resource's live lease, or removes a waiter, on an operator's
   * order (POST /v1/revoke: a token with "admin": true, or a loopback
   * caller of a coordinator without -auth). options.holderId names the
   * holder (or the waiter to remove); options.fence ends only the lease
   * with that fence. Resolves to { holderId, fence } (the lease ended) or
   * { removedWaiter }; rejects with LeaseServiceError code 'not_held' when
   * there is nothing to revoke, 'forbidden' without the right to. Sent
   * again after a lost answer only with a fence (without one, a second
   * revoke could end the next holder's lease).
   */
  async revoke(resource, options) {
    if (options !== undefined && !isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: revoke options must be an object', 'options');
    }
    checkOptions(options ?? {}, REVOKE_OPTIONS, 'client.revoke');
    const { signal, timeoutMillis, holderId, fence } = options ?? {};
    checkSignal(signal, 'options.signal');
    if (timeoutMillis !== undefined) positive(timeoutMillis, 'options.timeoutMillis');
    checkResource(resource, 'resource');
    const body = { resource };
    if (holderId !== undefined) body.holderId = checkResource(holderId, 'options.holderId');
    if (fence !== undefined) {
      body.fence = wholeMillis(fence, 'options.fence', MAX_FENCE);
      if (body.fence === 0) throw new InvalidArgumentError('lease-fence: options.fence must be at least 1', 'options.fence');
    }
    const reply = await this.#send('revoke', body, { signal, timeoutMillis, attempts: fence === undefined ? 1 : undefined });
    return reply.revoked;
  }

  /**
   * Acquires resource and keeps the lease alive by renewing it until
   * release(), a loss, or options.signal; see HeldLease. Waits up to
   * options.waitMillis for a held resource (0, the default: a held
   * resource is LeaseDeniedError at once; Infinity: until the signal).
   */
  async hold(resource, options) {
    const opts = holdOptions(options, 'client.hold');
    return makeHold(this, resource, opts);
  }

  /**
   * Holds resource while fn(held) runs, and releases it when fn settles,
   * whatever it settles with. Resolves to fn's value; rejects with fn's
   * error, with the LeaseLostError if the lease was lost while fn ran, or
   * with an AggregateError of them (fn's error, the LeaseLostError, the
   * release's failure: those that happened, in that order) when more than
   * one did. fn's error is left out when it is the loss itself or has it as
   * its cause (an AbortError of the signal). isLeaseLost(err) tells whether
   * the lease was lost.
   */
  async withLease(resource, fn, options) {
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError('lease-fence: withLease takes a function (held) => ... as its second argument', 'fn');
    }
    const opts = holdOptions(options, 'client.withLease');
    const held = await makeHold(this, resource, opts);
    let value, error;
    let failed = false;
    try {
      value = await fn(held);
    } catch (e) {
      failed = true;
      error = e;
    }
    const reason = held.signal.reason;
    const lost = held.signal.aborted && reason instanceof LeaseLostError ? reason : undefined;
    let releaseError;
    try {
      // Ended by a loss or the caller's signal, the hold released the lease
      // itself, within ENDING_RELEASE_MILLIS: its outcome, not a new call.
      await (heldOwnRelease(held) ?? held.release());
    } catch (e) {
      // The caller's own signal ended the hold: its reason is not news.
      if (!(opts.signal?.aborted && e === opts.signal.reason)) releaseError = e;
    }
    const errors = [];
    // fn stopped because of the loss (it threw the signal's reason, or an
    // AbortError caused by it, as node:timers/promises and events.once
    // reject): the loss alone says it.
    const stoppedByLoss = failed && lost !== undefined && (error === lost || (typeof error === 'object' && error !== null && error.cause === lost));
    if (failed && !stoppedByLoss) errors.push(error);
    if (lost) errors.push(lost);
    if (releaseError !== undefined) errors.push(releaseError);
    if (errors.length === 0) return value;
    if (errors.length === 1) throw errors[0];
    const what = [failed && !stoppedByLoss && 'the callback failed', lost && 'the lease was lost while it ran', releaseError !== undefined && 'the release failed'].filter(Boolean);
    throw new AggregateError(errors, `lease-fence: withLease(${JSON.stringify(held.token.resource)}): ${what.join(', and ')}`);
  }

  /**
   * Who holds resource, changing nothing: { held: true, holderId, fence,
   * remainingMillis } or { held: false, lastFence }. With afterFence and
   * waitMillis, answers as soon as the current fence (the live lease's, 0
   * when none is live) differs from afterFence, or when the wait ends.
   */
  async inspect(resource, options) {
    if (options !== undefined && !isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: call options must be an object', 'options');
    }
    checkOptions(options ?? {}, INSPECT_OPTIONS, 'client.inspect');
    const { signal, timeoutMillis, afterFence, waitMillis, afterValue } = options ?? {};
    checkSignal(signal, 'options.signal');
    if (timeoutMillis !== undefined) positive(timeoutMillis, 'options.timeoutMillis');
    checkResource(resource, 'resource');
    const body = { resource };
    if (afterFence !== undefined) body.afterFence = wholeMillis(afterFence, 'options.afterFence', MAX_FENCE);
    if (afterValue !== undefined) {
      if (afterFence === undefined) {
        throw new InvalidArgumentError('lease-fence: options.afterValue needs options.afterFence: an inspection waits for the fence or the value to change', 'options.afterValue');
      }
      body.afterValue = checkValue(afterValue, 'options.afterValue');
    }
    if (waitMillis !== undefined) {
      if (afterFence === undefined) {
        throw new InvalidArgumentError('lease-fence: options.waitMillis needs options.afterFence: an inspection waits for the fence to change from it', 'options.waitMillis');
      }
      body.waitMillis = wholeMillis(waitMillis, 'options.waitMillis', MAX_WAIT_MILLIS);
    }
    const reply = await this.#send('inspect', body, { signal, timeoutMillis, waitMillis: body.waitMillis ?? 0 });
    return reply.status;
  }

  /** The election named name: campaign to lead it, see who leads, follow the leaders. */
  election(name, options) {
    if (options !== undefined && !isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: election options must be an object', 'options');
    }
    checkOptions(options ?? {}, ELECTION_OPTIONS, 'client.election');
    checkResource(name, 'name');
    const { renewEveryMillis } = options ?? {};
    if (renewEveryMillis !== undefined) positive(renewEveryMillis, 'options.renewEveryMillis');
    return new LeaseElection(internal, this, name, renewEveryMillis);
  }

  #record(lease, what) {
    const { client, record } = lease instanceof ServiceLease ? leaseState(lease) : {};
    if (client !== this) {
      throw new InvalidArgumentError(`lease-fence: ${what} takes a lease acquired through this LeaseServiceClient`, 'lease');
    }
    if (record.ended) throw expired(lease.token, what);
    return record;
  }

  // send posts body to /v1/<op> until it gets an answer, a refusal that will
  // not change, runs out of attempts, or the call ends (signal, timeout).
  // waitMillis is how long the coordinator may keep the call open: each
  // attempt gets that on top of attemptTimeoutMillis. until (holder millis)
  // is when the call's answer stops being of use: while it is ahead, an
  // attempt waits at most ATTEMPT_FRACTION of the time left to it.
  async #send(op, body, { signal, timeoutMillis = this.#timeout, waitMillis = 0, until, attempts = this.#attempts }) {
    const data = JSON.stringify(body);
    const k = this.#bases.length;
    const start = this.#cur;
    // call aborts when the caller's signal does or the call's time is up;
    // its reason is what the call rejects with.
    const call = new AbortController();
    const onAbort = () => call.abort(signal.reason);
    let n = 0; // attempts sent
    let last; // the failure of the last attempt
    let timer;
    if (signal) {
      if (signal.aborted) throw signal.reason;
      signal.addEventListener('abort', onAbort, { once: true });
    }
    if (timeoutMillis !== undefined) {
      timer = this.#timers.setTimeout(() => call.abort(new LeaseServiceError(`lease-fence: ${op} timed out after ${timeoutMillis} ms`, { code: 'timeout', attempts: n })),
        Math.min(timeoutMillis, MAX_TIMER_MILLIS));
    }
    try {
      while (n < attempts) {
        // Each attempt goes to the next coordinator; only one that returns
        // to a coordinator this call already tried waits for the backoff
        // (the pause of the back-th retry of a client with one URL).
        const back = n + 1 - k;
        if (back >= 1) {
          const pause = this.#backoff(back + 1);
          if (pause > 0) await sleep(this.#timers, pause, call.signal);
        }
        // The call may have ended between the pause's end and this
        // continuation (timers that fire together, an abort in a microtask).
        if (call.signal.aborted) throw call.signal.reason;
        const i = (start + n) % k;
        n++;
        const outcome = await this.#attempt(op, this.#bases[i], data, call.signal, n, this.#attemptLimit(waitMillis, until));
        if (call.signal.aborted) throw call.signal.reason;
        if (outcome.reply) {
          this.#cur = i;
          return outcome.reply;
        }
        if (outcome.final) throw outcome.final;
        last = outcome.error;
      }
    } catch (e) {
      throw call.signal.aborted ? call.signal.reason : e;
    } finally {
      if (timer !== undefined) this.#timers.clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', onAbort);
    }
    if (last instanceof LeaseServiceError) {
      last.attempts = n;
      throw last;
    }
    throw new LeaseServiceError(`lease-fence: ${op} got no answer after ${n} attempts`, { code: 'no_answer', attempts: n, cause: last });
  }

  // attemptLimit is how long the next attempt may wait for its answer.
  #attemptLimit(waitMillis, until) {
    const limit = this.#attemptTimeout + waitMillis;
    if (until === undefined) return limit;
    let left;
    try {
      left = until - this.#lc.clock.now().millis;
    } catch {
      return limit;
    }
    if (!(left > 0)) return limit;
    return Math.min(limit, Math.max(left * ATTEMPT_FRACTION, MIN_RETRY_MILLIS));
  }

  // attempt sends once to the coordinator at base. It returns { reply } for
  // an answer, { final } for a refusal or a failure not worth repeating, or
  // { error } for one that is.
  async #attempt(op, base, data, callSignal, n, limit) {
    const url = `${base}/v1/${op}`;
    const attempt = new AbortController();
    const onAbort = () => attempt.abort(callSignal.reason);
    callSignal.addEventListener('abort', onAbort, { once: true });
    const timer = this.#timers.setTimeout(() => attempt.abort(new Error(`attempt ${n} timed out after ${durationText(limit)}`)), Math.min(limit, MAX_TIMER_MILLIS));
    let status, text;
    try {
      // Called as a plain function: fetch invoked as a method of another
      // object throws "Illegal invocation" in browsers and Workers.
      const send = this.#fetch;
      const res = await send(url, {
        method: 'POST',
        headers: this.#headers,
        body: data,
        signal: attempt.signal,
        // A redirect would carry the body, secret included, elsewhere: it
        // is an answer like any other non-200 (final below 500).
        redirect: 'manual',
      });
      status = res.status;
      text = await readBody(res);
    } catch (e) {
      if (attempt.signal.aborted) return { error: attempt.signal.reason };
      const bad = certificateFailure(e);
      if (bad) {
        const what = NAME_MISMATCH_CODES.has(bad.code) ? 'is not for its host' : 'cannot be verified';
        return {
          final: new LeaseServiceError(`lease-fence: ${op}: the TLS certificate of ${base} ${what} (${bad.code}: ${bad.message}); not retried: ` +
            'trust its CA (in Node, NODE_EXTRA_CA_CERTS, or a fetch of your own: see docs/js.md) or use the name it was issued for', { code: 'tls_certificate', attempts: n, cause: e }),
        };
      }
      return { error: e };
    } finally {
      this.#timers.clearTimeout(timer);
      callSignal.removeEventListener('abort', onAbort);
    }
    if (status === 200) {
      const reply = parseReply(op, text);
      if (reply === undefined) {
        return { error: new LeaseServiceError(`lease-fence: ${op} got an unreadable answer`, { code: 'bad_reply', status, attempts: n }) };
      }
      return { reply };
    }
    const err = parseError(op, status, text, n);
    if ((status >= 500 || RETRIED_4XX.has(status)) && !FINAL_CODES.has(err.code)) return { error: err };
    return { final: err };
  }

  // ---- #27: list and watch ----

  /**
   * One page of the live leases under options.prefix (POST /v1/list), in
   * byte order of resource: { leases: [{ resource, holderId, fence,
   * remainingMillis, waiters, waiterIds?, value? }], cursor? }. Pass the
   * cursor back for the next page; the last page has none. A page may hold
   * fewer than options.limit (1 to 1000, default 1000) leases, even none,
   * and still have a cursor. A Worker answers not_supported.
   */
  async listPage(options) {
    if (options !== undefined && !isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: list options must be an object', 'options');
    }
    checkOptions(options ?? {}, LIST_OPTIONS, 'client.listPage');
    const { signal, timeoutMillis, prefix, cursor, limit, waiters } = options ?? {};
    checkSignal(signal, 'options.signal');
    if (timeoutMillis !== undefined) positive(timeoutMillis, 'options.timeoutMillis');
    const body = listBody(prefix, cursor, limit, waiters);
    const reply = await this.#send('list', body, { signal, timeoutMillis });
    return reply.page;
  }

  /**
   * Every live lease under options.prefix, reading one page at a time: an
   * async iterator of the leases listPage answers. A lease live throughout
   * the listing is yielded exactly once.
   */
  async *list(options) {
    if (options !== undefined && !isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: list options must be an object', 'options');
    }
    checkOptions(options ?? {}, LIST_OPTIONS, 'client.list');
    let cursor = options?.cursor;
    do {
      const page = await this.listPage({ ...options, cursor });
      yield* page.leases;
      cursor = page.cursor;
    } while (cursor !== undefined);
  }

  /**
   * The events on resources under options.prefix (POST /v1/watch,
   * Server-Sent Events read from fetch's body), as an async iterator:
   * first { type: 'hello', stream, seq, resumed: false }, then each event
   * { seq, type, resource, holderId?, fence?, remainingMillis?, value?,
   * waiters?, at }. After a disconnect (the coordinator went away, or
   * closed a watcher too slow for its buffer) it connects again and
   * resumes after the last event it yielded; a hello is yielded again only
   * when the coordinator could not resume: reload the picture (list) then.
   * options.stream and options.afterSeq resume an earlier watch. Ends when
   * options.signal aborts or the loop stops; throws a refusal that will not
   * change, or the last failure after `attempts` failed connections in a row.
   */
  async *watch(options) {
    if (options !== undefined && !isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: watch options must be an object', 'options');
    }
    checkOptions(options ?? {}, WATCH_OPTIONS, 'client.watch');
    const { signal, prefix = '' } = options ?? {};
    let { stream, afterSeq } = options ?? {};
    checkSignal(signal, 'options.signal');
    if (typeof prefix !== 'string' || utf8Length(prefix) > MAX_PREFIX_BYTES) {
      throw new InvalidArgumentError(`lease-fence: options.prefix must be a string of at most ${MAX_PREFIX_BYTES} bytes`, 'options.prefix');
    }
    if (stream !== undefined && (typeof stream !== 'string' || stream === '')) {
      throw new InvalidArgumentError('lease-fence: options.stream must be a non-empty string', 'options.stream');
    }
    if (afterSeq !== undefined) wholeMillis(afterSeq, 'options.afterSeq', Number.MAX_SAFE_INTEGER);
    const k = this.#bases.length;
    let base = this.#cur;
    let failures = 0;
    let last;
    while (!signal?.aborted) {
      if (failures > 0) {
        if (failures >= this.#attempts) {
          throw last instanceof LeaseServiceError ? last
            : new LeaseServiceError(`lease-fence: watch could not connect after ${failures} attempts`, { code: 'no_answer', attempts: failures, cause: last });
        }
        base = (base + 1) % k;
        const pause = this.#backoff(failures + 1);
        if (pause > 0) {
          try {
            await sleep(this.#timers, pause, signal);
          } catch {
            return;
          }
        }
      }
      const body = { prefix };
      if (stream !== undefined) Object.assign(body, { stream, afterSeq: afterSeq ?? 0 });
      const conn = new AbortController();
      const onAbort = () => conn.abort(signal.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        let res;
        try {
          const send = this.#fetch;
          res = await send(`${this.#bases[base]}/v1/watch`, {
            method: 'POST', headers: { ...this.#headers, accept: 'text/event-stream' }, body: JSON.stringify(body),
            signal: conn.signal, redirect: 'manual',
          });
        } catch (e) {
          if (signal?.aborted) return;
          failures++;
          last = e;
          continue;
        }
        if (res.status !== 200) {
          const err = parseError('watch', res.status, await readBody(res), failures + 1);
          if (res.status >= 500 || RETRIED_4XX.has(res.status)) {
            failures++;
            last = err;
            continue;
          }
          throw err;
        }
        failures = 0;
        try {
          for await (const { event, data } of sseFrames(res.body)) {
            const v = JSON.parse(data);
            if (event === 'hello') {
              stream = v.stream;
              afterSeq = v.seq;
              if (!v.resumed) yield Object.freeze({ type: 'hello', stream: v.stream, seq: v.seq, resumed: false });
            } else if (event === 'overflow') {
              break; // the coordinator closes it: resume after the last event
            } else {
              afterSeq = v.seq;
              yield Object.freeze(v);
            }
          }
          // The stream ended (an overflow, the coordinator's drain):
          // connect again at once, resuming after the last event.
        } catch (e) {
          if (signal?.aborted) return;
          failures++;
          last = e;
        }
      } finally {
        signal?.removeEventListener('abort', onAbort);
        conn.abort();
      }
    }
  }

  // ---- end of #27 list and watch ----

  toString() {
    return `LeaseServiceClient(${this.#bases.join(' ')}, holder ${JSON.stringify(this.#lc.holderId)})`;
  }
}
named(LeaseServiceClient, 'LeaseServiceClient');

// certificateFailure returns { code, message } when e (or one of its
// causes) is a TLS certificate that cannot be verified or is not for the
// host, and undefined otherwise.
function certificateFailure(e) {
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 8; depth++, e = e.cause) {
    if (typeof e.code === 'string' && CERTIFICATE_CODES.has(e.code)) return { code: e.code, message: String(e.message) };
  }
  return undefined;
}

// baseURLsOf checks the client's coordinators: options.baseURL (one) or
// options.baseURLs (several, tried in turn), not both, each an http: or
// https: URL with a host and at most a path (a prefix the calls' paths are
// appended to); trailing slashes are dropped.
function baseURLsOf(baseURL, baseURLs) {
  if (baseURL !== undefined && baseURLs !== undefined) {
    throw new InvalidArgumentError('lease-fence: pass options.baseURL or options.baseURLs, not both', 'options.baseURLs');
  }
  let list = [baseURL];
  let name = () => 'options.baseURL';
  if (baseURLs !== undefined) {
    if (!Array.isArray(baseURLs) || baseURLs.length === 0 || baseURLs.length > MAX_BASE_URLS) {
      throw new InvalidArgumentError(`lease-fence: options.baseURLs must be an array of 1 to ${MAX_BASE_URLS} URLs`, 'options.baseURLs');
    }
    list = baseURLs;
    name = (i) => `options.baseURLs[${i}]`;
  }
  return list.map((u, i) => checkBaseURL(u, name(i)));
}

const BASE_URL_EXAMPLE = '"http://127.0.0.1:8787" or "https://leases.example.com/prefix"';

function checkBaseURL(u, name) {
  const bad = (why) => new InvalidArgumentError(`lease-fence: ${name} ${why}`, name);
  if (typeof u !== 'string') {
    throw bad(`must be a string: an http: or https: URL with a host, such as ${BASE_URL_EXAMPLE}`);
  }
  const shown = JSON.stringify(u.length > 200 ? `${u.slice(0, 200)}…` : u);
  let url;
  try {
    url = new URL(u);
  } catch {
    url = undefined;
  }
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(u) && (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))) {
    // "localhost:8787" parses as the scheme "localhost:".
    throw bad(`${shown} has no scheme: write it with http:// or https:// in front, such as ${BASE_URL_EXAMPLE}`);
  }
  if (!url) throw bad(`${shown} is not a URL: it must be an http: or https: URL with a host, such as ${BASE_URL_EXAMPLE}`);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw bad(`${shown} has the scheme ${JSON.stringify(url.protocol)}: it must be http: or https:`);
  }
  if (url.hostname === '') throw bad(`${shown} has no host: it must be an http: or https: URL with a host, such as ${BASE_URL_EXAMPLE}`);
  if (url.username !== '' || url.password !== '') {
    // Not shown: the password would be in the message.
    throw bad('has a user name or password in it: a base URL is a scheme, a host and a path; send a token with options.token');
  }
  if (url.search !== '' || url.hash !== '' || u.includes('?') || u.includes('#')) {
    throw bad(`${shown} has a query or a fragment: a base URL is a scheme, a host and a path, to which /v1/acquire and the like are appended`);
  }
  return u.replace(/\/+$/, '');
}

// checkResource refuses what cannot be a resource name before anything is
// sent (the coordinator checks the rest: its length limit).
function checkResource(v, name) {
  if (typeof v !== 'string' || v === '' || !v.isWellFormed()) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be a non-empty, well-formed string`, name);
  }
  return v;
}

function expired(token, what, reason) {
  const { resource, holderId, fence } = token;
  if (reason === 'revoked') {
    return new LeaseExpiredError(`lease-fence: ${what} of ${JSON.stringify(resource)} fence ${fence}: the lease was revoked by an operator`,
      { resource, holderId, fence, revoked: true });
  }
  return new LeaseExpiredError(`lease-fence: ${what} of ${JSON.stringify(resource)} fence ${fence}: the lease is no longer current`, { resource, holderId, fence });
}

const isFence = (v) => Number.isSafeInteger(v) && v >= 0;

// parseReply returns the answer in text if it has one of the shapes op
// answers with, or undefined.
// ---- #27: list and watch helpers ----

const LIST_OPTIONS = ['signal', 'timeoutMillis', 'prefix', 'cursor', 'limit', 'waiters'];
const WATCH_OPTIONS = ['signal', 'prefix', 'stream', 'afterSeq'];
// The protocol's bounds (service/wire: MaxPrefixBytes, MaxListLimit).
const MAX_PREFIX_BYTES = 1024;
const MAX_LIST_LIMIT = 1000;

function utf8Length(s) {
  return new TextEncoder().encode(s).length;
}

// listBody is the body of a list, its options checked.
function listBody(prefix, cursor, limit, waiters) {
  const body = {};
  if (prefix !== undefined) {
    if (typeof prefix !== 'string' || utf8Length(prefix) > MAX_PREFIX_BYTES) {
      throw new InvalidArgumentError(`lease-fence: options.prefix must be a string of at most ${MAX_PREFIX_BYTES} bytes`, 'options.prefix');
    }
    if (prefix !== '') body.prefix = prefix;
  }
  if (cursor !== undefined) {
    if (typeof cursor !== 'string' || cursor === '') throw new InvalidArgumentError('lease-fence: options.cursor must be a cursor a list answered', 'options.cursor');
    body.cursor = cursor;
  }
  if (limit !== undefined) {
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw new InvalidArgumentError(`lease-fence: options.limit must be a whole number from 1 to ${MAX_LIST_LIMIT}`, 'options.limit');
    }
    body.limit = limit;
  }
  if (waiters !== undefined) {
    if (typeof waiters !== 'boolean') throw new InvalidArgumentError('lease-fence: options.waiters must be a boolean', 'options.waiters');
    if (waiters) body.waiters = true;
  }
  return body;
}

// parseList reads a list's answer: { ok: true, page } or undefined.
function parseList(v) {
  if (v.ok !== true || !Array.isArray(v.leases) || (v.cursor !== undefined && typeof v.cursor !== 'string')) return undefined;
  for (const l of v.leases) {
    if (typeof l !== 'object' || l === null || typeof l.resource !== 'string' || typeof l.holderId !== 'string' || !isFence(l.fence) ||
      typeof l.remainingMillis !== 'number' || !Number.isInteger(l.waiters)) return undefined;
    Object.freeze(l);
  }
  const page = { leases: Object.freeze(v.leases) };
  if (v.cursor !== undefined) page.cursor = v.cursor;
  return { ok: true, page: Object.freeze(page) };
}

// sseFrames reads Server-Sent Events from a fetch body: { event, data } for
// each frame with data (comments and keepalives skipped).
async function* sseFrames(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let event = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line === '' || line.startsWith(':')) continue;
          const c = line.indexOf(':');
          const name = c < 0 ? line : line.slice(0, c);
          let val = c < 0 ? '' : line.slice(c + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (name === 'event') event = val;
          else if (name === 'data') data.push(val);
        }
        if (data.length > 0) yield { event, data: data.join('\n') };
      }
      if (buf.length > MAX_FRAME_CHARS) throw new LeaseServiceError('lease-fence: a watch frame is too long', { code: 'bad_reply', attempts: 1 });
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

const MAX_FRAME_CHARS = 1 << 20;

// ---- end of #27 list and watch helpers ----

function parseReply(op, text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v) || typeof v.ok !== 'boolean') return undefined;
  if (op === 'list') return parseList(v);
  if (op === 'inspect') {
    if (v.ok !== true) return undefined;
    if (v.held === true) {
      if (typeof v.holderId !== 'string' || !isFence(v.fence) || v.fence === 0 || typeof v.remainingMillis !== 'number' || !Number.isFinite(v.remainingMillis)) return undefined;
      if (v.value !== undefined && typeof v.value !== 'string') return undefined;
      const st = { held: true, holderId: v.holderId, fence: v.fence, remainingMillis: v.remainingMillis };
      if (v.value !== undefined) st.value = v.value;
      return { ok: true, status: Object.freeze(st) };
    }
    if (v.held !== false || !isFence(v.lastFence)) return undefined;
    return { ok: true, status: Object.freeze({ held: false, lastFence: v.lastFence }) };
  }
  if (op === 'revoke') {
    if (v.ok !== true) return undefined;
    const r = v.revoked;
    if (typeof r === 'object' && r !== null && typeof r.holderId === 'string' && isFence(r.fence) && r.fence > 0) {
      return { ok: true, revoked: Object.freeze({ holderId: r.holderId, fence: r.fence }) };
    }
    if (typeof v.removedWaiter === 'string' && v.removedWaiter !== '') return { ok: true, revoked: Object.freeze({ removedWaiter: v.removedWaiter }) };
    return undefined;
  }
  if (v.ok) {
    if (op === 'release' || op === 'proclaim') return { ok: true };
    if (typeof v.grant !== 'object' || v.grant === null || Array.isArray(v.grant)) return undefined;
    return { ok: true, grant: v.grant };
  }
  if (v.reason === 'revoked') return { ok: false, reason: 'revoked' };
  if (op === 'acquire') {
    if (typeof v.heldBy !== 'string' || typeof v.retryAfterMillis !== 'number') return undefined;
    return { ok: false, heldBy: v.heldBy, retryAfterMillis: v.retryAfterMillis };
  }
  if (v.reason !== 'expired') return undefined;
  return { ok: false, reason: 'expired' };
}

// parseError turns a non-200 answer into a LeaseServiceError: the service's
// {"error": {"code", "message"}} when it is one, http_<status> otherwise.
function parseError(op, status, text, attempts) {
  let code, message;
  try {
    const v = JSON.parse(text);
    if (typeof v?.error?.code === 'string' && v.error.code !== '') {
      code = v.error.code;
      message = typeof v.error.message === 'string' ? v.error.message : '';
    }
  } catch {
    // not the service's error shape
  }
  if (code === undefined) {
    return new LeaseServiceError(`lease-fence: ${op}: unexpected answer ${status}: ${short(text)}`, { code: `http_${status}`, status, attempts });
  }
  return new LeaseServiceError(`lease-fence: ${op}: ${code} (${status}): ${message}`, { code, status, attempts });
}

// ---------------------------------------------------------------- leases

/**
 * A lease held through a LeaseServiceClient: the core lease's token, deadline
 * and grant, and `await using` support (Symbol.asyncDispose releases it).
 */
export class ServiceLease {
  #client;
  #record;
  #core;

  static {
    leaseState = (l) => ({ client: l.#client, record: l.#record });
    // Only where the host has the symbol: importing adds nothing to globals.
    if (typeof Symbol.asyncDispose === 'symbol') {
      Object.defineProperty(this.prototype, Symbol.asyncDispose, {
        value: function dispose() {
          return this.dispose();
        },
        writable: true,
        configurable: true,
      });
    }
  }

  constructor(key, client, record, core) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: ServiceLease objects are made by LeaseServiceClient, not with new', 'this');
    }
    this.#client = client;
    this.#record = record;
    this.#core = core;
    /** The fencing token to present with every write. */
    this.token = core.token;
    /** End of the lease in the client's clock domain, anchored at the first send. */
    this.deadline = core.deadline;
    /** The grant the lease was made from (it holds no secret). */
    this.grant = core.grant;
    Object.freeze(this);
  }

  /** The library's Lease underneath (for LeaseClient.beginRenewal and the like). */
  get lease() {
    return this.#core;
  }

  /** Advisory: whether the deadline has passed at this instant. Never branch a write on it. */
  hasExpired() {
    return this.#core.hasExpired();
  }

  /** Advisory: whether gate would admit this token at this instant. Never branch a write on it. */
  wouldAdmit(gate) {
    return this.#core.wouldAdmit(gate);
  }

  /**
   * Releases the lease unless this client already released it or learned
   * that it ended; a lease that turns out to have ended already is not an
   * error. Other failures (no answer, a refusal) reject. What
   * `await using` calls.
   */
  async dispose(options) {
    callOptions(options, 'lease.dispose');
    if (this.#record.ended) return;
    try {
      await this.#client.release(this, options);
    } catch (e) {
      if (!(e instanceof LeaseExpiredError)) throw e;
    }
  }

  toString() {
    return `ServiceLease(${JSON.stringify(this.token.resource)} held by ${JSON.stringify(this.token.holderId)}, fence ${this.token.fence}, until ${this.deadline})`;
  }
}
named(ServiceLease, 'ServiceLease');

// ---------------------------------------------------------------- holding

function holdOptions(options, what) {
  if (options === undefined) return { waitMillis: 0 };
  if (!isOptions(options)) {
    throw new InvalidArgumentError(`lease-fence: ${what} options must be an object`, 'options');
  }
  checkOptions(options, HOLD_OPTIONS, what);
  const { waitMillis = 0, signal, renewEveryMillis, value } = options;
  wholeMillis(waitMillis, 'options.waitMillis', Number.MAX_SAFE_INTEGER, true);
  checkSignal(signal, 'options.signal');
  if (renewEveryMillis !== undefined) positive(renewEveryMillis, 'options.renewEveryMillis');
  if (value !== undefined) checkValue(value, 'options.value');
  return { waitMillis, signal, renewEveryMillis, value };
}

// makeHold acquires resource (waiting as waitMillis says) and starts a
// HeldLease on it. A waited grant whose first renewal is refused (it
// expired at the coordinator before the renewal came: a wait longer than
// the TTL and a slow answer) is waited for again, for what is left of the
// wait, as Go's client.Client.Hold does.
async function makeHold(client, resource, opts) {
  const tools = clientTools(client);
  let { waitMillis } = opts;
  for (;;) {
    const start = tools.clock.now().millis;
    try {
      return await holdOnce(client, tools, resource, { ...opts, waitMillis });
    } catch (e) {
      if (!(e instanceof LeaseExpiredError) || waitMillis === 0) throw e;
      if (waitMillis !== Infinity) {
        waitMillis -= tools.clock.now().millis - start;
        if (waitMillis < 1) throw e;
      }
    }
  }
}

async function holdOnce(client, tools, resource, { waitMillis, signal, renewEveryMillis, value }) {
  let { lease, sentAt } = await tools.acquire(resource, { signal }, waitMillis, value);
  const giveUp = (e) => {
    client.release(lease).catch(() => {});
    throw e;
  };
  const ttl = lease.grant.ttlMillis;
  const skew = sentAt + ttl - lease.deadline.millis;
  const every = renewEveryMillis ?? ttl / 3;
  const margin = lossMargin(ttl);
  if (!(every < ttl - skew - margin)) {
    giveUp(new InvalidArgumentError(`lease-fence: options.renewEveryMillis (${every}) must be less than the TTL (${ttl} ms) minus the clock skew (${skew} ms) ` +
      `and the loss margin (${margin} ms), or the lease would lapse between renewals`, 'options.renewEveryMillis'));
  }
  // A grant that waited is anchored, like any, at the acquisition's send:
  // if the wait ate the time to its first renewal (or its whole deadline),
  // renew now, so the lease handed over has its time ahead.
  let now;
  try {
    now = tools.clock.now().millis;
  } catch (e) {
    giveUp(e);
  }
  if (now >= sentAt + every) {
    try {
      ({ lease, sentAt } = await tools.renew(lease, { signal }));
    } catch (e) {
      giveUp(e);
    }
  }
  return new HeldLease(internal, client, tools, lease, sentAt, every, margin, signal);
}

/** What a HeldLease dispatches: 'renewed', 'lost' and 'released'. */
export class HoldEvent extends Event {
  constructor(key, type, lease, error = null) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: HoldEvent objects are dispatched by a HeldLease, not made with new', 'this');
    }
    super(type);
    /** The hold's current lease (ServiceLease) when the event was dispatched. */
    this.lease = lease;
    /** For 'lost': the LeaseLostError, also the signal's reason; null otherwise. */
    this.error = error;
  }
}
named(HoldEvent, 'HoldEvent');

/**
 * A lease kept alive by its own renewals while the work runs: what
 * client.hold resolves to and withLease's callback receives.
 *
 * `signal` is the work's signal. It aborts when the lease is lost, with a
 * LeaseLostError: when renewals fail, a margin (lossMargin: 5 % of the TTL,
 * at most 250 ms) before the holder's deadline (the last successful
 * renewal's send instant + TTL - clock skew, by the holder's clock), at once
 * when the coordinator refuses one; when release() ends the hold, with a
 * LeaseReleasedError; and when the signal given to hold aborts, with its
 * reason (the lease is then released, within ENDING_RELEASE_MILLIS, as after
 * a loss). It never aborts after the holder's deadline unless its timer
 * fires later than the margin. It cannot stop a write already on its way to
 * the resource: that write still needs the resource's gate.
 *
 * Every renewal is a new request (LeaseClient.beginRenewal), so each
 * deadline is anchored at that renewal's own send; renewals are begun
 * renewEveryMillis after the last one's send (a third of the TTL by
 * default), a failed one is tried again sooner, each of its attempts waits
 * at most half the time left before the loss, and the one in flight is
 * aborted at the loss. Timers are set from the holder's clock for the
 * instants the deadline and the next renewal fall on, never by adding
 * intervals; all of them are cleared when the hold ends, so a released or
 * lost hold keeps nothing alive.
 *
 * An EventTarget: 'renewed' after each successful renewal, 'lost' when the
 * lease is lost, 'released' when release() or the hold's signal ended it;
 * each a HoldEvent.
 */
export class HeldLease extends EventTarget {
  #client;
  #tools;
  #lease; // the current ServiceLease: the last renewal's
  #sentAt; // holder millis: the send of the current lease's request
  #every;
  #margin; // how long before the deadline the lease counts as lost
  #next; // holder millis: when to begin the next renewal
  #ac = new AbortController();
  #outer;
  #onOuter;
  #renewT;
  #lossT;
  #renewing; // the AbortController of the renewal in flight
  #renewals = 0;
  #failure; // the last renewal's failure since the last success
  #done = false;
  #releasing; // the release sent, a promise
  #own; // the release the hold sent itself when it ended without release(), a promise

  static {
    heldOwnRelease = (h) => h.#own;
  }

  static {
    if (typeof Symbol.asyncDispose === 'symbol') {
      Object.defineProperty(this.prototype, Symbol.asyncDispose, {
        value: function dispose() {
          return this.release();
        },
        writable: true,
        configurable: true,
      });
    }
  }

  constructor(key, client, tools, lease, sentAt, every, margin, outer) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: HeldLease objects are made by LeaseServiceClient.hold, not with new', 'this');
    }
    super();
    this.#client = client;
    this.#tools = tools;
    this.#lease = lease;
    this.#sentAt = sentAt;
    this.#every = every;
    this.#margin = margin;
    this.#next = sentAt + every;
    if (outer) {
      this.#outer = outer;
      this.#onOuter = () => this.#endBy(outer.reason);
      if (outer.aborted) {
        this.#endBy(outer.reason);
        return;
      }
      outer.addEventListener('abort', this.#onOuter, { once: true });
    }
    this.#arm();
  }

  /** The fencing token every write of the work presents: the same for the whole hold. */
  get token() {
    return this.#lease.token;
  }

  /** The current lease (a ServiceLease): the last successful renewal's. */
  get lease() {
    return this.#lease;
  }

  /** The holder's deadline of the current lease, in its clock's domain. */
  get deadline() {
    return this.#lease.deadline;
  }

  /** The work's signal: see HeldLease. */
  get signal() {
    return this.#ac.signal;
  }

  /** How many renewals succeeded. */
  get renewals() {
    return this.#renewals;
  }

  /**
   * Ends the hold: the signal aborts first (a LeaseReleasedError), then the
   * lease is released at the coordinator, which hands the resource to its
   * next waiter. Resolves once the coordinator ended the lease or it had
   * ended (a lost hold, a released one: a second call resolves too); rejects
   * if the release got no answer or was refused (call it again to retry).
   * A lost lease is not an error here: the signal, the 'lost' event and
   * withLease tell it.
   */
  async release(options) {
    callOptions(options, 'held.release');
    if (!this.#done) {
      const { resource, holderId, fence } = this.#lease.token;
      this.#end(new LeaseReleasedError(`lease-fence: the hold on ${JSON.stringify(resource)} (fence ${fence}) was released`, { resource, holderId, fence }));
      this.dispatchEvent(new HoldEvent(internal, 'released', this.#lease));
    }
    if (this.#releasing === undefined) this.#releasing = this.#sendRelease(options);
    const p = this.#releasing;
    try {
      await p;
    } catch (e) {
      if (this.#releasing === p) this.#releasing = undefined;
      throw e;
    }
  }

  /** release(options): what `await using` calls. */
  dispose(options) {
    return this.release(options);
  }

  #sendRelease(options) {
    return this.#client.release(this.#lease, options).catch((e) => {
      if (!(e instanceof LeaseExpiredError)) throw e;
    });
  }

  // releaseInBackground releases a lease given up (lost at the holder's
  // deadline it may still be live at the coordinator, with others waiting),
  // within ENDING_RELEASE_MILLIS (less if the client's timeoutMillis is), so
  // that withLease and release() settle soon after a loss even when the
  // coordinator does not answer. release() waits for it, or sends again if
  // it failed; withLease waits for it and reports its failure (#own).
  #releaseInBackground() {
    const tools = this.#tools;
    const timeoutMillis = Math.min(ENDING_RELEASE_MILLIS, tools.timeout ?? Infinity);
    let until;
    try {
      until = tools.clock.now().millis + timeoutMillis;
    } catch {
      until = undefined;
    }
    const p = tools.release(this.#lease, { timeoutMillis, until }).catch((e) => {
      if (!(e instanceof LeaseExpiredError)) throw e;
    });
    this.#releasing = p;
    this.#own = p;
    p.catch(() => {
      if (this.#releasing === p) this.#releasing = undefined;
    });
  }

  #after(ms, fn) {
    return this.#tools.timers.setTimeout(fn, Math.min(Math.max(Math.floor(ms), 0), MAX_TIMER_MILLIS));
  }

  #clearTimers() {
    if (this.#renewT !== undefined) this.#tools.timers.clearTimeout(this.#renewT);
    if (this.#lossT !== undefined) this.#tools.timers.clearTimeout(this.#lossT);
    this.#renewT = this.#lossT = undefined;
  }

  // arm sets the timers for the deadline and the next renewal from a
  // reading of the holder's clock, or finds the lease lost.
  #arm() {
    let now;
    try {
      now = this.#tools.clock.now().millis;
    } catch (e) {
      // The deadline cannot be kept without the clock: give the lease up.
      this.#lose(e, undefined, true);
      return;
    }
    const deadline = this.#lease.deadline.millis;
    const lossAt = deadline - this.#margin;
    if (lossAt - now <= DEADLINE_EARLY_MILLIS) {
      this.#lose(this.#failure, now);
      return;
    }
    const timers = this.#tools.timers;
    if (this.#lossT !== undefined) timers.clearTimeout(this.#lossT);
    this.#lossT = this.#after(lossAt - now, () => {
      this.#lossT = undefined;
      if (!this.#done) this.#arm();
    });
    if (this.#renewing === undefined) {
      if (this.#renewT !== undefined) timers.clearTimeout(this.#renewT);
      this.#renewT = this.#after(Math.min(this.#next, lossAt) - now, () => {
        this.#renewT = undefined;
        this.#onRenewal();
      });
    }
  }

  #onRenewal() {
    if (this.#done || this.#renewing !== undefined) return;
    const ac = new AbortController();
    this.#renewing = ac;
    this.#renew(ac);
  }

  async #renew(ac) {
    const before = this.#lease;
    let out, err;
    try {
      out = await this.#tools.renew(before, { signal: ac.signal, until: before.deadline.millis - this.#margin });
    } catch (e) {
      err = e;
    }
    if (this.#renewing === ac) this.#renewing = undefined;
    // Ended meanwhile (the end aborted this renewal, or its answer came
    // after): the end releases the lease.
    if (this.#done) return;
    let now;
    try {
      now = this.#tools.clock.now().millis;
    } catch (e) {
      this.#lose(e, undefined, true);
      return;
    }
    if (out !== undefined) {
      // An answer taken after the lease counted as lost does not revive
      // the hold: the work had to stop by then (the loss timer was late).
      if (before.deadline.millis - this.#margin - now <= DEADLINE_EARLY_MILLIS) {
        this.#lose(this.#failure, now);
        return;
      }
      if (out.lease.deadline.millis > this.#lease.deadline.millis) {
        this.#lease = out.lease;
        this.#sentAt = out.sentAt;
        this.#next = out.sentAt + this.#every;
      }
      this.#renewals++;
      this.#failure = undefined;
      this.dispatchEvent(new HoldEvent(internal, 'renewed', this.#lease));
      if (this.#done) return; // a listener released it
    } else if (err instanceof LeaseExpiredError) {
      this.#lose(err, now);
      return;
    } else {
      this.#failure = err;
      const left = this.#lease.deadline.millis - now;
      this.#next = now + Math.max(Math.min(this.#every, left) / 4, MIN_RETRY_MILLIS);
    }
    this.#arm();
  }

  // end ends the hold: timers cleared, the renewal in flight aborted, the
  // signal aborted with reason.
  #end(reason) {
    this.#done = true;
    this.#clearTimers();
    const r = this.#renewing;
    this.#renewing = undefined;
    r?.abort(reason);
    this.#outer?.removeEventListener('abort', this.#onOuter);
    this.#ac.abort(reason);
  }

  // lose ends the hold with a LeaseLostError: cause is the renewal's
  // refusal (a LeaseExpiredError), the last renewal's failure, or (noClock)
  // the clock's; now is the holder's reading when the loss was found. The
  // message gives durations (since the lease's send, to or past its
  // deadline), not instants of the holder's clock domain.
  #lose(cause, now, noClock = false) {
    if (this.#done) return;
    const lease = this.#lease;
    const { resource, holderId, fence } = lease.token;
    const deadline = lease.deadline.millis;
    const when = now === undefined ? '' : `${durationText(now - this.#sentAt)} after the send of the call that last extended it, ` +
      (now <= deadline ? `${durationText(deadline - now)} before the holder's deadline` : `${durationText(now - deadline)} after the holder's deadline`);
    let why;
    if (noClock) {
      why = `the holder's clock could not be read (${cause?.message ?? cause}), so its deadline could not be kept`;
    } else if (cause instanceof LeaseExpiredError && cause.revoked) {
      why = `an operator revoked it (the coordinator answered its renewal "revoked"), ${when}`;
    } else if (cause instanceof LeaseExpiredError) {
      why = `the coordinator refused its renewal (it is no longer current), ${when}`;
    } else {
      why = `no renewal succeeded in time; given up ${when}`;
    }
    const options = { resource, holderId, fence, deadline: lease.deadline };
    if (cause !== undefined) options.cause = cause;
    const Lost = cause instanceof LeaseExpiredError && cause.revoked ? LeaseRevokedError : LeaseLostError;
    const err = new Lost(`lease-fence: the lease on ${JSON.stringify(resource)} (fence ${fence}) was lost: ${why}`, options);
    this.#end(err);
    this.dispatchEvent(new HoldEvent(internal, 'lost', lease, err));
    this.#releaseInBackground();
  }

  #endBy(reason) {
    if (this.#done) return;
    this.#end(reason);
    this.dispatchEvent(new HoldEvent(internal, 'released', this.#lease));
    this.#releaseInBackground();
  }

  toString() {
    const { resource, holderId, fence } = this.#lease.token;
    const state = this.#done ? `, ended: ${this.#ac.signal.reason?.name ?? String(this.#ac.signal.reason)}` : '';
    return `HeldLease(${JSON.stringify(resource)} held by ${JSON.stringify(holderId)}, fence ${fence}, until ${this.#lease.deadline}, ${this.#renewals} renewals${state})`;
  }
}
named(HeldLease, 'HeldLease');

// ---------------------------------------------------------------- elections

/**
 * Leader election over one resource, the election's name: the leader is
 * the holder of its lease. Made by client.election(name).
 */
export class LeaseElection {
  #client;
  #name;
  #every;
  #held; // the HeldLease of the last campaign won

  constructor(key, client, name, every) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: LeaseElection objects are made by LeaseServiceClient.election, not with new', 'this');
    }
    this.#client = client;
    this.#name = name;
    this.#every = every;
  }

  /** The election's name: the resource whose holder leads. */
  get name() {
    return this.#name;
  }

  /**
   * Waits, in the resource's queue, until this holder leads, or the signal
   * aborts (rejects with its reason). value (optional; at most 4096 bytes
   * of UTF-8, not secret: the leader's address, say) is the lead's value,
   * which leader() and observe() report. The HeldLease renews itself; its
   * signal aborts when the lead is lost; release() resigns, handing the
   * lead to the next campaigner at once. campaign(options) without a value
   * is campaign('', options).
   */
  async campaign(value, options) {
    if (value === undefined || isOptions(value)) [value, options] = ['', value];
    checkValue(value, 'value');
    if (options !== undefined && !isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: election.campaign options must be an object', 'options');
    }
    checkOptions(options ?? {}, CAMPAIGN_OPTIONS, 'election.campaign');
    const signal = checkSignal(options?.signal, 'options.signal');
    const held = await makeHold(this.#client, this.#name, { waitMillis: Infinity, signal, renewEveryMillis: this.#every, value });
    this.#held = held;
    return held;
  }

  /**
   * Changes the value of the lead this election's last campaign won.
   * Rejects with LeaseExpiredError when that lead is over (revoked: true
   * if an operator revoked it), InvalidArgumentError if no campaign won.
   */
  async proclaim(value, options) {
    checkValue(value, 'value');
    const held = this.#held;
    if (held === undefined) {
      throw new InvalidArgumentError('lease-fence: election.proclaim needs a lead won by this election\'s campaign()', 'this');
    }
    if (held.signal.aborted) {
      const { resource, holderId, fence } = held.token;
      throw new LeaseExpiredError(`lease-fence: proclaim of ${JSON.stringify(resource)} fence ${fence}: the lead is over`, { resource, holderId, fence });
    }
    return this.#client.proclaim(held.lease, value, options);
  }

  /** The current leader, { holderId, fence, value? } (value when it has one), or null when nobody leads. */
  async leader(options) {
    const st = await this.#client.inspect(this.#name, callOptions(options, 'election.leader'));
    return st.held ? leaderOf(st) : null;
  }

  /**
   * The leaders, as an async iterable: the current one first (if anyone
   * leads), then each new leader as it is elected, once each and in fence
   * order, and the leader again each time its value changes (proclaim):
   * { holderId, fence, value? }. The coordinator answers each change at once
   * (an inspection waiting with afterFence), so a new leader is seen when
   * it is elected, not at a next poll. Ends when the signal aborts or the
   * loop breaks; failures to reach the coordinator are retried with the
   * client's backoff; a refusal that will not change (a 4xx) is thrown.
   */
  observe(options) {
    if (options !== undefined && !isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: election.observe options must be an object', 'options');
    }
    checkOptions(options ?? {}, OBSERVE_OPTIONS, 'election.observe');
    return this.#observe(checkSignal(options?.signal, 'options.signal'));
  }

  async *#observe(signal) {
    const client = this.#client;
    const { timers, backoff, maxWait } = clientTools(client);
    let after = 0;
    let value = '';
    let last = 0;
    let lastValue = '';
    let first = true;
    let fails = 0;
    while (!signal?.aborted) {
      let st;
      try {
        st = await client.inspect(this.#name, first ? { signal } : { signal, afterFence: after, afterValue: value, waitMillis: maxWait });
      } catch (e) {
        if (signal?.aborted) return;
        if (e instanceof InvalidArgumentError || (e instanceof LeaseServiceError && !e.retryable)) throw e;
        fails++;
        try {
          await sleep(timers, Math.max(backoff(Math.min(fails, 8) + 1), MIN_RETRY_MILLIS), signal ?? new AbortController().signal);
        } catch {
          return;
        }
        continue;
      }
      first = false;
      fails = 0;
      after = st.held ? st.fence : 0;
      value = (st.held && st.value) || '';
      if (st.held && (st.fence > last || (st.fence === last && value !== lastValue))) {
        last = st.fence;
        lastValue = value;
        yield leaderOf(st);
      }
    }
  }

  toString() {
    return `LeaseElection(${JSON.stringify(this.#name)})`;
  }
}
named(LeaseElection, 'LeaseElection');

// leaderOf is the leader an inspection of a held election reports:
// { holderId, fence }, and value when the lease has one.
function leaderOf(st) {
  const l = { holderId: st.holderId, fence: st.fence };
  if (st.value) l.value = st.value;
  return Object.freeze(l);
}

// The Lease-Fence header of fence-proxy (docs/fencing.md), for writes through it.
export { LEASE_FENCE_HEADER, MAX_HEADER_FENCE, isStaleFence, leaseFenceHeader, staleFenceError } from './fence-header.mjs';
