// The same module loads in a browser page: Chromium (playwright-core) opens a
// page served from 127.0.0.1 that imports lease-fence.mjs and runs a round
// trip. Once with .wasm served as application/wasm (streaming compilation)
// and once as application/octet-stream (the fallback that compiles bytes).
// The page also lists the global object's own properties before and after
// the import: loading adds none (Go's wasm_exec.js would add Go, fs, path
// and a process without env); and it recurses through commit until the
// stack runs out, which the stack room check turns into a RangeError before
// Go runs.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { launch, servePackage } from '../chromium.mjs';

const page = `<!doctype html><meta charset="utf-8"><script type="module">
const before = Object.getOwnPropertyNames(globalThis);
const { createManualClock, FenceGate, LeaseClient, LeaseCoordinator, StaleFenceError } = await import('./lease-fence.mjs');
const added = Object.getOwnPropertyNames(globalThis).filter((k) => !before.includes(k));
try {
  const coordinator = new LeaseCoordinator({ clock: createManualClock('c'), ttlMillis: 100 });
  const client = new LeaseClient({ clock: createManualClock('a'), holderId: 'a', clockSkewMillis: 5 });
  const gate = new FenceGate('r');
  const request = client.beginAcquire('r');
  const lease = client.completeAcquire(request, coordinator.acquire(request).grant);
  const written = gate.commit(lease.token, () => 'written');
  gate.admit({ resource: 'r', holderId: 'b', fence: 2 });
  let refused = false;
  try { gate.commit(lease.token, () => {}); } catch (e) { refused = e instanceof StaleFenceError; }
  // Recursion through commit until the stack runs out: the room check makes
  // it a RangeError before any call into Go, and the instance goes on.
  const nest = () => gate.commit({ resource: 'r', holderId: 'b', fence: 2 }, nest);
  let overflow = null;
  try { nest(); } catch (e) { overflow = e.name; }
  const checked = FenceGate[Symbol.for('lease-fence.stackRoom')];
  window.result = { written, refused, deadline: lease.deadline.millis, rejections: gate.rejections.length, added, process: typeof process,
    checked, overflow, floorAfter: gate.floor };
} catch (e) {
  window.result = { error: String(e && e.stack || e) };
}
</script>`;

let server, base, browser, wasmType = 'application/wasm';
const served = [];

before(async () => {
  server = createServer((req, res) => {
    const name = new URL(req.url, 'http://x').pathname.slice(1);
    served.push(name);
    servePackage(res, name, page, wasmType);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}/`;
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server.close();
});

async function runPage() {
  const tab = await browser.context.newPage();
  try {
    const logs = [];
    tab.on('console', (m) => logs.push(m.text()));
    await tab.goto(base + 'index.html');
    await tab.waitForFunction(() => window.result !== undefined);
    return { result: await tab.evaluate(() => window.result), logs };
  } finally {
    await tab.close();
  }
}

const expected = { written: 'written', refused: true, deadline: 95, rejections: 1, added: [], process: 'undefined', checked: true,
  overflow: 'RangeError', floorAfter: 2 };

test('loads in Chromium with application/wasm', async () => {
  wasmType = 'application/wasm';
  const { result } = await runPage();
  assert.deepEqual(result, expected);
  assert.ok(served.includes('lease-fence.wasm') && served.includes('wasm_exec.mjs'));
});

test('loads in Chromium when the server sends the wrong content type', async () => {
  wasmType = 'application/octet-stream';
  const { result } = await runPage();
  assert.deepEqual(result, expected);
});
