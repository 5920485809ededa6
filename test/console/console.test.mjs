// The console (cmd/coordinator -ui) in headless Chromium, against a real
// coordinator: each kind of event appears as its mark on the resource's
// lane within DEADLINE of the page's time after it arrived (the page's clock
// is Playwright's, moved on by the test only); waiters are shown in order; a dropped
// stream is resumed and a restarted coordinator reloaded, with a banner
// meanwhile; a silent stream shows a banner (the page's clock is
// Playwright's, moved on by the test); a token sees only its scope, and
// Revoke is offered to a token the coordinator lets revoke only; the keyboard reaches every control, the
// token form included; hostile names are shown as text.
// Every wait is on a DOM condition (no sleeps). Screenshots go to
// out/console/ (docs/console.md shows them).
//
// COORDINATOR overrides the binary (out/bin/coordinator); make test-console
// builds it first.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch } from '../chromium.mjs';
import { axe } from '../web/checks.mjs';
import { COORDINATOR, FENCE_PROXY, startFenceProxy, startCoordinator, api, acquire, renew, release, writeTokens, watchFromNode, startRelay } from './harness.mjs';
import { visible } from '../../web/console-state.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const SHOTS = join(ROOT, 'out', 'console');
// The issue's bound: an event is drawn within a second of being sent. The
// page is held to a second of its own time from the event's arrival, on a
// clock that moves only when the test moves it (drawnWithin): a loaded
// machine takes nothing from it. The time the event takes on its way is
// make bench-console's figure (event to frame).
const DEADLINE = 1000;
// Against a hang only.
const LONG = 30_000;

let browser;

before(async () => {
  assert.ok(existsSync(COORDINATOR), `${COORDINATOR} is not built: run make coordinator`);
  assert.ok(existsSync(FENCE_PROXY), `${FENCE_PROXY} is not built: run make fence-proxy`);
  await mkdir(SHOTS, { recursive: true });
  browser = await launch({ viewport: { width: 1400, height: 820 } });
});
after(async () => {
  await browser?.close();
});

// Opens the console of url (in context: the shared browser's unless
// given); errors the page throws fail the test at the end.
async function open(t, url, context = browser.context) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    // Chromium logs each answer that is not 2xx and each broken stream
    // ("Failed to load resource"): the page handles those (401 before a
    // token, 403 for a revoke without admin, 501 without -ui-gates, a
    // coordinator stopped). Anything else is an error.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource:')) errors.push(m.text());
  });
  t.after(async () => {
    await page.close();
    assert.deepEqual(errors, [], 'the page logged errors');
  });
  await page.goto(`${url}/ui/`);
  return page;
}

// What has the keyboard focus: its id, its sort key, row:RESOURCE for a row's button, or its tag.
const focusedIn = (page) => page.evaluate(() => {
  const a = document.activeElement;
  return a.id || a.dataset.sort || (a.classList.contains('name') ? `row:${a.closest('.tr').dataset.resource}` : a.tagName);
});
const live = (page) => page.waitForSelector('#status[data-state="live"]', { timeout: LONG });
const rowSel = (resource) => `.tr[data-resource="${resource}"]`;

// Waits for mark kind (with the given attributes) on resource's lane.
async function mark(page, resource, kind, attrs = {}) {
  await page.waitForSelector(markSel(resource, kind, attrs), { state: 'attached', timeout: LONG });
}
const markSel = (resource, kind, attrs = {}) => `${rowSel(resource)} .ev-${kind}${Object.entries(attrs).map(([k, v]) => `[data-${k}="${v}"]`).join('')}`;

// A browser whose pages' clock is Playwright's, paused (a clock is
// installed for a whole context): for drawnWithin.
async function pausedBrowser(t) {
  const own = await launch({ viewport: { width: 1400, height: 820 } });
  t.after(() => own.close());
  const t0 = Date.now();
  await own.context.clock.install({ time: t0 });
  await own.context.clock.pauseAt(t0 + 1000);
  return own;
}

