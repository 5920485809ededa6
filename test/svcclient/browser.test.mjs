// LeaseServiceClient in Chromium (playwright-core): a page served from
// 127.0.0.1 maps 'lease-fence' with an import map, as docs/js.md says for
// pages without a bundler, and talks to the native coordinator through the
// same origin (this server forwards POST /v1/* to it, so no CORS is
// involved). The first answer to the page's first acquisition is dropped,
// so the retry runs in the browser's fetch; the page also uses the real
// `await using` syntax (Chromium has it), aborts a call, and is denied.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { launch, servePackage } from '../chromium.mjs';
import { startCoordinator, stop } from './children.mjs';

const page = `<!doctype html><meta charset="utf-8">
<script type="importmap">{"imports": {"lease-fence": "/lease-fence.mjs", "lease-fence/service-client": "/service-client.mjs"}}</script>
<script type="module">
const { LeaseServiceClient, LeaseDeniedError, LeaseExpiredError, ServiceLease } = await import('lease-fence/service-client');
try {
  const a = new LeaseServiceClient({ baseURL: location.origin, holderId: 'browser-a', backoff: () => 0 });
  const b = new LeaseServiceClient({ baseURL: location.origin, holderId: 'browser-b', backoff: () => 0 });
  let fence, denied, afterBlock;
  {
    await using lease = await a.acquire('browser-r');
    fence = lease.token.fence;
    try { await b.acquire('browser-r'); } catch (e) { denied = e instanceof LeaseDeniedError ? e.heldBy : String(e); }
    const renewed = await a.renew(lease);
    fence = renewed.token.fence === fence ? fence : -1;
  }
  // The block released it: b gets the next fence.
  const next = await b.acquire('browser-r');
  afterBlock = next.token.fence;
  await b.release(next);
  let expired;
  try { await b.release(next); } catch (e) { expired = e instanceof LeaseExpiredError; }
  const ac = new AbortController();
  const pending = a.acquire('browser-hold', { signal: ac.signal });
  ac.abort();
  let aborted;
  try { await pending; } catch (e) { aborted = e.name; }
  window.result = { fence, denied, afterBlock, expired, aborted, printed: String(next) + JSON.stringify(next), usingSyntax: true,
    disposable: typeof ServiceLease.prototype[Symbol.asyncDispose] };
} catch (e) {
  window.result = { error: String(e && e.stack || e) + " cause: " + String(e && e.cause && (e.cause.stack || e.cause)) };
}
</script>`;

let coordinator, server, base, browser;
const posted = [];

before(async () => {
  coordinator = await startCoordinator(['-memory', '-quiet']);
  const target = coordinator.url;
  let dropped = false;
  server = createServer(async (req, res) => {
    const name = new URL(req.url, 'http://x').pathname.slice(1);
    if (req.method === 'POST' && name.startsWith('v1/')) {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const body = Buffer.concat(chunks).toString('utf8');
      posted.push({ path: name, body });
      if (JSON.parse(body).resource === 'browser-hold') return; // never answered
      const r = await fetch(`${target}/${name}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const text = await r.text();
      if (name === 'v1/acquire' && !dropped) {
        dropped = true;
        req.socket.destroy(); // the first answer is lost
        return;
      }
      res.writeHead(r.status, { 'content-type': 'application/json' }).end(text);
    } else {
      servePackage(res, name, page);
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}/`;
  browser = await launch();
});

after(async () => {
  await browser?.close();
  server?.closeAllConnections();
  server?.close();
  await stop(coordinator?.child);
});

test('in Chromium: a lost answer retried, await using, denied, expired, abort', async () => {
  const tab = await browser.context.newPage();
  const logs = [];
  tab.on('console', (m) => logs.push(m.text()));
  try {
    await tab.goto(base + 'index.html');
    await tab.waitForFunction(() => window.result !== undefined);
    const result = await tab.evaluate(() => window.result);
    assert.equal(result.error, undefined, result.error);
    const { printed, ...rest } = result;
    assert.deepEqual(rest, { fence: rest.fence, denied: 'browser-a', afterBlock: rest.fence + 1, expired: true, aborted: 'AbortError', usingSyntax: true, disposable: 'function' });
    assert.ok(rest.fence >= 1);
    const acquisitions = posted.filter((p) => p.path === 'v1/acquire' && JSON.parse(p.body).holderId === 'browser-a' && JSON.parse(p.body).resource === 'browser-r');
    assert.equal(acquisitions.length, 2, 'the lost answer was retried');
    assert.equal(acquisitions[1].body, acquisitions[0].body, 'with the same body');
    const secrets = posted.map((p) => JSON.parse(p.body).secret).filter((s) => typeof s === 'string');
    assert.ok(secrets.length >= 4);
    for (const s of secrets) {
      assert.match(s, /^[A-Za-z0-9_-]{43}$/);
      assert.ok(!printed.includes(s) && !logs.join('\n').includes(s), 'no secret printed or logged in the page');
    }
  } finally {
    await tab.close();
  }
});
