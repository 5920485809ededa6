// The runtime: the one WebAssembly instance of lease-fence.wasm (the Go
// library compiled with GOOS=js GOARCH=wasm) and its Go runtime, started by
// init(source) and started again by init() after it died; the handles of the
// objects it made; and enter, through which every call into Go goes (with
// its stack-room check and its clock-source readings). Nothing here starts
// at import: the entries call init (lease-fence.mjs, node.mjs) or leave it
// to the app (init.mjs, workerd.mjs). The state below is this module's own:
// other modules read it through its exports and change it only by calling
// init.
import { InvalidArgumentError, LeaseFenceError } from './errors.mjs';
import { instantiate, MISSING_FIX, randomSource } from './loader.mjs';

// Go's runtime glue (wasm_exec.mjs, a build output beside this file), imported
// at once but by a dynamic import, so that a package or checkout without it
// rejects the import with a LeaseFenceError that says how to build it (a
// static import would fail before this module could say anything).
const goRuntime = import('./wasm_exec.mjs').then((m) => m.Go, (e) => {
  throw new LeaseFenceError(`lease-fence: loading wasm_exec.mjs (the Go runtime's glue, beside lease-fence.mjs) failed: ${e?.message ?? e}; ${MISSING_FIX}`, { cause: e });
});
goRuntime.catch(() => {}); // reported by init


// createClock sources, by reader id. Go never calls into JavaScript: a call
// that needs a source's reading stops with status READ_SOURCE and changes
// nothing, and enter reads the source here, with no Go code on the stack and
// no Go lock held, then makes the call again with the reading (readSource).
// While a source runs, `reading` is set and the library refuses to be called
// (begin): the call that asked for the reading is half done, its arguments
// sit in the shared buffer and the glue holds its state.
export let reading = false;
const readers = new Map();

/** Registers readMillis, a createClock source, as reader id. */
export function addReader(id, readMillis) {
  readers.set(id, readMillis);
}

// The current instance. init() sets all of these; after the instance died
// (a trap or the Go runtime exiting, e.g. out of memory) init() replaces
// them with a fresh instance, and generation tells objects made by the dead
// one apart (their handles mean nothing to the new one).
let go, memory, hdrAddr, readingAddr;
export let X, u8, dv, hdr;
export let dead = '';
export let generation = 0;
let compiled; // the WebAssembly.Module, which a restart instantiates again
let starting = null;

export function views() {
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

/**
 * init(load()) unless an instance is running or starting, and init()
 * otherwise: what node.mjs calls at import, so that it reads nothing when
 * the app started the library itself (init(source)) before importing it.
 */
export function initUnlessStarted(load) {
  if ((X !== undefined && !dead) || starting !== null) return init();
  return init(load());
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
}

// When an exception comes out of a call into Go (see enter), dead is set to
// CUT_SHORT and deathCause to the exception, inline in the catch block: plain
// assignments, with no call that a full stack could refuse, so an instance
// that stopped is never used again. instanceDied words it later.
const CUT_SHORT = 'cut short';
let deathCause;

export function instanceDied() {
  const cause = deathCause;
  const why = dead !== CUT_SHORT ? dead : cause instanceof RangeError
    ? `a call into it was cut short by ${cause.name}: ${cause.message} (the JavaScript stack was nearly full when lease-fence was called, and the Go code it interrupted may have held locks)`
    : `it trapped: ${cause && cause.message}`;
  return new LeaseFenceError(`lease-fence: the WebAssembly instance has stopped (${why}); await init() for a fresh one (objects made before stay unusable)`, { cause });
}

export function notStarted() {
  return new LeaseFenceError('lease-fence: the WebAssembly instance is not started; await init() before using the library (with lease-fence/init, pass the wasm; in Cloudflare Workers, call it inside a handler)');
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

export const secret = Symbol('lease-fence internal');

// Every object the library makes extends Handled, whose private fields hold
// its handle on the Go side, its kind and the instance (generation) that made
// it. handleOf gives 0 for anything else, which Go refuses as "not a live
// ...", and throws for an object of an instance that init() has replaced.
let setHandle;
export let handleOf, kindOf;
export class Handled {
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

export function adopt(obj, kind, h, reader) {
  setHandle(obj, h, kind);
  registry.register(obj, { h, reader, g: generation });
}

export function isObject(v) {
  return (typeof v === 'object' && v !== null) || typeof v === 'function';
}

export function badThis(what) {
  throw new InvalidArgumentError(`lease-fence: this is not a live ${what}`, 'this');
}

export function internalOnly(key, name) {
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
// figures are in docs/wasm.md and docs/benchmarks.md.
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

/** Whether calls into Go check for stack room first (a diagnostic for tests). */
export function stackRoomOn() {
  return room !== null;
}

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
export let wasmCalls = 0;

// yieldToGo lets Go's garbage collector run its mark worker (lf_yield, see
// main_js.go); enter queues it as a microtask every 1,024 calls, so it
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
export function enter(fn, a, b, c, d) {
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

