// Stack overflows (RangeError) around and inside calls into the library.
//
// An overflow in JavaScript code (a commit's fn, a clock source, the glue)
// leaves the instance as it was: 10,000 round trips on the same objects work
// afterwards. An overflow that cuts a call into Go short stops the instance at
// once with a LeaseFenceError saying so (the interrupted Go code may have held
// a lock), never a later wrong answer; init() then starts a fresh instance.
// Each case runs in a fresh node process, since a process holds one instance.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

function run(code) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', code], { cwd: root, maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stderr}`));
      const lines = stdout.trim().split('\n');
      resolve(JSON.parse(lines[lines.length - 1]));
    });
  });
}

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
function world(lf) {
  let t = 0;
  const w = { deep: false };
  const source = () => (w.deep ? source() : (t += 1));
  w.clock = lf.createClock('agent', source);
  w.coordinator = new lf.LeaseCoordinator({ clock: lf.createClock('coordinator', () => (t += 1)), ttlMillis: 1e9 });
  w.client = new lf.LeaseClient({ clock: w.clock, holderId: 'agent-a' });
  w.gate = new lf.FenceGate('slot');
  return w;
}
`;

test('an overflow in a commit\'s fn or in a clock source leaves the same instance working', async () => {
  const out = await run(`
${roundTrips}
const lf = await import('lease-fence');
const w = world(lf);
const token = { resource: 'slot', holderId: 'agent-a', fence: 1 };
// Recursion through commit: every level commits the admitted token again and
// recurses in its fn, until the stack runs out.
let depth = 0;
const nest = () => { depth++; return w.gate.commit(token, nest); };
let commitError = null;
try { nest(); } catch (e) { commitError = e.name; }
// Recursion inside a clock source: the source recurses until the stack runs
// out, while Go waits for its reading.
w.deep = true;
let clockError = null;
try { w.clock.now(); } catch (e) { clockError = e.name; }
let beginError = null;
try { w.client.beginAcquire('slot'); } catch (e) { beginError = e.name; }
w.deep = false;
const result = roundTrips(lf, w);
console.log(JSON.stringify({ commitError, depthOver1000: depth > 1000, clockError, beginError, floor: w.gate.floor > 1, result }));
`);
  assert.deepEqual(out, {
    commitError: 'RangeError', depthOver1000: true, clockError: 'RangeError', beginError: 'RangeError', floor: true,
    result: { done: 10000, refused: true, rejections: 1 },
  });
});

test('an overflow that cuts a Go call short stops the instance at once; init() gives a working one', async () => {
  const out = await run(`
${roundTrips}
const lf = await import('lease-fence');
const w = world(lf);
let fence = 0;
const seen = {};
// At every depth on the way back from a stack overflow, call into Go: some
// calls overflow in the glue, some inside Go.
function probe(n) {
  try {
    return probe(n + 1);
  } catch (e) {
    try {
      const request = w.client.beginAcquire('r' + (n % 7));
      const outcome = w.coordinator.acquire(request);
      if (outcome.ok) w.coordinator.release(w.client.completeAcquire(request, outcome.grant).token);
      w.gate.commit({ resource: 'slot', holderId: 'agent-b', fence: ++fence }, () => w.clock.now());
      seen.ok = (seen.ok ?? 0) + 1;
    } catch (e2) {
      const kind = e2 instanceof RangeError ? 'RangeError'
        : e2 instanceof lf.LeaseFenceError && /instance has stopped \\(a call into it was cut short by RangeError/.test(e2.message) ? 'stopped'
        : 'other: ' + e2.message;
      seen[kind] = (seen[kind] ?? 0) + 1;
    }
    throw e;
  }
}
for (let i = 0; i < 3; i++) { try { probe(0); } catch {} }
let after = null;
try { w.gate.floor; after = 'alive'; } catch (e) { after = e.message; }
await lf.init();
let old = null;
try { w.gate.commit({ resource: 'slot', holderId: 'agent-b', fence: fence + 1 }, () => {}); old = 'ran'; } catch (e) { old = e.message; }
const result = roundTrips(lf, world(lf));
console.log(JSON.stringify({ kinds: Object.keys(seen).sort(), after, old, result }));
`);
  assert.deepEqual(out.kinds.filter((k) => k.startsWith('other')), [], 'every failure is the overflow itself or the stopped instance');
  assert.ok(out.kinds.includes('RangeError'));
  if (out.after === 'alive') {
    assert.equal(out.old, 'ran');
  } else {
    assert.match(out.after, /instance has stopped \(a call into it was cut short by RangeError/);
    assert.ok(out.kinds.includes('stopped'));
    assert.match(out.old, /made by a WebAssembly instance that has stopped/);
  }
  assert.deepEqual(out.result, { done: 10000, refused: true, rejections: 1 });
});
