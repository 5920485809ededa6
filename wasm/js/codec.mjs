// The codec: how a call's arguments cross into Go and its results come
// back. Each Go function is a //go:wasmexport taking and returning numbers.
// Arguments are written into a byte buffer inside the wasm memory as tagged
// values (see put below and wasm/lib/convert), whatever the caller passed,
// so every type and range check happens in Go, in one place. Results come
// back in a second buffer. Objects made by the library are numeric handles
// (runtime.mjs); short strings the fast paths pass are interned ids. The
// encoding state below is this module's own and lives for one call.
import {
  ClockDomainError, ClockReadingError, GrantMismatchError, InvalidArgumentError, LeaseFenceError, RequestCompletedError, StaleFenceError,
} from './errors.mjs';
import { dead, dv, enter, generation, handleOf, hdr, instanceDied, kindOf, notStarted, reading, u8, views, X } from './runtime.mjs';

// checkOptions refuses an options object with an own enumerable property
// that is not one of names (an option misspelt, or one this version does
// not have, is an error rather than a silent default). Only the keys are
// read: no getter runs. Non-objects are left to the caller's own checks.
export function checkOptions(options, names, what) {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) return;
  for (const k in options) {
    if (!names.includes(k) && Object.hasOwn(options, k)) unknownOption(k, names, what);
  }
}

export function unknownOption(k, names, what) {
  throw new InvalidArgumentError(`lease-fence: ${what} has no option ${JSON.stringify(k)}; its options are ${names.join(', ')}`,
    `options.${k}`);
}

// ---------------------------------------------------------------- argument encoding

export const T_UNDEFINED = 0, T_NULL = 1, T_FALSE = 2, T_TRUE = 3, T_NUMBER = 4, T_STRING = 5, T_OBJECT = 6,
  T_ARRAY = 7, T_FUNCTION = 8, T_OTHER = 9, T_ILLFORMED = 10, T_HANDLE = 11, T_TOOLONG = 12,
  T_SAME = 13;
const MAX_STRING = 1 << 20;
export const K_CLOCK = 1, K_COORDINATOR = 2, K_CLIENT = 3, K_LEASE = 4, K_GATE = 5, K_NAIVE = 6;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
// Whether s is well-formed UTF-16 (no lone surrogates): String's
// isWellFormed where the host has it, else a scan. Not /\p{Cs}/u: V8 builds
// that Unicode set while parsing this module, at every import, even on hosts
// that never run the fallback.
const wellFormed = typeof String.prototype.isWellFormed === 'function'
  ? (s) => s.isWellFormed()
  : (s) => {
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdfff) {
        if (c >= 0xdc00) return false; // a low surrogate with no high one before it
        const d = s.charCodeAt(++i); // NaN past the end
        if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      }
    }
    return true;
  };

let inPtr = 0, inCap = 0;
export let p = 0;


// begin starts encoding a call's arguments and returns the encoding's number.
// Reading an argument can run the caller's code (a getter), and if that code
// calls into lease-fence it starts an encoding of its own over the same
// buffer; call then sees that the number moved on and refuses to send the
// outer call's now-mixed arguments.
export let encoding = 0;
export function begin() {
  if (X === undefined) throw notStarted();
  if (dead) throw instanceDied();
  if (reading) {
    throw new LeaseFenceError('lease-fence: a clock source (the readMillis of createClock) must not call into lease-fence');
  }
  if (u8.length === 0) views(); // the memory grew, detaching the old views
  inPtr = hdr[0];
  inCap = hdr[1];
  p = 0;
  return ++encoding;
}

export function ensure(n) {
  if (p + n <= inCap) return;
  enter(X.lf_grow, p, p + n);
  if (u8.length === 0) views();
  inPtr = hdr[0];
  inCap = hdr[1];
}

export function tag(t) {
  ensure(1);
  u8[inPtr + p++] = t;
}

