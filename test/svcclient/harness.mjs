// What the hold tests share with the service-client tests: the
// coordinators (children.mjs) with the options the hold tests need, the
// fault proxy in front of them, and a manual scheduler for the client's
// timers seam.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { root, startCoordinator, startWorker as startChildWorker, stop, workerFault } from './children.mjs';

// ---------------------------------------------------------------- processes

// The coordinators the suite runs against: SVCCLIENT_TARGETS, the native
// coordinator and the Worker unless it names fewer (make
// test-svcclient-fetch runs the native one only: the Worker's answers are
// the same on either transport, and the node:http pass checks them).
export const TARGETS = (process.env.SVCCLIENT_TARGETS ?? 'native worker').split(/[\s,]+/).filter(Boolean);
for (const t of TARGETS) if (t !== 'native' && t !== 'worker') throw new Error(`SVCCLIENT_TARGETS: unknown target ${JSON.stringify(t)} (native, worker)`);

// The coordinators, started by children.mjs; children lists what this
// file's users started, for stopAll.
export const children = [];
export { root };

// wrangler dev's proxy at times answers a POST with this 503 although the
// Worker never restarted (its kept-alive connection to workerd closed under
// it: workers-sdk issue 14641), and sends only GET and HEAD again itself.
const WRANGLER_PROXY_LOST = /^Your worker restarted mid-request/;

/**
 * fetch, then the answer's text: { status, text }. A call that wrangler
 * dev's proxy lost (that 503) is sent again, up to 3 times in all; the
 * service's calls carry their request id, so a call sent twice is answered
 * as one. Every other answer is passed on as it came.
 */
export async function fetchText(url, init) {
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(url, init);
    const text = await res.text();
    const fault = workerFault(url, res.status, text);
    if (fault) console.error(fault);
    if (res.status !== 503 || !WRANGLER_PROXY_LOST.test(text) || attempt === 3) return { status: res.status, text };
  }
}

/**
 * The native coordinator on a free port: in memory by default; with ttl,
 * durable in a temporary state directory, with that lease length and its
 * debug endpoint (debugURL).
 */
export async function startNative({ ttl } = {}) {
  let args = ['-memory'];
  let dir;
  if (ttl !== undefined) {
    dir = mkdtempSync(path.join(tmpdir(), 'lease-fence-svcclient-native-'));
    args = ['-init', '-state', path.join(dir, 'state'), '-ttl', `${ttl}ms`, '-debug-addr', '127.0.0.1:0'];
  }
  const { url, log, child } = await startCoordinator(args, children);
  if (dir) child.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  let debugURL;
  if (ttl !== undefined) {
    // The debug line comes after the listening one.
    const debugLine = () => log.map((l) => /debug on (http:\/\/127\.0\.0\.1:\d+)/.exec(l)?.[1]).find(Boolean);
    await until(() => (debugURL = debugLine()), () => `no debug line from the coordinator:\n${log.join('\n')}`, 120_000, [child.stdout, 'data'], [child.stderr, 'data']);
  }
  return { name: 'native coordinator', kind: 'native', url, debugURL, ttl, log, child };
}

/** The Worker under wrangler dev on a free port (children.mjs), with LEASE_TTL_MS ttl. */
export async function startWorker({ ttl = 600_000 } = {}) {
  const { url, log, child } = await startChildWorker(['--var', `LEASE_TTL_MS:${ttl}`], children);
  return { name: 'Worker under wrangler dev', kind: 'worker', url, ttl, log, child };
}

/** The rejection of promise, after check(err); the test fails if it resolves. */
export async function rejects(promise, check) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err !== undefined, 'expected a rejection');
  check?.(err);
  return err;
}

/** A maker of resource names unique to this process: prefix-what-pid-n. */
export function resourceNames(prefix) {
  let seq = 0;
  return (what) => `${prefix}-${what}-${process.pid}-${++seq}`;
}

export function stopAll() {
  return Promise.all(children.map((c) => stop(c)));
}

// ---------------------------------------------------------------- the proxy

