// Stack overflows (RangeError) around and inside calls into the library.
//
// Before every call into Go the library checks that the stack has room for
// it (see docs/js.md), so on V8 an overflow never lands inside Go: a
// RangeError anywhere (a commit's fn, a clock source, the glue, the check
// itself) leaves the instance as it was, and 10,000 round trips on the same
// objects work afterwards. A createClock source is read by JavaScript between
// two calls into Go, never from inside Go. Where the check cannot work (here:
// node --no-liftoff, where V8 compiles the check without its large frame), an
// overflow inside Go stops the instance at once with a LeaseFenceError saying
// so, never a later wrong answer, and init() starts a fresh instance.
// Each case runs in a fresh node process, since a process holds one instance.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { run } from './fresh-node.mjs';


// 10,000 round trips (begin, acquire, complete, commit with a new fence,
// release) on one set of objects, with createClock sources; returns how many
// completed with the expected results.
const roundTrips = `
function roundTrips(lf, w, n = 10000) {
  let done = 0;
  for (let i = 0; i < n; i++) {
    const request = w.client.beginAcquire('slot');
    const outcome = w.coordinator.acquire(request);
    if (!outcome.ok) throw new Error('denied: ' + JSON.stringify(outcome));
    const lease = w.client.completeAcquire(request, outcome.grant);
    const written = w.gate.commit(lease.token, () => lease.token.fence);
    if (written !== lease.token.fence || w.gate.floor !== lease.token.fence) throw new Error('bad commit');
    if (!w.coordinator.release(lease.token)) throw new Error('not released');
    done++;
  }
  let refused = false;
  try { w.gate.commit({ resource: 'slot', holderId: 'x', fence: 1 }, () => {}); } catch (e) { refused = e instanceof lf.StaleFenceError; }
  return { done, refused, rejections: w.gate.rejections.length };
}
// A world whose clocks are createClock sources. The client's source recurses
// w.deep levels before it reads (Infinity: until the stack runs out), and
// counts how often it was entered and how often it returned.
function world(lf) {
  let t = 0;
  const w = { deep: 0, entered: 0, returned: 0 };
  const burn = (k) => (k <= 0 ? (t += 1) : burn(k - 1) + 0);
  w.burn = burn;
  w.read = () => {
    w.entered++;
    const v = burn(w.deep);
    w.returned++;
    return v;
  };
  w.source = () => w.read();
  w.clock = lf.createClock('agent', w.source);
  w.coordinator = new lf.LeaseCoordinator({ clock: lf.createClock('coordinator', () => (t += 1)), ttlMillis: 1e9 });
  w.client = new lf.LeaseClient({ clock: w.clock, holderId: 'agent-a' });
  w.gate = new lf.FenceGate('slot');
  return w;
}
const calls = (lf) => lf.FenceGate[Symbol.for('lease-fence.wasmCalls')];
const checked = (lf) => lf.FenceGate[Symbol.for('lease-fence.stackRoom')];
`;

// probe: at every depth on the way back from a stack overflow, run op and
// classify what happened: ok, a RangeError (the instance as it was), or a
// stopped instance; 'other' is a failure.
const probe = `
function sweep(lf, op, rounds = 3) {
  const seen = {};
  const note = (k) => { seen[k] = (seen[k] ?? 0) + 1; };
  let round = 0;
  function probe(n) {
    try {
      return probe(n + 1);
    } catch (e) {
      try {
        op(n, round);
        note('ok');
      } catch (e2) {
        note(e2 instanceof RangeError ? 'RangeError'
          : e2 instanceof lf.LeaseFenceError && /instance has stopped \\(a call into it was cut short by RangeError/.test(e2.message) ? 'stopped'
          : 'other: ' + e2.message);
      }
      throw e;
    }
  }
  for (; round < rounds; round++) { try { probe(0); } catch {} }
  return seen;
}
`;

test('an overflow in a commit\'s fn or in a clock source leaves the same instance working', async () => {
  const out = await run(`
${roundTrips}
const lf = await import('lease-fence');
const w = world(lf);
const token = { resource: 'slot', holderId: 'agent-a', fence: 1 };
// Recursion through commit: every level commits the admitted token again and
// recurses in its fn (a commit inside a running write goes through Go), until
// the stack runs out.
let depth = 0;
const nest = () => { depth++; return w.gate.commit(token, nest); };
let commitError = null;
try { nest(); } catch (e) { commitError = e.name; }
// Recursion inside a clock source until the stack runs out.
w.deep = Infinity;
let clockError = null;
try { w.clock.now(); } catch (e) { clockError = e.name; }
let beginError = null;
try { w.client.beginAcquire('slot'); } catch (e) { beginError = e.name; }
w.deep = 0;
const result = roundTrips(lf, w);
console.log(JSON.stringify({ checked: checked(lf), commitError, depthOver1000: depth > 1000, clockError, beginError, floor: w.gate.floor > 1, result }));
`);
  assert.deepEqual(out, {
    checked: true, commitError: 'RangeError', depthOver1000: true, clockError: 'RangeError', beginError: 'RangeError', floor: true,
    result: { done: 10000, refused: true, rejections: 1 },
  });
});

