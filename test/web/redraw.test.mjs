// A redraw is the drawing a fresh page makes, in headless Chromium. The
// lanes are redrawn in place while an event is dragged (the elements that
// stay are updated, not made again), so these tests compare, markup for
// markup:
// - the lanes, row labels and handles after drags and key presses with
//   those of the same scenario loaded from the link the page then shows;
// - 120 seeded random drawings (and now and then one from before again),
//   each drawn over the one before in the same container, with the same
//   drawing made afresh in an empty one.
// And the pace of a drag: five raw pointer moves between two frames make
// one redraw at once and one of the newest at the next frame; without
// pointerrawupdate (a browser that lacks it) the page follows pointermove.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, load } from './harness.mjs';

// What a redraw must reproduce: the two lanes' drawings, their row labels,
// the handles (without the page's focus), the verdicts and the caption.
// Runs in the page.
function readDrawing() {
  const out = {};
  for (const mode of ['naive', 'fenced']) {
    out[`draw-${mode}`] = document.getElementById(`draw-${mode}`).innerHTML;
    out[`rows-${mode}`] = document.getElementById(`rows-${mode}`).innerHTML;
    out[`handles-${mode}`] = document.getElementById(`handles-${mode}`).innerHTML;
    const v = document.getElementById(`verdict-${mode}`);
    out[`verdict-${mode}`] = JSON.stringify([v.textContent, v.dataset.tone, v.hidden]);
  }
  const s = document.getElementById('scrubber');
  out.scrubber = JSON.stringify([s.value, s.max, s.getAttribute('aria-valuetext')]);
  return out;
}

// Where the lanes are on the page (px from its top).
function lanesTop() {
  return document.getElementById('lanes').getBoundingClientRect().top + window.scrollY;
}

// Keeps in window.__first the drawing as the page first shows it, and
// where its lanes are: read when body gets its class ready, in the same
// task, before any frame (a redraw the page leaves for a later frame, say
// after a resize it caused itself, or text that comes later and moves the
// lanes, would come too late to be in it, whatever the machine's load).
function keepFirst(read, top) {
  new MutationObserver((_, observer) => {
    if (!document.body?.classList.contains('ready')) return;
    observer.disconnect();
    window.__first = { drawing: read(), top: top() };
  }).observe(document, { subtree: true, attributes: true, attributeFilter: ['class'] });
}

// Every document of the tests' tabs (reused: harness.mjs tabs) keeps its first drawing.
const web = useBrowser({ viewport: { width: 1280, height: 900 }, initScript: `(${keepFirst})(${readDrawing}, ${lanesTop})` });

/** Opens query in a tab; done(page) gives it back. */
const open = (query) => web.tab.open(web.server.url + query);
const done = (page) => web.tab.done(page);

const settled = (page) =>
  page.waitForFunction(() => !document.body.classList.contains('busy') && new Promise((r) => requestAnimationFrame(() => r(true))), null, { timeout: 15000 });

const drawing = (page) => page.evaluate(readDrawing);

// Where two strings part, with some context (the drawings are long).
function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return `at ${i}: ...${a.slice(Math.max(0, i - 160), i + 160)}... vs ...${b.slice(Math.max(0, i - 160), i + 160)}...`;
}

// An edit's caption replaces the step's until the position moves, and
// with it the halo that marks what the step revealed: right after an edit
// (edited true) the halo is left out of the comparison.
const noHalo = (html) => html.replace(/<g class="highlights">.*?<\/g>/, '').replaceAll(' changed"', '"');

// The link's page is compared twice: as it first shows (its first frame)
// and once settled, with live mode's availability shown; both must be the
// drawing here, and its lanes must not have moved (a handle grabbed at
// once must still be under the pointer).
async function sameAsLink(page, what, edited) {
  await settled(page);
  const here = await drawing(page);
  const { page: other, errors } = await open(new URL(page.url()).search);
  const { drawing: first, top } = await other.evaluate(() => window.__first);
  await other.waitForSelector('#live[data-available]', { state: 'attached' });
  await settled(other);
  const there = await drawing(other);
  assert.equal(await other.evaluate(lanesTop), top, `${what}: the lanes of ${page.url()} moved after the page was ready`);
  for (const [when, drawn] of [['as it first shows', first], ['settled', there]]) {
    for (const k of Object.keys(here)) {
      const [a, b] = edited && k.startsWith('draw-') ? [noHalo(here[k]), noHalo(drawn[k])] : [here[k], drawn[k]];
      assert.ok(a === b, `${what}: ${k} differs from ${page.url()} loaded afresh (${when}), ${firstDifference(a, b)}`);
    }
  }
  assert.deepEqual(errors, []);
  done(other);
}

