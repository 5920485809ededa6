// lease-fence: leases whose holders can be proven wrong.
//
// This ES module runs lease-fence.wasm (the Go library compiled with
// GOOS=js GOARCH=wasm). Imported directly it loads the wasm once, at import,
// with top-level await: read from beside this file on file: URLs, fetched
// from beside it otherwise (serve it as application/wasm for streaming
// compilation). The entries init.mjs, node.mjs and workerd.mjs import it
// after manual.mjs and call init themselves (see docs/js.md). Every function
// and method is synchronous once init has finished.
//
// How calls cross into Go: each Go function is a //go:wasmexport taking and
// returning numbers. Arguments are written into a byte buffer inside the wasm
// memory as tagged values (see put below and wasm/lib/convert), whatever the
// caller passed, so every type and range check happens in Go, in one place.
// Results come back in a second buffer. Objects made by the library (clocks,
// coordinators, clients, gates) are numeric handles into a table on the Go
// side, released when the JavaScript object is garbage collected; a lease is
// plain data held here (see class Lease).

import { instantiate, loading, MISSING_FIX, randomSource } from './loader.mjs';

// Go's runtime glue (wasm_exec.mjs, a build output beside this file), imported
// at once but by a dynamic import, so that a package or checkout without it
// rejects the import with a LeaseFenceError that says how to build it (a
// static import would fail before this module could say anything).
const goRuntime = import('./wasm_exec.mjs').then((m) => m.Go, (e) => {
  throw new LeaseFenceError(`lease-fence: loading wasm_exec.mjs (the Go runtime's glue, beside lease-fence.mjs) failed: ${e?.message ?? e}; ${MISSING_FIX}`, { cause: e });
});
goRuntime.catch(() => {}); // reported by init

// ---------------------------------------------------------------- errors
//
// The error classes and isStaleFence live in errors.mjs (no wasm), shared
// with lease-fence/sql, lease-fence/redis and the fence header.
import {
  ClockDomainError, ClockReadingError, GateBusyError, GrantMismatchError, InvalidArgumentError,
  LeaseFenceError, RequestCompletedError, StaleFenceError, SupersededError,
} from './errors.mjs';

export {
  ClockDomainError, ClockReadingError, GateBusyError, GrantMismatchError, InvalidArgumentError,
  isStaleFence, LeaseFenceError, RequestCompletedError, StaleFenceError, SupersededError,
} from './errors.mjs';

// checkOptions refuses an options object with an own enumerable property
// that is not one of names (an option misspelt, or one this version does
// not have, is an error rather than a silent default). Only the keys are
// read: no getter runs. Non-objects are left to the caller's own checks.
function checkOptions(options, names, what) {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) return;
  for (const k in options) {
    if (!names.includes(k) && Object.hasOwn(options, k)) unknownOption(k, names, what);
  }
}

function unknownOption(k, names, what) {
  throw new InvalidArgumentError(`lease-fence: ${what} has no option ${JSON.stringify(k)}; its options are ${names.join(', ')}`,
    `options.${k}`);
}

// ---------------------------------------------------------------- loading

// createClock sources, by reader id. Go never calls into JavaScript: a call
// that needs a source's reading stops with status READ_SOURCE and changes
// nothing, and enter reads the source here, with no Go code on the stack and
// no Go lock held, then makes the call again with the reading (readSource).
// While a source runs, `reading` is set and the library refuses to be called
// (begin): the call that asked for the reading is half done, its arguments
// sit in the shared buffer and the glue holds its state.
let reading = false;
const readers = new Map();

// The current instance. init() sets all of these; after the instance died
// (a trap or the Go runtime exiting, e.g. out of memory) init() replaces
// them with a fresh instance, and generation tells objects made by the dead
// one apart (their handles mean nothing to the new one).
let go, X, memory, hdrAddr, u8, dv, hdr, readingAddr;
let dead = '';
let generation = 0;
let compiled; // the WebAssembly.Module, which a restart instantiates again
let starting = null;

function views() {
  u8 = new Uint8Array(memory.buffer);
  dv = new DataView(memory.buffer);
  hdr = new Uint32Array(memory.buffer, hdrAddr, 6);
}

const loadErrors = {
  invalid: (message) => new InvalidArgumentError(message, 'source'),
  failed: (message, cause) => new LeaseFenceError(message, { cause }),
};

/**
 * Starts the WebAssembly instance from source (a URL or URL string, a
 * Response, bytes or a WebAssembly.Module, or a promise of one) and resolves
 * once every export is ready. While an instance is running it does nothing.
 * After the instance died it starts a fresh one, from source or else from
 * the module it compiled before; objects made by the dead instance stay
 * unusable. Without source, and nothing compiled yet, it loads
 * lease-fence.wasm from beside this module.
 */
export function init(source) {
  if (X !== undefined && !dead) return Promise.resolve();
  starting ??= start(source ?? compiled).finally(() => {
    starting = null;
  });
  return starting;
}

async function start(source) {
  if (registry === null) {
    throw new LeaseFenceError('lease-fence: this host has no FinalizationRegistry, which the library needs to free what its objects hold (in Cloudflare Workers, set compatibility_date to 2025-05-05 or later)');
  }
  // A promise of the wasm (node.mjs's read) may reject while the glue
  // loads: instantiate reports it; until then it is handled here.
  if (source instanceof Promise) source.catch(() => {});
  const Go = await goRuntime;
  const next = new Go();
  next.getRandomValues = randomSource();
  next.exit = (code) => {
    if (next === go) dead ||= `the Go runtime exited with code ${code}`;
  };
  const rooms = startRooms();
  const { module, instance } = await instantiate(source, next.importObject, loadErrors);
  await rooms;
  // run calls Go's main, which returns when it blocks (the exports are then
  // ready); run's promise settles only if Go exits. A trap in main rejects it
  // at once, and a race with an already resolved value still sees that.
  try {
    await Promise.race([next.run(instance), undefined]);
  } catch (e) {
    throw new LeaseFenceError(`lease-fence: the Go runtime failed to start: ${e.message}`, { cause: e });
  }
  if (next.exited) throw new LeaseFenceError('lease-fence: the Go runtime exited while starting');
  const exports = instance.exports;
  const at = exports.lf_header();
  const layout = new Uint32Array(exports.mem.buffer, at, 5)[4];
  if (layout !== 2) {
    throw new LeaseFenceError(`lease-fence: lease-fence.wasm has buffer layout ${layout}, this module expects 2; rebuild both together`);
  }
  go = next;
  X = exports;
  memory = exports.mem;
  hdrAddr = at;
  views();
  readingAddr = hdr[5];
  generation++;
  dead = '';
  deathCause = undefined;
  compiled = module;
  reading = false;
  readers.clear();
  ids.clear();
  lastResource = lastHolder = '';
}