export function putStr(s) {
  const n = s.length;
  if (n > MAX_STRING) return tag(T_TOOLONG);
  ensure(5 + 3 * n);
  const at = inPtr + p + 5;
  let i = 0;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) break;
    u8[at + i] = c;
  }
  let len = i;
  if (i < n) {
    if (!wellFormed(s)) return tag(T_ILLFORMED);
    len += encoder.encodeInto(s.slice(i), u8.subarray(at + i, at + 3 * n)).written;
  }
  u8[inPtr + p] = T_STRING;
  dv.setUint32(inPtr + p + 1, len, true);
  p += 5 + len;
}

// put encodes any value. Objects are encoded as their tag alone; putObj
// encodes an object whose fields the caller then puts in schema order.
export function put(v) {
  switch (typeof v) {
    case 'string':
      return putStr(v);
    case 'number':
      ensure(9);
      u8[inPtr + p] = T_NUMBER;
      dv.setFloat64(inPtr + p + 1, v, true);
      p += 9;
      return;
    case 'undefined':
      return tag(T_UNDEFINED);
    case 'boolean':
      return tag(v ? T_TRUE : T_FALSE);
    case 'function':
      return tag(T_FUNCTION);
    case 'object': {
      if (v === null) return tag(T_NULL);
      if (Array.isArray(v)) return tag(T_ARRAY);
      const h = handleOf(v);
      if (h === 0) return tag(T_OBJECT);
      ensure(6);
      u8[inPtr + p] = T_HANDLE;
      u8[inPtr + p + 1] = kindOf(v);
      dv.setUint32(inPtr + p + 2, h, true);
      p += 6;
      return;
    }
    default:
      return tag(T_OTHER);
  }
}

export function putObj(v) {
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    tag(T_OBJECT);
    return true;
  }
  put(v);
  return false;
}

export function putInstant(v) {
  if (putObj(v)) {
    put(v.millis);
    put(v.domain);
  }
}

export function putToken(v) {
  if (putObj(v)) {
    put(v.resource);
    put(v.holderId);
    put(v.fence);
  }
}

// The fields of the request and grant arguments of the current call, each
// read once from the caller's object (in the order Go decodes them) before
// anything is encoded. A call that succeeds has had them checked by Go, and
// the results that repeat them (a grant carries its request's id, resource
// and holder; a lease its grant's) are built from these instead of decoding
// the same strings again.
let rqObj, rqKind, rqResource, rqHolder, rqSentAt, rqTObj, rqMillis, rqFence;
export let rqId, rqDomain;
let gtObj, gtFence, gtTtl, gtAt, gtTObj, gtMillis;
export let gtId, gtResource, gtHolder, gtDomain;

