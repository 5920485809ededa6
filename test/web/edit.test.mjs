// Editing the scenario where it is drawn, in headless Chromium: dragging an
// event with the mouse and moving it with the keyboard change the parameter
// the model says places it, the URL, the form, the caption and the verdicts;
// the handles are sliders with names and values; and 120 seeded random
// edits (handles, form fields, the third agent, presets; EDITS, or `make
// soak-edit` for more) keep every label apart and axe-core at no serious
// or critical violation (run on each state that shows a kind of element
// no earlier state showed, checks.mjs a11yKinds: an edit that only moves
// events or changes numbers shows none).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import * as lib from 'lease-fence';
import { useBrowser, goTo, atEach, SCREENSHOTS } from './harness.mjs';
import { labelProblems, axe, a11yKinds } from './checks.mjs';
import { PARAMS, PRESETS, parseQuery, runScenarioAsync, applies } from '../../web/model.js';
import { verdicts } from '../../web/words.js';
import { rng } from '../js/helpers.mjs';

// The seeded random edits. Deliberate breaks of the label placement
// (web/svg.js findSpot and placeLabels: a label may cross a drawn line,
// overlap an obstacle, overlap a placed label; a key label gets no wide
// search) fail at edits 0, 4, 0 and 34: 120 is over three times the last.
const EDITS = Number(process.env.EDITS ?? 120);

const web = useBrowser();

/** Opens query in a tab (reused: harness.mjs tabs); done(page) gives it back. */
const open = (query, viewport = { width: 1280, height: 900 }) => web.tab.open(web.server.url + query, viewport);
const done = (page) => web.tab.done(page);

const shot = (page, name) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
const handle = (page, mode, actor, kind) => page.locator(`#handles-${mode} .handle[data-actor="${actor}"][data-kind="${kind}"]`).first();
const scenarioOf = (page) => parseQuery(new URL(page.url()).search).scenario;
/** Waits until the page shows the run of its latest edit. */
const settled = (page) =>
  page.waitForFunction(() => !document.body.classList.contains('busy') && new Promise((r) => requestAnimationFrame(() => r(true))), null, { timeout: 120_000 });