// Checks that the page, its clock paused (pausedBrowser), draws what it
// received: once arrived() is true in the page (the event was taken from
// the stream), the page's clock is moved on by DEADLINE, and the mark sel
// must then be on the page, drawn by a frame within DEADLINE of the
// arrival on the page's clock. Nothing the page does between the two runs
// but on that clock, so a page that puts a frame or a redraw off fails
// however fast or loaded the machine is.
async function drawnWithin(page, what, arrived, arg, sel, find) {
  await page.waitForFunction(arrived, arg, { timeout: LONG, polling: 20 });
  const from = await page.evaluate(() => Date.now());
  await page.clock.runFor(DEADLINE);
  const d = await page.evaluate(find, arg);
  const on = await page.$(sel);
  assert.ok(d && on, `${what}: not drawn within ${DEADLINE} ms of the page's time after it arrived`);
  assert.ok(d.drawn - from <= DEADLINE, `${what}: drawn ${d.drawn - from} ms of the page's time after it arrived`);
}

// drawnWithin for an event of the stream, ev as a watch from Node had it.
function eventDrawn(page, resource, kind, attrs, ev) {
  return drawnWithin(page, `${kind} on ${resource}`, (seq) => window.__console.conn.seq >= seq, ev.seq,
    markSel(resource, kind, attrs), (seq) => window.__console.drawn.find((e) => e.seq === seq));
}