test('a createClock source is read with no Go code on the stack, by every call that reads a clock', async () => {
  const out = await run(`
const lf = await import('lease-fence');
const stacks = [];
let t = 0;
const source = () => {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = Infinity;
  stacks.push(new Error().stack);
  Error.stackTraceLimit = limit;
  return (t += 1);
};
const clock = lf.createClock('agent', source);
const coordinator = new lf.LeaseCoordinator({ clock: lf.createClock('coordinator', source), ttlMillis: 1000 });
const client = new lf.LeaseClient({ clock, holderId: 'a' });
const reads = {};
const count = (name, f) => { const before = stacks.length; f(); reads[name] = stacks.length - before; };
let request, lease, renewal, naive;
count('clock.now', () => clock.now());
count('beginAcquire', () => { request = client.beginAcquire('r'); });
count('acquire', () => { lease = client.completeAcquire(request, coordinator.acquire(request).grant); });
count('hasExpired', () => lease.hasExpired());
count('beginRenewal', () => { renewal = client.beginRenewal(lease); });
count('renew', () => { lease = client.completeRenewal(renewal, coordinator.renew(renewal).grant); });
count('release', () => coordinator.release(lease.token));
count('createNaiveLease', () => { naive = lf.createNaiveLease(clock, 100); });
count('naive.valid', () => naive.valid());
count('naive.renewed', () => naive.renewed());
// A refused call reads nothing.
count('refused acquire', () => { try { coordinator.acquire({ ...request, kind: 'renew' }); } catch {} });
count('refused release', () => { try { coordinator.release({ resource: 'r', holderId: 'a', fence: 0 }); } catch {} });
const withWasm = stacks.filter((s) => /wasm:\\/\\/|wasm-function/.test(s)).length;
console.log(JSON.stringify({ reads, withWasm, sample: stacks[0].split('\\n').length > 3 }));
`);
  assert.deepEqual(out.reads, {
    'clock.now': 1, beginAcquire: 1, acquire: 1, hasExpired: 1, beginRenewal: 1, renew: 1, release: 1,
    createNaiveLease: 1, 'naive.valid': 1, 'naive.renewed': 1, 'refused acquire': 0, 'refused release': 0,
  });
  assert.equal(out.withWasm, 0, 'no stack a source saw has a wasm frame on it');
  assert.ok(out.sample);
});

test('an overflow at every point around a clock source\'s call leaves the instance working', async () => {
  // At every depth on the way back from a stack overflow, a round trip whose
  // clock source first recurses k levels (k changes with the depth), so the
  // stack runs out before Go is entered, while Go runs (refused by the room
  // check), between the two calls into Go, at the source's entry, inside it,
  // and after it.
  const out = await run(`
${roundTrips}
${probe}
const lf = await import('lease-fence');
const w = world(lf);
const side = new lf.FenceGate('side');
let fence = 0;
const where = {};
// In odd rounds the source has a frame of 2,000 registers (16 KiB, twice the
// room checked before a call into Go): its very entry overflows at some
// depths where the call into Go before it had room. A fresh function each
// round, so that V8 has not optimized the unused registers away.
const plain = w.read;
const big = (round) => new Function('w', 'burn', 'w.entered++; let ' + Array.from({ length: 2000 }, (_, i) => 'v' + i + ' = w.deep').join(', ') +
  '; const v = burn(w.deep); w.returned++; return v; // ' + round);
const seen = sweep(lf, (n, round) => {
  if (n === 0) w.read = round % 2 === 0 ? plain : ((f) => () => f(w, w.burn))(big(round));
  w.deep = (n * 7 + 13 * round) % 300;
  const entered = w.entered, returned = w.returned, before = calls(lf);
  try {
    w.clock.now();
    const request = w.client.beginAcquire('r' + (n % 7));
    const outcome = w.coordinator.acquire(request);
    if (outcome.ok) w.coordinator.release(w.client.completeAcquire(request, outcome.grant).token);
    side.commit({ resource: 'side', holderId: 'agent-b', fence: ++fence }, () => 0);
  } catch (e) {
    if (e instanceof RangeError) {
      const k = w.entered - entered > w.returned - returned ? 'inside the source'
        : w.entered === entered && calls(lf) > before ? 'at the entry of the source, after a call into Go' : 'elsewhere';
      where[k] = (where[k] ?? 0) + 1;
    }
    throw e;
  }
}, 12);
w.deep = 0;
w.read = plain;
let alive = null;
try { w.gate.floor; alive = true; } catch (e) { alive = e.message; }
const result = roundTrips(lf, w);
console.log(JSON.stringify({ checked: checked(lf), kinds: Object.keys(seen).sort(), where, alive, result }));
`);
  assert.equal(out.checked, true);
  assert.deepEqual(out.kinds, ['RangeError', 'ok'], 'every call either worked or threw the RangeError, and the instance never stopped');
  assert.ok(out.where['inside the source'] > 0 && out.where['at the entry of the source, after a call into Go'] > 0, JSON.stringify(out.where));
  assert.equal(out.alive, true);
  assert.deepEqual(out.result, { done: 10000, refused: true, rejections: 1 });
});

