// Per-call cost, from JavaScript, of the wasm library's hot calls, each beside
// a pure-JavaScript reference doing the same work, in CPU time of this process
// (user + system, which other processes' load disturbs less than wall time;
// it includes V8's and Go's collectors). Run by `make bench-js`:
//
//   node scripts/bench-js.mjs [--json] [--rounds N] [--only REGEX] [--baseline DIR]
//
// --only runs the cases (and comparisons) whose names match REGEX, e.g.
// --only cycle. --baseline DIR also loads another build of the library
// (DIR/lease-fence.mjs, with its lease-fence.wasm beside it: a copy of
// wasm/js built from an earlier commit) into the same process, runs every
// case of the library on it too ("baseline: ..."), and compares each case
// with its baseline, interleaved like the other comparisons.
//
// The cases run interleaved: every round runs each case once (in a rotating
// order), and the two sides of a comparison alternate in ten slices within
// the round, so a burst of load from other processes hits both sides alike. Each case reports min/median/max nanoseconds per call
// over the rounds (round 0 warms up and is dropped); each comparison also
// reports the ratio of the two sides within every round (min/median/max).
// The machine is shared, so compare figures from one run.
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as current from 'lease-fence';
import { stats } from './bench-kit.mjs';

const args = process.argv.slice(2);
const ROUNDS = Number(args[args.indexOf('--rounds') + 1]) || 15;
const ONLY = args.includes('--only') ? new RegExp(args[args.indexOf('--only') + 1]) : null;
const BASELINE = args.includes('--baseline') ? resolve(args[args.indexOf('--baseline') + 1]) : null;

let sink = 0;
const write = () => { sink++; return sink; };
const SHORT = 'agent-a';
const UUID = '6f1c2b9e-8d4a-4c1e-9b7f-3a2d5e6f7a8b';

// ---------------------------------------------------------------- references

// The gate check and raise of FenceGate.commit in plain JavaScript, with its
// argument checks, the rejections log and the write callback.
class JsGate {
  constructor(resource) {
    this.resource = resource;
    this.floor = 0;
    this.floorHolder = '';
    this.claimed = false;
    this.rejections = [];
  }

  commit(token, fn) {
    if (typeof fn !== 'function') throw new TypeError('fn must be a function');
    if (typeof token !== 'object' || token === null) throw new TypeError('token must be an object');
    const { resource, holderId, fence } = token;
    if (typeof resource !== 'string' || resource !== this.resource) throw new TypeError('token.resource');
    if (typeof holderId !== 'string' || holderId === '') throw new TypeError('token.holderId');
    if (!Number.isSafeInteger(fence) || fence < 1) throw new TypeError('token.fence');
    if (fence < this.floor) {
      this.rejections.push(Object.freeze({ seq: this.rejections.length + 1, resource, refusedHolderId: holderId, refusedFence: fence,
        admittedHolderId: this.floorHolder || null, admittedFence: this.floor }));
      throw new Error('stale');
    }
    if (fence > this.floor || !this.claimed) {
      this.floor = fence;
      this.floorHolder = holderId;
      this.claimed = true;
    }
    return fn();
  }
}

// The coordinator and client of core/lease in plain JavaScript: the same
// checks, maps, replay cache, request ids and plain-data results, so that
// a whole cycle can be compared with the library's.
const HEX = '0123456789abcdef';
function randomId() {
  let s = '';
  for (let half = 0; half < 2; half++) {
    let hi = (Math.random() * 2 ** 32) >>> 0;
    let lo = (Math.random() * 2 ** 32) >>> 0;
    for (let j = 0; j < 8; j++, lo >>>= 4) s += HEX[lo & 15];
    for (let j = 0; j < 8; j++, hi >>>= 4) s += HEX[hi & 15];
  }
  return s;
}

function checkInstant(t, domain) {
  if (typeof t !== 'object' || t === null || !Number.isFinite(t.millis) || t.domain !== domain) throw new TypeError('instant');
}

function checkRequest(r, kind) {
  if (typeof r !== 'object' || r === null || r.kind !== kind) throw new TypeError('request.kind');
  if (typeof r.requestId !== 'string' || r.requestId === '') throw new TypeError('request.requestId');
  if (typeof r.resource !== 'string' || r.resource === '') throw new TypeError('request.resource');
  if (typeof r.holderId !== 'string' || r.holderId === '') throw new TypeError('request.holderId');
  if (typeof r.sentAt !== 'object' || r.sentAt === null || !Number.isFinite(r.sentAt.millis)) throw new TypeError('request.sentAt');
}

class JsCoordinator {
  constructor(clock, ttlMillis) {
    this.clock = clock;
    this.ttl = ttlMillis;
    this.issued = 0;
    this.last = -Infinity;
    this.leases = new Map();
    this.replay = new Map();
    this.ring = [];
    this.grants = 0;
  }