test("docs/console.md's example serves the console, and nothing without -ui", { timeout: 60_000 }, async (t) => {
  const doc = await readFile(join(ROOT, 'docs', 'console.md'), 'utf8');
  const block = /```sh\n([^`]*)```/.exec(doc)[1];
  const lines = block.split('\n').filter((l) => l.startsWith('out/bin/coordinator '));
  assert.deepEqual(lines, ['out/bin/coordinator -memory -ui']);
  // The example, on a free port (startCoordinator adds -addr 127.0.0.1:0).
  const c = await startCoordinator(lines[0].split(' ').slice(1));
  t.after(() => c.stop());
  const page = await open(t, c.url);
  await live(page);
  const off = await startCoordinator(['-memory']);
  t.after(() => off.stop());
  assert.equal((await fetch(`${off.url}/ui/`)).status, 404);
});

test('an acquire, a renewal, a release, an expiry and a revoke each appear on the lane within 1 s', { timeout: 120_000 }, async (t) => {
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '2s']);
  t.after(() => c.stop());
  const w = watchFromNode(c.url);
  t.after(() => w.close());
  const own = await pausedBrowser(t);
  const page = await open(t, c.url, own.context);
  await live(page);
  const mark = eventDrawn;
  const sent = (type, resource) => w.next((e) => e.type === type && e.resource === resource);

  const g = await acquire(c.url, 'jobs/one', 'worker-1');
  await mark(page, 'jobs/one', 'granted', { holder: 'worker-1', fence: g.grant.fence }, await sent('granted', 'jobs/one'));
  assert.equal((await renew(c.url, 'jobs/one', 'worker-1', g)).body.ok, true);
  await mark(page, 'jobs/one', 'renewed', { fence: g.grant.fence }, await sent('renewed', 'jobs/one'));
  assert.equal((await release(c.url, 'jobs/one', 'worker-1', g)).body.ok, true);
  await mark(page, 'jobs/one', 'released', { fence: g.grant.fence }, await sent('released', 'jobs/one'));

  const g2 = await acquire(c.url, 'jobs/two', 'worker-2');
  await mark(page, 'jobs/two', 'granted', { fence: g2.grant.fence }, await sent('granted', 'jobs/two'));
  // Nobody renews: the coordinator's sweep (every half TTL) says it expired.
  await mark(page, 'jobs/two', 'expired', { fence: g2.grant.fence }, await sent('expired', 'jobs/two'));

  const g3 = await acquire(c.url, 'jobs/three', 'worker-3');
  await mark(page, 'jobs/three', 'granted', { fence: g3.grant.fence }, await sent('granted', 'jobs/three'));
  // Without -auth, a revoke is taken from loopback.
  const rv = await api(c.url, '/v1/revoke', { resource: 'jobs/three', fence: g3.grant.fence });
  assert.equal(rv.status, 200, JSON.stringify(rv.body));
  await mark(page, 'jobs/three', 'revoked', { fence: g3.grant.fence }, await sent('revoked', 'jobs/three'));

  // A handover: the fence line steps up, and the new lease has the next colour.
  const g4 = await acquire(c.url, 'jobs/one', 'worker-4');
  await mark(page, 'jobs/one', 'granted', { holder: 'worker-4', fence: g4.grant.fence }, await w.next((e) => e.type === 'granted' && e.holderId === 'worker-4'));
  const floor = await page.getAttribute(`${rowSel('jobs/one')} .floor`, 'data-floor');
  assert.equal(floor, String(g4.grant.fence));
  const bars = await page.$$eval(`${rowSel('jobs/one')} .gen`, (gs) => gs.map((g) => [g.getAttribute('data-holder'), g.getAttribute('data-how')]));
  assert.deepEqual(bars, [['worker-1', 'released'], ['worker-4', 'live']]);
  await page.clock.resume(); // a screenshot waits for a frame
  await page.screenshot({ path: join(SHOTS, 'lanes.png') });
});

test("a fence-proxy's refusal appears as a mark on the right lane, with both holders and fences", { timeout: 120_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lease-fence-console-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // The API behind the proxy: it takes every write.
  const upstream = createServer((req, res) => req.resume().on('end', () => res.end('ok')));
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  t.after(() => upstream.close());
  const proxy = await startFenceProxy(dir, `http://127.0.0.1:${upstream.address().port}`);
  t.after(() => proxy.stop());
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '60s', '-ui-gates', proxy.url]);
  t.after(() => c.stop());
  const w = watchFromNode(c.url, undefined, { refusals: true });
  t.after(() => w.close());
  const own = await pausedBrowser(t);
  const page = await open(t, c.url, own.context);
  await live(page);
  await page.waitForFunction(() => /connected/.test(document.getElementById('gates').textContent), null, { timeout: LONG, polling: 20 });

  // A holds fence 1, lets it go; B gets fence 2 and writes; A's late write
  // with fence 1 is refused by the proxy.
  const a = await acquire(c.url, 'gated/r', 'agent-a');
  await release(c.url, 'gated/r', 'agent-a', a);
  const b = await acquire(c.url, 'gated/r', 'agent-b');
  const write = (holder, fence) => fetch(`${proxy.url}/orders`, { method: 'POST', headers: { 'lease-fence': `resource="gated/r", holder="${holder}", fence=${fence}` }, body: 'x' });
  assert.equal((await write('agent-b', b.grant.fence)).status, 200);
  const refused = await write('agent-a', a.grant.fence);
  assert.equal(refused.status, 409);
  const sel = `${rowSel('gated/r')} .ev-refused[data-holder="agent-a"][data-fence="${a.grant.fence}"][data-admitted-fence="${b.grant.fence}"]`;
  await w.next((e) => e.resource === 'gated/r' && e.refusedHolderId === 'agent-a');
  await drawnWithin(page, 'the refusal', () => window.__console.stats.refusals >= 1, null, sel,
    () => window.__console.drawn.find((e) => e.type === 'refused' && e.resource === 'gated/r'));
  assert.match(await page.textContent(`${sel} title`), /agent-a with fence 1 refused; agent-b had written with fence 2/);
  // No other lane has it.
  assert.equal(await page.$$eval('.ev-refused', (es) => es.length), 1);
  await page.clock.resume(); // a screenshot waits for a frame
  await page.screenshot({ path: join(SHOTS, 'refusal.png') });
});