test('the room check stays in force after millions of calls (V8 optimizes hot functions)', async () => {
  const out = await run(`
${roundTrips}
${probe}
const lf = await import('lease-fence');
const w = world(lf);
// Enough calls to use up several modules of room checks; each check function
// would be optimized, losing its frame, after about 36,000 calls.
for (let i = 0; i < 1.6e6; i++) w.gate.floor;
const side = new lf.FenceGate('side');
let fence = 0;
const seen = sweep(lf, (n) => {
  const request = w.client.beginAcquire('r' + (n % 7));
  const outcome = w.coordinator.acquire(request);
  if (outcome.ok) w.coordinator.release(w.client.completeAcquire(request, outcome.grant).token);
  side.commit({ resource: 'side', holderId: 'agent-b', fence: ++fence }, () => w.clock.now());
});
let alive = null;
try { w.gate.floor; alive = true; } catch (e) { alive = e.message; }
console.log(JSON.stringify({ checked: checked(lf), kinds: Object.keys(seen).sort(), alive, result: roundTrips(lf, w) }));
`);
  assert.equal(out.checked, true);
  assert.deepEqual(out.kinds, ['RangeError', 'ok']);
  assert.equal(out.alive, true);
  assert.deepEqual(out.result, { done: 10000, refused: true, rejections: 1 });
});

test('where the room check cannot work, an overflow inside Go stops the instance at once; init() gives a working one', async () => {
  // --no-liftoff: V8 compiles the check with its optimizing compiler, which
  // drops its frame, so calls are made with the stack all but full.
  const out = await run(`
${roundTrips}
${probe}
const lf = await import('lease-fence');
const w = world(lf);
let fence = 0;
const seen = sweep(lf, (n) => {
  const request = w.client.beginAcquire('r' + (n % 7));
  const outcome = w.coordinator.acquire(request);
  if (outcome.ok) w.coordinator.release(w.client.completeAcquire(request, outcome.grant).token);
  w.gate.commit({ resource: 'slot', holderId: 'agent-b', fence: ++fence }, () => w.clock.now());
});
let after = null;
try { w.gate.floor; after = 'alive'; } catch (e) { after = e.message; }
await lf.init();
let old = null;
try { w.gate.commit({ resource: 'slot', holderId: 'agent-b', fence: fence + 1 }, () => {}); old = 'ran'; } catch (e) { old = e.message; }
const result = roundTrips(lf, world(lf));
console.log(JSON.stringify({ kinds: Object.keys(seen).sort(), after, old, result }));
`, ['--no-liftoff']);
  assert.deepEqual(out.kinds.filter((k) => k.startsWith('other')), [], 'every failure is the overflow itself or the stopped instance');
  assert.ok(out.kinds.includes('stopped'), JSON.stringify(out.kinds));
  assert.match(out.after, /instance has stopped \(a call into it was cut short by RangeError/);
  assert.match(out.old, /made by a WebAssembly instance that has stopped/);
  assert.deepEqual(out.result, { done: 10000, refused: true, rejections: 1 });
});

test('every call into Go goes through enter (which checks for stack room first)', () => {
  // The glue calls an export only by passing it to enter (directly or through
  // call and call4); an export called in place, such as X.lf_floor(h), would
  // skip the check. lf_header, called once while starting, is the exception.
  // The modules that call into Go: the runtime, the codec, the API and the gate.
  const src = ['runtime.mjs', 'codec.mjs', 'api.mjs', 'gate.mjs']
    .map((f) => readFileSync(new URL(`../../wasm/js/${f}`, import.meta.url), 'utf8').replace(/^\s*\/\/.*$/gm, '')).join('\n');
  assert.deepEqual([...src.matchAll(/\b(?:X|exports)\.(lf_\w+)\s*\(/g)].map((m) => m[1]), ['lf_header']);
  // fn runs in callGo only, and callGo is called by enter and readSource
  // only, each after room().
  assert.equal([...src.matchAll(/\bfn\(a, b, c, d\)/g)].length, 1, 'fn is called in one place');
  assert.ok(/function callGo\(fn, a, b, c, d\) \{\s*let st;\s*try \{\s*st = fn\(a, b, c, d\)/.test(src), 'that place is callGo');
  assert.equal([...src.matchAll(/\bcallGo\(/g)].length, 3, 'callGo is defined once and called twice');
  assert.ok(/function enter\(fn[^)]*\) \{[^]*?room\(\);[^]*?callGo\(fn, a, b, c, d\)[^]*?\n\}/.test(src), 'enter checks for room before it calls Go');
  assert.ok(/function readSource\([^]*?if \(room !== null\) room\(\);\s*wasmCalls\+\+;\s*const st = callGo\(fn, a, b, c, d\)/.test(src), 'readSource checks for room before its second call');
});