  now() {
    const t = this.clock();
    if (!Number.isFinite(t) || t < this.last) throw new RangeError('clock');
    return t;
  }

  acquire(req) {
    checkRequest(req, 'acquire');
    const now = this.now();
    const cur = this.leases.get(req.resource);
    const live = cur !== undefined && now < cur.expiresAt;
    const prev = this.replay.get(req.requestId);
    if (prev !== undefined) {
      const g = this.ring[(prev - 1) % 1024].grant;
      if (g.resource !== req.resource || g.holderId !== req.holderId) throw new TypeError('requestId reused');
      if (live && cur.fence === g.fence) {
        this.last = now;
        return { ok: true, grant: g };
      }
    }
    if (live) {
      this.last = now;
      return { ok: false, heldBy: cur.holder, retryAfterMillis: cur.expiresAt - now };
    }
    this.last = now;
    const fence = ++this.issued;
    const expiresAt = now + this.ttl;
    this.leases.set(req.resource, { holder: req.holderId, fence, expiresAt });
    const grant = { requestId: req.requestId, resource: req.resource, holderId: req.holderId, fence, ttlMillis: this.ttl,
      coordinatorExpiresAt: { millis: expiresAt, domain: 'coordinator' } };
    const n = ++this.grants;
    if (this.ring.length < 1024) this.ring.push({ grant, n });
    else {
      const old = this.ring[(n - 1) % 1024];
      if (old.n !== 0) this.replay.delete(old.grant.requestId);
      this.ring[(n - 1) % 1024] = { grant, n };
    }
    this.replay.set(req.requestId, n);
    return { ok: true, grant };
  }

  release(token) {
    if (typeof token !== 'object' || token === null || typeof token.resource !== 'string' || typeof token.holderId !== 'string' ||
      !Number.isSafeInteger(token.fence)) throw new TypeError('token');
    const now = this.now();
    this.last = now;
    const cur = this.leases.get(token.resource);
    if (cur === undefined || cur.holder !== token.holderId || cur.fence !== token.fence || now >= cur.expiresAt) return false;
    this.leases.delete(token.resource);
    return true;
  }
}

class JsClient {
  constructor(clock, holderId) {
    this.clock = clock;
    this.holderId = holderId;
    this.pending = new Map();
    this.order = [];
    this.completed = new Set();
    this.doneOrder = [];
  }

  beginAcquire(resource) {
    if (typeof resource !== 'string' || resource === '') throw new TypeError('resource');
    const millis = this.clock();
    if (!Number.isFinite(millis)) throw new RangeError('clock');
    const requestId = randomId();
    if (this.pending.has(requestId) || this.completed.has(requestId)) throw new Error('repeated id');
    while (this.pending.size >= 4096) this.pending.delete(this.order.shift());
    if (this.order.length >= 8192) this.order = this.order.filter((id) => this.pending.has(id));
    const req = { kind: 'acquire', requestId, resource, holderId: this.holderId, sentAt: { millis, domain: 'agent' } };
    this.pending.set(requestId, { ...req, sentAt: { ...req.sentAt } });
    this.order.push(requestId);
    return req;
  }

  completeAcquire(req, g) {
    checkRequest(req, 'acquire');
    checkInstant(req.sentAt, 'agent');
    if (req.holderId !== this.holderId) throw new TypeError('holder');
    if (g.requestId !== req.requestId || g.resource !== req.resource || g.holderId !== req.holderId) throw new Error('mismatch');
    if (!Number.isSafeInteger(g.fence) || !(g.ttlMillis > 0)) throw new TypeError('grant');
    if (this.completed.has(req.requestId)) throw new Error('completed');
    const orig = this.pending.get(req.requestId);
    if (orig === undefined) throw new Error('not begun');
    if (orig.resource !== req.resource || orig.sentAt.millis !== req.sentAt.millis) throw new Error('altered');
    this.pending.delete(req.requestId);
    if (this.doneOrder.length >= 4096) this.completed.delete(this.doneOrder.shift());
    this.completed.add(req.requestId);
    this.doneOrder.push(req.requestId);
    const token = Object.freeze({ resource: g.resource, holderId: g.holderId, fence: g.fence });
    return Object.freeze({ token, deadline: { millis: req.sentAt.millis + g.ttlMillis, domain: 'agent' }, grant: g });
  }
}

// ---------------------------------------------------------------- the //go:wasmexport floor

// A second instance of lease-fence.wasm, started with Go's own wasm_exec.js,
// so that an export can be called directly: lf_free(0) takes one number and
// returns at once, the cheapest crossing there is.
async function rawExports() {
  const goroot = execFileSync('go', ['env', 'GOROOT'], { encoding: 'utf8' }).trim();
  await import(join(goroot, 'lib', 'wasm', 'wasm_exec.js'));
  const go = new globalThis.Go();
  const bytes = await readFile(new URL('../wasm/js/lease-fence.wasm', import.meta.url));
  const { instance } = await WebAssembly.instantiate(bytes, go.importObject);
  go.run(instance);
  return instance.exports;
}