test('the waiters are shown in order, beside the lane and in the detail', { timeout: 120_000 }, async (t) => {
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '60s']);
  t.after(() => c.stop());
  const w = watchFromNode(c.url);
  t.after(() => w.close());
  const page = await open(t, c.url);
  await live(page);
  const g0 = await acquire(c.url, 'queue/r', 'holder-0');
  const waits = [];
  for (const id of ['w-1', 'w-2', 'w-3']) {
    waits.push(acquire(c.url, 'queue/r', id, { waitMillis: 50_000 }).catch(() => null));
    await w.next((e) => e.type === 'waiting' && e.holderId === id);
  }
  const queue = () => page.$$eval(`${rowSel('queue/r')} .queue li`, (lis) => lis.map((li) => li.textContent));
  await page.waitForFunction((sel) => document.querySelectorAll(`${sel} .queue li`).length === 3, rowSel('queue/r'), { timeout: LONG });
  assert.deepEqual(await queue(), ['w-1', 'w-2', 'w-3']);
  const label = await page.getAttribute(`${rowSel('queue/r')} svg[role="img"]`, 'aria-label');
  assert.match(label, /waiters in order: w-1, w-2, w-3/);
  await page.click(`${rowSel('queue/r')} button.name`);
  assert.deepEqual(await page.$$eval('#d-waiters li', (lis) => lis.map((li) => li.textContent)), ['w-1', 'w-2', 'w-3']);

  // The holder leaves: the first waiter is granted, the others move up.
  await release(c.url, 'queue/r', 'holder-0', g0);
  await mark(page, 'queue/r', 'granted', { holder: 'w-1' }, await w.next((e) => e.type === 'granted' && e.holderId === 'w-1'));
  await page.waitForFunction(() => [...document.querySelectorAll('#d-waiters li')].map((li) => li.textContent).join() === 'w-2,w-3', null, { timeout: LONG });
  assert.deepEqual(await queue(), ['w-2', 'w-3']);
  // Revoke is offered (no -auth, a loopback page) once the coordinator said so.
  await page.waitForSelector('#revoke-box[data-may="yes"] #revoke:not([hidden])', { timeout: LONG });
  await page.screenshot({ path: join(SHOTS, 'detail.png') });
  await c.stop();
  await Promise.all(waits);
});

test('a dropped stream is resumed from its last event; a restarted coordinator is reloaded, with a banner meanwhile', { timeout: 120_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lease-fence-console-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const state = join(dir, 'state');
  let c = await startCoordinator(['-init', '-state', state, '-ui', '-ttl', '60s']);
  t.after(() => c.stop());
  const relay = await startRelay(c.port);
  t.after(() => relay.close());
  await acquire(c.url, 'keep/a', 'holder-a');
  const page = await open(t, relay.url);
  await live(page);
  await page.waitForSelector(rowSel('keep/a'), { timeout: LONG });

  // Every connection of the page is cut; what happens meanwhile is replayed.
  relay.cut();
  const g = await acquire(c.url, 'keep/b', 'holder-b');
  await mark(page, 'keep/b', 'granted', { fence: g.grant.fence });
  const s1 = await page.evaluate(() => ({ ...window.__console.stats, latencies: undefined }));
  assert.equal(s1.resumes, 1, 'the page resumed the stream');
  assert.equal(s1.reloads, 0, 'and needed no reload');
  assert.match(await page.textContent('#status'), /Resumed after event \d+: nothing was missed/);

  // The coordinator goes away: the banner says so.
  await c.stop();
  await page.waitForSelector('#banner:not([hidden])', { timeout: LONG });
  assert.match(await page.textContent('#banner'), /Reconnecting, attempt \d+/);
  await page.screenshot({ path: join(SHOTS, 'banner.png') });
  // It comes back on the same port, with its state, as another stream.
  c = await startCoordinator(['-state', state, '-ui', '-ttl', '60s'], c.port);
  await page.waitForFunction(() => /restarted/.test(document.getElementById('status').textContent), null, { timeout: LONG });
  await page.waitForSelector('#banner[hidden]', { state: 'attached', timeout: LONG });
  await page.waitForSelector(rowSel('keep/a'), { timeout: LONG });
  const g2 = await acquire(c.url, 'keep/c', 'holder-c');
  await mark(page, 'keep/c', 'granted', { fence: g2.grant.fence });
  const s2 = await page.evaluate(() => window.__console.stats.reloads);
  assert.equal(s2, 1, 'the restart reloaded the list once');
});