/**
 * A recording proxy in front of target. proxy.policy(entry) picks what happens
 * to each request (entry: { n, path, body, json, headers }); it returns
 * nothing (forward and answer) or an object:
 *   { drop: true }        forward, then close the connection instead of answering
 *   { holdReply: true }   forward, never answer
 *   { release: promise }  forward, answer once promise resolves (parked
 *                         until then; with drop, close the connection then)
 *   { hold: true }        do not forward, never answer
 *   { reset: true }       do not forward, close the connection
 *   { detach: true }      forward, and close the client's connection at once
 *                         while the coordinator's call goes on (its answer is
 *                         dropped): a client that sees its call fail while
 *                         the coordinator still has it
 *   { answer: { status, body } }  answer this instead of forwarding
 *   { rewrite: (json) => json }   forward a changed body
 *   { before: async () => {} }    run this, then forward
 * A client that goes away before its answer ends the forwarded call too, so
 * the coordinator sees a waiting client leave. hooks.reply(json), if given,
 * changes every 200 answer the coordinator gives. hooks.onBody(text, answer)
 * sees every body in each direction; hooks.onPark(entry) is called when a
 * request is parked for good (hold, or holdReply once the coordinator
 * answered). proxy.seen lists every request; proxy.on(path) those to one path.
 */
