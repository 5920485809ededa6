// The work of one redraw while an event is dragged, in headless Chromium,
// apart from the page's controller: for 40 scenarios a step apart (the
// dragged parameter 5 ms further each time), the model's run, both lanes
// drawn over the drawing of the step before (view.js drawLane, each lane a
// new run: nothing kept), and the layout that follows. Each round times
// every part over the 40 steps; the figure is the best round's mean (a
// shared machine only ever adds time), with the median round beside it.
//
//   node scripts/bench-redraw.mjs [rounds]                   (make bench-web)
//   WEB_BEFORE=dir node scripts/bench-redraw.mjs [rounds]
//
// With WEB_BEFORE (another copy of web/, e.g. `git archive main web`), the
// rounds alternate between that page and this one, each from its own server
// with the same module. The figures are printed, not asserted.

import { startServer, launch } from '../test/web/harness.mjs';
import { load, pageSides, stats } from './bench-kit.mjs';

const rounds = Math.max(1, Number(process.argv[2] ?? 15) | 0);

// [preset, the parameter stepped, more of the scenario]
const CASES = [
  ['gap', 'model', {}],
  ['restart', 'model', { agents: 3 }],
  ['async', 'bStart', {}],
];

// In the page: one round over every case; { case: { model, draw, layout } } in ms per step.
async function round(page) {
  return page.evaluate(async (cases) => {
    const { drawLane, extentOf, agentsOf } = await import('./view.js');
    const { defaultScenario, runScenarioAsync, stateAt } = await import('./model.js');
    const lib = await import('/lease-fence/lease-fence.mjs');
    const out = {};
    for (const [id, key, extra] of cases) {
      const base = { ...defaultScenario(id), ...extra };
      const scenarios = [];
      for (let i = 0; i < 40; i++) scenarios.push({ ...base, [key]: Math.max(0, base[key] - 100) + i * 5 });
      let t0 = performance.now();
      const runs = [];
      for (const s of scenarios) runs.push(await runScenarioAsync(lib, s));
      const model = (performance.now() - t0) / runs.length;
      const extent = extentOf(runs[20]);
      const box = { naive: document.createElement('div'), fenced: document.createElement('div') };
      document.body.append(box.naive, box.fenced);
      let draw = 0;
      let layout = 0;
      for (const run of runs) {
        const a = performance.now();
        for (const mode of ['naive', 'fenced']) {
          const lane = { ...run.lanes[mode] };
          const pos = run.positions[run.positions.length - 1];
          const st = stateAt(lane, pos);
          drawLane(box[mode], lane, { shown: st.events, cursor: pos.t, revealed: [], ghost: false }, { extent, width: 1100, compact: false, summary: '', agents: agentsOf(run), keepScroll: true });
        }
        const b = performance.now();
        void document.body.offsetHeight;
        layout += performance.now() - b;
        draw += b - a;
      }
      box.naive.remove();
      box.fenced.remove();
      out[id] = { model, draw: draw / runs.length, layout: layout / runs.length };
    }
    return out;
  }, CASES);
}

const sides = await pageSides(startServer, () => ({ rounds: [] }));
const browser = await launch();
const startLoad = load();
try {
  for (const side of sides) {
    side.page = await browser.context.newPage();
    await side.page.goto(side.server.url + '?p=gap');
    await side.page.waitForSelector('body.ready');
    await round(side.page); // warm up
  }
  for (let r = 0; r < rounds; r++) for (const side of sides) side.rounds.push(await round(side.page));
} finally {
  await browser.close();
  for (const side of sides) await side.server.close();
}
const f = (v) => v.toFixed(2);
for (const side of sides) {
  for (const [id] of CASES) {
    const fig = (xs, s = stats(xs)) => `${f(s.min)} (median ${f(s.median)})`;
    const parts = ['model', 'draw', 'layout'].map((k) => `${k} ${fig(side.rounds.map((r) => r[id][k]))}`);
    const totals = fig(side.rounds.map((r) => r[id].model + r[id].draw + r[id].layout));
    console.log(`bench-redraw ${side.name} ${id}: ms per step, best of ${rounds} rounds: ${parts.join(', ')}; all three ${totals}`);
  }
}
console.log(`bench-redraw: load average ${startLoad} at the start, ${load()} at the end`);
