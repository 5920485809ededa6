// fence-proxy from JavaScript: the Lease-Fence header written by
// leaseFenceHeader (lease-fence/service-client) and read by the real proxy
// (cmd/fence-proxy: $FENCE_PROXY, or built here; a child process) in front
// of an upstream API served by this process; the proxy's refusal read back by
// staleFenceError; and the JavaScript conformance suite (test/gates) run
// against the proxy through HTTP.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { InvalidArgumentError, StaleFenceError } from 'lease-fence';
import { waitFor } from '../svcclient/children.mjs';
import { LEASE_FENCE_HEADER, MAX_HEADER_FENCE, leaseFenceHeader, staleFenceError } from 'lease-fence/service-client';
import { runConformance } from '../gates/conformance.mjs';
import { proxyGate } from '../gates/adapters.mjs';
import { rejection } from '../../wasm/js/gate-common.mjs';
import { rng } from '../js/helpers.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'fence-proxy-js-'));
// $FENCE_PROXY (make test-proxy-js: out/bin/fence-proxy), or built here.
const binary = process.env.FENCE_PROXY || join(dir, 'fence-proxy');

// ---------------------------------------------------------------- servers

// The upstream: POST /append?resource=r appends the body to r's list (then
// answers 500 with X-Fail, after storing); X-Inside names a callback run
// while the request is held; GET /values?resource=r lists. Every request's
// Lease-Fence header is kept in `headers`.
function startUpstream() {
  const values = new Map();
  const inside = new Map();
  const headers = [];
  const server = createServer(async (req, res) => {
    const u = new URL(req.url, 'http://x');
    const r = u.searchParams.get('resource');
    const chunks = [];
    for await (const c of req) chunks.push(c);
    headers.push(req.headers['lease-fence'] ?? null);
    if (req.method === 'GET' && u.pathname === '/values') {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(values.get(r) ?? []));
      return;
    }
    if (req.method === 'POST' && u.pathname === '/append') {
      values.set(r, [...(values.get(r) ?? []), Buffer.concat(chunks).toString()]);
      const k = req.headers['x-inside'];
      if (k && inside.has(k)) {
        const f = inside.get(k);
        inside.delete(k);
        await f();
      }
      res.statusCode = req.headers['x-fail'] ? 500 : 204;
      res.end();
      return;
    }
    res.statusCode = 404;
    res.end();
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () =>
    resolve({ url: `http://127.0.0.1:${server.address().port}`, values, inside, headers, close: () => new Promise((r) => server.close(r)) })));
}

let proxySeq = 0;

// A fence-proxy process over a fresh state file (or the given one).
async function startProxy(upstream, { state, listen = '127.0.0.1:0' } = {}) {
  const init = !state;
  state ??= join(dir, `proxy${++proxySeq}.db`);
  const args = ['-listen', listen, '-upstream', upstream, '-state', state, '-quiet'];
  if (init) args.push('-init');
  const proc = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await waitFor(proc, [], /^listening on (http:\/\/127\.0\.0\.1:\d+)$/, 'fence-proxy');
  return {
    url, state,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      return exited;
    },
    async kill() {
      const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve(signal)));
      proc.kill('SIGKILL');
      return exited;
    },
  };
}

