// The playground in headless Chromium, served by the dev server on a free
// port: loading, every preset's claim, stepping and scrubbing, the URL,
// embed mode, hostile URL values, the keyboard and a narrow screen.
// Screenshots go to out/test/screenshots.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { useBrowser, openPage, load, SCREENSHOTS } from './harness.mjs';
import { PRESETS, PARAMS, defaultScenario, toQuery } from '../../web/model.js';

const web = useBrowser();

/** Opens url (a path and query) in a tab (reused); returns { page, errors, requests, dialogs }. */
const open = (query, viewport) => web.tab.open(web.server.url + query, viewport);
const done = (page) => web.tab.done(page);

/** Everything the page shows about the run, as plain data. */
function snapshot(page) {
  return page.evaluate(() => {
    const txt = (id) => document.getElementById(id).textContent;
    const log = (id) => [...document.querySelectorAll(`#${id} li`)].map((li) => li.textContent);
    return {
      clock: txt('clock'),
      values: [txt('value-naive'), txt('value-fenced')],
      writes: [txt('writes-naive'), txt('writes-fenced')],
      floor: txt('floor-fenced'),
      rejections: [...document.querySelectorAll('#rejections-body tr.rejection')].map((tr) => [...tr.cells].map((c) => c.textContent)),
      logs: [log('log-naive'), log('log-fenced')],
      svgs: [document.querySelector('#svg-naive svg').outerHTML, document.querySelector('#svg-fenced svg').outerHTML],
    };
  });
}

const position = (page) => page.evaluate(() => [Number(document.getElementById('scrubber').value), Number(document.getElementById('scrubber').max)]);
const toEnd = async (page) => {
  await page.click('#to-end');
  const [v, max] = await position(page);
  assert.equal(v, max);
};
const notices = (page) => page.$$eval('#notice-list li', (lis) => lis.map((li) => li.textContent));
const shot = (page, name) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });

test('loads with no console errors, same-origin requests only, and the module streamed', async () => {
  const o = await openPage(web.browser.context);
  // Count how the module compiles the wasm: streaming, or the fallback from bytes.
  await o.page.addInitScript(() => {
    const streaming = WebAssembly.instantiateStreaming;
    const plain = WebAssembly.instantiate;
    window.__wasm = { streaming: 0, plain: 0 };
    WebAssembly.instantiateStreaming = function (...args) {
      window.__wasm.streaming++;
      return streaming.apply(this, args);
    };
    // The module also instantiates tiny helper modules of its own (the
    // stack-room check, a few hundred bytes): only the library's own wasm
    // (megabytes) counts as the fallback.
    WebAssembly.instantiate = function (...args) {
      const a = args[0];
      const size = a instanceof WebAssembly.Module ? Infinity : a?.byteLength ?? Infinity;
      if (size > 64 * 1024) window.__wasm.plain++;
      return plain.apply(this, args);
    };
  });
  await load(o.page, web.server.url);
  const { page, errors, requests } = o;
  assert.deepEqual(errors, []);
  const origin = new URL(web.server.url).origin;
  assert.ok(requests.length >= 5, `requests: ${requests}`);
  for (const r of requests) assert.equal(new URL(r).origin, origin, `request outside the origin: ${r}`);
  assert.equal(requests.filter((r) => r.endsWith('/lease-fence/lease-fence.wasm')).length, 1, 'the wasm is fetched once (the preload is used)');
  assert.deepEqual(await page.evaluate(() => window.__wasm), { streaming: 1, plain: 0 });
  assert.equal(await page.isVisible('#loading'), false);
  assert.equal(await page.isVisible('#notice'), false);
  await page.close();
});

test('the page cannot reach another origin (Content-Security-Policy)', async () => {
  const { page } = await open('');
  const resp = await page.request.get(web.server.url);
  assert.match(resp.headers()['content-security-policy'], /default-src 'self'/);
  assert.match(await page.getAttribute('meta[http-equiv="Content-Security-Policy"]', 'content'), /connect-src 'self'/);
  const outcome = await page.evaluate(async () => {
    let violated = false;
    document.addEventListener('securitypolicyviolation', () => (violated = true));
    try {
      await fetch('http://192.0.2.1/');
      return 'fetched';
    } catch {
      await new Promise((r) => setTimeout(r, 0));
      return violated ? 'blocked by CSP' : 'failed otherwise';
    }
  });
  assert.equal(outcome, 'blocked by CSP');
  done(page);
});