export async function startProxy(target, hooks = {}) {
  const proxy = { seen: [], policy: null, waiting: [] };
  const open = new Set();
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks).toString('utf8');
    hooks.onBody?.(body, false);
    let json;
    try {
      json = JSON.parse(body);
    } catch {
      json = undefined;
    }
    const entry = { n: proxy.seen.length + 1, path: req.url, body, json, headers: req.headers, start: performance.now() };
    proxy.seen.push(entry);
    changed();
    for (const w of proxy.waiting.splice(0)) w(entry);
    const action = (proxy.policy && (await proxy.policy(entry))) || {};
    if (action.hold) {
      entry.parked = true;
      changed();
      hooks.onPark?.(entry);
      return;
    }
    if (action.reset) {
      req.socket.destroy();
      return;
    }
    if (action.answer) {
      const text = typeof action.answer.body === 'string' ? action.answer.body : JSON.stringify(action.answer.body);
      res.writeHead(action.answer.status, { 'content-type': 'application/json', ...action.answer.headers });
      res.end(text);
      return;
    }
    if (action.before) await action.before();
    const sent = action.rewrite ? JSON.stringify(action.rewrite(json)) : body;
    const upstream = new AbortController();
    if (action.detach) {
      req.socket.destroy();
    } else {
      res.on('close', () => {
        if (!res.writableFinished && !entry.parked) upstream.abort();
      });
    }
    let status, text;
    try {
      ({ status, text } = await fetchText(target + req.url, { method: req.method, headers: { 'content-type': 'application/json' }, body: sent, signal: upstream.signal }));
    } catch (e) {
      entry.error = e;
      changed();
      if (!res.destroyed) {
        res.writeHead(599);
        res.end(String(e));
      }
      return;
    }
    hooks.onBody?.(text, true);
    entry.status = status;
    entry.reply = text;
    entry.at = performance.now();
    if (action.release) {
      entry.parked = true;
      changed();
      await action.release;
      entry.parked = false;
    }
    changed();
    if (action.drop || action.detach) {
      req.socket.destroy();
      return;
    }
    if (action.holdReply) {
      entry.parked = true;
      changed();
      hooks.onPark?.(entry);
      return;
    }
    if (hooks.reply && status === 200) text = JSON.stringify(hooks.reply(JSON.parse(text)));
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(text);
  });
  server.on('connection', (s) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${server.address().port}`;
  proxy.on = (p) => proxy.seen.filter((e) => e.path === p);
  /** Resolves with the next request the proxy receives (that matches, if given a test). */
  proxy.next = (match = () => true) => new Promise((resolve) => {
    const w = (e) => (match(e) ? resolve(e) : proxy.waiting.push(w));
    proxy.waiting.push(w);
  });
  proxy.reset = () => {
    proxy.policy = null;
    proxy.seen.length = 0;
  };
  proxy.close = () => {
    for (const s of open) s.destroy();
    return new Promise((resolve) => server.close(resolve));
  };
  return proxy;
}

// ---------------------------------------------------------------- waiting

// changes hears of every change a waiting test may look at: the harness
// tells it of the proxy's records, a tracked promise's settling and a
// manual timer set or cleared; a test tells it of its own (a child's
// output line, a leader an observer saw) with changed().
const changes = new EventTarget();
export function changed() {
  changes.dispatchEvent(new Event('change'));
}

/**
 * Resolves once check() is true: looked at now, then after each change
 * (changed(), and each event of the [target, type] pairs given: an
 * EventTarget's, such as a hold's 'renewed' or its signal's 'abort', or an
 * emitter's, such as a child's 'exit'), at the next turn of the event loop,
 * once the code that made the change and any I/O already come have run.
 * Nothing looks in between: a check on something that tells no one of its
 * changes waits out guardMillis, then fails, naming what (or what()).
 */
export function until(check, what, guardMillis = 60_000, ...events) {
  return new Promise((resolve, reject) => {
    const sources = [[changes, 'change'], ...events];
    const listen = (on) => {
      for (const [target, type] of sources) {
        if (target instanceof EventTarget) target[on ? 'addEventListener' : 'removeEventListener'](type, wake);
        else target[on ? 'on' : 'off'](type, wake);
      }
    };
    let done = false;
    let queued = false;
    const end = (settle, v) => {
      done = true;
      clearTimeout(guard);
      listen(false);
      settle(v);
    };
    const look = () => {
      queued = false;
      if (done) return;
      try {
        if (check()) end(resolve);
      } catch (e) {
        end(reject, e);
      }
    };
    const wake = () => {
      if (!queued) setImmediate(look);
      queued = true;
    };
    const guard = setTimeout(() => end(reject, new Error(`${typeof what === 'function' ? what() : what}: not true after ${guardMillis} ms`)), guardMillis);
    listen(true);
    look();
  });
}

/** promise, and a flag that says whether it has settled. */
export function tracked(promise) {
  const t = { settled: false, value: undefined, error: undefined, at: 0 };
  const settle = (v) => {
    Object.assign(t, v, { settled: true, at: performance.now() });
    changed();
    return t;
  };
  t.promise = promise.then((value) => settle({ value }), (error) => settle({ error }));
  return t;
}

// ---------------------------------------------------------------- manual timers

/**
 * Timers on a ManualClock, for the client's `timers` option: a timer set
 * for ms fires when the clock is moved to (or past) its instant, with the
 * clock set to exactly that instant, in order of their instants (then of
 * setting).
 */
export class ManualTimers {
  #clock;
  #queue = [];
  #seq = 0;

  constructor(clock) {
    this.#clock = clock;
    this.setTimeout = (fn, ms) => {
      const id = ++this.#seq;
      this.#queue.push({ id, at: this.#clock.now().millis + ms, fn });
      changed();
      return id;
    };
    this.clearTimeout = (id) => {
      const i = this.#queue.findIndex((t) => t.id === id);
      if (i >= 0) this.#queue.splice(i, 1);
      changed();
    };
  }

  /** How many timers are set. */
  get count() {
    return this.#queue.length;
  }

  /** The timers set, for a failure's message. */
  describe() {
    return this.#queue.map((t) => `at ${t.at}: ${String(t.fn).slice(0, 120)}`).join('\n');
  }

  /** The instant of the earliest timer, or undefined. */
  get nextAt() {
    return this.#earliest()?.at;
  }

  /** The instant of the latest timer, or undefined. */
  get latestAt() {
    let at;
    for (const t of this.#queue) if (at === undefined || t.at > at) at = t.at;
    return at;
  }

  #earliest() {
    let e;
    for (const t of this.#queue) if (e === undefined || t.at < e.at || (t.at === e.at && t.id < e.id)) e = t;
    return e;
  }

  /** Fires the earliest timer at its instant (the clock moves there); false if none. */
  fireNext() {
    const t = this.#earliest();
    if (!t) return false;
    this.#queue.splice(this.#queue.indexOf(t), 1);
    if (t.at > this.#clock.now().millis) this.#clock.set(t.at);
    t.fn();
    return true;
  }

  /** Moves the clock to ms, firing every timer due by then at its own instant. */
  advanceTo(ms) {
    for (let t = this.#earliest(); t && t.at <= ms; t = this.#earliest()) this.fireNext();
    if (ms > this.#clock.now().millis) this.#clock.set(ms);
  }
}