test('a stream silent for 20 s shows a banner; the next bytes clear it', { timeout: 120_000 }, async (t) => {
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '60s']);
  t.after(() => c.stop());
  const relay = await startRelay(c.port);
  t.after(() => relay.close());
  // The page's clock is Playwright's, paused from the start and moved on
  // by the test only (its own browser: a clock is installed for a whole
  // context). Nothing the page does waits for a timer until the stream is
  // live.
  const own = await launch({ viewport: { width: 1400, height: 820 } });
  t.after(() => own.close());
  const t0 = Date.now();
  await own.context.clock.install({ time: t0 });
  await own.context.clock.pauseAt(t0 + 10_000);
  const page = await open(t, relay.url, own.context);
  await live(page);
  const banner = () => page.evaluate(() => {
    const b = document.getElementById('banner');
    return b.hidden ? null : { state: b.dataset.state, text: b.textContent };
  });

  // The coordinator's bytes are held back: the stream is open and silent.
  // At 19 s of silence no banner; at 21 s, the banner.
  relay.hold();
  const quiet = await page.evaluate(() => Date.now() - window.__console.conn.lastBytes);
  await page.clock.fastForward(Math.max(0, 19_000 - quiet));
  assert.equal(await banner(), null, 'a banner before 20 s of silence');
  await page.clock.fastForward(2_000);
  await page.waitForSelector('#banner[data-state="silent"]:not([hidden])', { timeout: LONG });
  assert.match((await banner()).text, /sent nothing for 21 s: the picture may be stale/);
  assert.equal(await page.evaluate(() => document.getElementById('status').dataset.state), 'live');

  // The clock runs again (the page's frames need it).
  await page.clock.resume();
  // Bytes again (an event): the banner goes, and the event is drawn.
  relay.flow();
  await acquire(c.url, 'quiet/a', 'holder-a');
  await mark(page, 'quiet/a', 'granted', { holder: 'holder-a' });
  await page.waitForSelector('#banner[hidden]', { state: 'attached', timeout: LONG });
});

test('the token form is reached and used with the keyboard alone', { timeout: 120_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lease-fence-console-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const app = { name: 'app', token: 'tok-app-keyboard-0123456789abcdef', resources: ['app/*'] };
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '60s', '-auth', writeTokens(dir, [app])]);
  t.after(() => c.stop());
  await acquire(c.url, 'app/k', 'h-k', { token: app.token });
  const page = await open(t, c.url);
  await page.waitForSelector('#token-form:not([hidden])', { timeout: LONG });
  // The form takes the focus when it asks.
  await page.waitForFunction(() => document.activeElement?.id === 'token-input', null, { timeout: LONG });
  await page.keyboard.type(app.token);
  await page.keyboard.press('Enter');
  await live(page);
  await page.waitForSelector(rowSel('app/k'), { timeout: LONG });
  assert.equal(await page.evaluate(() => sessionStorage.getItem('lease-fence-console-token')), app.token);
  assert.equal(await page.isHidden('#token-form'), true);

  // From the top of the page, Tab reaches "Token…"; Enter opens the form,
  // its input focused; Tab reaches its buttons, Enter on "Forget" forgets.
  await page.evaluate(() => document.activeElement?.blur());
  const tabTo = async (id) => {
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Tab');
      if (await focusedIn(page) === id) return;
    }
    assert.fail(`Tab does not reach ${id}`);
  };
  await tabTo('token-open');
  await page.keyboard.press('Enter');
  assert.equal(await focusedIn(page), 'token-input');
  await tabTo('token-forget');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('lease-fence-console-token')), null);
  await page.waitForSelector('#status[data-state="forbidden"]', { timeout: LONG });
  assert.equal(await focusedIn(page), 'token-input');
  assert.equal(await page.$$eval('.spacer .tr:not([hidden])', (trs) => trs.length), 0);
  // And the token again, by the keyboard: the picture is back.
  await page.keyboard.type(app.token);
  await page.keyboard.press('Enter');
  await live(page);
  await page.waitForSelector(rowSel('app/k'), { timeout: LONG });
});