const running = [];
before(() => {
  if (!process.env.FENCE_PROXY) execFileSync(process.env.GO ?? 'go', ['build', '-o', binary, './cmd/fence-proxy'], { cwd: root, stdio: 'inherit' });
});
after(async () => {
  for (const s of running) assert.equal(await s.stop(), 0, 'fence-proxy stopped cleanly on SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

async function env() {
  const upstream = await startUpstream();
  const proxy = await startProxy(upstream.url);
  running.push(proxy, { stop: async () => { await upstream.close(); return 0; } });
  return { upstream, proxy };
}

const post = (url, token, body = '') => fetch(url, {
  method: 'POST', body, headers: token ? { [LEASE_FENCE_HEADER]: leaseFenceHeader(token) } : {},
});

// ---------------------------------------------------------------- the header

describe('leaseFenceHeader', () => {
  test('writes the dictionary Go writes', () => {
    const cases = [
      [{ resource: 'deploy-slot', holderId: 'agent-a', fence: 7 }, 'resource="deploy-slot", holder="agent-a", fence=7'],
      [{ resource: 'a"b\\c', holderId: 'h', fence: 1 }, 'resource="a\\"b\\\\c", holder="h", fence=1'],
      [{ resource: 'r', holderId: 'agent-ü', fence: MAX_HEADER_FENCE }, 'resource="r", holder=%"agent-%c3%bc", fence=999999999999999'],
      [{ resource: 'tab\there%', holderId: 'h', fence: 2 }, 'resource=%"tab%09here%25", holder="h", fence=2'],
      [{ resource: '🦀"', holderId: 'h', fence: 3 }, 'resource=%"%f0%9f%a6%80%22", holder="h", fence=3'],
    ];
    for (const [token, want] of cases) assert.equal(leaseFenceHeader(token), want);
  });

  test('refuses a token it cannot send', () => {
    const bad = [
      [null, 'token'],
      [{ resource: 'r', holderId: 'h', fence: 0 }, 'token.fence'],
      [{ resource: 'r', holderId: 'h', fence: MAX_HEADER_FENCE + 1 }, 'token.fence'],
      [{ resource: 'r', holderId: 'h', fence: Number.MAX_SAFE_INTEGER }, 'token.fence'],
      [{ resource: 'r', holderId: 'h', fence: 1.5 }, 'token.fence'],
      [{ resource: 'r', holderId: 'h', fence: '7' }, 'token.fence'],
      [{ resource: '', holderId: 'h', fence: 1 }, 'token.resource'],
      [{ resource: 'r'.repeat(1025), holderId: 'h', fence: 1 }, 'token.resource'],
      [{ resource: 'r', holderId: 'é'.repeat(513), fence: 1 }, 'token.holderId'],
      [{ resource: 'r', holderId: 'lone \ud800', fence: 1 }, 'token.holderId'],
    ];
    for (const [token, argument] of bad) {
      assert.throws(() => leaseFenceHeader(token), (err) => err instanceof InvalidArgumentError && err.argument === argument, JSON.stringify(token));
    }
  });

  test('the proxy reads back every id the helper writes', async () => {
    const { upstream, proxy } = await env();
    const rand = rng(18);
    const alphabet = ['a', 'Z', '0', ' ', '"', '\\', '%', ',', ';', '=', '(', ')', '\t', 'é', 'ü', '→', '🦀', '\u0000', '\u007f'];
    for (let i = 0; i < 150; i++) {
      let holderId = '';
      for (let n = 1 + Math.floor(rand() * 12); n > 0; n--) holderId += alphabet[Math.floor(rand() * alphabet.length)];
      const resource = `r${i}-${holderId}`;
      const fence = 1 + Math.floor(rand() * MAX_HEADER_FENCE);
      // A write with fence, then a stale one: the refusal names both
      // holders as the proxy parsed them.
      const ok = await post(`${proxy.url}/append?resource=${encodeURIComponent(resource)}`, { resource, holderId, fence }, 'x');
      assert.equal(ok.status, 204, `${JSON.stringify(holderId)}: ${await ok.text()}`);
      assert.equal(ok.headers.get('Lease-Fence-Floor'), String(fence));
      if (fence === 1) continue;
      const res = await post(`${proxy.url}/append?resource=x`, { resource, holderId: `${holderId}-old`, fence: fence - 1 });
      const stale = await staleFenceError(res);
      assert.ok(stale instanceof StaleFenceError, `${res.status} ${await res.text()}`);
      assert.deepEqual(stale.rejection, rejection(1, resource, `${holderId}-old`, fence - 1, holderId, fence));
    }
    assert.ok(upstream.headers.length >= 150);
  });
});

describe('through fence-proxy', () => {
  test('the stale write is refused with 409 and never reaches the upstream', async () => {
    const { upstream, proxy } = await env();
    const b = await post(`${proxy.url}/append?resource=deploy-slot`, { resource: 'deploy-slot', holderId: 'agent-b', fence: 8 }, 'release 42');
    assert.equal(b.status, 204);
    assert.equal(await staleFenceError(b), null);
    const a = await post(`${proxy.url}/append?resource=deploy-slot`, { resource: 'deploy-slot', holderId: 'agent-a', fence: 7 }, 'release 41');
    assert.equal(a.status, 409);
    const err = await staleFenceError(a);
    assert.ok(err instanceof StaleFenceError);
    assert.equal(err.message, 'fence: stale write to "deploy-slot" refused (rejection #1): holder "agent-a" has fence 7 but holder "agent-b" was admitted at fence 8');
    // The body is still readable after staleFenceError.
    const body = await a.json();
    assert.deepEqual(body.error.rejection, { seq: 1, resource: 'deploy-slot', refusedHolderId: 'agent-a', refusedFence: 7, admittedHolderId: 'agent-b', admittedFence: 8 });
    assert.deepEqual(upstream.values.get('deploy-slot'), ['release 42']);
    // Once the body is read, the refusal cannot be missed silently.
    await assert.rejects(staleFenceError(a), (err) => err instanceof InvalidArgumentError && err.argument === 'response');
    // An upstream's own 409 is not the proxy's refusal.
    assert.equal(await staleFenceError(new Response('{"error":{"code":"stale_fence"}}', { status: 409 })), null);
    // A write without the header: 428, JSON.
    const none = await post(`${proxy.url}/append?resource=deploy-slot`, null, 'x');
    assert.equal(none.status, 428);
    assert.equal((await none.json()).error.code, 'missing_fence');
  });

  test('the example of docs/fencing.md, as written', async () => {
    const doc = readFileSync(join(root, 'docs', 'fencing.md'), 'utf8');
    const m = doc.match(/<!-- fence-proxy-js:start -->\n```js\n([\s\S]*?)```\n<!-- fence-proxy-js:end -->/);
    assert.ok(m, 'docs/fencing.md has the fence-proxy JavaScript block');
    // The block's imports stay at the top of a module; the rest becomes the
    // body of a function of proxyURL and lease.
    const lines = m[1].split('\n');
    const imports = lines.filter((l) => l.startsWith('import '));
    const rest = lines.filter((l) => !l.startsWith('import '));
    const outDir = join(root, 'out', 'test');
    mkdirSync(outDir, { recursive: true });
    const file = join(outDir, 'fence-proxy-example.mjs');
    writeFileSync(file, `${imports.join('\n')}\nexport async function run(proxyURL, lease) {\n${rest.join('\n')}\n}\n`);
    const { run } = await import(pathToFileURL(file).href);

    const { upstream, proxy } = await env();
    const token = (holderId, fence) => ({ resource: 'deploy-slot', holderId, fence });
    await run(proxy.url, { token: token('agent-b', 8) });
    await assert.rejects(run(proxy.url, { token: token('agent-a', 7) }), (err) =>
      err instanceof StaleFenceError && err.rejection.admittedHolderId === 'agent-b' && err.rejection.refusedFence === 7);
    assert.deepEqual(upstream.headers, ['resource="deploy-slot", holder="agent-b", fence=8']);
  });
});

// The JavaScript conformance suite through HTTP (test/gates/conformance.mjs,
// the adapter proxyGate), writer processes included: every gate is a fresh
// fence-proxy process with its own state file, in front of one upstream.
// The header carries fences up to MAX_HEADER_FENCE, so the gate declares
// that ceiling: above it, the helper refuses the token and the proxy refuses
// it too (400). Writes with the floor's fence are forwarded together
// (shared: raiseWaitsForEqualWrites with 8 in flight). Restart kills the
// proxy with SIGKILL and starts it again on the same state file and address.
describe('fence-proxy: the JavaScript conformance suite', () => {
  let upstream;
  let insideSeq = 0;
  const proxies = new Map(); // addr -> proxy process
  before(async () => {
    upstream = await startUpstream();
    running.push({ stop: async () => { await upstream.close(); return 0; } });
  });
  const inside = (fn) => {
    const k = String(++insideSeq);
    upstream.inside.set(k, fn);
    return k;
  };
  runConformance('fence-proxy', {
    async create() {
      const proxy = await startProxy(upstream.url);
      running.push(proxy);
      const addr = `${proxy.url} ${upstream.url} g${++proxySeq}-`;
      proxies.set(addr, proxy);
      return { gate: proxyGate(addr, { inside }), addr };
    },
    kind: 'proxy',
    failedWrite: 'keepsFloor',
    capped: false,
    inside: true,
    shared: true,
    paged: true,
    maxFence: MAX_HEADER_FENCE,
    async restart(addr) {
      const old = proxies.get(addr);
      assert.equal(await old.kill(), 'SIGKILL');
      running.splice(running.indexOf(old), 1);
      const p = await startProxy(upstream.url, { state: old.state, listen: new URL(old.url).host });
      assert.equal(p.url, old.url);
      running.push(p);
      proxies.set(addr, p);
    },
  });
});