// When an exception comes out of a call into Go (see enter), dead is set to
// CUT_SHORT and deathCause to the exception, inline in the catch block: plain
// assignments, with no call that a full stack could refuse, so an instance
// that stopped is never used again. instanceDied words it later.
const CUT_SHORT = 'cut short';
let deathCause;

function instanceDied() {
  const cause = deathCause;
  const why = dead !== CUT_SHORT ? dead : cause instanceof RangeError
    ? `a call into it was cut short by ${cause.name}: ${cause.message} (the JavaScript stack was nearly full when lease-fence was called, and the Go code it interrupted may have held locks)`
    : `it trapped: ${cause && cause.message}`;
  return new LeaseFenceError(`lease-fence: the WebAssembly instance has stopped (${why}); await init() for a fresh one (objects made before stay unusable)`, { cause });
}

function notStarted() {
  return new LeaseFenceError('lease-fence: the WebAssembly instance is not started; await init() before using the library (with lease-fence/init, pass the wasm; in Cloudflare Workers, call it inside a handler)');
}

// ---------------------------------------------------------------- argument encoding

const T_UNDEFINED = 0, T_NULL = 1, T_FALSE = 2, T_TRUE = 3, T_NUMBER = 4, T_STRING = 5, T_OBJECT = 6,
  T_ARRAY = 7, T_FUNCTION = 8, T_OTHER = 9, T_ILLFORMED = 10, T_HANDLE = 11, T_TOOLONG = 12,
  T_SAME = 13;
const MAX_STRING = 1 << 20;
const K_CLOCK = 1, K_COORDINATOR = 2, K_CLIENT = 3, K_LEASE = 4, K_GATE = 5, K_NAIVE = 6;

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

let inPtr = 0, inCap = 0, p = 0;


