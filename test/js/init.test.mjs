// Loading: the entries (lease-fence, lease-fence/init, the module file
// itself) add nothing to globalThis; init takes every documented kind of
// source and refuses others without harm; calls before init say so; and
// after the instance died (here: out of memory under a small wasm memory
// limit) init() starts a fresh, working instance while objects of the dead
// one stay refused. Each case runs in a fresh node process, since a process
// holds one instance.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { root, run } from './fresh-node.mjs';
import { roundTrip as roundTripOf } from '../consumers/app/roundtrip.mjs';


// A round trip through whatever namespace lf is, the consumer apps' own
// (acquire, commit, a stale fence refused), as source for the fresh processes.
const roundTrip = String(roundTripOf);
const ok = { fence: 1, written: 'written', refused: true, rejections: 1 };

// The ways a fresh process loads the library, each the body of an async
// function that returns its namespace.
const loads = {
  "import('lease-fence') (the node entry)": "return import('lease-fence');",
  'import of the module file (the browser and default entry, read from file:)': "return import('./wasm/js/lease-fence.mjs');",
  'lease-fence/init with init(URL)': "const lf = await import('lease-fence/init'); await lf.init(new URL('./wasm/js/lease-fence.wasm', 'file://' + process.cwd() + '/')); return lf;",
};

const globalsCheck = (load) => `
${roundTrip}
const names = () => Object.getOwnPropertyNames(globalThis);
const keys = Object.keys(globalThis);
const before = names();
// node -e defines fs, path and the other built-in modules as globals itself;
// what matters is that loading changes none of these.
const watched = ['Go', 'fs', 'path', 'process'];
const types = () => watched.map((k) => [k, Object.getOwnPropertyDescriptor(globalThis, k)?.value ?? typeof globalThis[k]]);
const typesBefore = types();
const lf = await (async () => { ${load} })();
const result = roundTrip(lf);
console.log(JSON.stringify({
  added: names().filter((k) => !before.includes(k)),
  keysAdded: Object.keys(globalThis).filter((k) => !keys.includes(k)),
  unchanged: types().every(([k, v], i) => v === typesBefore[i][1]),
  Go: typeof globalThis.Go,
  result,
}));
`;

describe('importing adds nothing to globalThis', () => {
  for (const [name, load] of Object.entries(loads)) {
    test(name, async () => {
      const out = await run(globalsCheck(load));
      assert.deepEqual(out, { added: [], keysAdded: [], unchanged: true, Go: 'undefined', result: ok });
    });
  }
});

// Source that sets touched when globalThis[name] is read (a write puts a
// plain value in its place).
const watchGlobal = (name) => `
const real = Object.getOwnPropertyDescriptor(globalThis, '${name}');
let touched = false;
Object.defineProperty(globalThis, '${name}', {
  configurable: true,
  enumerable: real.enumerable,
  get() { touched = true; return real.get ? real.get.call(this) : real.value; },
  set(v) { Object.defineProperty(globalThis, '${name}', { value: v, writable: true, configurable: true, enumerable: real.enumerable }); },
});`;

// In Node the first mention of the global Response loads Node's fetch
// (undici), which takes longer than starting the wasm; loading from a file:
// URL must not need it.
const responseCheck = (load) => `
${roundTrip}
${watchGlobal('Response')}
const lf = await (async () => { ${load} })();
console.log(JSON.stringify({ touched, result: roundTrip(lf) }));
`;

describe('loading from a file does not touch Response (which would load fetch in Node)', () => {
  const cases = {
    ...loads,
    'lease-fence/init with init(URL string)': "const lf = await import('lease-fence/init'); await lf.init(new URL('./wasm/js/lease-fence.wasm', 'file://' + process.cwd() + '/').href); return lf;",
  };
  for (const [name, load] of Object.entries(cases)) {
    test(name, async () => {
      assert.deepEqual(await run(responseCheck(load)), { touched: false, result: ok });
    });
  }
});