test('a token sees only its scope; Revoke is offered to an admin token only, after a probe that changes nothing', { timeout: 120_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lease-fence-console-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const app = { name: 'app', token: 'tok-app-console-0123456789abcdef', resources: ['app/*'] };
  const ops = { name: 'ops', token: 'tok-ops-console-fedcba9876543210', resources: ['*'], admin: true };
  const tokens = writeTokens(dir, [app, ops]);
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '60s', '-auth', tokens]);
  t.after(() => c.stop());
  // The witness of every event, from before the page's first call.
  const w = watchFromNode(c.url, ops.token);
  t.after(() => w.close());
  await w.ready;
  await acquire(c.url, 'app/x', 'h-x', { token: ops.token });
  await acquire(c.url, 'other/y', 'h-y', { token: ops.token });
  // A waiter on app/x: a probe must not remove it either.
  const waiter = acquire(c.url, 'app/x', 'w-1', { token: ops.token, waitMillis: 60_000 });
  waiter.catch(() => {}); // awaited below; a test that fails before leaves it to the coordinator's stop
  const waiting = await w.next((e) => e.type === 'waiting' && e.resource === 'app/x');
  // The refusals call is scoped like the API: no token, no answer.
  assert.equal((await fetch(`${c.url}/ui/api/rejections`)).status, 401);
  const held = async () => (await api(c.url, '/v1/list', { prefix: 'app/x', waiters: true }, ops.token)).body.leases
    .map((l) => [l.resource, l.holderId, l.fence, l.waiterIds]);
  const before = await held();
  assert.deepEqual(before, [['app/x', 'h-x', 1, ['w-1']]]);

  const page = await open(t, c.url);
  // Every revoke the page sends, with its answer.
  const revokes = [];
  page.on('response', async (res) => {
    if (new URL(res.url()).pathname === '/v1/revoke') revokes.push([JSON.parse(res.request().postData()), res.status()]);
  });
  await page.waitForSelector('#token-form:not([hidden])', { timeout: LONG });
  await page.fill('#token-input', app.token);
  await page.press('#token-input', 'Enter');
  await live(page);
  await page.waitForSelector(rowSel('app/x'), { timeout: LONG });
  assert.equal(await page.evaluate(() => sessionStorage.getItem('lease-fence-console-token')), app.token);
  // other/z is decided before app/z: had the stream carried it, it would be there first.
  await acquire(c.url, 'other/z', 'h-z', { token: ops.token });
  await acquire(c.url, 'app/z', 'h-z', { token: ops.token });
  await page.waitForSelector(rowSel('app/z'), { timeout: LONG });
  assert.deepEqual(await page.evaluate(() => [...window.__console.picture.resources.keys()].sort()), ['app/x', 'app/z']);

  // Opening the detail asks the coordinator (once) whether this token may
  // revoke: it may not (403), so no button, and the coordinator's reason.
  const opened = async (resource, may) => {
    await page.click(`${rowSel(resource)} button.name`);
    await page.waitForSelector(`#revoke-box[data-may="${may}"]`, { timeout: LONG });
    return page.isVisible('#revoke');
  };
  assert.equal(await opened('app/x', 'no'), false);
  assert.match(await page.textContent('#revoke-none'), /Revoke is not offered: the token "app" may not revoke/);
  const probe = { resource: 'app/x', holderId: 'lease-fence-console-probe', fence: 1 };
  assert.deepEqual(revokes, [[probe, 403]]);
  // Another resource: the answer is the token's, not asked again.
  assert.equal(await opened('app/z', 'no'), false);
  assert.equal(revokes.length, 1);

  // Another token: the picture is rebuilt with its scope, and the question
  // asked again. The admin's probe is taken, and answered 409 not_held.
  await page.click('#detail-close');
  await page.click('#token-open');
  await page.fill('#token-input', ops.token);
  await page.press('#token-input', 'Enter');
  await page.waitForSelector(rowSel('other/y'), { timeout: LONG });
  assert.equal(await opened('app/x', 'yes'), true);
  assert.deepEqual(revokes, [[probe, 403], [probe, 409]]);
  assert.equal(await page.textContent('#revoke-none'), '');
  // Neither probe changed anything: the lease and its waiter are as they
  // were, and no event on app/x came between the waiter's and the marker's.
  assert.deepEqual(await held(), before);
  await acquire(c.url, 'app/marker', 'h-m', { token: ops.token });
  const marker = await w.next((e) => e.resource === 'app/marker');
  assert.deepEqual(w.seen().filter((e) => e.resource === 'app/x' && e.seq > waiting.seq && e.seq < marker.seq), []);

  // The admin revokes, after a confirmation; the waiter is granted.
  await page.click('#revoke');
  assert.match(await page.textContent('#revoke-q'), /Revoke h-x's lease on app\/x \(fence 1\)\?/);
  await page.click('#revoke-yes');
  await page.waitForFunction(() => document.getElementById('revoke-result').textContent !== '', null, { timeout: LONG });
  assert.match(await page.textContent('#revoke-result'), /Revoked: h-x, fence 1/);
  await mark(page, 'app/x', 'revoked', { fence: 1 });
  const wg = (await waiter).grant;
  await mark(page, 'app/x', 'granted', { holder: 'w-1', fence: wg.fence });

  // The token is downgraded under the page (SIGHUP reads the file again):
  // its next revoke is refused (403), the page says why and takes the
  // button away; the lease stays.
  writeTokens(dir, [app, { ...ops, admin: false }]);
  c.proc.kill('SIGHUP');
  for (const deadline = Date.now() + LONG; ;) {
    // A revoke that cannot match (fence 1 was h-x's): 409 until the file is read again.
    const r = await api(c.url, '/v1/revoke', { resource: 'app/x', holderId: 'node-probe', fence: 1 }, ops.token);
    if (r.status === 403) break;
    assert.equal(r.status, 409, JSON.stringify(r.body));
    assert.ok(Date.now() < deadline, 'the tokens file was not read again');
  }
  assert.equal(await page.isVisible('#revoke'), true);
  await page.click('#revoke');
  assert.match(await page.textContent('#revoke-q'), new RegExp(`Revoke w-1's lease on app/x \\(fence ${wg.fence}\\)\\?`));
  await page.click('#revoke-yes');
  await page.waitForSelector('#revoke-box[data-may="no"]', { timeout: LONG });
  assert.match(await page.textContent('#revoke-result'), /Not revoked: the token "ops" may not revoke/);
  assert.equal(await page.isVisible('#revoke'), false);
  assert.equal(await focusedIn(page), 'detail-h');
  assert.deepEqual((await held()).map((l) => l.slice(0, 3)), [['app/x', 'w-1', wg.fence]]);
});

