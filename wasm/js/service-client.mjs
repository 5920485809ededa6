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
function acquireBody(request, secret) {
  return {
    requestId: request.requestId,
    resource: request.resource,
    holderId: request.holderId,
    sentAt: { millis: request.sentAt.millis, domain: request.sentAt.domain },
    kind: 'acquire',
    secret,
  };
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
 * 'no_answer', 'bad_reply', 'timeout', 'http_<status>'.
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

  /** Whether the same call may succeed later: a 5xx, no answer, or a timeout. A 4xx never will. */
  get retryable() {
    return this.status === 0 || this.status >= 500;
  }
}
named(LeaseServiceError, 'LeaseServiceError');

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

/** A renewal or release found the lease no longer current: it ran out, was released or was reassigned. */
export class LeaseExpiredError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'expired';
    this.resource = field(options, 'resource', '');
    this.holderId = field(options, 'holderId', '');
    this.fence = field(options, 'fence', 0);
  }
}
named(LeaseExpiredError, 'LeaseExpiredError');

// ---------------------------------------------------------------- helpers

const MAX_REPLY_BYTES = 1 << 20;
const MAX_ATTEMPTS = 100;
const MAX_BASE_URLS = 64;

// Codes answered with a 5xx that sending the same call again at once will not
// change: the coordinator is full until some lease ends.
const FINAL_CODES = new Set(['too_many_leases']);

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

const CLIENT_OPTIONS = ['baseURL', 'baseURLs', 'leaseClient', 'holderId', 'clock', 'clockSkewMillis', 'fetch', 'attempts', 'attemptTimeoutMillis', 'timeoutMillis', 'backoff', 'token'];
const CALL_OPTIONS = ['signal', 'timeoutMillis'];

function callOptions(options, what) {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError('lease-fence: call options must be an object', 'options');
  }
  checkOptions(options, CALL_OPTIONS, what);
  const { signal, timeoutMillis } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError('lease-fence: options.signal must be an AbortSignal', 'options.signal');
  }
  if (timeoutMillis !== undefined) positive(timeoutMillis, 'options.timeoutMillis');
  return { signal, timeoutMillis };
}