// What each preset claims, written from the scenarios in the issue, checked
// against what the page shows at the end of the run.
const CLAIMS = {
  gap: {
    naive: ['B at 1000', 'A at 1400'],
    naiveValue: '"A\'s report"',
    fenced: ['B at 1000 (fence 2)'],
    fencedValue: '"B\'s report"',
    rejections: [['1', 'agent-a', '1', 'agent-b', '2']],
    log: [/^t=950 A checks now < expiresAt \(1000\): valid/, /^t=1000 The coordinator grants r2 to B: fence 2/],
  },
  renewal: {
    naive: ['B at 1100', 'A at 1400'],
    naiveValue: '"A\'s report"',
    fenced: ['B at 1100 (fence 2)'],
    fencedValue: '"B\'s report"',
    rejections: [['1', 'agent-a', '1', 'agent-b', '2']],
    log: [/^t=40 The coordinator renews A's lease .* ends at 1040/, /^t=900 A sets expiresAt = now \+ ttl = 1900/],
    fencedLog: [/^t=900 A holds fence 1; deadline = sentAt 0 \+ ttl 1000 − skew 0 = 1000/],
  },
  lost: {
    naive: ['B at 1100', 'A at 1400'],
    naiveValue: '"A\'s report"',
    fenced: ['B at 1100 (fence 2)'],
    fencedValue: '"B\'s report"',
    rejections: [['1', 'agent-a', '1', 'agent-b', '2']],
    log: [/^t=100 The reply to r1 is lost/, /^t=200 A resends acquire r1 \(same request id/, /same grant: fence 1 \(issuedFence still 1\)/],
  },
  expired: {
    naive: ['B at 1150', 'A at 1300'],
    naiveValue: '"A\'s report"',
    fenced: ['B at 1150 (fence 2)'],
    fencedValue: '"B\'s report"',
    rejections: [['1', 'agent-a', '1', 'agent-b', '2']],
    log: [/^t=1100 The coordinator refuses renewal r2: reason "expired"/],
  },
  restart: {
    naive: ['A at 200', 'B at 1100', 'A at 1500'],
    naiveValue: '"A\'s second report"',
    fenced: ['A at 200 (fence 1)', 'B at 1100 (fence 2)'],
    fencedValue: '"B\'s report"',
    rejections: [['1', 'agent-a', '1', 'agent-b', '2']],
    log: [/^t=1300 The coordinator restarts and forgets everything/, /^t=1400 The coordinator grants r3 to A: fence 1/],
  },
  'restart-kept': {
    naive: ['A at 200', 'B at 1100', 'A at 1500'],
    naiveValue: '"A\'s second report"',
    fenced: ['A at 200 (fence 1)', 'B at 1100 (fence 2)', 'A at 1500 (fence 3)'],
    fencedValue: '"A\'s second report"',
    rejections: [],
    log: [/^t=1300 The coordinator restarts; its successor gets startFence = 2/, /^t=1400 The coordinator grants r3 to A: fence 3/],
  },
  early: {
    naive: ['A at 1100', 'B at 1300'],
    naiveValue: '"B\'s report"',
    fenced: ['A at 1100 (fence 1)', 'B at 1300 (fence 2)'],
    fencedValue: '"B\'s report"',
    rejections: [],
    log: [/^t=1100 The gate admits A's write with fence 1 \(floor now 1\)/],
  },
  async: {
    naive: ['B at 1100', 'A at 1250', 'A at 1400'],
    naiveValue: '"A\'s report"',
    fenced: ['A at 1400 (fence 1)', 'B at 1500 (fence 2)'],
    fencedValue: '"B\'s report"',
    rejections: [['1', 'agent-a', '1', 'agent-b', '2']],
    log: [
      /^t=950 A calls gate\.commit\(token, async fn\): refused with InvalidArgumentError before fn runs/,
      /^t=1000 B calls gate\.commitAsync with fence 2: a write is still running, so it waits its turn/,
      /^t=1400 B's turn comes: the gate checks fence 2 now and admits it \(floor now 2\)/,
      /^t=1500 The gate refuses A's waiting write when its turn comes: fence 1 is below agent-b's 2 \(rejection #1\)/,
    ],
  },
  push: {
    naive: ['A at 1100', 'B at 1300'],
    naiveValue: '"B\'s report"',
    fenced: ['B at 1300 (fence 2)'],
    fencedValue: '"B\'s report"',
    rejections: [['1', 'agent-a', '1', 'agent-b', '2']],
    log: [/^t=1000 The coordinator pushes B's fence 2 to the gate \(gate\.admit\): floor now 2/],
  },
};

for (const preset of PRESETS) {
  test(`preset ${preset.id} runs to the outcome it claims`, async () => {
    const claim = CLAIMS[preset.id];
    assert.ok(claim, `no expectations written for preset ${preset.id}`);
    const { page, errors } = await open(`?p=${preset.id}`);
    assert.equal(await page.inputValue('#preset'), preset.id);
    assert.equal(await page.textContent('#claim'), preset.claim);
    await toEnd(page);
    const s = await snapshot(page);
    assert.equal(s.writes[0], `Writes landed: ${claim.naive.join(', ')}.`);
    assert.equal(s.values[0], claim.naiveValue);
    assert.equal(s.writes[1], `Writes landed: ${claim.fenced.join(', ')}. Refused: ${claim.rejections.length}.`);
    assert.equal(s.values[1], claim.fencedValue);
    assert.deepEqual(s.rejections, claim.rejections);
    // The naive lane records nothing: no refusal anywhere in its log.
    assert.ok(!s.logs[0].some((l) => /refuse[sd]? .*write/i.test(l)), s.logs[0].join('\n'));
    for (const re of claim.log) assert.ok(s.logs[0].some((l) => re.test(l)) || s.logs[1].some((l) => re.test(l)), `log lacks ${re}`);
    for (const re of claim.fencedLog ?? []) assert.ok(s.logs[1].some((l) => re.test(l)), `fenced log lacks ${re}`);
    // The refused write is drawn, in the fenced lane only.
    assert.equal(await page.locator('#svg-fenced g.ev-write[data-landed="false"]').count(), claim.rejections.length);
    assert.equal(await page.locator('#svg-naive g.ev-write[data-landed="false"]').count(), 0);
    assert.equal(await page.locator('#svg-naive g.ev-write[data-landed="true"]').count(), claim.naive.length);
    await shot(page, `preset-${preset.id}`);
    assert.deepEqual(errors, []);
    done(page);
  });
}

test('play runs the scenario to its end and stops', async () => {
  const { page } = await open('?p=gap');
  await page.selectOption('#speed', '4');
  await page.click('#play');
  assert.equal(await page.getAttribute('#play', 'aria-pressed'), 'true');
  await page.waitForFunction(() => document.getElementById('play').getAttribute('aria-pressed') === 'false', null, { timeout: 30000 });
  const [v, max] = await position(page);
  assert.equal(v, max);
  assert.deepEqual((await snapshot(page)).rejections, [['1', 'agent-a', '1', 'agent-b', '2']]);
  done(page);
});

test('stepping and scrubbing reach the same states', async () => {
  const { page } = await open('?p=renewal');
  const [, max] = await position(page);
  assert.ok(max >= 10, `only ${max} positions`);
  const stepped = [await snapshot(page)];
  for (let k = 1; k <= max; k++) {
    await page.click('#step');
    stepped.push(await snapshot(page));
  }
  assert.equal(await page.isDisabled('#step'), true);
  // Each step changes what is shown.
  for (let k = 1; k <= max; k++) assert.notDeepEqual(stepped[k], stepped[k - 1], `step ${k} changed nothing`);
  for (const k of [0, 3, Math.floor(max / 2), max - 1, max, 1]) {
    await page.locator('#scrubber').fill(String(k));
    assert.deepEqual(await snapshot(page), stepped[k], `scrubbed to ${k}`);
  }
  done(page);
});

test('step back undoes a step exactly', async () => {
  const { page } = await open('?p=lost');
  for (let k = 0; k < 6; k++) await page.click('#step');
  const at6 = await snapshot(page);
  await page.click('#step');
  await page.click('#back');
  assert.deepEqual(await snapshot(page), at6);
  await page.click('#reset');
  assert.equal((await position(page))[0], 0);
  assert.equal(await page.isDisabled('#back'), true);
  assert.deepEqual((await snapshot(page)).logs, [[], []]);
  done(page);
});

test('a link with at= reopens the same position', async () => {
  const { page } = await open('?p=expired');
  for (let k = 0; k < 9; k++) await page.click('#step');
  const before = await snapshot(page);
  const link = await page.inputValue('#link');
  assert.match(link, /[?&]at=9(&|$)/);
  assert.equal(link, page.url());
  const other = await open(new URL(link).search);
  assert.deepEqual(await snapshot(other.page), before);
  done(page);
  done(other.page);
});

test('a custom run survives the URL round trip', async () => {
  const { page } = await open('?p=gap');
  const plain = await snapshot(page);
  await page.click('#custom summary');
  for (const [key, v] of [['ttl', '1300'], ['model', '700'], ['bStart', '1300'], ['step', '2'], ['skew', '30']]) {
    await page.fill(`#param-${key}`, v);
    await page.press(`#param-${key}`, 'Tab');
  }
  await toEnd(page);
  const custom = await snapshot(page);
  assert.notDeepEqual(custom.logs, plain.logs);
  // ttl 1300: B acquires at 1300, A's write at 1650 is refused.
  assert.match(custom.writes[1], /^Writes landed: B at 1300 \(fence 2\)\. Refused: 1\.$/);
  const link = await page.inputValue('#link');
  for (const part of ['p=gap', 'ttl=1300', 'model=700', 'bStart=1300', 'step=2', 'skew=30']) assert.ok(link.includes(part), `${link} lacks ${part}`);
  const other = await open(new URL(link).search);
  assert.deepEqual(await snapshot(other.page), custom);
  assert.equal(await other.page.inputValue('#param-ttl'), '1300');
  assert.equal(await other.page.inputValue('#param-step'), '2');
  done(page);
  done(other.page);
});

test('a bad value typed into the form is flagged and changes nothing', async () => {
  const { page } = await open('?p=gap');
  await page.click('#to-end');
  const before = await snapshot(page);
  await page.click('#custom summary');
  for (const bad of ['-3', '0', '1.5', '99999999']) {
    await page.fill('#param-ttl', bad);
    await page.press('#param-ttl', 'Tab');
    assert.equal(await page.getAttribute('#param-ttl', 'aria-invalid'), 'true', bad);
    assert.match(await page.textContent('#param-ttl-error'), /Whole number from 1 to 60000; the run still uses 1000/);
    assert.deepEqual(await snapshot(page), before, bad);
  }
  assert.match(page.url(), /ttl=1000/);
  done(page);
});

test('choosing a preset with the keyboard resets to its start and updates the URL', async () => {
  const { page } = await open('?p=gap&at=5');
  await page.focus('#preset');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.inputValue('#preset'), 'renewal');
  assert.equal((await position(page))[0], 0);
  assert.match(page.url(), /p=renewal/);
  assert.match(page.url(), /upA=40&downA=860/);
  assert.equal(await page.textContent('#claim'), PRESETS.find((p) => p.id === 'renewal').claim);
  done(page);
});

test('embed=1 shows only the lanes, at the end of the run', async () => {
  const { page, errors } = await open(`?${toQuery(defaultScenario('gap'), { embed: true })}`, { width: 1100, height: 700 });
  for (const sel of ['.setup', '.intro', '.keys', '#reset', 'footer', '.log', '.outcome']) assert.equal(await page.isVisible(sel), false, `${sel} is visible`);
  for (const sel of ['h1', '#caption', '#verdict-naive', '#verdict-fenced', '#lane-naive', '#lane-fenced', '#svg-naive svg', '#svg-fenced svg', '#play', '#open-full']) {
    assert.equal(await page.isVisible(sel), true, `${sel} is hidden`);
  }
  assert.equal(await page.textContent('h1'), 'lease-fence: The check-to-write gap');
  assert.match(await page.getAttribute('#open-full', 'href'), /^\.\/\?p=gap&.*at=\d+$/);
  const s = await snapshot(page);
  assert.deepEqual(s.rejections, [['1', 'agent-a', '1', 'agent-b', '2']]);
  assert.match(page.url(), /embed=1/);
  await shot(page, 'embed-gap');
  assert.deepEqual(errors, []);
  done(page);
});

test('hostile URL: markup in the preset is shown as text, never run', async () => {
  const { page, dialogs } = await open(`?p=${encodeURIComponent('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">')}`);
  const msgs = await notices(page);
  assert.equal(msgs.length, 1);
  assert.equal(msgs[0], 'Unknown preset "<script>window.__pwned=1</script><img sr…"; showing "gap" instead.');
  assert.equal(await page.isVisible('#notice'), true);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator('img').count(), 0);
  // The page's own two scripts, nothing the URL brought: the import map and app.js.
  assert.deepEqual(await page.evaluate(() => [...document.scripts].map((x) => `${x.type} ${x.src ? new URL(x.src).pathname : 'inline'}`)), ['importmap inline', 'module /app.js']);
  assert.deepEqual(dialogs, []);
  assert.equal(await page.inputValue('#preset'), 'gap');
  await shot(page, 'hostile-preset');
  done(page);
});

test('hostile URL: markup in a parameter name and value is shown as text', async () => {
  const q = `?ttl=${encodeURIComponent('<img src=x onerror=alert(1)>')}&${encodeURIComponent('<b onmouseover=alert(2)>x</b>')}=1`;
  const { page, dialogs } = await open(q);
  const msgs = await notices(page);
  assert.equal(msgs.length, 2, msgs.join('\n'));
  assert.ok(msgs[0].includes('got "<img src=x onerror=alert(1)>"; using 1000.'), msgs[0]);
  assert.ok(msgs[1].includes('Ignored unknown parameter "<b onmouseover=alert(2)>x</b>"'), msgs[1]);
  assert.equal(await page.locator('#notice img, #notice b:not(:first-child)').count(), 0);
  assert.deepEqual(dialogs, []);
  assert.equal(await page.inputValue('#param-ttl'), '1000');
  done(page);
});

test('hostile URL: huge numbers fall back to the defaults', async () => {
  const { page } = await open('?p=gap&ttl=1e400&model=99999999999999999999999&bStart=60001&at=123456789');
  const msgs = await notices(page);
  assert.equal(msgs.length, 4, msgs.join('\n'));
  assert.equal(await page.inputValue('#param-ttl'), '1000');
  assert.equal(await page.inputValue('#param-model'), '450');
  assert.equal(await page.inputValue('#param-bStart'), '1000');
  assert.match(msgs[3], /past the end of this run/);
  const [v, max] = await position(page);
  assert.equal(v, max);
  done(page);
});

test('hostile URL: NaN, negative, fractional and empty values fall back', async () => {
  const { page } = await open('?p=lost&ttl=NaN&model=-5&skew=1.5&step=&upA=Infinity');
  const msgs = await notices(page);
  assert.equal(msgs.length, 5, msgs.join('\n'));
  const want = defaultScenario('lost');
  for (const key of ['ttl', 'model', 'skew', 'step', 'upA']) assert.equal(await page.inputValue(`#param-${key}`), String(want[key]), key);
  // The run is the preset's own.
  assert.match(page.url(), new RegExp(`ttl=${want.ttl}&checkAt=${want.checkAt}&model=${want.model}`));
  done(page);
});

test('hostile URL: an unknown preset falls back to the default, and the message can be dismissed', async () => {
  const { page } = await open('?p=restart-forever&embed=2');
  const msgs = await notices(page);
  assert.equal(msgs.length, 2);
  assert.match(msgs[0], /^Unknown preset "restart-forever"/);
  assert.match(msgs[1], /^embed must be 1 or 0/);
  assert.equal(await page.inputValue('#preset'), 'gap');
  await page.click('#notice-close');
  assert.equal(await page.isVisible('#notice'), false);
  done(page);
});

test('keyboard: global keys step, rewind, jump and play', async () => {
  const { page } = await open('?p=gap');
  await page.click('h1'); // focus nowhere in particular
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  assert.equal((await position(page))[0], 2);
  await page.keyboard.press('ArrowLeft');
  assert.equal((await position(page))[0], 1);
  await page.keyboard.press('End');
  const [v, max] = await position(page);
  assert.equal(v, max);
  await page.keyboard.press('Home');
  assert.equal((await position(page))[0], 0);
  await page.keyboard.press(' ');
  assert.equal(await page.getAttribute('#play', 'aria-pressed'), 'true');
  await page.keyboard.press('k');
  assert.equal(await page.getAttribute('#play', 'aria-pressed'), 'false');
  done(page);
});

test('keyboard: Tab reaches every control, focus is visible, Enter and arrows work', async () => {
  const { page } = await open('?p=gap');
  const seen = [];
  for (let i = 0; i < 60 && !seen.includes('copy'); i++) {
    await page.keyboard.press('Tab');
    seen.push(await page.evaluate(() => document.activeElement.id));
  }
  // #back is disabled at the start, so Tab skips it.
  for (const id of ['preset', 'play-big', 'play', 'step', 'svg-naive', 'log-naive', 'svg-fenced', 'log-fenced', 'link', 'copy']) assert.ok(seen.includes(id), `Tab never reached #${id}: ${seen}`);
  assert.ok(!seen.includes('back'));
  await page.focus('#step');
  const outline = await page.evaluate(() => {
    const cs = getComputedStyle(document.activeElement);
    return [cs.outlineStyle, cs.outlineWidth];
  });
  assert.deepEqual(outline, ['solid', '3px']);
  await page.keyboard.press('Enter'); // on #step
  assert.equal((await position(page))[0], 1);
  await page.focus('#scrubber');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  assert.equal((await position(page))[0], 3);
  await page.focus('#custom summary');
  await page.keyboard.press('Enter');
  assert.equal(await page.isVisible('#param-ttl'), true);
  done(page);
});

test('every control has a label', async () => {
  const { page } = await open('');
  const unlabeled = await page.evaluate(() => {
    const out = [];
    for (const el of document.querySelectorAll('input, select')) if (!el.labels?.length) out.push(el.id);
    for (const el of document.querySelectorAll('button')) if (!el.textContent.trim()) out.push(el.id);
    return out;
  });
  assert.deepEqual(unlabeled, []);
  assert.equal(await page.locator('.param label').count(), PARAMS.length);
  done(page);
});

test('narrow screen: the lanes stack and nothing scrolls sideways', async () => {
  const { page, errors } = await open('?p=gap', { width: 390, height: 844 });
  await page.click('#to-end');
  const [naive, fenced] = await Promise.all([page.locator('#lane-naive').boundingBox(), page.locator('#lane-fenced').boundingBox()]);
  assert.ok(fenced.y >= naive.y + naive.height, `fenced lane (y ${fenced.y}) is not below the naive one (ends ${naive.y + naive.height})`);
  assert.ok(Math.abs(naive.x - fenced.x) < 1);
  const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(widths[0] <= widths[1], `page is ${widths[0]}px wide in a ${widths[1]}px window`);
  await shot(page, 'narrow-gap');
  assert.deepEqual(errors, []);
  done(page);
});

test('copy link puts the current URL on the clipboard or selects it', async () => {
  const { page } = await open('?p=renewal');
  await page.click('#step');
  await page.click('#copy');
  // The clipboard answers asynchronously (or refuses, in a headless browser).
  await page.waitForFunction(() => document.getElementById('copy-status').textContent !== '', null, { timeout: 10000 });
  assert.match(await page.textContent('#copy-status'), /^(Copied\.|Selected: press Ctrl\+C)/);
  assert.equal(await page.inputValue('#link'), page.url());
  done(page);
});

test('a module that fails to load is reported on the page', async () => {
  const o = await openPage(web.browser.context);
  await o.page.route('**/lease-fence/lease-fence.mjs', (route) => route.fulfill({ status: 404, body: 'gone' }));
  await o.page.goto(web.server.url + '?p=gap');
  await o.page.waitForSelector('#loading.failed');
  assert.match(await o.page.textContent('#loading'), /did not load .*make build-wasm/);
  assert.equal(await o.page.evaluate(() => document.body.classList.contains('ready')), false);
  await o.page.close();
});