// ---------------------------------------------------------------- cases

const cycleState = (lib) => {
  if (lib === null) {
    const clock = () => performance.now(); // what createMonotonicClock reads
    return { coordinator: new JsCoordinator(clock, 30_000), client: new JsClient(clock, SHORT), gate: new JsGate('deploy-slot') };
  }
  return {
    coordinator: new lib.LeaseCoordinator({ clock: lib.createMonotonicClock('c'), ttlMillis: 30_000 }),
    client: new lib.LeaseClient({ clock: lib.createMonotonicClock('agent'), holderId: SHORT }),
    gate: new lib.FenceGate('deploy-slot'),
  };
};

const cycle = ({ coordinator, client, gate }, n) => {
  for (let i = 0; i < n; i++) {
    const request = client.beginAcquire('deploy-slot');
    const lease = client.completeAcquire(request, coordinator.acquire(request).grant);
    gate.commit(lease.token, write);
    coordinator.release(lease.token);
  }
};

const commitLoop = (holderId) => (g, n) => {
  const token = { resource: 'deploy-slot', holderId, fence: 1 };
  for (let i = 0; i < n; i++) g.commit(token, write);
};

// Each call a new fence, carrying on from the floor (a run in slices
// continues where the last slice stopped).
const risingLoop = (holderId) => (g, n) => {
  for (let i = g.floor + 1, end = i + n; i < end; i++) g.commit({ resource: 'deploy-slot', holderId, fence: i }, write);
};

// commitAsync on an idle gate with a synchronous fn: each call runs fn at
// once and resolves; the loop awaits the last one.
const asyncIdleLoop = (g, n) => {
  const token = { resource: 'deploy-slot', holderId: SHORT, fence: 1 };
  let p;
  for (let i = 0; i < n; i++) p = g.commitAsync(token, write);
  return p;
};

// commitAsync with an async fn, awaited one call at a time: the common use.
const asyncWrite = async () => { sink++; };
const asyncAwaitLoop = (fn) => async (g, n) => {
  const token = { resource: 'deploy-slot', holderId: SHORT, fence: 1 };
  for (let i = 0; i < n; i++) await g.commitAsync(token, fn);
};

// commitAsync calls queued behind a running write, 100 at a time: the
// waiting path (checked when called, started in turn).
const asyncQueueLoop = async (g, n) => {
  const token = { resource: 'deploy-slot', holderId: SHORT, fence: 1 };
  for (let done = 0; done < n; done += 100) {
    let release;
    const first = g.commitAsync(token, () => new Promise((r) => { release = r; }));
    const ps = [first];
    for (let i = 1; i < 100; i++) ps.push(g.commitAsync(token, asyncWrite));
    release();
    await Promise.all(ps);
  }
};

// The cases of the library lib, names prefixed with tag.
function libraryCases(lib, raw, tag) {
  const gate = () => new lib.FenceGate('deploy-slot');
  return [
    { name: `${tag}gate.commit, admitted, 7-char holder`, n: 2_000_000, setup: gate, run: commitLoop(SHORT) },
    { name: `${tag}gate.commit, admitted, 36-char holder`, n: 2_000_000, setup: gate, run: commitLoop(UUID) },
    { name: `${tag}gate.commit, rising fence, 7-char holder (enters Go)`, n: 200_000, setup: gate, run: risingLoop(SHORT) },
    { name: `${tag}gate.commit, rising fence, 36-char holder (enters Go)`, n: 200_000, setup: gate, run: risingLoop(UUID) },
    { name: `${tag}gate.commitAsync, idle gate, sync fn`, n: 200_000, setup: gate, run: asyncIdleLoop },
    { name: `${tag}gate.commitAsync, async fn, awaited`, n: 100_000, setup: gate, run: asyncAwaitLoop(asyncWrite) },
    { name: `${tag}gate.commitAsync, async fn taking the signal, awaited`, n: 50_000, setup: gate, run: asyncAwaitLoop(async (signal) => { sink += signal ? 1 : 0; }) },
    { name: `${tag}gate.commitAsync, 99 queued behind a running write`, n: 100_000, setup: gate, run: asyncQueueLoop },
    ...(raw ? [{ name: `${tag}//go:wasmexport call, one number in, none out (lf_free(0))`, n: 2_000_000, setup: () => raw, run: (x, n) => { for (let i = 0; i < n; i++) x.lf_free(0); } }] : []),
    { name: `${tag}gate.floor (handle in, number out)`, n: 500_000, setup: gate, run: (g, n) => { for (let i = 0; i < n; i++) sink += g.floor; } },
    { name: `${tag}cycle: beginAcquire+acquire+completeAcquire+commit+release`, n: 20_000, setup: () => cycleState(lib), run: cycle },
  ];
}

