// Time from a drag to the redrawn lanes, in headless Chromium: the mouse
// drags an event along its row (A's write, then B's start) back and forth;
// for each pointer move that changes the scenario, the page records the time
// from the event's timeStamp to both lanes redrawn and laid out (the model
// re-run, both timelines redrawn and their labels placed, the handles moved;
// app.js measures it when window.__benchDrag is an array). Paint is not
// included. The time from the event includes its wait for its redraw to
// start ("queued": the page takes Chromium's pointerrawupdate, which comes
// as the input does, where pointermove would wait for the next frame, and
// redraws at most once a frame, so a move may wait for the one before it
// or for the next frame); the time from the handler is the page's own
// work. Going back over a value takes the page's kept run of it (a run is
// a pure function of its scenario) and the lanes' kept drawings: the
// figures for new values alone are printed too.
//
//   node scripts/bench-drag.mjs [moves] [rounds]             (make bench-web)
//   WEB_BEFORE=dir node scripts/bench-drag.mjs [moves] [rounds]
//
// With WEB_BEFORE (another copy of web/, e.g. `git archive main web`), each
// round drags on that page and then on this one, each from its own server
// with the same module (3 rounds unless told): a comparison within one run,
// the two sides interleaved, each round with the load average at its start.
//
// Goal: p95 under 16 ms (one frame at 60 Hz). The figures are printed, not
// asserted.

import { startServer, launch } from '../test/web/harness.mjs';
import { load, pageSides, stats } from './bench-kit.mjs';

const moves = Math.max(10, Number(process.argv[2] ?? 120) | 0);
const rounds = Math.max(1, Number(process.argv[3] ?? (process.env.WEB_BEFORE ? 3 : 1)) | 0);

const f = (v) => v.toFixed(1);
// "n redraws, total min/median/p95/max; parts: queued, script, layout (median/p95)".
function line(rows) {
  const t = stats(rows.map((x) => x.total));
  const h = stats(rows.map((x) => x.script + x.layout));
  const part = (k) => {
    const p = stats(rows.map((x) => x[k]));
    return `${k} ${f(p.median)}/${f(p.p95)}`;
  };
  const fresh = rows.filter((x) => !x.cached);
  const n = stats(fresh.map((x) => x.total));
  const nh = stats(fresh.map((x) => x.script + x.layout));
  return (
    `${t.n} redraws; from the event: min ${f(t.min)}, median ${f(t.median)}, p95 ${f(t.p95)}, max ${f(t.max)} ms; ` +
    `from its handler (script + layout): min ${f(h.min)}, median ${f(h.median)}, p95 ${f(h.p95)}, max ${f(h.max)} ms; ` +
    `median/p95 of the parts: ${part('queued')}, ${part('script')}, ${part('layout')} ms; ` +
    `the ${n.n} with a new run of the model: from the event ${f(n.median)}/${f(n.p95)}, from the handler ${f(nh.median)}/${f(nh.p95)} ms`
  );
}

// [preset query, lane, actor, kind of the event dragged]
const CASES = [
  ['?p=gap', 'fenced', 'A', 'write'],
  ['?p=gap', 'naive', 'B', 'send'],
  ['?p=restart&agents=3', 'fenced', 'A', 'check'],
  ['?p=async', 'fenced', 'B', 'send'],
];

// Drags every case on the page server serves; resolves with every redraw's figures.
async function dragAll(browser, server, name) {
  const all = [];
  for (const [query, lane, actor, kind] of CASES) {
    const page = await browser.context.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(server.url + query);
    await page.waitForSelector('body.ready');
    await page.click('#to-end');
    await page.evaluate(() => (window.__benchDrag = []));
    const h = page.locator(`#handles-${lane} .handle[data-actor="${actor}"][data-kind="${kind}"]`).first();
    await h.scrollIntoViewIfNeeded();
    const box = await h.boundingBox();
    const x0 = box.x + box.width / 2;
    const y = box.y + box.height / 2;
    await page.mouse.move(x0, y);
    await page.mouse.down();
    // Back and forth over 120 px, 3 px a move: each move is a new value.
    for (let i = 1; i <= moves; i++) {
      const phase = i % 80;
      const dx = phase <= 40 ? -phase * 3 : -(80 - phase) * 3;
      await page.mouse.move(x0 + dx, y);
    }
    await page.mouse.up();
    await page.waitForFunction(() => !document.body.classList.contains('busy'));
    const t = await page.evaluate(() => window.__benchDrag);
    all.push(...t);
    console.log(`bench-drag ${name} ${query} ${lane} ${actor} ${kind}: ${line(t)}`);
    await page.close();
  }
  return all;
}

const sides = await pageSides(startServer, () => ({ rows: [] }));
const browser = await launch();
try {
  for (let r = 1; r <= rounds; r++) {
    for (const side of sides) {
      const at = load();
      const rows = await dragAll(browser, side.server, side.name);
      side.rows.push(...rows);
      console.log(`bench-drag ${side.name}, round ${r} of ${rounds}: ${line(rows)} (load average at the start ${at})`);
    }
  }
} finally {
  await browser.close();
  for (const side of sides) await side.server.close();
}
for (const side of sides) {
  const s = stats(side.rows.map((x) => x.total));
  const h = stats(side.rows.map((x) => x.script + x.layout));
  console.log(`bench-drag ${side.name}, all ${rounds} round(s): ${line(side.rows)} (load average at the end ${load()})`);
  console.log(`bench-drag ${side.name}, goal: p95 < 16 ms: from the event ${s.p95 < 16 ? 'met' : 'NOT met'} (${f(s.p95)} ms); from the handler ${h.p95 < 16 ? 'met' : 'NOT met'} (${f(h.p95)} ms)`);
}