// Go's runtime asks for random bytes as it starts. In Node they come from
// /dev/urandom (randomSource in loader.mjs), because Node builds its
// WebCrypto object on the first read of globalThis.crypto, the costliest step
// of a cold import. Either way they must be random: the first request id of
// a fresh process (128 bits from Go's generator, which those bytes seed)
// differs from one process to the next.
const randomCheck = (load) => `
${roundTrip}
${watchGlobal('crypto')}
const lf = await (async () => { ${load} })();
const id = new lf.LeaseClient({ clock: lf.createManualClock('a'), holderId: 'a' }).beginAcquire('r').requestId;
console.log(JSON.stringify({ touched, id, result: roundTrip(lf) }));
`;

describe("Go's random bytes in Node come from /dev/urandom, without WebCrypto", () => {
  for (const [name, load] of Object.entries(loads)) {
    test(name, async () => {
      const [a, b] = await Promise.all([run(randomCheck(load)), run(randomCheck(load))]);
      for (const out of [a, b]) {
        assert.equal(out.touched, false);
        assert.match(out.id, /^[0-9a-f]{32}$/);
        assert.deepEqual(out.result, ok);
      }
      assert.notEqual(a.id, b.id);
    });
  }

  test('the source fills the whole buffer with fresh bytes each time', async () => {
    const { randomSource } = await import('../../wasm/js/loader.mjs');
    const fill = randomSource();
    assert.equal(typeof fill, 'function');
    const seen = new Set();
    for (const n of [1, 8, 16, 64, 4096, 100000]) {
      const a = new Uint8Array(n + 2);
      const b = new Uint8Array(n + 2);
      fill(a.subarray(1, n + 1));
      fill(b.subarray(1, n + 1));
      assert.equal(a[0] + a[n + 1] + b[0] + b[n + 1], 0, 'nothing outside the buffer is written');
      const hex = (x) => Buffer.from(x.subarray(1, n + 1)).toString('hex');
      if (n >= 8) {
        assert.notEqual(hex(a), hex(b));
        assert.ok(a.subarray(1, n + 1).some((v) => v !== 0) && b.subarray(1, n + 1).some((v) => v !== 0));
        if (n >= 4096) assert.ok(a.subarray(n - 7, n + 1).some((v) => v !== 0), 'the end is filled too');
      }
      if (n >= 8) seen.add(hex(a)).add(hex(b));
    }
    assert.equal(seen.size, 10);
  });

  test('where /dev/urandom may not be read (the permission model), from crypto.getRandomValues', async () => {
    const permission = process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';
    const flags = [permission, `--allow-fs-read=${root}*`];
    const load = "return import('lease-fence');";
    const [a, b] = await Promise.all([run(randomCheck(load), flags), run(randomCheck(load), flags)]);
    for (const out of [a, b]) {
      assert.equal(out.touched, true);
      assert.match(out.id, /^[0-9a-f]{32}$/);
      assert.deepEqual(out.result, ok);
    }
    assert.notEqual(a.id, b.id);
  });
});

const initCheck = (source) => `
${roundTrip}
import { readFileSync } from 'node:fs';
const lf = await import('lease-fence/init');
const url = new URL('./wasm/js/lease-fence.wasm', 'file://' + process.cwd() + '/');
const bytes = readFileSync(url);
await lf.init(${source});
console.log(JSON.stringify(roundTrip(lf)));
`;

describe('init takes the wasm as', () => {
  const sources = {
    'a file: URL': 'url',
    'a URL string': 'url.href',
    'a Node Buffer': 'bytes',
    'an ArrayBuffer': 'bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)',
    'a Uint8Array': 'new Uint8Array(bytes)',
    'a WebAssembly.Module': 'new WebAssembly.Module(bytes)',
    'a promise of a WebAssembly.Module': 'WebAssembly.compile(bytes)',
    'a Response (application/wasm)': "new Response(bytes, { headers: { 'content-type': 'application/wasm' } })",
    'a Response with another content type': 'new Response(bytes)',
    'a promise of a Response': "Promise.resolve(new Response(bytes, { headers: { 'content-type': 'application/wasm' } }))",
  };
  for (const [name, source] of Object.entries(sources)) {
    test(name, async () => {
      assert.deepEqual(await run(initCheck(source)), ok);
    });
  }
});

