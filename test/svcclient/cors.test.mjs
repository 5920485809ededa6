// LeaseServiceClient in Chromium from a page on another origin than the
// coordinator's: the coordinator (out/bin/coordinator, with -auth and
// -cors-origin; and the Worker under wrangler dev, with the same tokens
// file in LEASE_TOKENS and the origin in LEASE_CORS_ORIGINS) lists the
// page's origin, so the browser's preflight is answered and the page
// acquires, renews, is denied and releases with its token. The same page
// from an origin the coordinator does not list (localhost instead of
// 127.0.0.1: another origin) is refused by the browser itself.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, servePackage } from '../chromium.mjs';
import { startCoordinator, startWorker, stop } from './children.mjs';

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

let server, pagePort, browser;
let coordinator = { log: [] };
let worker = { log: [] };
const children = [];
const dir = mkdtempSync(join(tmpdir(), 'lease-fence-cors-'));
const token = randomBytes(32).toString('base64url');

before(async () => {
  server = createServer((req, res) => servePackage(res, new URL(req.url, 'http://x').pathname.slice(1), page));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  pagePort = server.address().port;
  const tokens = join(dir, 'tokens.json');
  const file = JSON.stringify([{ name: 'web', tokenSha256: createHash('sha256').update(token).digest('hex'), resources: ['web/*'], holders: ['web-*'] }]);
  writeFileSync(tokens, file);
  // The Worker reads the same file from its LEASE_TOKENS secret (here from
  // an env file, as .dev.vars would give it).
  const env = join(dir, 'worker.env');
  writeFileSync(env, `LEASE_TOKENS='${file}'\nLEASE_CORS_ORIGINS=http://127.0.0.1:${pagePort}\n`);
  [coordinator, worker] = await Promise.all([
    startCoordinator(['-memory', '-auth', tokens, '-cors-origin', `http://127.0.0.1:${pagePort}`], children),
    startWorker(['--env-file', env], children),
  ]);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.closeAllConnections();
  server?.close();
  await Promise.all(children.map((c) => stop(c)));
  rmSync(dir, { recursive: true, force: true });
});

async function run(origin, coordinatorURL) {
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

for (const [name, target] of [['the native coordinator', () => coordinator], ['the Worker under wrangler dev', () => worker]]) {
  test(`${name}: a page of a listed origin calls it with its token`, async () => {
    const { result } = await run(`http://127.0.0.1:${pagePort}`, target().url);
    assert.equal(result.error, undefined, JSON.stringify(result));
    assert.deepEqual(result, { fence: result.fence, same: true, denied: 'web-a', forbidden: 'forbidden 403' });
    assert.ok(result.fence >= 1);
  });

  test(`${name}: a page of another origin is refused by the browser`, async () => {
    const { result, console } = await run(`http://localhost:${pagePort}`, target().url);
    assert.equal(result.error, 'no_answer', JSON.stringify(result));
    assert.equal(result.status, 0);
    assert.ok(console.some((l) => /CORS/.test(l)), `the browser did not say CORS: ${console.join('\n')}`);
    assert.ok(!target().log.join('').includes(token));
  });
}