test("dragging A's write onto B's in the gap: model = 50, the stale write reaches the gate first, and the caption says why", async () => {
  const { page, errors } = await open('?p=gap');
  await page.click('#to-end');
  assert.match(await page.textContent('#verdict-fenced'), /^Fenced: fence 1 < floor 2, refused and logged/);
  const a = handle(page, 'fenced', 'A', 'write');
  const b = handle(page, 'fenced', 'B', 'write');
  await a.scrollIntoViewIfNeeded();
  const from = await a.boundingBox();
  const to = await b.boundingBox();
  await page.mouse.move(from.x + from.width / 2, from.y + from.height / 2);
  await page.mouse.down();
  // Through the way, in steps, as a hand would; the URL waits for the drop.
  for (let k = 1; k <= 8; k++) await page.mouse.move(from.x + from.width / 2 + ((to.x - from.x - 1) * k) / 8, from.y + from.height / 2);
  assert.match(page.url(), /model=450/, 'the address is written once the drag ends');
  await page.mouse.up();
  await settled(page);
  assert.equal(scenarioOf(page).model, 50);
  assert.equal(await page.inputValue('#param-model'), '50');
  assert.equal(await page.inputValue('#link'), page.url());
  // What the model says for model = 50.
  const want = verdicts(await runScenarioAsync(lib, { ...parseQuery('?p=gap').scenario, model: 50 }));
  assert.equal(await page.textContent('#verdict-fenced'), want.fenced.text);
  assert.match(want.fenced.text, /^Fenced: admitted: the stale write reached the gate first\./);
  assert.equal(await page.textContent('#verdict-naive'), want.naive.text);
  const caption = await page.textContent('#caption');
  assert.match(caption, /^A's write now at 1000 ms \(Model call length: 50\)\./);
  assert.match(caption, /Fenced: The gate admits A's stale write: fence 1 ≥ floor 0\. The newer fence has not reached the gate yet, so it cannot refuse\./);
  assert.match(caption, /Verdicts? changed: .*admitted: the stale write reached the gate first/);
  // Drawn as the model says: A's write first, admitted, stale.
  const writes = await page.$$eval('#svg-fenced g.ev-write', (gs) => gs.map((g) => [g.dataset.actor, g.dataset.t, g.dataset.status]));
  assert.deepEqual(writes, [['A', '1000', 'stale'], ['B', '1000', 'ok']]);
  assert.deepEqual(await page.evaluate(labelProblems), []);
  await shot(page, 'edit-drag-gap');
  assert.deepEqual(errors, []);
  done(page);
});

test('moving the focused event with the keyboard: the handle is a slider, keeps focus, and the run follows', async () => {
  const { page, errors } = await open('?p=gap');
  await page.click('#to-end');
  const a = handle(page, 'fenced', 'A', 'write');
  assert.equal(await a.getAttribute('role'), 'slider');
  assert.equal(await a.getAttribute('aria-label'), 'Fenced lane: A\'s write; sets Model call length');
  assert.equal(await a.getAttribute('aria-valuenow'), '450');
  assert.equal(await a.getAttribute('aria-valuetext'), "A's write at 1400 ms; Model call length 450");
  await a.focus();
  const id = await a.getAttribute('data-id');
  for (let k = 0; k < 4; k++) await page.keyboard.press('Shift+ArrowLeft');
  await settled(page);
  assert.equal(scenarioOf(page).model, 50);
  assert.equal(await page.evaluate(() => document.activeElement.dataset.id), id, 'the handle keeps the focus');
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-valuenow')), '50');
  assert.match(await page.textContent('#verdict-fenced'), /^Fenced: admitted: the stale write reached the gate first\./);
  assert.match(await page.textContent('#caption'), /The newer fence has not reached the gate yet/);
  // 10 ms later it comes after B's write: refused again.
  await page.keyboard.press('ArrowRight');
  await settled(page);
  assert.equal(scenarioOf(page).model, 60);
  assert.match(await page.textContent('#verdict-fenced'), /^Fenced: fence 1 < floor 2, refused and logged/);
  // Alt: 1 ms; Home: the least it can be.
  await page.keyboard.press('Alt+ArrowRight');
  await settled(page);
  assert.equal(scenarioOf(page).model, 61);
  await page.keyboard.press('Home');
  await settled(page);
  assert.equal(scenarioOf(page).model, 0);
  // The page's own keys (step, reset) leave a focused handle alone, and the position stays at the end.
  const [v, max] = await page.evaluate(() => [document.getElementById('scrubber').value, document.getElementById('scrubber').max]);
  assert.equal(v, max);
  // B's start, from the keyboard too: bStart.
  const bStart = handle(page, 'naive', 'B', 'send');
  await bStart.focus();
  await page.keyboard.press('Shift+ArrowRight');
  await settled(page);
  assert.equal(scenarioOf(page).bStart, 1100);
  assert.equal(await page.inputValue('#param-bStart'), '1100');
  assert.deepEqual(errors, []);
  done(page);
});

test('every event a parameter places has a handle, on the first frame too, and reloading the link shows the same run', async () => {
  const { page } = await open('?p=renewal');
  // The first frame draws the whole run faintly: every editable event is there to move.
  const first = await page.$$eval('#handles-fenced .handle', (hs) => hs.map((h) => `${h.dataset.actor} ${h.dataset.kind} ${h.dataset.key}`));
  assert.ok(first.includes('A check checkAt') && first.includes('A reply downA') && first.includes('B send bStart'), first.join(', '));
  for (const h of await page.$$('#handles-naive .handle, #handles-fenced .handle')) {
    const label = await h.getAttribute('aria-label');
    assert.match(label, /^(Naive|Fenced) lane: .+; sets .+/);
    assert.match(await h.getAttribute('aria-valuetext'), / at -?\d+(\.\d+)? ms; /);
  }
  // A drag on the first frame: the reply to A's renewal, 860 -> later.
  const reply = page.locator('#handles-fenced .handle[data-actor="A"][data-kind="reply"][data-key="downA"]').last();
  await reply.focus();
  await page.keyboard.press('Shift+ArrowRight');
  await settled(page);
  assert.equal(scenarioOf(page).downA, 960);
  assert.equal(await page.evaluate(() => document.getElementById('scrubber').value), '0', 'the first frame stays the first frame');
  const link = await page.inputValue('#link');
  const other = await open(new URL(link).search);
  assert.equal(await other.page.inputValue('#param-downA'), '960');
  await other.page.click('#to-end');
  await page.click('#to-end');
  assert.equal(await other.page.textContent('#verdict-naive'), await page.textContent('#verdict-naive'));
  done(page);
  done(other.page);
});

test('a third agent, the floor and the restart from the form: the rows, the link and the run follow', async () => {
  const { page, errors } = await open('?p=restart');
  await page.click('#custom summary');
  assert.equal(await page.isVisible('#param-cStart'), false, "C's fields wait for agent C");
  await page.check('#param-agents');
  await settled(page);
  assert.equal(scenarioOf(page).agents, 3);
  assert.match(page.url(), /agents=3&cStart=1600&cModel=200&upC=0&downC=0/);
  assert.equal(await page.isVisible('#param-cStart'), true);
  assert.match(await page.textContent('#claim'), /^The coordinator restarts at 1300 .*\(As the preset comes\. This run is edited: Add agent C\.\)$/);
  assert.deepEqual(await page.$$eval('#rows-fenced text.rowlabel', (ts) => ts.map((t) => t.textContent)), ['Agent A', 'Agent B', 'Agent C', 'Coordinator', 'Resource']);
  for (const [key, v] of [['restartAt', '1500'], ['startFence', '7'], ['floor', '1']]) {
    await page.fill(`#param-${key}`, v);
    await page.press(`#param-${key}`, 'Tab');
  }
  await settled(page);
  await page.click('#to-end');
  const s = scenarioOf(page);
  assert.deepEqual([s.restartAt, s.startFence, s.floor], [1500, 7, 1]);
  const log = await page.$$eval('#log-fenced li', (lis) => lis.map((li) => li.textContent));
  assert.ok(log.some((l) => /^t=1500 The coordinator restarts; its successor gets startFence = 7/.test(l)), log.join('\n'));
  // C asks at 1600 as A does after the restart; the successor starts at 7: C gets 8, A (denied, then retrying) 9.
  assert.ok(log.some((l) => /grants r\d+ to C: fence 8/.test(l)), log.join('\n'));
  assert.ok(log.some((l) => /grants r\d+ to A: fence 9/.test(l)), log.join('\n'));
  assert.deepEqual(await page.evaluate(labelProblems), []);
  await shot(page, 'edit-three-agents-restart');
  // Not a restart preset: its fields go away, and out of the link.
  await page.selectOption('#preset', 'gap');
  await settled(page);
  assert.equal(await page.isVisible('#param-restartAt'), false);
  assert.doesNotMatch(page.url(), /restartAt=/);
  assert.deepEqual(errors, []);
  done(page);
});

// At a position part-way through an edited run: the labels' problems and
// the kinds of element shown (atEach's check, one call to the page).
const MID_CHECKS = `(include) => ({ problems: (${labelProblems})(), shown: (${a11yKinds})(include) })`;

test(`${EDITS} seeded random edits keep every label apart and axe-core at no serious or critical violation`, async () => {
  const AXE_INCLUDE = ['#lanes', '.setup', '.stage'];
  const rand = rng(22022);
  const pick = (n) => Math.floor(rand() * n);
  const { page, errors } = await open('?p=gap', { width: 1280, height: 900 });
  await page.click('#custom summary');
  await page.click('#to-end');
  const kinds = { handle: 0, form: 0, agents: 0, preset: 0 };
  const seen = new Set();
  let axeRuns = 0;
  let lastNew = -1;
  for (let n = 0; n < EDITS; n++) {
    const r = rand();
    let what;
    if (r < 0.6) {
      const handles = await page.$$('#handles-naive .handle:not(.gone), #handles-fenced .handle:not(.gone)');
      const h = handles[pick(handles.length)];
      await h.focus();
      const key = ['ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown', 'PageUp', 'PageDown'][pick(6)];
      const mod = ['', 'Shift+', 'Alt+'][pick(3)];
      const times = 1 + pick(4);
      for (let k = 0; k < times; k++) await page.keyboard.press(mod + key);
      what = `handle ${await h.getAttribute('data-id')} ${mod}${key} x${times}`;
      kinds.handle++;
    } else if (r < 0.88) {
      const s = scenarioOf(page);
      const defs = PARAMS.filter((d) => !d.toggle && applies(d, s));
      const def = defs[pick(defs.length)];
      const v = def.min + pick(Math.min(def.max, def.key === 'floor' || def.key === 'startFence' ? 4 : def.key.startsWith('up') || def.key.startsWith('down') ? 400 : 2500) - def.min + 1);
      await page.fill(`#param-${def.key}`, String(v));
      await page.press(`#param-${def.key}`, 'Tab');
      what = `${def.key}=${v}`;
      kinds.form++;
    } else if (r < 0.96) {
      await page.click('#param-agents');
      what = 'agents toggled';
      kinds.agents++;
    } else {
      const id = PRESETS[pick(PRESETS.length)].id;
      await page.selectOption('#preset', id);
      await settled(page);
      await goTo(page, -1);
      what = `preset ${id}`;
      kinds.preset++;
    }
    await settled(page);
    const where = `edit ${n} (${what}): ${page.url()}`;
    assert.deepEqual(await page.evaluate(labelProblems), [], `${where}, at the end`);
    // And at a position part-way through.
    const max = Number(await page.getAttribute('#scrubber', 'max'));
    const mid = 1 + pick(Math.max(1, max));
    const [{ problems, shown }] = (await atEach(page, [mid], MID_CHECKS, AXE_INCLUDE)).results;
    assert.deepEqual(problems, [], `${where}, at step ${mid}`);
    // axe-core on every state with a kind of element new in this run.
    if (shown.some((k) => !seen.has(k))) {
      assert.deepEqual(await axe(page, AXE_INCLUDE), [], where);
      for (const k of shown) seen.add(k);
      axeRuns++;
      lastNew = n;
    }
    await goTo(page, -1);
  }
  assert.ok(kinds.handle > EDITS * 0.4 && kinds.form > EDITS * 0.15 && kinds.agents > EDITS / 40 && kinds.preset > EDITS / 100, JSON.stringify(kinds));
  // New kinds come with the presets, the third agent, the form's fields
  // and the outcomes they lead to: every one met by axe-core at least once.
  console.log(`axe-core: ${axeRuns} runs, ${seen.size} kinds of element in ${EDITS} edits, the last new at edit ${lastNew}`);
  assert.ok(axeRuns >= 10 && seen.size >= 300, `axe-core ran ${axeRuns} times over ${seen.size} kinds of element`);
  await shot(page, 'edit-random');
  assert.deepEqual(errors, []);
  done(page);
});