test('the keyboard reaches every control, and each lane has an accessible label', { timeout: 120_000 }, async (t) => {
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '60s']);
  t.after(() => c.stop());
  for (const r of ['k/a', 'k/b', 'k/c']) await acquire(c.url, r, `holder-${r.slice(2)}`);
  const page = await open(t, c.url);
  await live(page);
  await page.waitForSelector(rowSel('k/c'), { timeout: LONG });
  const focused = () => focusedIn(page);
  const reached = new Set();
  for (let i = 0; i < 20; i++) {
    await page.keyboard.press('Tab');
    reached.add(await focused());
  }
  for (const want of ['filter', 'span', 'name', 'fence', 'remaining', 'waiters', 'row:k/a', 'row:k/b', 'row:k/c']) assert.ok(reached.has(want), `Tab does not reach ${want}: ${[...reached]}`);
  // Arrows move between the rows; Enter opens the detail, whose controls Tab reaches.
  await page.focus(`${rowSel('k/a')} button.name`);
  await page.keyboard.press('ArrowDown');
  assert.equal(await focused(), 'row:k/b');
  await page.keyboard.press('Enter');
  assert.equal(await focused(), 'detail-h');
  // Without -auth a revoke is taken from loopback: Revoke is offered once the coordinator said so.
  await page.waitForSelector('#revoke-box[data-may="yes"] #revoke:not([hidden])', { timeout: LONG });
  const inDetail = new Set();
  for (let i = 0; i < 4; i++) {
    await page.keyboard.press('Tab');
    inDetail.add(await focused());
  }
  for (const want of ['detail-close', 'revoke', 'd-history']) assert.ok(inDetail.has(want), `Tab does not reach ${want} in the detail: ${[...inDetail]}`);
  await page.focus('#revoke');
  await page.keyboard.press('Enter');
  assert.equal(await focused(), 'revoke-no');
  await page.keyboard.press('Shift+Tab');
  assert.equal(await focused(), 'revoke-yes');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Enter');
  assert.equal(await focused(), 'revoke');
  // The filter and the sort answer the keyboard too.
  await page.focus('#filter');
  await page.keyboard.type('k/b');
  await page.waitForFunction(() => document.getElementById('count').textContent.startsWith('1 of 3'), null, { timeout: LONG });

  const labels = await page.$$eval('.spacer .tr:not([hidden]) svg[role="img"]', (ss) => ss.map((s) => s.getAttribute('aria-label')));
  assert.ok(labels.length > 0);
  for (const l of labels) assert.match(l, /^Lane of resource k\/b; held by holder-b, fence \d+/);
  assert.deepEqual(await axe(page), []);
});

