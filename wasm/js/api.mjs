// The library's API over the runtime (runtime.mjs) and the codec
// (codec.mjs): clocks, LeaseCoordinator, LeaseClient and Lease, the naive
// lease, and FenceGate (gate.mjs). Every function and method is synchronous
// once init has finished. Importing it starts nothing: the entries do
// (lease-fence.mjs and node.mjs call init; init.mjs and workerd.mjs leave
// it to the app). A lease is plain data held here (see class Lease). The
// API is documented in lease-fence.d.ts.

// The error classes and isStaleFence live in errors.mjs (no wasm), shared
// with lease-fence/sql, lease-fence/redis and the fence header.
export {
  ClockDomainError, ClockReadingError, GateBusyError, GrantMismatchError, InvalidArgumentError,
  isStaleFence, LeaseFenceError, RequestCompletedError, StaleFenceError, SupersededError,
} from './errors.mjs';
export { init } from './runtime.mjs';
export { FenceGate } from './gate.mjs';

import {
  begin, bool, call, checkOptions, done, f64, gtDomain, gtHolder, gtId, gtResource, idHolder, idResource, Instant, isToken, K_CLIENT,
  K_CLOCK, K_COORDINATOR, K_NAIVE, lastGrant, lastReq, noteReuse, p, put, putLeaseTag, putObj, putReadGrant, putReadRequest, putReadToken,
  putRequest, putToken, readAcquireRequest, readGrantArg, readInstant, readOutcome, readRequest, readRequestArg, resourceId, reusedCount,
  rqDomain, setLastGrant, setLastRequest, tokenIds,
} from './codec.mjs';
import { addReader, adopt, badThis, dead, enter, Handled, handleOf, instanceDied, internalOnly, isObject, reading, secret, X } from './runtime.mjs';

// ---------------------------------------------------------------- instants and clocks

class Clock extends Handled {
  #domain;
  constructor(key, h, domain, reader) {
    internalOnly(key, 'Clock');
    super();
    this.#domain = domain;
    adopt(this, K_CLOCK, h, reader);
  }

  get domain() {
    return isObject(this) && #domain in this ? this.#domain : badThis('clock');
  }

  now() {
    const enc = begin();
    call(enc, X.lf_clock_now, handleOf(this));
    return new Instant(f64(), this.#domain);
  }
}

class ManualClock extends Clock {
  advance(ms) {
    const enc = begin();
    put(ms);
    call(enc, X.lf_clock_advance, handleOf(this), p);
  }

  set(ms) {
    const enc = begin();
    put(ms);
    call(enc, X.lf_clock_set, handleOf(this), p);
  }
}

export function createMonotonicClock(domain) {
  const enc = begin();
  put(domain);
  call(enc, X.lf_clock_monotonic, p);
  return new Clock(secret, f64(), domain);
}

export function createManualClock(domain, options) {
  checkOptions(options, MANUAL_OPTIONS, 'createManualClock');
  const enc = begin();
  put(domain);
  if (putObj(options)) {
    put(options.start);
    put(options.stepPerRead);
  }
  call(enc, X.lf_clock_manual, p);
  return new ManualClock(secret, f64(), domain);
}

const MANUAL_OPTIONS = ['start', 'stepPerRead'];

let readerSeq = 0;

export function createClock(domain, readMillis) {
  const enc = begin();
  put(domain);
  put(readMillis);
  const id = ++readerSeq;
  call(enc, X.lf_clock_custom, id, p);
  addReader(id, readMillis);
  return new Clock(secret, f64(), domain, id);
}


// ---------------------------------------------------------------- coordinator

const COORDINATOR_OPTIONS = ['clock', 'ttlMillis', 'startFence'];

export class LeaseCoordinator extends Handled {
  #clock;
  #ttl;
  constructor(options) {
    checkOptions(options, COORDINATOR_OPTIONS, 'LeaseCoordinator');
    const enc = begin();
    let clock, ttl;
    if (putObj(options)) {
      clock = options.clock;
      put(clock);
      ttl = options.ttlMillis;
      put(ttl);
      put(options.startFence);
    }
    call(enc, X.lf_coord_new, p);
    const h = f64();
    super();
    adopt(this, K_COORDINATOR, h);
    this.#clock = clock;
    this.#ttl = ttl;
  }