// [preset query, where (end or a step), lane, actor, kind, pixel offsets the pointer visits, the last one is the drop]
const DRAGS = [
  ['?p=gap', 'end', 'fenced', 'A', 'write', [-20, -60, -120, -200, -120, -90]],
  ['?p=gap', 'end', 'naive', 'B', 'send', [30, 60, 90, -40, 10]],
  ['?p=restart&agents=3', 'end', 'fenced', 'A', 'check', [-30, -60, 40, -15]],
  ['?p=async', 'end', 'fenced', 'B', 'send', [-40, -80, -120, -60]],
  ['?p=renewal', 'start', 'fenced', 'A', 'check', [20, 50, -30, 35]],
  ['?p=lost', 'end', 'naive', 'A', 'check', [-25, 25, 60]],
];

for (const [query, where, lane, actor, kind, path] of DRAGS) {
  test(`a drag in ${query} (${lane} ${actor} ${kind}, at the ${where}) leaves the drawing its link draws`, async () => {
    const { page, errors } = await open(query);
    if (where === 'end') await page.click('#to-end');
    const h = page.locator(`#handles-${lane} .handle[data-actor="${actor}"][data-kind="${kind}"]`).first();
    await h.scrollIntoViewIfNeeded();
    const box = await h.boundingBox();
    const x0 = box.x + box.width / 2;
    const y = box.y + box.height / 2;
    const before = page.url();
    await page.mouse.move(x0, y);
    await page.mouse.down();
    let from = 0;
    for (const dx of path) {
      // In small steps, as a hand moves: every step may be a new run.
      for (let k = 1; k <= 4; k++) await page.mouse.move(x0 + from + ((dx - from) * k) / 4, y);
      from = dx;
    }
    await page.mouse.up();
    await settled(page);
    assert.notEqual(page.url(), before, 'the drag changed the scenario');
    await sameAsLink(page, `after the drag in ${query}`, true);
    // Then the keyboard, on the same handle (it keeps the focus), and a step.
    for (const key of ['ArrowRight', 'Shift+ArrowLeft', 'Alt+ArrowRight']) await page.keyboard.press(key);
    await sameAsLink(page, `after the keys in ${query}`, true);
    // A step (back from the end, on from the start): the position moves.
    await page.click(where === 'end' ? '#back' : '#step');
    await sameAsLink(page, `after a step in ${query}`, false);
    assert.deepEqual(errors, []);
    done(page);
  });
}

test('120 seeded random drawings (and some from before again), each drawn over the one before, match the same drawings made afresh', async () => {
  const { page, errors } = await open('?p=gap');
  const report = await page.evaluate(async () => {
    const { drawLane, extentOf, agentsOf } = await import('./view.js');
    const { PRESETS, PARAMS, defaultScenario, runScenarioAsync, stateAt, applies } = await import('./model.js');
    const lib = await import('/lease-fence/lease-fence.mjs');
    let seed = 22;
    const rand = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = (n) => Math.floor(rand() * n);
    const kept = { naive: document.createElement('div'), fenced: document.createElement('div') };
    const fresh = document.createElement('div');
    document.body.append(kept.naive, kept.fenced, fresh);
    const problems = [];
    let s = defaultScenario('gap');
    let run = await runScenarioAsync(lib, s);
    let drawn = 0;
    let again = 0;
    const history = [];
    for (let n = 0; n < 120; n++) {
      // Mostly small edits of one parameter (a drag), sometimes another preset.
      const r = rand();
      if (r < 0.1) s = defaultScenario(PRESETS[pick(PRESETS.length)].id);
      else if (r < 0.15) s = { ...s, agents: s.agents === 3 ? 2 : 3 };
      else {
        const defs = PARAMS.filter((d) => !d.toggle && applies(d, s));
        const d = defs[pick(defs.length)];
        s = { ...s, [d.key]: Math.min(d.max, Math.max(d.min, s[d.key] + (pick(2) ? 1 : -1) * (1 + pick(80)))) };
      }
      try {
        run = await runScenarioAsync(lib, s);
      } catch {
        continue; // a scenario the model refuses draws nothing new
      }
      // The run at one position, then often the same run again with one
      // input changed (the position, the halo, the axis or the width).
      let extent = pick(4) === 0 ? { t0: 0, t1: 1000 + pick(3000) } : extentOf(run);
      let i = pick(3) === 0 ? pick(run.positions.length) : run.positions.length - 1;
      let width = pick(5) === 0 ? 300 + pick(900) : 1000;
      let halo = pick(2) === 0;
      const start = history.length;
      for (let k = 0; k < 1 + pick(3); k++) {
        if (k > 0) {
          const what = pick(4);
          if (what === 0) i = pick(run.positions.length);
          else if (what === 1) halo = !halo;
          else if (what === 2) extent = { t0: extent.t0, t1: extent.t1 + 1 + pick(500) };
          else width = 300 + pick(900);
        }
        for (const mode of ['naive', 'fenced']) {
          const lane = run.lanes[mode];
          const st = stateAt(lane, run.positions[i]);
          const state = { shown: st.events, cursor: run.positions[i].t, revealed: halo ? st.events.slice(-1).map((e) => e.seq) : [], ghost: i === 0 };
          const opts = { extent, width, compact: false, summary: `summary ${n}`, agents: agentsOf(run) };
          history.push([mode, lane, state, opts]);
        }
      }
      // Now and then a drawing from before again (a drag going back over a
      // value: the page keeps the runs, and the lane its drawing).
      const draws = history.slice(start);
      if (history.length > 8 && pick(3) === 0) draws.unshift(history[history.length - 3 - pick(6)]);
      for (const entry of draws) {
        const [mode, lane, state, opts] = entry;
        const a = drawLane(kept[mode], lane, state, opts);
        if (entry[4] === a) again++; // the lane's kept drawing, shown again
        entry[4] = a;
        // Afresh: an empty container, and a copy of the lane (nothing kept).
        fresh.replaceChildren();
        const b = drawLane(fresh, { ...lane }, state, opts);
        drawn++;
        if (kept[mode].innerHTML !== fresh.innerHTML) problems.push(`drawing ${n} (${mode}, ${JSON.stringify(s)}, cursor ${state.cursor}): the markup differs`);
        if (JSON.stringify(a.handles.map((h) => [h.seq, h.x, h.y])) !== JSON.stringify(b.handles.map((h) => [h.seq, h.x, h.y]))) problems.push(`drawing ${n} (${mode}): the handles differ`);
      }
    }
    kept.naive.remove();
    kept.fenced.remove();
    fresh.remove();
    return { problems, drawn, again };
  });
  assert.deepEqual(report.problems, []);
  assert.ok(report.drawn >= 200, `only ${report.drawn} drawings`);
  assert.ok(report.again >= 10, `only ${report.again} drawings shown again`);
  assert.deepEqual(errors, []);
  done(page);
});