// sleep waits ms or until signal aborts, whichever is first.
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    const t = setTimeout(() => {
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
  // Acquisition record -> its secret. A lease holds its record, this map the
  // secret; a record whose lease ended is dropped from it.
  #secrets = new WeakMap();

  constructor(options) {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new InvalidArgumentError('lease-fence: LeaseServiceClient takes an options object', 'options');
    }
    checkOptions(options, CLIENT_OPTIONS, 'new LeaseServiceClient');
    const { baseURL, baseURLs, leaseClient, holderId, clock, clockSkewMillis, fetch: f, attemptTimeoutMillis = 5000, timeoutMillis, backoff = defaultBackoff, token } = options;
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
    const request = this.#lc.beginAcquire(resource);
    const secret = base64url(randomBytes(32));
    const reply = await this.#send('acquire', acquireBody(request, secret), opts);
    if (reply.ok !== true) {
      // parseReply admits a refused acquisition only with both fields.
      const { heldBy, retryAfterMillis } = reply;
      throw new LeaseDeniedError(`lease-fence: ${JSON.stringify(request.resource)} is held by ${JSON.stringify(heldBy)} for ${retryAfterMillis} ms more`,
        { resource: request.resource, heldBy, retryAfterMillis });
    }
    const core = this.#lc.completeAcquire(request, reply.grant);
    const record = { ended: false };
    this.#secrets.set(record, secret);
    return new ServiceLease(internal, this, record, core);
  }

  /**
   * Renews lease. Resolves to a new ServiceLease with the same fence and a
   * deadline anchored at this renewal's first send; rejects with
   * LeaseExpiredError when it is no longer the current lease.
   */
  async renew(lease, options) {
    const opts = callOptions(options, 'client.renew');
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
      throw expired(lease.token, 'renewal');
    }
    return new ServiceLease(internal, this, record, this.#lc.completeRenewal(request, reply.grant));
  }

  /**
   * Releases lease. Resolves when the coordinator ended it (or already had,
   * for a retry whose first answer was lost); rejects with LeaseExpiredError
   * when it was no longer the current lease.
   */
  async release(lease, options) {
    const opts = callOptions(options, 'client.release');
    const record = this.#record(lease, 'release');
    const { resource, holderId, fence } = lease.token;
    const body = { requestId: hex(randomBytes(16)), resource, holderId, fence, secret: this.#secrets.get(record) };
    const reply = await this.#send('release', body, opts);
    record.ended = true;
    this.#secrets.delete(record);
    if (reply.ok !== true) throw expired(lease.token, 'release');
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
  async #send(op, body, { signal, timeoutMillis = this.#timeout }) {
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
      timer = setTimeout(() => call.abort(new LeaseServiceError(`lease-fence: ${op} timed out after ${timeoutMillis} ms`, { code: 'timeout', attempts: n })), timeoutMillis);
    }
    try {
      while (n < this.#attempts) {
        // Each attempt goes to the next coordinator; only one that returns
        // to a coordinator this call already tried waits for the backoff
        // (the pause of the back-th retry of a client with one URL).
        const back = n + 1 - k;
        if (back >= 1) {
          const pause = this.#backoff(back + 1);
          if (pause > 0) await sleep(pause, call.signal);
        }
        const i = (start + n) % k;
        n++;
        const outcome = await this.#attempt(op, `${this.#bases[i]}/v1/${op}`, data, call.signal, n);
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
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', onAbort);
    }
    if (last instanceof LeaseServiceError) {
      last.attempts = n;
      throw last;
    }
    throw new LeaseServiceError(`lease-fence: ${op} got no answer after ${n} attempts`, { code: 'no_answer', attempts: n, cause: last });
  }

  // attempt sends once. It returns { reply } for an answer, { final } for a
  // refusal not worth repeating, or { error } for one that is.
  async #attempt(op, url, data, callSignal, n) {
    const attempt = new AbortController();
    const onAbort = () => attempt.abort(callSignal.reason);
    callSignal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => attempt.abort(new Error(`attempt ${n} timed out`)), this.#attemptTimeout);
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
      return { error: attempt.signal.aborted ? attempt.signal.reason : e };
    } finally {
      clearTimeout(timer);
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
    if (status >= 500 && !FINAL_CODES.has(err.code)) return { error: err };
    return { final: err };
  }

  toString() {
    return `LeaseServiceClient(${this.#bases.join(' ')}, holder ${JSON.stringify(this.#lc.holderId)})`;
  }
}
named(LeaseServiceClient, 'LeaseServiceClient');

// baseURLsOf checks the client's coordinators: options.baseURL (one) or
// options.baseURLs (several, tried in turn), not both, each an http: or
// https: URL; trailing slashes are dropped.
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
  return list.map((u, i) => {
    let url;
    try {
      url = new URL(u);
    } catch {
      url = undefined;
    }
    if (typeof u !== 'string' || !url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw new InvalidArgumentError(`lease-fence: ${name(i)} must be an http: or https: URL`, name(i));
    }
    return u.replace(/\/+$/, '');
  });
}

function expired(token, what) {
  const { resource, holderId, fence } = token;
  return new LeaseExpiredError(`lease-fence: ${what} of ${JSON.stringify(resource)} fence ${fence}: the lease is no longer current`, { resource, holderId, fence });
}

// parseReply returns the answer in text if it has one of the shapes op
// answers with, or undefined.
function parseReply(op, text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v) || typeof v.ok !== 'boolean') return undefined;
  if (v.ok) {
    if (op === 'release') return { ok: true };
    if (typeof v.grant !== 'object' || v.grant === null || Array.isArray(v.grant)) return undefined;
    return { ok: true, grant: v.grant };
  }
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

// The Lease-Fence header of fence-proxy (docs/fencing.md), for writes through it.
export { LEASE_FENCE_HEADER, MAX_HEADER_FENCE, leaseFenceHeader, staleFenceError } from './fence-header.mjs';