function cases(raw, baseline) {
  return [
    { name: 'JS reference gate.commit, admitted, 7-char holder', n: 2_000_000, setup: () => new JsGate('deploy-slot'), run: commitLoop(SHORT) },
    { name: 'JS reference gate.commit, admitted, 36-char holder', n: 2_000_000, setup: () => new JsGate('deploy-slot'), run: commitLoop(UUID) },
    { name: 'JS reference cycle', n: 20_000, setup: () => cycleState(null), run: cycle },
    ...libraryCases(current, raw, ''),
    ...(baseline ? libraryCases(baseline, null, 'baseline: ') : []),
  ];
}

const comparisons = [
  ['gate.commit, admitted, 7-char holder', 'JS reference gate.commit, admitted, 7-char holder', 5],
  ['gate.commit, admitted, 36-char holder', 'JS reference gate.commit, admitted, 36-char holder', 5],
  ['cycle: beginAcquire+acquire+completeAcquire+commit+release', 'JS reference cycle', 3],
];

// ---------------------------------------------------------------- run

const baseline = BASELINE ? await import(pathToFileURL(join(BASELINE, 'lease-fence.mjs')).href) : null;
const all = cases(await rawExports(), baseline).filter((c) => ONLY === null || ONLY.test(c.name));
// With a baseline, each case of the library is compared with its twin
// (goal: within 10%) instead of with the JavaScript reference.
if (baseline) {
  comparisons.length = 0;
  for (const c of all) {
    if (all.some((b) => b.name === `baseline: ${c.name}`)) comparisons.push([c.name, `baseline: ${c.name}`, 1.1]);
  }
}
const times = new Map(all.map((c) => [c.name, []]));

// The two sides of a comparison run as one unit, in CHUNKS alternating
// slices of their n calls (the side that goes first alternating too), so
// that the noise of other processes falls on both alike; every other case
// runs its n calls at once.
const CHUNKS = 10;
const partner = new Map(comparisons.flatMap(([a, b]) => [[a, b], [b, a]]));
const units = [];
for (const c of all) {
  if (units.some((u) => u.includes(c))) continue;
  const other = all.find((d) => d.name === partner.get(c.name));
  units.push(other ? [c, other] : [c]);
}

for (let round = 0; round <= ROUNDS; round++) {
  for (let k = 0; k < units.length; k++) {
    const unit = units[(k + round) % units.length];
    const states = unit.map((c) => c.setup());
    const cpu = unit.map(() => 0);
    const chunks = unit.length === 1 ? 1 : CHUNKS;
    for (let j = 0; j < chunks; j++) {
      for (let s = 0; s < unit.length; s++) {
        const i = (s + j) % unit.length;
        const t0 = process.cpuUsage();
        const r = unit[i].run(states[i], unit[i].n / chunks);
        if (r instanceof Promise) await r;
        const t = process.cpuUsage(t0);
        cpu[i] += t.user + t.system;
      }
    }
    if (round > 0) unit.forEach((c, i) => times.get(c.name).push((cpu[i] * 1000) / c.n));
    // Let the event loop turn, as an application's would: the library frees
    // the wasm side of collected objects from finalization callbacks.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const results = all.map((c) => ({ name: c.name, ...stats(times.get(c.name)), n: c.n }));
const ratios = comparisons.filter(([name, ref]) => times.has(name) && times.has(ref)).map(([name, ref, goal]) => {
  const a = times.get(name);
  const b = times.get(ref);
  const r = stats(a.map((x, i) => x / b[i]));
  return { name, ref, goal, ...r, met: r.median <= goal };
});

if (args.includes('--json')) {
  console.log(JSON.stringify({ rounds: ROUNDS, results, ratios }, null, 2));
} else {
  const f = (x) => (x < 100 ? x.toFixed(1) : x.toFixed(0)).padStart(7);
  console.log(`lease-fence from JavaScript: CPU ns per call over ${ROUNDS} interleaved rounds, min / median / max`);
  for (const r of results) console.log(`  ${r.name.padEnd(64)} ${f(r.min)} ${f(r.median)} ${f(r.max)}`);
  console.log('ratios within each round, min / median / max (goal: median at most):');
  for (const r of ratios) {
    console.log(`  ${r.name.padEnd(64)} ${r.min.toFixed(2).padStart(6)}x ${r.median.toFixed(2).padStart(6)}x ${r.max.toFixed(2).padStart(6)}x  goal ${r.goal}x: ${r.met ? 'met' : 'NOT met'}`);
  }
}
if (sink === -1) console.log(sink);