test('raw pointer moves faster than frames: one redraw at once, the newest of the rest at the next frame', async () => {
  const { page, errors } = await open('?p=gap');
  await page.click('#to-end');
  assert.equal(await page.evaluate(() => 'onpointerrawupdate' in window), true, 'Chromium on 127.0.0.1 has pointerrawupdate');
  const h = page.locator('#handles-fenced .handle[data-actor="A"][data-kind="write"]').first();
  await h.scrollIntoViewIfNeeded();
  const box = await h.boundingBox();
  const x0 = box.x + box.width / 2;
  await page.mouse.move(x0, box.y + box.height / 2);
  await page.mouse.down();
  // Five moves in one task: the first starts a redraw, which finishes in
  // the promise jobs after the task (the gap preset's run does not wait
  // for anything); the other four come while it runs, as a fast mouse's
  // raw moves come between two frames.
  const seen = await page.evaluate(async (x0) => {
    window.__benchDrag = [];
    const el = document.querySelector('#handles-fenced .handle.dragging');
    const field = document.getElementById('param-model');
    for (const dx of [-10, -20, -30, -40, -50]) el.dispatchEvent(new PointerEvent('pointerrawupdate', { bubbles: true, clientX: x0 + dx, pointerId: 1 }));
    for (let i = 0; i < 100; i++) await null;
    const first = { value: field.value, redraws: window.__benchDrag.length };
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    return { first, after: field.value, redraws: window.__benchDrag.length };
  }, x0);
  await page.mouse.up();
  await settled(page);
  const final = new URL(page.url()).searchParams.get('model');
  // The first move is drawn at once and the field follows; the next four
  // wait, and only the newest is drawn, at the next frame.
  assert.deepEqual(seen.first.redraws, 1, 'one redraw before the next frame');
  assert.notEqual(seen.first.value, '450', 'the first move was drawn at once');
  assert.equal(seen.redraws, 2, `${seen.redraws} redraws for 5 moves in one frame`);
  assert.equal(seen.after, final, 'the newest move is the one drawn');
  assert.ok(Number(final) < Number(seen.first.value), `the last move (model ${final}) is left of the first (${seen.first.value})`);
  await sameAsLink(page, 'after the burst', true);
  assert.deepEqual(errors, []);
  done(page);
});

test('without pointerrawupdate (other browsers), a drag follows pointermove and draws the same', async () => {
  const o = await openPage(web.browser.context, { width: 1280, height: 900 });
  // A browser without it: no handler property to find, and no such events.
  await o.page.addInitScript(() => {
    delete Window.prototype.onpointerrawupdate;
    delete window.onpointerrawupdate;
    window.addEventListener('pointerrawupdate', (e) => e.stopImmediatePropagation(), true);
  });
  await load(o.page, `${web.server.url}?p=gap`);
  const { page, errors } = o;
  assert.equal(await page.evaluate(() => 'onpointerrawupdate' in window), false);
  await page.click('#to-end');
  const h = page.locator('#handles-fenced .handle[data-actor="A"][data-kind="write"]').first();
  await h.scrollIntoViewIfNeeded();
  const box = await h.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.down();
  for (let k = 1; k <= 6; k++) await page.mouse.move(box.x + box.width / 2 - k * 15, box.y + box.height / 2);
  await page.mouse.up();
  await settled(page);
  assert.notEqual(new URL(page.url()).searchParams.get('model'), '450', 'the drag moved A\'s write');
  await sameAsLink(page, 'after a drag with pointermove', true);
  assert.deepEqual(errors, []);
  await page.close();
});