function isRecord(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// The request the last beginAcquire returned and the grant the last
// coordinator.acquire of it returned, with the values they were made with:
// Go keeps the same two (Bridge.last and Bridge.lastGrant, set by the same
// calls), so a call passed these objects unchanged sends no arguments.
let reusedCalls = 0; // calls that passed these two instead of their arguments (a diagnostic for tests)

/** Counts a call that passed the last request (and grant) by reference. */
export function noteReuse() {
  reusedCalls++;
}

/** How many calls noteReuse counted. */
export function reusedCount() {
  return reusedCalls;
}
export let lastReq = null;
let lrGen = 0, lrId, lrResource, lrHolder, lrSentAt, lrMillis, lrDomain;
export let lastGrant = null;
let lgId, lgResource, lgHolder, lgFence, lgTtl, lgAt, lgMillis, lgDomain;

export function setLastRequest(r) {
  lastReq = r;
  lrGen = generation;
  lrId = r.requestId;
  lrResource = r.resource;
  lrHolder = r.holderId;
  lrSentAt = r.sentAt;
  lrMillis = lrSentAt.millis;
  lrDomain = lrSentAt.domain;
  lastGrant = null;
  return r;
}

export function setLastGrant(g) {
  lastGrant = g;
  lgId = g.requestId;
  lgResource = g.resource;
  lgHolder = g.holderId;
  lgFence = g.fence;
  lgTtl = g.ttlMillis;
  lgAt = g.coordinatorExpiresAt;
  lgMillis = lgAt.millis;
  lgDomain = lgAt.domain;
}

// readRequestArg reads the fields of a request argument and reports whether
// it is the last request beginAcquire returned, unchanged (and still the
// last one after its fields were read: a getter could have begun another).
export function readRequestArg(v) {
  rqObj = isRecord(v);
  if (!rqObj) {
    rqKind = v;
    rqId = rqResource = rqHolder = rqDomain = undefined;
    return false;
  }
  rqKind = v.kind;
  rqId = v.requestId;
  rqResource = v.resource;
  rqHolder = v.holderId;
  const t = rqSentAt = v.sentAt;
  rqTObj = isRecord(t);
  rqMillis = rqDomain = undefined;
  if (rqTObj) {
    rqMillis = t.millis;
    rqDomain = t.domain;
  }
  rqFence = v.fence;
  return v === lastReq && lrGen === generation && rqKind === 'acquire' && rqId === lrId && rqResource === lrResource &&
    rqHolder === lrHolder && t === lrSentAt && rqMillis === lrMillis && rqDomain === lrDomain && rqFence === undefined;
}

// putReadRequest encodes the request readRequestArg read.
export function putReadRequest() {
  if (!rqObj) return put(rqKind);
  tag(T_OBJECT);
  put(rqKind);
  put(rqId);
  put(rqResource);
  put(rqHolder);
  if (rqTObj) {
    tag(T_OBJECT);
    put(rqMillis);
    put(rqDomain);
  } else {
    put(rqSentAt);
  }
  put(rqFence);
}

export function putRequest(v) {
  readRequestArg(v);
  putReadRequest();
}

// readGrantArg reads the fields of a grant argument and reports whether it
// is the last grant coordinator.acquire returned for the last request begun,
// unchanged.
export function readGrantArg(v) {
  gtObj = isRecord(v);
  if (!gtObj) {
    gtId = v;
    return false;
  }
  gtId = v.requestId;
  gtResource = v.resource;
  gtHolder = v.holderId;
  gtFence = v.fence;
  gtTtl = v.ttlMillis;
  const t = gtAt = v.coordinatorExpiresAt;
  gtTObj = isRecord(t);
  gtMillis = gtDomain = undefined;
  if (gtTObj) {
    gtMillis = t.millis;
    gtDomain = t.domain;
  }
  return v === lastGrant && lastReq !== null && gtId === lgId && gtResource === lgResource && gtHolder === lgHolder &&
    gtFence === lgFence && gtTtl === lgTtl && t === lgAt && gtMillis === lgMillis && gtDomain === lgDomain;
}

// putSame encodes a grant's string field: T_SAME when it is the same string
// as the matching field of the request encoded just before (Go then uses the
// request's, already decoded and checked), else the value itself.
function putSame(v, same) {
  if (typeof v === 'string' && v === same) return tag(T_SAME);
  put(v);
}

// putReadGrant encodes the grant readGrantArg read, passed after the request
// putReadRequest encoded (completeAcquire and completeRenewal): the strings
// it shares with that request go as T_SAME.
export function putReadGrant() {
  if (!gtObj) return put(gtId);
  tag(T_OBJECT);
  putSame(gtId, rqId);
  putSame(gtResource, rqResource);
  putSame(gtHolder, rqHolder);
  put(gtFence);
  put(gtTtl);
  if (gtTObj) {
    tag(T_OBJECT);
    put(gtMillis);
    putSame(gtDomain, rqDomain);
  } else {
    put(gtAt);
  }
}

/** A clock reading: milliseconds and the domain (clock) it was read in. */
export class Instant {
  constructor(millis, domain) {
    this.millis = millis;
    this.domain = domain;
  }

  /** this minus earlier, in milliseconds; ClockDomainError across domains. */
  since(earlier) {
    const enc = begin();
    putInstant(this);
    putInstant(earlier);
    call(enc, X.lf_instant_since, p);
    return f64();
  }

  toString() {
    return `${this.millis}ms@${JSON.stringify(this.domain)}`;
  }
}

// ---------------------------------------------------------------- results

let outPtr = 0, q = 0;

// done checks a call's status and positions the result reader. A status
// other than 0 becomes the matching error.
export function done(st) {
  if (u8.length === 0) views();
  outPtr = hdr[2];
  q = 0;
  if (st !== 0) throw readError(st);
}

export function f64() {
  const v = dv.getFloat64(outPtr + q, true);
  q += 8;
  return v;
}

export function bool() {
  return u8[outPtr + q++] !== 0;
}

export function str() {
  const n = dv.getUint32(outPtr + q, true);
  const at = outPtr + q + 4;
  q += 4 + n;
  if (n <= 10) {
    // Short ASCII strings: cheaper than a TextDecoder call (measured).
    let s = '';
    for (let i = 0; i < n; i++) {
      const c = u8[at + i];
      if (c >= 0x80) return decoder.decode(u8.subarray(at, at + n));
      s += String.fromCharCode(c);
    }
    return s;
  }
  return decoder.decode(u8.subarray(at, at + n));
}

export function readError(st) {
  const message = str();
  switch (st) {
    case 1:
      return new InvalidArgumentError(message, str());
    case 2:
      return new StaleFenceError(message, { rejection: readRejection() });
    case 3:
      return new ClockDomainError(message, { expectedDomain: str(), actualDomain: str() });
    case 4:
      return new ClockReadingError(message, { domain: str(), problem: str(), value: f64(), previous: f64() });
    case 5:
      return new RequestCompletedError(message, { requestId: str() });
    case 6:
      return new GrantMismatchError(message, { field: str(), expected: str(), actual: str() });
    default:
      return new LeaseFenceError(message);
  }
}

export function readRejection() {
  const seq = f64();
  const resource = str();
  const refusedHolderId = str();
  const refusedFence = f64();
  const admitted = str();
  const admittedFence = f64();
  return Object.freeze({
    seq, resource, refusedHolderId, refusedFence,
    admittedHolderId: admitted === '' ? null : admitted, admittedFence,
  });
}

export function readInstant() {
  const millis = f64();
  return new Instant(millis, str());
}

export function readRequest() {
  const kind = str();
  const requestId = str();
  const resource = str();
  const holderId = str();
  const sentAt = readInstant();
  const fence = f64();
  const r = { kind, requestId, resource, holderId, sentAt };
  if (kind === 'renew') r.fence = fence;
  return r;
}

// readAcquireRequest reads the request beginAcquire made, whose kind,
// resource, holder and domain the caller knows: only its id and its send
// instant are new.
export function readAcquireRequest(resource, holderId, domain) {
  const requestId = str();
  const millis = f64();
  return { kind: 'acquire', requestId, resource, holderId, sentAt: new Instant(millis, domain) };
}

// readGrantOf reads a grant whose id, resource and holder are the given
// strings and whose expiry is in domain: Go writes only its numbers.
export function readGrantOf(requestId, resource, holderId, domain) {
  const fence = f64();
  const ttlMillis = f64();
  const millis = f64();
  return { requestId, resource, holderId, fence, ttlMillis, coordinatorExpiresAt: new Instant(millis, domain) };
}

// readOutcome reads the answer to the request putRequest encoded, from the
// coordinator whose clock has domain.
export function readOutcome(domain) {
  switch (f64()) {
    case 1:
      return { ok: true, grant: readGrantOf(rqId, rqResource, rqHolder, domain) };
    case 2: {
      const heldBy = str();
      return { ok: false, heldBy, retryAfterMillis: f64() };
    }
    default:
      return { ok: false, reason: 'expired' };
  }
}

// call runs one export whose arguments encoding enc wrote.
export function call(enc, fn, a, b, c) {
  if (enc !== encoding) {
    throw new LeaseFenceError('lease-fence: an argument\'s getter called into lease-fence while the arguments were being read; nothing was done');
  }
  done(enter(fn, a, b, c));
}

// call4 is call for the fast exports that take no argument buffer.
export function call4(fn, a, b, c, d) {
  if (dead) throw instanceDied();
  if (reading) begin(); // throws the re-entry error
  const st = enter(fn, a, b, c, d);
  if (st !== 0) done(st);
}

// Interned strings: short strings the fast paths pass to Go as numbers.
const MAX_IDS = 4096;
const ids = new Map();

// roomForIds makes room for n new ids. It is called before a call's ids are
// looked up, never between, since a reset invalidates ids already handed out.
// The ids of the last token committed, which is usually the next one too;
// lastResource is empty after a reset, when lastIds mean nothing.
let lastResource = '', lastHolder = '';
const lastIds = [0, 0];
let idsOf = 0; // the generation of the instance the ids are of

// resetIds forgets the ids of an instance that init() has replaced: the
// fresh one knows none of them.
function resetIds() {
  lastResource = lastHolder = '';
  ids.clear();
  idsOf = generation;
}

function roomForIds(n) {
  if (reading) begin(); // throws the re-entry error
  if (idsOf !== generation) resetIds();
  if (ids.size + n > MAX_IDS) {
    lastResource = lastHolder = '';
    ids.clear();
    enter(X.lf_reset_ids);
  }
}

// idOf returns s's id, registering it on first use, or 0 when s cannot be
// interned (empty, long, not well-formed): the caller then takes the slow
// path, which reports the problem.
function idOf(s) {
  const id = ids.get(s);
  if (id !== undefined) return id;
  if (s.length === 0 || s.length > 64 || ids.size >= MAX_IDS) return 0; // 64 UTF-16 units fit in 192 UTF-8 bytes
  begin(); // s is a string: no caller code runs while it is encoded
  putStr(s);
  if (enter(X.lf_intern, p) !== 0) return 0;
  if (u8.length === 0) views();
  const n = dv.getFloat64(hdr[2], true);
  ids.set(s, n);
  return n;
}

// tokenIds sets idResource and idHolder to the ids of a token's strings and
// returns true, or returns false when one cannot be interned.
export let idResource = 0, idHolder = 0;
export function tokenIds(resource, holderId) {
  if (idsOf !== generation) resetIds();
  if (resource === lastResource && holderId === lastHolder && resource !== '') {
    idResource = lastIds[0];
    idHolder = lastIds[1];
    return true;
  }
  roomForIds(2);
  idResource = idOf(resource);
  idHolder = idResource && idOf(holderId);
  if (!idHolder) return false;
  lastResource = resource;
  lastHolder = holderId;
  lastIds[0] = idResource;
  lastIds[1] = idHolder;
  return true;
}

// resourceId returns the id of a resource string, or 0 when it cannot be
// interned.
export function resourceId(resource) {
  if (idsOf !== generation) resetIds();
  if (resource === lastResource && resource !== '') return lastIds[0];
  roomForIds(1);
  return idOf(resource);
}

// putReadToken encodes a token whose fields were read already.
export function putReadToken(token, isToken, resource, holderId, fence) {
  if (isToken) {
    tag(T_OBJECT);
    put(resource);
    put(holderId);
    put(fence);
  } else {
    put(token);
  }
}

export function isToken(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// putLeaseTag encodes the tag of a lease as ClientBeginRenewal reads it: a
// lease handle tag numbered 0 (it only says that the value is a Lease).
export function putLeaseTag() {
  ensure(6);
  u8[inPtr + p] = T_HANDLE;
  u8[inPtr + p + 1] = K_LEASE;
  dv.setUint32(inPtr + p + 2, 0, true);
  p += 6;
}
