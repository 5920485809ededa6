// Load time of the playground in headless Chromium on localhost: from the
// start of navigation to the moment the page has run its first scenario and
// drawn it (the "playground-ready" mark app.js sets), and the bytes that
// crossed the wire. Cold loads use a fresh browser profile each time; warm
// loads reload in the same profile (the server answers 304 to revalidations).
//
//   node scripts/bench-web.mjs [runs]       (make bench-web)
//   WEB_BEFORE=dir node scripts/bench-web.mjs [runs]
//
// With WEB_BEFORE (another copy of web/, e.g. `git archive main web`), the
// two pages are loaded alternately, each from its own server with the same
// module, and both are reported: a comparison within one run.
//
// Goal: interactive in under 1 s here. The figures are printed, not asserted.

import { startServer, launch } from '../test/web/harness.mjs';
import { pageSides, stats } from './bench-kit.mjs';

const runs = Math.max(1, Number(process.argv[2] ?? 7) | 0);

const measure = (page) =>
  page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    const ready = performance.getEntriesByName('playground-ready')[0];
    const wasm = res.find((e) => e.name.endsWith('.wasm'));
    return {
      ready: ready.startTime,
      domContentLoaded: nav.domContentLoadedEventEnd,
      load: nav.loadEventEnd,
      transferred: nav.transferSize + res.reduce((n, e) => n + e.transferSize, 0),
      decoded: nav.decodedBodySize + res.reduce((n, e) => n + e.decodedBodySize, 0),
      wasmTransferred: wasm?.transferSize ?? 0,
      wasmDecoded: wasm?.decodedBodySize ?? 0,
      wasmFetchEnd: wasm?.responseEnd ?? 0,
      requests: res.length + 1,
    };
  });

const sides = await pageSides(startServer, () => ({ cold: [], warm: [] }));
try {
  for (let i = 0; i < runs; i++) {
    for (const side of sides) {
      const browser = await launch();
      try {
        const page = await browser.context.newPage();
        await page.goto(side.server.url + '?p=gap');
        await page.waitForSelector('body.ready');
        side.cold.push(await measure(page));
        await page.reload();
        await page.waitForSelector('body.ready');
        side.warm.push(await measure(page));
      } finally {
        await browser.close();
      }
    }
  }
} finally {
  for (const side of sides) await side.server.close();
}

const ms = (v) => `${v.toFixed(0)} ms`;
const kb = (v) => `${(v / 1024).toFixed(1)} KiB`;
for (const side of sides) {
  for (const [name, rows] of [['cold', side.cold], ['warm', side.warm]]) {
    const r = stats(rows.map((x) => x.ready));
    const d = stats(rows.map((x) => x.domContentLoaded));
    const w = stats(rows.map((x) => x.wasmFetchEnd));
    const t = rows[0];
    console.log(
      `bench-web ${side.name}, ${name} (${rows.length} loads): interactive median ${ms(r.median)} (min ${ms(r.min)}, max ${ms(r.max)}); ` +
        `DOMContentLoaded median ${ms(d.median)}; wasm fetched by ${ms(w.median)}; ` +
        `${t.requests} requests, ${kb(t.transferred)} transferred (${kb(t.decoded)} decoded; wasm ${kb(t.wasmTransferred)} of ${kb(t.wasmDecoded)})`,
    );
  }
}
const cold = sides.at(-1).cold;
const goal = stats(cold.map((x) => x.ready)).median;
console.log(`bench-web goal: cold interactive < 1000 ms: ${goal < 1000 ? 'met' : 'NOT met'} (${ms(goal)})`);
