// FenceGate: stands in front of one resource and refuses writes from
// superseded fences; commit, commitAsync (writes queued in fence order) and
// admit, over the Go gate of the runtime's instance. The API is documented
// in lease-fence.d.ts.
import { GateBusyError, InvalidArgumentError, LeaseFenceError, SupersededError } from './errors.mjs';
import {
  begin, call, call4, checkOptions, f64, idHolder, idResource, isToken, K_GATE, p, put, putObj, putReadToken, readRejection, tokenIds,
  unknownOption,
} from './codec.mjs';
import { adopt, badThis, dead, generation, Handled, handleOf, isObject, stackRoomOn, wasmCalls, X } from './runtime.mjs';

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
    Object.defineProperty(this, Symbol.for('lease-fence.stackRoom'), { get: stackRoomOn });
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

  get floor() {
    const enc = begin();
    call(enc, X.lf_gate_floor, handleOf(this));
    return f64();
  }

  // Costs O(maxRejections), however many refusals there have been: entries
  // already read are kept here, and only newer ones cross from Go.
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

  get rejectionCount() {
    const enc = begin();
    call(enc, X.lf_gate_rejection_count, handleOf(this));
    return f64();
  }

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