// begin starts encoding a call's arguments and returns the encoding's number.
// Reading an argument can run the caller's code (a getter), and if that code
// calls into lease-fence it starts an encoding of its own over the same
// buffer; call then sees that the number moved on and refuses to send the
// outer call's now-mixed arguments.
let encoding = 0;
function begin() {
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

function ensure(n) {
  if (p + n <= inCap) return;
  enter(X.lf_grow, p, p + n);
  if (u8.length === 0) views();
  inPtr = hdr[0];
  inCap = hdr[1];
}

function tag(t) {
  ensure(1);
  u8[inPtr + p++] = t;
}

function putStr(s) {
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
function put(v) {
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

function putObj(v) {
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    tag(T_OBJECT);
    return true;
  }
  put(v);
  return false;
}

function putInstant(v) {
  if (putObj(v)) {
    put(v.millis);
    put(v.domain);
  }
}

function putToken(v) {
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
let rqObj, rqKind, rqId, rqResource, rqHolder, rqSentAt, rqTObj, rqMillis, rqDomain, rqFence;
let gtObj, gtId, gtResource, gtHolder, gtFence, gtTtl, gtAt, gtTObj, gtMillis, gtDomain;

function isRecord(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// The request the last beginAcquire returned and the grant the last
// coordinator.acquire of it returned, with the values they were made with:
// Go keeps the same two (Bridge.last and Bridge.lastGrant, set by the same
// calls), so a call passed these objects unchanged sends no arguments.
let reusedCalls = 0; // calls that passed these two instead of their arguments (a diagnostic for tests)
let lastReq = null, lrGen = 0, lrId, lrResource, lrHolder, lrSentAt, lrMillis, lrDomain;
let lastGrant = null, lgId, lgResource, lgHolder, lgFence, lgTtl, lgAt, lgMillis, lgDomain;

function setLastRequest(r) {
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

function setLastGrant(g) {
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
function readRequestArg(v) {
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
function putReadRequest() {
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

function putRequest(v) {
  readRequestArg(v);
  putReadRequest();
}

// readGrantArg reads the fields of a grant argument and reports whether it
// is the last grant coordinator.acquire returned for the last request begun,
// unchanged.
function readGrantArg(v) {
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
function putReadGrant() {
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

// ---------------------------------------------------------------- results

let outPtr = 0, q = 0;

// done checks a call's status and positions the result reader. A status
// other than 0 becomes the matching error.
function done(st) {
  if (u8.length === 0) views();
  outPtr = hdr[2];
  q = 0;
  if (st !== 0) throw readError(st);
}

function f64() {
  const v = dv.getFloat64(outPtr + q, true);
  q += 8;
  return v;
}

function bool() {
  return u8[outPtr + q++] !== 0;
}

function str() {
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

function readError(st) {
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

function readRejection() {
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

function readInstant() {
  const millis = f64();
  return new Instant(millis, str());
}

function readRequest() {
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
function readAcquireRequest(resource, holderId, domain) {
  const requestId = str();
  const millis = f64();
  return { kind: 'acquire', requestId, resource, holderId, sentAt: new Instant(millis, domain) };
}

function readGrant() {
  const requestId = str();
  const resource = str();
  const holderId = str();
  const fence = f64();
  const ttlMillis = f64();
  const coordinatorExpiresAt = readInstant();
  return { requestId, resource, holderId, fence, ttlMillis, coordinatorExpiresAt };
}

// readGrantOf reads a grant whose id, resource and holder are the given
// strings and whose expiry is in domain: Go writes only its numbers.
function readGrantOf(requestId, resource, holderId, domain) {
  const fence = f64();
  const ttlMillis = f64();
  const millis = f64();
  return { requestId, resource, holderId, fence, ttlMillis, coordinatorExpiresAt: new Instant(millis, domain) };
}

// readOutcome reads the answer to the request putRequest encoded, from the
// coordinator whose clock has domain.
function readOutcome(domain) {
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

// ---------------------------------------------------------------- handles

// init refuses to start without FinalizationRegistry (Cloudflare Workers
// before compatibility date 2025-05-05): every object would leak its handle.
const registry = typeof FinalizationRegistry === 'function'
  ? new FinalizationRegistry(({ h, reader, g }) => {
    if (g !== generation) return; // made by an instance that has been replaced
    if (reader) readers.delete(reader);
    if (!dead) {
      try {
        enter(X.lf_free, h);
      } catch {
        // enter marked the instance dead; the next call reports it.
      }
    }
  })
  : null;

const secret = Symbol('lease-fence internal');

// Every object the library makes extends Handled, whose private fields hold
// its handle on the Go side, its kind and the instance (generation) that made
// it. handleOf gives 0 for anything else, which Go refuses as "not a live
// ...", and throws for an object of an instance that init() has replaced.
let handleOf, kindOf, setHandle;
class Handled {
  #h = 0;
  #k = 0;
  #g = 0;
  static {
    handleOf = (o) => {
      if (!(isObject(o) && #h in o)) return 0;
      if (o.#g !== generation) {
        throw new LeaseFenceError('lease-fence: this object was made by a WebAssembly instance that has stopped; make a new one');
      }
      return o.#h;
    };
    kindOf = (o) => o.#k;
    setHandle = (o, h, k) => {
      o.#h = h;
      o.#k = k;
      o.#g = generation;
    };
  }
}

function adopt(obj, kind, h, reader) {
  setHandle(obj, h, kind);
  registry.register(obj, { h, reader, g: generation });
}

function isObject(v) {
  return (typeof v === 'object' && v !== null) || typeof v === 'function';
}

function badThis(what) {
  throw new InvalidArgumentError(`lease-fence: this is not a live ${what}`, 'this');
}

function internalOnly(key, name) {
  if (key !== secret) {
    throw new InvalidArgumentError(`lease-fence: ${name} objects are made by the library, not with new`, 'this');
  }
}

// ---------------------------------------------------------------- stack room
//
// Go code cut short by a full JavaScript stack may leave a lock held or a map
// half changed, and the instance then has to stop. So before every call into
// Go, room() makes sure that 8 KiB of stack are left, at least twice what any
// call into Go was measured to use, and otherwise throws the engine's own
// RangeError here, before Go runs: the caller gets a stack overflow as from
// any JavaScript code, and the instance stays as it was. Costs and
// measurements are in docs/js.md.
//
// room is a wasm function with no code and 8 KiB of locals: V8's baseline
// wasm compiler (Liftoff) checks a frame that large against the stack limit
// on entry. Once a function is hot, V8's optimizing compiler recompiles it
// without the unused locals, and so without the check. So the functions come
// ROOM_FUNCS to a module, each used for ROOM_CALLS calls only, well before
// that happens; the next module is compiled in the background while the
// current one is used (or on the spot if it is not ready), and each module
// carries its own serial number, since V8 would return an already optimized
// copy of the same bytes from its cache. The check runs on V8 only (another
// engine may zero such a frame at a far higher cost), and not where the host
// forbids compiling wasm at run time (Cloudflare Workers); there a call that
// runs out of stack inside Go stops the instance (see enter).
const ROOM_FUNCS = 8;
const ROOM_CALLS = 8192;
let room = null; // the current check, or null when there is none
let roomLeft = 0; // calls left for room
let rooms = null; // the current module's functions
let roomNext = 0; // the next of rooms to use
let roomSerial = 0;
let nextRooms = null; // the next module, once compiled in the background
let roomsPending = false;

// roomBytes returns a module of ROOM_FUNCS functions without parameters,
// results or code, each with 1,024 i64 locals (8 KiB), exported as "0",
// "1", ...; its custom section holds serial.
function roomBytes(serial) {
  const leb = (n) => (n < 0x80 ? [n] : [0x80 | (n & 0x7f), n >> 7]);
  const section = (id, body) => [id, ...leb(body.length), ...body];
  const funcs = [ROOM_FUNCS], exports = [ROOM_FUNCS], code = [ROOM_FUNCS];
  for (let i = 0; i < ROOM_FUNCS; i++) {
    funcs.push(0);
    exports.push(1, 0x30 + i, 0x00, i);
    code.push(5, 1, 0x80, 0x08, 0x7e, 0x0b); // 1 local group: 1,024 x i64; end
  }
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, 0x60, 0, 0]), // type 0: [] -> []
    ...section(3, funcs), ...section(7, exports), ...section(10, code),
    ...section(0, [1, 0x73, serial & 0xff, (serial >>> 8) & 0xff, (serial >>> 16) & 0xff, serial >>> 24]),
  ]);
}

function useRooms(module) {
  const x = new WebAssembly.Instance(module).exports;
  rooms = [];
  for (let i = 0; i < ROOM_FUNCS; i++) rooms.push(x[String.fromCharCode(0x30 + i)]);
  roomNext = 0;
}

// compileRooms compiles the next module in the background.
function compileRooms() {
  roomsPending = true;
  WebAssembly.compile(roomBytes(++roomSerial)).then((m) => {
    nextRooms = m;
  }, () => {}).finally(() => {
    roomsPending = false;
  });
}

// nextRoom moves room on to the next function, and to the next module after
// the last. A RangeError (the stack is full here too) leaves roomLeft at 0,
// so the next call tries again.
function nextRoom() {
  if (roomNext === ROOM_FUNCS) {
    if (nextRooms !== null) {
      useRooms(nextRooms);
      nextRooms = null;
    } else {
      useRooms(new WebAssembly.Module(roomBytes(++roomSerial)));
    }
  }
  if (roomNext === ROOM_FUNCS >> 1 && nextRooms === null && !roomsPending) compileRooms();
  room = rooms[roomNext++];
  roomLeft = ROOM_CALLS;
}

// startRooms turns the check on where it can work (see above). V8 is told
// apart by how it names wasm code in a stack trace (wasm://wasm/<hash>),
// from a module whose one function traps.
async function startRooms() {
  if (room !== null) return;
  try {
    const trap = await WebAssembly.instantiate(new Uint8Array([
      0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00, 0x03, 0x02, 0x01, 0x00,
      0x07, 0x05, 0x01, 0x01, 0x74, 0x00, 0x00, 0x0a, 0x05, 0x01, 0x03, 0x00, 0x00, 0x0b, // t: unreachable
    ]));
    let stack = '';
    try {
      trap.instance.exports.t();
    } catch (e) {
      stack = String(e?.stack);
    }
    if (!stack.includes('wasm://wasm/')) return;
    useRooms(await WebAssembly.compile(roomBytes(++roomSerial)));
  } catch {
    return; // this host compiles no wasm at run time
  }
  nextRoom();
}

// enter runs export fn. Go never lets an exception out of its own code and
// never calls into JavaScript, so anything fn throws cut a Go call short: a
// trap, or a RangeError when the JavaScript stack ran out while Go code was
// running (where room() cannot check, see above). That code may have held a
// lock or been half way through changing a map, so the instance is marked
// dead then and there rather than left to fail later in some other call;
// init() starts a fresh one. A call that needs a clock source's reading
// comes back as READ_SOURCE (see readSource).
const READ_SOURCE = 8;
let wasmCalls = 0;

// yieldToGo lets Go's garbage collector run its mark worker (lf_yield, see
// exports_js.go); enter queues it as a microtask every 1,024 calls, so it
// runs once the caller's synchronous code is done, with the stack almost
// empty.
let yieldQueued = false;
function yieldToGo() {
  yieldQueued = false;
  if (X === undefined || dead || reading) return;
  try {
    enter(X.lf_yield);
  } catch {
    // enter marked the instance dead; the next call reports it.
  }
}
function enter(fn, a, b, c, d) {
  if (dead) throw instanceDied();
  if (room !== null) {
    if (--roomLeft <= 0) nextRoom();
    room();
  }
  if ((++wasmCalls & 1023) === 0 && !yieldQueued) {
    yieldQueued = true;
    queueMicrotask(yieldToGo);
  }
  const st = callGo(fn, a, b, c, d);
  if (st === READ_SOURCE) return readSource(fn, a, b, c, d);
  return st;
}

// callGo runs export fn once. Anything it throws cut a Go call short (see
// enter): the instance is marked dead with plain assignments first, since
// building an error could itself overflow the stack.
function callGo(fn, a, b, c, d) {
  let st;
  try {
    st = fn(a, b, c, d);
  } catch (e) {
    if (!dead) {
      dead = CUT_SHORT;
      deathCause = e;
    }
    throw instanceDied();
  }
  if (go.exited) throw instanceDied();
  return st;
}

// readSource answers a call that stopped for the reading of a createClock
// source (Out: the reader id, then a ticket). Go changed nothing and holds
// no lock, and no Go code is on the stack: an exception the source throws,
// a RangeError at its very entry included, goes to the caller as it is and
// leaves the instance as it was. The reading goes into Go's Reading slot
// with the ticket, and the call is made again: Go checks everything again
// and acts on the reading (or refuses, reading nothing more).
function readSource(fn, a, b, c, d) {
  if (u8.length === 0) views();
  const id = dv.getFloat64(hdr[2], true);
  const ticket = dv.getFloat64(hdr[2] + 8, true);
  const source = readers.get(id);
  let v = NaN;
  if (source !== undefined) {
    reading = true;
    try {
      v = source();
    } finally {
      reading = false;
    }
    if (typeof v !== 'number') v = NaN;
  }
  if (u8.length === 0) views();
  dv.setFloat64(readingAddr, v, true);
  dv.setUint32(readingAddr + 8, id, true);
  dv.setUint32(readingAddr + 12, ticket, true);
  if (room !== null) room();
  wasmCalls++;
  const st = callGo(fn, a, b, c, d);
  if (st === READ_SOURCE) {
    throw new LeaseFenceError('lease-fence: internal error (please report): a call asked for a second clock reading; nothing was done');
  }
  return st;
}

// call runs one export whose arguments encoding enc wrote.
function call(enc, fn, a, b, c) {
  if (enc !== encoding) {
    throw new LeaseFenceError('lease-fence: an argument\'s getter called into lease-fence while the arguments were being read; nothing was done');
  }
  done(enter(fn, a, b, c));
}

// call4 is call for the fast exports that take no argument buffer.
function call4(fn, a, b, c, d) {
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

function roomForIds(n) {
  if (reading) begin(); // throws the re-entry error
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

// ---------------------------------------------------------------- instants and clocks

/** A clock reading: milliseconds and the domain (clock) it was read in. */
class Instant {
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

class Clock extends Handled {
  #domain;
  constructor(key, h, domain, reader) {
    internalOnly(key, 'Clock');
    super();
    this.#domain = domain;
    adopt(this, K_CLOCK, h, reader);
  }

  /** The clock's domain: instants it returns carry this name. */
  get domain() {
    return isObject(this) && #domain in this ? this.#domain : badThis('clock');
  }

  /** Reads the clock. Throws ClockReadingError for a NaN, infinite or backwards reading. */
  now() {
    const enc = begin();
    call(enc, X.lf_clock_now, handleOf(this));
    return new Instant(f64(), this.#domain);
  }
}

class ManualClock extends Clock {
  /** Moves the clock forward by ms (finite, >= 0). */
  advance(ms) {
    const enc = begin();
    put(ms);
    call(enc, X.lf_clock_advance, handleOf(this), p);
  }

  /** Moves the clock to ms; moving it backwards throws ClockReadingError. */
  set(ms) {
    const enc = begin();
    put(ms);
    call(enc, X.lf_clock_set, handleOf(this), p);
  }
}

/** A clock backed by the host's monotonic clock, starting near 0 when created. */
export function createMonotonicClock(domain) {
  const enc = begin();
  put(domain);
  call(enc, X.lf_clock_monotonic, p);
  return new Clock(secret, f64(), domain);
}

/** A clock that moves only when told to, and by stepPerRead on every read. */
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

/** Wraps readMillis (any millisecond source) with the NaN/infinite/backwards guard. */
export function createClock(domain, readMillis) {
  const enc = begin();
  put(domain);
  put(readMillis);
  const id = ++readerSeq;
  call(enc, X.lf_clock_custom, id, p);
  readers.set(id, readMillis);
  return new Clock(secret, f64(), domain, id);
}

// ---------------------------------------------------------------- coordinator

const COORDINATOR_OPTIONS = ['clock', 'ttlMillis', 'startFence'];

/** Grants, renews and releases leases, each with a fence. */
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

  /** The coordinator's clock. */
  get clock() {
    return isObject(this) && #clock in this ? this.#clock : badThis('LeaseCoordinator');
  }

  /** Lease length in milliseconds. */
  get ttlMillis() {
    return isObject(this) && #ttl in this ? this.#ttl : badThis('LeaseCoordinator');
  }

  /** The highest fence issued so far; persist it and pass it as startFence. */
  get issuedFence() {
    const enc = begin();
    call(enc, X.lf_coord_issued, handleOf(this));
    return f64();
  }

  acquire(request) {
    const enc = begin();
    if (readRequestArg(request) && request === lastReq) {
      // The request the last beginAcquire returned, unchanged: Go has it.
      reusedCalls++;
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

  /** Ends the lease token names if it is current; returns whether it did. */
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

/** The holder's side: stamps send instants and turns grants into leases. */
export class LeaseClient extends Handled {
  #clock;
  #holder;
  static {
    // How many acquire and completeAcquire calls passed the last request
    // and grant by reference instead of encoding them: a diagnostic for
    // tests that check which calls take that path.
    Object.defineProperty(this, Symbol.for('lease-fence.reusedCalls'), { get: () => reusedCalls });
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
      reusedCalls++;
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
    /** The fencing token to present with every write. */
    this.token = token;
    /** End of the lease in the client's clock domain. */
    this.deadline = deadline;
    /** The grant the lease was made from. */
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

  /** Advisory: whether the deadline has passed at this instant. Never branch a write on it. */
  hasExpired() {
    const d = leaseData(this);
    if (d === undefined) badThis('Lease');
    const enc = begin();
    call(enc, X.lf_lease_has_expired, handleOf(d[2]), d[1]);
    return bool();
  }

  /** Advisory: whether gate would admit this token at this instant. Never branch a write on it. */
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
  ensure(6);
  u8[inPtr + p] = T_HANDLE;
  u8[inPtr + p + 1] = K_LEASE;
  dv.setUint32(inPtr + p + 2, 0, true);
  p += 6;
  putToken(d[0]);
  put(d[3]);
}

// ---------------------------------------------------------------- gate

const AsyncFunctionPrototype = Object.getPrototypeOf(async () => {});

// goCommit asks Go to check a token against gate h and raise its floor, for
// a write fn about to run: it returns when the token is admitted and throws
// otherwise (StaleFenceError, logged in Go; InvalidArgumentError for a bad
// token or an fn that is not a function). isToken says whether token is an
// object, whose fields the caller has read (once) into resource, holderId
// and fence. A well-typed call passes the token's strings as interned ids
// and needs no argument buffer; Go makes every other check.
function goCommit(h, token, isToken, resource, holderId, fence, fn) {
  if (typeof fn === 'function' && typeof resource === 'string' && typeof holderId === 'string' && typeof fence === 'number' &&
    tokenIds(resource, holderId)) {
    call4(X.lf_gate_commit_ids, h, idResource, idHolder, fence);
    return;
  }
  const enc = begin();
  putReadToken(token, isToken, resource, holderId, fence);
  put(fn);
  call(enc, X.lf_gate_commit, h, p);
}

// tokenIds sets idResource and idHolder to the ids of a token's strings and
// returns true, or returns false when one cannot be interned.
let idResource = 0, idHolder = 0;
function tokenIds(resource, holderId) {
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
function resourceId(resource) {
  if (resource === lastResource && resource !== '') return lastIds[0];
  roomForIds(1);
  return idOf(resource);
}

// putReadToken encodes a token whose fields were read already.
function putReadToken(token, isToken, resource, holderId, fence) {
  if (isToken) {
    tag(T_OBJECT);
    put(resource);
    put(holderId);
    put(fence);
  } else {
    put(token);
  }
}

function isToken(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isThenable(v) {
  return (typeof v === 'object' || typeof v === 'function') && v !== null && typeof v.then === 'function';
}

function isAbortSignal(v) {
  return typeof v === 'object' && v !== null && typeof v.aborted === 'boolean' &&
    typeof v.addEventListener === 'function' && typeof v.removeEventListener === 'function';
}

const COMMIT_ASYNC_OPTIONS = ['signal'];

let isGate;

const GATE_OPTIONS = ['initialFloor', 'maxRejections', 'exclusive'];

// describeReason words an abort reason for a message: anything may be one.
function describeReason(r) {
  try {
    if (typeof r === 'object' && r !== null && typeof r.message === 'string') return r.name ? `${r.name}: ${r.message}` : r.message;
    return String(r);
  } catch {
    return typeof r;
  }
}

/** Stands in front of one resource and refuses writes from superseded fences. */
export class FenceGate extends Handled {
  #resource;
  #log = [];
  // The admitted generation: the token Go admitted last, whose fence is the
  // floor. A commit with exactly this token would be admitted by Go without
  // any change, so commit runs it without entering wasm. Every change of
  // the floor goes through this object (commit, commitAsync, admit), and
  // each sets these after Go admitted; a refusal leaves the floor, and so
  // them, unchanged. Everything else (another holder or fence, a refusal, a
  // commit inside a running write, admit, commitAsync) goes through Go.
  #holderId = null;
  #fence = -1;
  #made = generation; // the instance whose Go gate this is
  // Writes in progress: synchronous fns on the stack (a reentrant commit
  // inside fn nests), and writes whose promise has not settled. A write
  // that waits (commitAsync) is queued until both are 0, unless it shares
  // the gate (see #joins).
  #depth = 0;
  #held = 0;
  // options.exclusive: commitAsync writes run one at a time whatever their
  // fences. Otherwise writes with the running commitAsync writes' fence
  // run alongside them when nothing waits (shared admission).
  #exclusive = false;
  #queue = [];
  // An upper bound on the fences in #queue (0 when it is empty): a write
  // that starts with a fence at or above it has no newer fence waiting.
  #queueMax = 0;
  #draining = false; // #drain is on the stack: it starts the next write itself
  // The running write that holds the gate (#held > 0: a commitAsync write,
  // or a commit whose fn returned a promise), in as few writes per write as
  // can be. Its token is the one admitted last (#holderId, #fence), set as
  // it starts, unless an admit has moved those on since: admit then copies
  // it into #runHolder/#runFence first (null when it has not). #runCtrls
  // holds the AbortControllers of the signals the running commitAsync
  // writes' fns were given (several when they share the gate, all with one
  // fence) and #runTold whether those signals have aborted. #runSince is performance.now()
  // at its start when it got the gate from the queue (#runExact), otherwise
  // when the first write queued behind it (0 until then: the gate reads no
  // clock for a write nobody waits for). Writes never overlap and each ends
  // once, before the next starts, so its end clears the record.
  #runHolder = null;
  #runFence = 0;
  #runCtrls = new Set();
  #runTold = false;
  #runSince = 0;
  #runExact = false;

  static {
    isGate = (o) => isObject(o) && #queue in o;
    // How many calls have entered the wasm instance: a diagnostic for tests
    // that check which calls take the full path through Go.
    Object.defineProperty(this, Symbol.for('lease-fence.wasmCalls'), { get: () => wasmCalls });
    // Whether calls into Go check for stack room first (see room), for tests.
    Object.defineProperty(this, Symbol.for('lease-fence.stackRoom'), { get: () => room !== null });
  }

  constructor(resource, options) {
    checkOptions(options, GATE_OPTIONS, 'FenceGate');
    const exclusive = isObject(options) ? options.exclusive : undefined;
    if (exclusive !== undefined && typeof exclusive !== 'boolean') {
      throw new InvalidArgumentError(`lease-fence: FenceGate: options.exclusive must be a boolean, got ${typeof exclusive}`, 'options.exclusive');
    }
    const enc = begin();
    put(resource);
    if (putObj(options)) {
      put(options.initialFloor);
      put(options.maxRejections);
    }
    call(enc, X.lf_gate_new, p);
    const h = f64();
    super();
    adopt(this, K_GATE, h);
    this.#resource = resource;
    this.#exclusive = exclusive === true;
  }

  get resource() {
    return isGate(this) ? this.#resource : badThis('FenceGate');
  }

  /** The highest fence admitted (or the initial floor). */
  get floor() {
    const enc = begin();
    call(enc, X.lf_gate_floor, handleOf(this));
    return f64();
  }

  /**
   * A copy of the most recent refusals (at most maxRejections), oldest
   * first. It costs O(maxRejections), however many refusals there have been:
   * entries already read are kept here, and only newer ones cross from Go.
   */
  get rejections() {
    const enc = begin();
    const log = isGate(this) ? this.#log : [];
    call(enc, X.lf_gate_rejections, handleOf(this), log.length === 0 ? 0 : log[log.length - 1].seq);
    f64(); // the count, for rejectionCount
    const max = f64();
    const n = f64();
    for (let i = 0; i < n; i++) log.push(readRejection());
    if (log.length > max) log.splice(0, log.length - max);
    return log.slice();
  }

  /** How many refusals the gate has made, including those rejections no longer keeps. */
  get rejectionCount() {
    const enc = begin();
    call(enc, X.lf_gate_rejection_count, handleOf(this));
    return f64();
  }

  /**
   * Checks token against the floor and raises it, then runs fn and returns
   * what it returns. A stale token throws StaleFenceError and fn does not run.
   * An async function is refused (use commitAsync); a plain function that
   * returns a promise keeps the gate busy until it settles.
   */
  commit(token, fn) {
    if (!isGate(this)) badThis('FenceGate');
    if (typeof fn === 'function' && Object.getPrototypeOf(fn) === AsyncFunctionPrototype) {
      throw new InvalidArgumentError('lease-fence: fn is an async function, and gate.commit cannot keep a write fenced past ' +
        'its first await; use gate.commitAsync(token, fn), which runs writes on a gate one at a time. fn did not run', 'fn');
    }
    if (this.#held !== 0) throw this.#writeRunning();
    let resource, holderId, fence;
    const tok = typeof token === 'object' && token !== null;
    if (tok) ({ resource, holderId, fence } = token);
    if (holderId !== this.#holderId || fence !== this.#fence || resource !== this.#resource || typeof fn !== 'function' ||
      this.#depth !== 0 || dead || this.#made !== generation) {
      goCommit(handleOf(this), token, tok && !Array.isArray(token), resource, holderId, fence, fn);
      this.#holderId = holderId;
      this.#fence = fence;
    }
    this.#depth++;
    let result;
    try {
      result = fn();
      if (isThenable(result)) result = this.#hold(result);
    } finally {
      if (--this.#depth === 0 && this.#held === 0 && this.#queue.length !== 0 && !this.#draining) this.#drain();
    }
    return result;
  }

  /**
   * Like commit for a write that is async: returns a promise. Writes with
   * the fence of the running commitAsync writes start alongside them when
   * nothing waits; any other write waits for the gate to be free, and is
   * checked when its turn comes, and writes with its fence queued right
   * behind it start with it (options.exclusive of the gate: one at a time).
   * A fn that declares a parameter gets an AbortSignal that aborts, with a
   * SupersededError, when a newer fence reaches the gate while it runs.
   */
  commitAsync(token, fn, options) {
    return new Promise((resolve, reject) => {
      if (!isGate(this)) badThis('FenceGate');
      let resource, holderId, fence, signal;
      const tok = isToken(token);
      if (tok) ({ resource, holderId, fence } = token);
      if (options !== undefined && options !== null) {
        if (!isToken(options)) {
          throw new InvalidArgumentError('lease-fence: options must be an object such as { signal }', 'options');
        }
        for (const k in options) {
          if (k !== 'signal' && Object.hasOwn(options, k)) unknownOption(k, COMMIT_ASYNC_OPTIONS, 'gate.commitAsync');
        }
        signal = options.signal;
        if (signal !== undefined && signal !== null && !isAbortSignal(signal)) {
          throw new InvalidArgumentError('lease-fence: options.signal must be an AbortSignal', 'options.signal');
        }
      }
      const idle = (this.#depth === 0 && this.#held === 0 && this.#queue.length === 0) || this.#joins(fence);
      const aborted = signal?.aborted === true;
      if (!idle || aborted) {
        // Refuse a bad call now rather than when its turn comes, and, like
        // Gate.Commit in Go, a fence already below the floor (logged). An
        // aborted call is only checked: it logs nothing.
        const enc = begin();
        putReadToken(token, tok, resource, holderId, fence);
        put(fn);
        call(enc, X.lf_gate_check, handleOf(this), p, !aborted);
        if (aborted) throw signal.reason;
      }
      const w = { token, tok, resource, holderId, fence, fn, resolve, reject, signal, onAbort: null };
      if (idle) {
        this.#start(w, false);
        return;
      }
      if (signal) {
        w.onAbort = () => {
          const i = this.#queue.indexOf(w);
          if (i >= 0) {
            this.#queue.splice(i, 1);
            if (this.#queue.length === 0) this.#queueMax = 0;
            reject(this.#busy(w, signal.reason));
          }
        };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
      this.#queue.push(w);
      if (fence > this.#queueMax) this.#queueMax = fence;
      if (this.#held !== 0 && this.#runSince === 0) this.#runSince = performance.now();
      // A newer fence now waits for the running write: tell it (last, as
      // the signal's listeners run now and may call this gate).
      this.#supersede(holderId, fence, true);
    });
  }

  /** Raises the floor to token's fence without writing. */
  admit(token) {
    const enc = begin();
    let holderId, fence;
    if (putObj(token)) {
      put(token.resource);
      put(holderId = token.holderId);
      put(fence = token.fence);
    }
    call(enc, X.lf_gate_admit, handleOf(this), p);
    if (this.#held !== 0 && this.#runHolder === null) {
      this.#runHolder = this.#holderId; // the running write's token, which this moves on
      this.#runFence = this.#fence;
    }
    this.#holderId = holderId;
    this.#fence = fence;
    this.#supersede(holderId, fence, false);
  }

  // #supersede aborts the running write's signal, once, when fence (one
  // that Go has checked) is newer than the write's.
  #supersede(holderId, fence, waiting) {
    if (this.#runCtrls.size === 0 || this.#runTold) return;
    const h = this.#runHolder ?? this.#holderId, f = this.#runHolder === null ? this.#fence : this.#runFence;
    if (!(fence > f)) return;
    this.#runTold = true;
    const err = new SupersededError(`lease-fence: the write of holder ${JSON.stringify(h)} with fence ${f} to ` +
      `${JSON.stringify(this.#resource)} is superseded: holder ${JSON.stringify(holderId)} with fence ${fence} ` +
      `${waiting ? 'waits for it to finish' : 'was admitted'}`,
    { resource: this.#resource, holderId: h, fence: f, newerHolderId: holderId, newerFence: fence, newerWaiting: waiting });
    for (const ctrl of [...this.#runCtrls]) ctrl.abort(err);
  }

  // #joins reports whether a commitAsync write with fence starts now
  // alongside the running writes: they are all commitAsync writes with that
  // fence (the one admitted last, which no newer fence has superseded), and
  // nothing waits ahead of it (head: it is the first of the queue).
  #joins(fence, head = false) {
    return !this.#exclusive && this.#held !== 0 && this.#held === this.#runCtrls.size && this.#depth === 0 &&
      (head || this.#queue.length === 0) && !this.#runTold && this.#runHolder === null && fence === this.#fence;
  }

  // #running describes the write that holds the gate: the record of an
  // async one, or the synchronous fn on the stack (whose token is the one
  // admitted last, and which has not returned yet). millis is whole
  // milliseconds; atLeast, whether they count from when the gate first
  // looked rather than from the write's start.
  #running() {
    const holderId = this.#runHolder ?? this.#holderId, fence = this.#runHolder === null ? this.#fence : this.#runFence;
    if (this.#held === 0) return { holderId, fence, millis: 0, atLeast: true };
    if (this.#runSince === 0) this.#runSince = performance.now();
    return { holderId, fence, millis: Math.round(performance.now() - this.#runSince), atLeast: !this.#runExact };
  }

  // #busy is the error of waiting write w that gave up because of reason.
  #busy(w, reason) {
    const r = this.#running();
    return new GateBusyError(`lease-fence: the write of holder ${JSON.stringify(w.holderId)} with fence ${w.fence} to ` +
      `${JSON.stringify(this.#resource)} gave up waiting for its turn (${describeReason(reason)}): holder ` +
      `${JSON.stringify(r.holderId)} has been writing with fence ${r.fence} for ${r.atLeast ? 'at least ' : ''}${r.millis} ms`,
    { resource: this.#resource, holderId: w.holderId, fence: w.fence, runningHolderId: r.holderId, runningFence: r.fence, runningMillis: r.millis, cause: reason });
  }

  #writeRunning() {
    const r = this.#running();
    return new LeaseFenceError(`lease-fence: gate.commit on ${JSON.stringify(this.#resource)} refused: a write is still running ` +
      `on this gate (holder ${JSON.stringify(r.holderId)} with fence ${r.fence}: a commitAsync write, ` +
      'or a commit whose fn returned a promise, has not settled); fn did not run. Use gate.commitAsync(token, fn) to wait for your turn');
  }

  // #hold keeps the gate busy until thenable t (returned by a commit's fn
  // for the token holderId/fence) settles, and returns a promise that
  // settles as t does once the gate is free again.
  #hold(t) {
    this.#held++;
    this.#runSince = 0;
    this.#runExact = false;
    return Promise.resolve(t).then((v) => {
      this.#end();
      return v;
    }, (e) => {
      this.#end();
      throw e;
    });
  }

  // #end frees the gate from the running write, and starts the writes
  // queued meanwhile (a write queued from inside a synchronous fn included)
  // unless #drain, further up the stack, will.
  #end(ctrl) {
    if (ctrl !== undefined) this.#runCtrls.delete(ctrl);
    if (--this.#held !== 0) return;
    this.#runHolder = null;
    if (this.#depth === 0 && this.#queue.length !== 0 && !this.#draining) this.#drain();
  }

  // #drain starts waiting writes, in order, while the gate is free.
  #drain() {
    this.#draining = true;
    try {
      while (this.#depth === 0 && this.#held === 0 && this.#queue.length !== 0) {
        const w = this.#queue.shift();
        if (this.#queue.length === 0) this.#queueMax = 0;
        this.#start(w, true);
        // The writes with its fence queued right behind it share its turn.
        while (this.#queue.length !== 0 && this.#joins(this.#queue[0].fence, true)) {
          const q = this.#queue.shift();
          if (this.#queue.length === 0) this.#queueMax = 0;
          this.#start(q, true);
        }
      }
    } finally {
      this.#draining = false;
    }
  }

  // #start gives write w its turn: Go checks its token now, and a token
  // that became stale while it waited is refused (and logged). Every fn is
  // given its signal, whatever parameters it declares: a wrapper such as
  // (...args) => write(...args) must not silently lose it. (Making an
  // AbortSignal costs about 2.5 us in Node 20, small next to the I/O an
  // async write does.)
  #start(w, handed) {
    if (w.onAbort) w.signal.removeEventListener('abort', w.onAbort);
    try {
      goCommit(handleOf(this), w.token, w.tok, w.resource, w.holderId, w.fence, w.fn);
    } catch (e) {
      w.reject(e);
      return;
    }
    this.#holderId = w.holderId;
    this.#fence = w.fence;
    if (this.#held++ === 0) {
      this.#runTold = false;
      this.#runSince = handed ? performance.now() : 0;
      this.#runExact = handed;
    }
    const ctrl = new AbortController();
    this.#runCtrls.add(ctrl);
    if (this.#queueMax > w.fence) this.#newerWaiting(w.fence);
    let result;
    try {
      result = w.fn(ctrl.signal);
      if (isThenable(result)) {
        Promise.resolve(result).then((v) => {
          this.#end(ctrl);
          w.resolve(v);
        }, (e) => {
          this.#end(ctrl);
          w.reject(e);
        });
        return;
      }
    } catch (e) {
      this.#end(ctrl);
      w.reject(e);
      return;
    }
    this.#end(ctrl);
    w.resolve(result);
  }

  // #newerWaiting supersedes the write starting with fence f if a newer
  // fence already waits behind it, and tightens #queueMax when none does.
  #newerWaiting(f) {
    let max = 0;
    for (const q of this.#queue) {
      if (q.fence > f) {
        this.#supersede(q.holderId, q.fence, true);
        return;
      }
      if (q.fence > max) max = q.fence;
    }
    this.#queueMax = max;
  }
}

// ---------------------------------------------------------------- naive

/**
 * THE LEASE THAT FAILS. Stores expiresAt, checks now < expiresAt, renews
 * with expiresAt = now + ttl. Here only so tests and the playground can show
 * two holders both passing their check. Never guard anything with it.
 */
class NaiveLease extends Handled {
  #clock;
  constructor(key, h, clock) {
    internalOnly(key, 'NaiveLease');
    super();
    this.#clock = clock;
    adopt(this, K_NAIVE, h);
  }

  /** now < expiresAt, true when evaluated and meaningless by the time a write lands. */
  valid() {
    const enc = begin();
    call(enc, X.lf_naive_valid, handleOf(this));
    return bool();
  }

  /** expiresAt = now + ttl, dated from the reply's arrival. */
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

/** Starts a naive lease (see NaiveLease): for demonstrations of the failure only. */
export function createNaiveLease(clock, ttlMillis) {
  const enc = begin();
  put(clock);
  put(ttlMillis);
  call(enc, X.lf_naive_new, p);
  return new NaiveLease(secret, f64(), clock);
}

// ---------------------------------------------------------------- start

// Imported directly (or as the package's browser and default entry), the
// module loads lease-fence.wasm from beside itself now; the other entries
// import manual.mjs first and call init themselves.
if (loading.auto) await init();