test('before init, calls say the instance is not started; a bad source is refused and a good one still works', async () => {
  const out = await run(`
${roundTrip}
const lf = await import('lease-fence/init');
const errors = [];
const attempt = async (f) => { try { await f(); errors.push(null); } catch (e) { errors.push({ name: e.name, argument: e.argument, message: e.message }); } };
await attempt(() => new lf.FenceGate('r'));
await attempt(() => lf.createManualClock('c'));
await attempt(() => lf.init(42));
await attempt(() => lf.init({ wasmURL: 'x' }));
await attempt(() => lf.init('http://[bad'));
await attempt(() => lf.init(new URL('./wasm/js/no-such.wasm', 'file://' + process.cwd() + '/')));
await attempt(() => lf.init(new Uint8Array([0, 97, 115, 109, 9, 9, 9, 9])));
await attempt(() => lf.init(new Response('gone', { status: 404, statusText: 'Not Found' })));
await attempt(() => new lf.FenceGate('r'));
await lf.init(new URL('./wasm/js/lease-fence.wasm', 'file://' + process.cwd() + '/'));
console.log(JSON.stringify({ errors, result: roundTrip(lf) }));
`);
  const [gate, clock, num, obj, badURL, missing, notWasm, status404, stillNotStarted] = out.errors;
  for (const e of [gate, clock, stillNotStarted]) {
    assert.equal(e.name, 'LeaseFenceError');
    assert.match(e.message, /not started; await init\(\) before using the library/);
  }
  for (const [e, what] of [[num, /not number/], [obj, /not Object/], [badURL, /is not a URL/]]) {
    assert.equal(e.name, 'InvalidArgumentError');
    assert.equal(e.argument, 'source');
    assert.match(e.message, what);
  }
  assert.equal(missing.name, 'LeaseFenceError');
  assert.match(missing.message, /reading file:.*no-such\.wasm failed: ENOENT/);
  assert.equal(notWasm.name, 'LeaseFenceError');
  assert.match(notWasm.message, /compiling the given bytes failed/);
  assert.equal(status404.name, 'LeaseFenceError');
  assert.match(status404.message, /404 Not Found/);
  assert.deepEqual(out.result, ok);
});

test('init while running does nothing; concurrent calls share one start', async () => {
  const out = await run(`
${roundTrip}
const lf = await import('lease-fence/init');
const url = new URL('./wasm/js/lease-fence.wasm', 'file://' + process.cwd() + '/');
const a = lf.init(url), b = lf.init(url);
const same = a === b;
await a;
const gate = new lf.FenceGate('kept');
gate.admit({ resource: 'kept', holderId: 'a', fence: 7 });
await lf.init(url);
await lf.init(42); // ignored while running: nothing to start
console.log(JSON.stringify({ same, floor: gate.floor, result: roundTrip(lf) }));
`);
  assert.deepEqual(out, { same: true, floor: 7, result: ok });
});