  get clock() {
    return isObject(this) && #clock in this ? this.#clock : badThis('LeaseCoordinator');
  }

  get ttlMillis() {
    return isObject(this) && #ttl in this ? this.#ttl : badThis('LeaseCoordinator');
  }

  get issuedFence() {
    const enc = begin();
    call(enc, X.lf_coord_issued, handleOf(this));
    return f64();
  }

  acquire(request) {
    const enc = begin();
    if (readRequestArg(request) && request === lastReq) {
      // The request the last beginAcquire returned, unchanged: Go has it.
      noteReuse();
      call(enc, X.lf_coord_acquire_last, handleOf(this));
      const out = readOutcome(this.#clock.domain);
      if (out.ok) setLastGrant(out.grant);
      return out;
    }
    putReadRequest();
    call(enc, X.lf_coord_acquire, handleOf(this), p);
    return readOutcome(this.#clock.domain);
  }

  renew(request) {
    const enc = begin();
    putRequest(request);
    call(enc, X.lf_coord_renew, handleOf(this), p);
    return readOutcome(this.#clock.domain);
  }

  release(token) {
    // A well-typed token goes as interned ids, with no argument buffer (as
    // in gate.commit); Go makes every other check.
    const t = isToken(token);
    let resource, holderId, fence;
    if (t) {
      resource = token.resource;
      holderId = token.holderId;
      fence = token.fence;
      if (typeof resource === 'string' && typeof holderId === 'string' && typeof fence === 'number' &&
        tokenIds(resource, holderId)) {
        if (dead) throw instanceDied();
        if (reading) begin(); // throws the re-entry error
        done(enter(X.lf_coord_release_ids, handleOf(this), idResource, idHolder, fence));
        return bool();
      }
    }
    const enc = begin();
    putReadToken(token, t, resource, holderId, fence);
    call(enc, X.lf_coord_release, handleOf(this), p);
    return bool();
  }
}

// ---------------------------------------------------------------- client and lease

const CLIENT_OPTIONS = ['clock', 'holderId', 'clockSkewMillis'];

export class LeaseClient extends Handled {
  #clock;
  #holder;
  static {
    // How many acquire and completeAcquire calls passed the last request
    // and grant by reference instead of encoding them: a diagnostic for
    // tests that check which calls take that path.
    Object.defineProperty(this, Symbol.for('lease-fence.reusedCalls'), { get: reusedCount });
  }
  constructor(options) {
    checkOptions(options, CLIENT_OPTIONS, 'LeaseClient');
    const enc = begin();
    let clock, holder;
    if (putObj(options)) {
      clock = options.clock;
      put(clock);
      holder = options.holderId;
      put(holder);
      put(options.clockSkewMillis);
    }
    call(enc, X.lf_client_new, p);
    const h = f64();
    super();
    adopt(this, K_CLIENT, h);
    this.#clock = clock;
    this.#holder = holder;
  }

  get clock() {
    return isObject(this) && #clock in this ? this.#clock : badThis('LeaseClient');
  }

  get holderId() {
    return isObject(this) && #holder in this ? this.#holder : badThis('LeaseClient');
  }

  beginAcquire(resource) {
    // A string that can be interned goes as its id, with no argument
    // buffer; anything else is encoded, and Go makes every check.
    const id = typeof resource === 'string' ? resourceId(resource) : 0;
    const enc = begin();
    if (id !== 0) {
      call(enc, X.lf_client_begin_acquire_id, handleOf(this), id);
    } else {
      put(resource);
      call(enc, X.lf_client_begin_acquire, handleOf(this), p);
    }
    return setLastRequest(readAcquireRequest(resource, this.#holder, this.#clock.domain));
  }

  completeAcquire(request, grant) {
    const enc = begin();
    const sameRequest = readRequestArg(request);
    if (readGrantArg(grant) && sameRequest && grant === lastGrant && request === lastReq) {
      // Both unchanged from the calls that made them: Go has them.
      noteReuse();
      call(enc, X.lf_client_complete_last, handleOf(this));
      return readLease(this);
    }
    putReadRequest();
    putReadGrant();
    call(enc, X.lf_client_complete_acquire, handleOf(this), p);
    return readLease(this);
  }

  beginRenewal(lease) {
    const enc = begin();
    putLease(lease);
    call(enc, X.lf_client_begin_renewal, handleOf(this), p);
    return readRequest();
  }

  completeRenewal(request, grant) {
    return complete(this, X.lf_client_complete_renewal, request, grant, begin());
  }
}

function complete(client, fn, request, grant, enc) {
  readRequestArg(request);
  readGrantArg(grant);
  putReadRequest();
  putReadGrant();
  call(enc, fn, handleOf(client), p);
  return readLease(client);
}

function readLease(client) {
  // The lease repeats the grant's strings (which Go checked against the
  // request's), its deadline is in the request's domain, and its grant's
  // expiry in the grant's: only the numbers come back.
  const fence = f64();
  const token = Object.freeze({ resource: gtResource, holderId: gtHolder, fence });
  const deadline = new Instant(f64(), rqDomain);
  const ttlMillis = f64();
  const g = { requestId: gtId, resource: gtResource, holderId: gtHolder, fence, ttlMillis,
    coordinatorExpiresAt: new Instant(f64(), gtDomain) };
  return new Lease(secret, token, deadline, g, client.clock);
}

// A Lease is plain data, held here: it has no Go object (and so no handle
// and no finalizer). Only complete makes one (the constructor refuses
// anything but the module's secret), from a grant Go has checked; its data
// sits in frozen fields and in private fields that no caller can change, and
// the calls that need it pass that data to Go, which checks it again.
let leaseData;
class Lease {
  #token;
  #deadline;
  #domain;
  #clock;
  constructor(key, token, deadline, grant, clock) {
    internalOnly(key, 'Lease');
    this.token = token;
    this.deadline = deadline;
    this.grant = grant;
    this.#token = token;
    this.#deadline = deadline.millis; // deadline itself is the caller's to change
    this.#domain = deadline.domain;
    this.#clock = clock; // the client's clock (and it keeps a createClock source alive while the lease is)
    Object.freeze(this);
  }

  static {
    // leaseData returns a lease's token, deadline millis, clock and domain,
    // or undefined for anything that is not a Lease.
    leaseData = (v) => (isObject(v) && #token in v ? [v.#token, v.#deadline, v.#clock, v.#domain] : undefined);
  }

  hasExpired() {
    const d = leaseData(this);
    if (d === undefined) badThis('Lease');
    const enc = begin();
    call(enc, X.lf_lease_has_expired, handleOf(d[2]), d[1]);
    return bool();
  }

  wouldAdmit(gate) {
    const d = leaseData(this);
    if (d === undefined) badThis('Lease');
    const enc = begin();
    putToken(d[0]);
    put(gate);
    call(enc, X.lf_lease_would_admit, p);
    return bool();
  }
}

// putLease encodes a lease as ClientBeginRenewal reads it: a lease handle
// tag (numbered 0: it only says that the value is a Lease) then its token
// and its deadline's domain. Anything else is encoded as it is, and Go
// refuses it.
function putLease(v) {
  const d = leaseData(v);
  if (d === undefined) return put(v);
  putLeaseTag();
  putToken(d[0]);
  put(d[3]);
}


// ---------------------------------------------------------------- naive

// THE LEASE THAT FAILS (see lease-fence.d.ts), here only so tests and the
// playground can show two holders both passing their check.
class NaiveLease extends Handled {
  #clock;
  constructor(key, h, clock) {
    internalOnly(key, 'NaiveLease');
    super();
    this.#clock = clock;
    adopt(this, K_NAIVE, h);
  }

  valid() {
    const enc = begin();
    call(enc, X.lf_naive_valid, handleOf(this));
    return bool();
  }

  renewed() {
    const enc = begin();
    call(enc, X.lf_naive_renewed, handleOf(this));
  }

  get expiresAt() {
    const enc = begin();
    call(enc, X.lf_naive_expires_at, handleOf(this));
    return readInstant();
  }
}

export function createNaiveLease(clock, ttlMillis) {
  const enc = begin();
  put(clock);
  put(ttlMillis);
  call(enc, X.lf_naive_new, p);
  return new NaiveLease(secret, f64(), clock);
}
