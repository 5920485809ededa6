// LeaseServiceClient in Chromium from a page on another origin than the
// coordinator's: the coordinator (out/bin/coordinator, with -auth and
// -cors-origin) lists the page's origin, so the browser's preflight is
// answered and the page acquires, renews, is denied and releases with its
// token. The same page from an origin the coordinator does not list
// (localhost instead of 127.0.0.1: another origin) is refused by the
// browser itself.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, servePackage } from '../chromium.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));

// The page reads the coordinator's URL and the token from its fragment.
const page = `<!doctype html><meta charset="utf-8">
<script type="importmap">{"imports": {"lease-fence": "/lease-fence.mjs", "lease-fence/service-client": "/service-client.mjs"}}</script>
<script type="module">
const { LeaseServiceClient, LeaseDeniedError, LeaseServiceError } = await import('lease-fence/service-client');
const params = new URLSearchParams(location.hash.slice(1));
const baseURL = params.get('coordinator'), token = params.get('token');
try {
  const a = new LeaseServiceClient({ baseURL, token, holderId: 'web-a', attempts: 1 });
  const b = new LeaseServiceClient({ baseURL, token, holderId: 'web-b', attempts: 1 });
  const lease = await a.acquire('web/r');
  let denied;
  try { await b.acquire('web/r'); } catch (e) { denied = e instanceof LeaseDeniedError ? e.heldBy : String(e); }
  const renewed = await a.renew(lease);
  await a.release(renewed);
  let forbidden;
  try { await a.acquire('elsewhere'); } catch (e) { forbidden = e instanceof LeaseServiceError ? e.code + ' ' + e.status : String(e); }
  window.result = { fence: lease.token.fence, same: renewed.token.fence === lease.token.fence, denied, forbidden };
} catch (e) {
  window.result = { error: e instanceof LeaseServiceError ? e.code : String(e), status: e.status, cause: String(e && e.cause) };
}
</script>`;

let coordinator, server, pagePort, coordinatorURL, browser;
const dir = mkdtempSync(join(tmpdir(), 'lease-fence-cors-'));
const token = randomBytes(32).toString('base64url');
const logs = [];

before(async () => {
  server = createServer((req, res) => servePackage(res, new URL(req.url, 'http://x').pathname.slice(1), page));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  pagePort = server.address().port;
  const bin = process.env.COORDINATOR || join(root, 'out/bin/coordinator');
  assert.ok(existsSync(bin), `${bin} is not built: run make coordinator`);
  const tokens = join(dir, 'tokens.json');
  writeFileSync(tokens, JSON.stringify([{ name: 'web', tokenSha256: createHash('sha256').update(token).digest('hex'), resources: ['web/*'], holders: ['web-*'] }]));
  coordinator = spawn(bin, ['-addr', '127.0.0.1:0', '-memory', '-auth', tokens, '-cors-origin', `http://127.0.0.1:${pagePort}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  coordinator.stderr.setEncoding('utf8');
  coordinator.stderr.on('data', (d) => logs.push(d));
  coordinatorURL = await new Promise((resolve, reject) => {
    let out = '';
    coordinator.stdout.setEncoding('utf8');
    coordinator.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1]);
    });
    coordinator.on('exit', (code) => reject(new Error(`coordinator exited (${code}): ${logs.join('')}`)));
  });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.closeAllConnections();
  server?.close();
  if (coordinator && coordinator.exitCode === null) {
    const gone = new Promise((resolve) => coordinator.once('exit', resolve));
    coordinator.kill('SIGTERM');
    await gone;
  }
  rmSync(dir, { recursive: true, force: true });
});

async function run(origin) {
  const tab = await browser.context.newPage();
  const console = [];
  tab.on('console', (m) => console.push(m.text()));
  try {
    const fragment = new URLSearchParams({ coordinator: coordinatorURL, token }).toString();
    await tab.goto(`${origin}/index.html#${fragment}`);
    await tab.waitForFunction(() => window.result !== undefined);
    return { result: await tab.evaluate(() => window.result), console };
  } finally {
    await tab.close();
  }
}

test('a page of a listed origin calls the coordinator with its token', async () => {
  const { result } = await run(`http://127.0.0.1:${pagePort}`);
  assert.equal(result.error, undefined, JSON.stringify(result));
  assert.deepEqual(result, { fence: result.fence, same: true, denied: 'web-a', forbidden: 'forbidden 403' });
  assert.ok(result.fence >= 1);
});

test('a page of another origin is refused by the browser', async () => {
  const { result, console } = await run(`http://localhost:${pagePort}`);
  assert.equal(result.error, 'no_answer', JSON.stringify(result));
  assert.equal(result.status, 0);
  assert.ok(console.some((l) => /CORS/.test(l)), `the browser did not say CORS: ${console.join('\n')}`);
  assert.ok(!logs.join('').includes(token));
});