test('hostile names are shown as text: markup and bidi controls', { timeout: 120_000 }, async (t) => {
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '60s']);
  t.after(() => c.stop());
  const names = ['x/<img src=x onerror="window.__pwned=1">', 'x/bidi\u2067evil\u2069\u202Egnp.exe'];
  const holder = 'w\u202Eevil<b onmouseover=alert(1)>';
  for (const r of names) await acquire(c.url, r, holder);
  const page = await open(t, c.url);
  await live(page);
  await page.waitForFunction(() => document.querySelectorAll('.spacer .tr:not([hidden])').length === 2, null, { timeout: LONG });
  const shown = await page.$$eval('.spacer .tr:not([hidden])', (trs) => trs.map((tr) => ({
    name: tr.querySelector('button.name').textContent,
    holder: tr.querySelector('.c-holder').textContent,
    inbar: tr.querySelector('text.inbar')?.textContent ?? null,
  })));
  assert.deepEqual(shown.map((s) => s.name).sort(), names.map(visible).sort());
  for (const s of shown) {
    assert.equal(s.holder, visible(holder));
    assert.match(s.holder, /⟨U\+202E⟩/);
  }
  assert.deepEqual(await page.evaluate(() => [window.__pwned, document.querySelectorAll('img, b').length]), [undefined, 0]);
  await page.click('.spacer .tr:not([hidden]) button.name');
  assert.equal(await page.evaluate(() => document.querySelectorAll('img, b').length), 0);
  await page.screenshot({ path: join(SHOTS, 'hostile.png') });
});

test('thousands of resources: rows are virtualised, filtered and sorted', { timeout: 180_000 }, async (t) => {
  const c = await startCoordinator(['-memory', '-ui', '-ttl', '120s']);
  t.after(() => c.stop());
  const N = 2000;
  const name = (i) => `many/${String(i).padStart(4, '0')}`;
  for (let i = 0; i < N; i += 50) await Promise.all(Array.from({ length: 50 }, (_, k) => acquire(c.url, name(i + k), `h-${i + k}`)));
  const page = await open(t, c.url);
  await live(page);
  await page.waitForFunction((n) => document.getElementById('count').textContent.startsWith(`${n} of ${n}`), N, { timeout: LONG });
  const inDom = () => page.evaluate(() => document.querySelectorAll('.spacer .tr').length);
  assert.ok((await inDom()) < 60, `${await inDom()} rows in the DOM for ${N} resources`);
  await page.evaluate(() => { const v = document.getElementById('viewport'); v.scrollTop = v.scrollHeight; });
  await page.waitForSelector(rowSel(name(N - 1)), { timeout: LONG });
  assert.ok((await inDom()) < 60);
  await page.fill('#filter', 'many/01');
  await page.waitForFunction((n) => document.getElementById('count').textContent.startsWith(`100 of ${n}`), N, { timeout: LONG });
  const fences = await page.evaluate(() => [...window.__console.picture.resources.values()].filter((r) => r.name.startsWith('many/01')).map((r) => [r.fence, r.name]));
  fences.sort((a, b) => b[0] - a[0]);
  await page.click('[data-sort="fence"]');
  // The rows are drawn again at the next animation frame, not by the click.
  const firstRow = '.spacer .tr[aria-rowindex="2"]';
  await page.waitForFunction(([sel, want]) => document.querySelector(sel)?.dataset.resource === want, [firstRow, fences[0][1]], { timeout: LONG }).catch(() => {});
  assert.equal(await page.$eval(firstRow, (tr) => tr.dataset.resource), fences[0][1], 'sorted by fence, highest first');
});