test('after the instance died, init() starts a fresh one from the module it compiled; old objects stay refused', async () => {
  // 512 pages of 64 KiB: the Go runtime runs out of memory after some
  // thousands of gates with 1,000-byte names, all kept alive, and exits, as
  // it would at 4 GiB.
  const out = await run(`
${roundTrip}
const lf = await import('lease-fence');
// One object of every kind, and every call on them, made before the death.
let t = 0;
const o = {
  clock: lf.createClock('c', () => (t += 1)), manual: lf.createManualClock('m'), mono: lf.createMonotonicClock('mono'),
  gate: new lf.FenceGate('r'),
};
o.coordinator = new lf.LeaseCoordinator({ clock: o.clock, ttlMillis: 1000 });
o.client = new lf.LeaseClient({ clock: o.manual, holderId: 'a' });
o.request = o.client.beginAcquire('r');
o.grant = o.coordinator.acquire(o.request).grant;
o.lease = o.client.completeAcquire(o.request, o.grant);
o.gate.commit(o.lease.token, () => 0);
o.renewal = o.client.beginRenewal(o.lease);
o.naive = lf.createNaiveLease(o.manual, 100);
const calls = {
  'clock.now': () => o.clock.now(), 'manual.now': () => o.manual.now(), 'monotonic.now': () => o.mono.now(),
  'manual.advance': () => o.manual.advance(1), 'manual.set': () => o.manual.set(1e9),
  'coordinator.acquire': () => o.coordinator.acquire(o.client.beginAcquire('s')), 'coordinator.renew': () => o.coordinator.renew(o.renewal),
  'coordinator.release': () => o.coordinator.release(o.lease.token), 'coordinator.issuedFence': () => o.coordinator.issuedFence,
  'client.beginAcquire': () => o.client.beginAcquire('s'), 'client.completeAcquire': () => o.client.completeAcquire(o.request, o.grant),
  'client.beginRenewal': () => o.client.beginRenewal(o.lease), 'client.completeRenewal': () => o.client.completeRenewal(o.renewal, o.grant),
  'lease.hasExpired': () => o.lease.hasExpired(), 'lease.wouldAdmit': () => o.lease.wouldAdmit(o.gate),
  'gate.commit (admitted token)': () => o.gate.commit(o.lease.token, () => 0), 'gate.commit': () => o.gate.commit({ ...o.lease.token, fence: 9 }, () => 0),
  'gate.admit': () => o.gate.admit({ ...o.lease.token, fence: 10 }), 'gate.floor': () => o.gate.floor,
  'gate.rejections': () => o.gate.rejections, 'gate.rejectionCount': () => o.gate.rejectionCount,
  'naive.valid': () => o.naive.valid(), 'naive.renewed': () => o.naive.renewed(), 'naive.expiresAt': () => o.naive.expiresAt,
  'new LeaseCoordinator (old clock)': () => new lf.LeaseCoordinator({ clock: o.manual, ttlMillis: 1 }),
  'createNaiveLease (old clock)': () => lf.createNaiveLease(o.manual, 1),
};
const asyncCalls = { 'gate.commitAsync': () => o.gate.commitAsync({ ...o.lease.token, fence: 11 }, () => 0) };
async function errors() {
  const out = {};
  for (const [k, f] of Object.entries(calls)) { try { f(); out[k] = 'ran'; } catch (e) { out[k] = e instanceof lf.LeaseFenceError ? e.message : 'not a LeaseFenceError: ' + e; } }
  for (const [k, f] of Object.entries(asyncCalls)) { try { await f(); out[k] = 'ran'; } catch (e) { out[k] = e instanceof lf.LeaseFenceError ? e.message : 'not a LeaseFenceError: ' + e; } }
  return out;
}
const keep = [];
let died = null;
for (let i = 0; i < 1e6 && died === null; i++) {
  try { keep.push(new lf.FenceGate(String(i).padEnd(1000, 'x'))); } catch (e) { died = { name: e.name, message: e.message, made: i }; }
}
keep.length = 0;
let afterDeath = null;
try { new lf.FenceGate('r'); } catch (e) { afterDeath = e.message; }
const oldBeforeInit = await errors();
await lf.init();
const oldAfterInit = await errors();
const result = roundTrip(lf);
let loop = 0;
for (let i = 0; i < 1000; i++) if (roundTrip(lf).refused) loop++;
console.log(JSON.stringify({ died, afterDeath, oldBeforeInit, oldAfterInit, result, loop }));
`, ['--wasm-max-mem-pages=512']);
  assert.equal(out.died.name, 'LeaseFenceError');
  assert.match(out.died.message, /instance has stopped \(the Go runtime exited with code 2\); await init\(\) for a fresh one/);
  assert.ok(out.died.made > 0);
  assert.match(out.afterDeath, /instance has stopped/);
  // Every call on an object of the dead instance fails with a
  // LeaseFenceError: before init() saying the instance has stopped, after it
  // that the object was made by an instance that has stopped.
  assert.equal(Object.keys(out.oldBeforeInit).length, 27);
  for (const [call, message] of Object.entries(out.oldBeforeInit)) {
    assert.match(message, /^lease-fence: the WebAssembly instance has stopped \(the Go runtime exited with code 2\); await init\(\) for a fresh one/, call);
  }
  for (const [call, message] of Object.entries(out.oldAfterInit)) {
    assert.match(message, /^lease-fence: this object was made by a WebAssembly instance that has stopped; make a new one$/, call);
  }
  assert.deepEqual(out.result, ok);
  assert.equal(out.loop, 1000);
});

test('without FinalizationRegistry (Workers before 2025-05-05), init refuses with a message saying what to set', async () => {
  const out = await run(`
delete globalThis.FinalizationRegistry;
const lf = await import('lease-fence/init');
let error = null;
try { await lf.init(new URL('./wasm/js/lease-fence.wasm', 'file://' + process.cwd() + '/')); } catch (e) { error = { name: e.name, message: e.message }; }
let call = null;
try { new lf.FenceGate('r'); } catch (e) { call = e.message; }
console.log(JSON.stringify({ error, call }));
`);
  assert.equal(out.error.name, 'LeaseFenceError');
  assert.match(out.error.message, /no FinalizationRegistry.*compatibility_date to 2025-05-05 or later/);
  assert.match(out.call, /not started/);
});

test('a missing wasm makes the import of an entry reject with a LeaseFenceError naming the file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'lease-fence-nowasm-'));
  try {
    for (const f of ['lease-fence.mjs', 'api.mjs', 'runtime.mjs', 'codec.mjs', 'gate.mjs', 'errors.mjs', 'error-class.mjs', 'loader.mjs', 'wasm_exec.mjs', 'init.mjs', 'node.mjs']) {
      cpSync(join(root, 'wasm/js', f), join(dir, f));
    }
    const attempt = (entry) => `
try { await import(${JSON.stringify(pathToFileURL(join(dir, entry)).href)}); console.log('null'); } catch (e) { console.log(JSON.stringify({ name: e.name, message: e.message, cause: e.cause?.code })); }
`;
    for (const [entry, message] of [
      ['lease-fence.mjs', /^lease-fence: reading file:.*lease-fence-nowasm-.*\/lease-fence\.wasm failed: ENOENT/],
      ['node.mjs', /^lease-fence: getting the wasm failed: ENOENT.*lease-fence-nowasm-.*\/lease-fence\.wasm/],
    ]) {
      const out = await run(attempt(entry));
      assert.equal(out?.name, 'LeaseFenceError', entry);
      assert.match(out.message, message);
      assert.equal(out.cause, 'ENOENT');
    }
    // Importing init.mjs first changes nothing (no flag set by an import):
    // node.mjs still reads the file. Once init(source) has been called,
    // node.mjs reads nothing and its import succeeds.
    const url = (f) => JSON.stringify(pathToFileURL(join(dir, f)).href);
    const out = await run(`
const lf = await import(${url('init.mjs')});
const before = await import(${url('node.mjs')}).then(() => null, (e) => e.cause?.code);
await lf.init(await import('node:fs/promises').then((fs) => fs.readFile(${JSON.stringify(join(root, 'wasm/js/lease-fence.wasm'))})));
const node = await import(${url('node.mjs')} + '?again');
${roundTrip}
console.log(JSON.stringify({ before, same: node.FenceGate === lf.FenceGate, result: roundTrip(node) }));
`);
    assert.deepEqual(out, { before: 'ENOENT', same: true, result: ok });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});