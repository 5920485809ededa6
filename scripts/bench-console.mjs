// The console under load, in headless Chromium against a real coordinator
// (cmd/coordinator -memory -ui): 1,000 leases, renewed at 500 events/s
// spread over all of them, the page following the stream. Figures:
//
// - event to frame: for every event, the time from its arrival in the page
//   (the chunk of the stream read) to the end of the frame that applied and
//   drew it (requestAnimationFrame), per minute and over the run:
//   min / median / p95 / max (goal: p95 under 16 ms on a quiet machine);
// - the frame's own work (render, in the page), p95;
// - the page's JS heap after a forced garbage collection (CDP), at the end
//   of minute 1 and of the last minute (goal: within 10%);
// - then, in a fresh page, the heap with 10,000 resources whose history
//   rings are full (RING events each, through the page's own model), and
//   the DOM nodes (goal: under 100 MB).
//
//   node scripts/bench-console.mjs [--minutes N] [--rate 500] [--resources 1000] [--profile SECONDS]   (make bench-console; MINUTES=N)
//
// The figures are printed, not asserted.

import { launch } from '../test/chromium.mjs';
import { startCoordinator, acquire, api, request } from '../test/console/harness.mjs';
import { load, stats } from './bench-kit.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const MINUTES = arg('minutes', 10);
const RATE = arg('rate', 500);
const N = arg('resources', 1000);
const BIG = 10_000;
const PROFILE = arg('profile', 0);

const f1 = (x) => x.toFixed(1);
const figs = (xs, s = stats(xs)) => `min ${f1(s.min)} median ${f1(s.median)} p95 ${f1(s.p95)} max ${f1(s.max)}`;
const mb = (b) => (b / 2 ** 20).toFixed(1);

console.log(`bench-console: ${N} resources, ${RATE} events/s, ${MINUTES} min; load average ${load()}`);
const c = await startCoordinator(['-memory', '-ui', '-ttl', '60s']);
const browser = await launch({ viewport: { width: 1400, height: 900 } });
try {
  const holds = [];
  for (let i = 0; i < N; i += 50) {
    holds.push(...(await Promise.all(Array.from({ length: Math.min(50, N - i) }, (_, k) => {
      const r = `bench/${String(i + k).padStart(5, '0')}`;
      return acquire(c.url, r, `h-${i + k}`).then((g) => ({ r, h: `h-${i + k}`, g }));
    }))));
  }
  const page = await browser.context.newPage();
  await page.goto(`${c.url}/ui/`);
  await page.waitForSelector('#status[data-state="live"]', { timeout: 60_000 });
  await page.waitForFunction((n) => document.getElementById('count').textContent.startsWith(`${n} of`), N, { timeout: 60_000 });
  const cdp = await page.context().newCDPSession(page);
  const heap = async () => {
    await cdp.send('HeapProfiler.collectGarbage');
    return (await cdp.send('Runtime.getHeapUsage')).usedSize;
  };

  // The load: RATE renewals a second, round robin over the leases, paced by
  // the time elapsed (a late tick sends what it owes, a debt beyond a
  // second is dropped and counted), as /v1/renewals batches (one call a
  // tick, at most 8 calls in flight): one HTTP call per renewal kept the
  // generator itself under the rate on a loaded machine.
  let sent = 0;
  let failed = 0;
  let dropped = 0;
  let inflight = 0;
  let next = 0;
  const loadStart = performance.now();
  const timer = setInterval(() => {
    let owed = Math.floor(((performance.now() - loadStart) * RATE) / 1000) - sent - dropped;
    if (owed > RATE) {
      dropped += owed - RATE;
      owed = RATE;
    }
    if (owed <= 0 || inflight >= 8) return;
    const n = Math.min(owed, 256);
    const batch = [];
    for (let k = 0; k < n; k++) {
      const l = holds[next++ % holds.length];
      batch.push(request('renew', l.r, l.h, { fence: l.g.grant.fence, secret: l.g.secret }));
    }
    sent += n;
    inflight++;
    api(c.url, '/v1/renewals', { renewals: batch })
      .then((a) => {
        if (a.status !== 200) failed += n;
        else for (const r of a.body.results) if (r.ok !== true) failed++;
      }, () => { failed += n; })
      .finally(() => { inflight--; });
  }, 10);

  // --profile: a CPU profile of the page over PROFILE_S seconds of minute
  // 1, its functions by self time.
  if (PROFILE) {
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
    await new Promise((resolve) => setTimeout(resolve, 5000));
    await cdp.send('Profiler.start');
    await new Promise((resolve) => setTimeout(resolve, PROFILE * 1000));
    const { profile } = await cdp.send('Profiler.stop');
    const self = new Map();
    const dt = profile.timeDeltas;
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const ms = new Map();
    profile.samples.forEach((id, i) => ms.set(id, (ms.get(id) ?? 0) + (dt[i] ?? 0) / 1000));
    for (const [id, t] of ms) {
      const f = byId.get(id).callFrame;
      const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop()}:${f.lineNumber + 1}`;
      self.set(key, (self.get(key) ?? 0) + t);
    }
    const total = [...self.values()].reduce((a, b) => a + b, 0);
    console.log(`profile over ${PROFILE} s (${f1(total)} ms sampled), by self time:`);
    for (const [k, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${f1(t).padStart(8)} ms  ${k}`);
  }

  const all = [];
  const minutes = [];
  const t0 = Date.now();
  let events0 = await page.evaluate(() => window.__console.stats.events);
  for (let m = 1; m <= MINUTES; m++) {
    await new Promise((resolve) => setTimeout(resolve, t0 + m * 60_000 - Date.now()));
    const got = await page.evaluate(() => {
      const s = window.__console.stats;
      return { lat: s.latencies.splice(0), work: s.work.splice(0), events: s.events };
    });
    const h = await heap();
    const lat = got.lat;
    for (const x of lat) all.push(x);
    const row = { m, events: (got.events - events0) / 60, heap: h };
    events0 = got.events;
    minutes.push(row);
    console.log(`minute ${m}: ${f1(row.events)} events/s drawn; event to frame ms ${figs(lat)}; frame work p95 ${f1(stats(got.work).p95)} ms; heap after GC ${mb(h)} MB; load ${load()}`);
  }
  clearInterval(timer);
  const first = minutes[0].heap;
  const last = minutes[minutes.length - 1].heap;
  console.log(`over the run: ${all.length} events; event to frame ms ${figs(all)}`);
  console.log(`heap after GC: minute 1 ${mb(first)} MB, minute ${MINUTES} ${mb(last)} MB, ratio ${(last / first).toFixed(3)}` +
    (minutes.length > 2 ? `; minutes 2-${MINUTES}: ${mb(stats(minutes.slice(1).map((r) => r.heap)).min)}-${mb(stats(minutes.slice(1).map((r) => r.heap)).max)} MB` : '') +
    `; renewals sent ${sent}, refused or failed ${failed}, not sent (the generator more than 1 s behind) ${dropped}`);
  await page.close();

  // 10,000 resources with full rings, through the page's own model (no
  // coordinator events needed: the memory is the model's and the rows').
  const big = await browser.context.newPage();
  await big.goto(`${c.url}/ui/`);
  await big.waitForSelector('#status[data-state="live"]', { timeout: 60_000 });
  const cdp2 = await big.context().newCDPSession(big);
  await cdp2.send('HeapProfiler.collectGarbage');
  const before = (await cdp2.send('Runtime.getHeapUsage')).usedSize;
  const n = await big.evaluate(async (count) => {
    const { RING } = await import('./console-state.js');
    const p = window.__console.picture;
    const at = Date.now();
    let seq = 1e9;
    for (let i = 0; i < count; i++) {
      const resource = `big/${String(i).padStart(5, '0')}/${'x'.repeat(40)}`;
      const holderId = `holder-${i}-${'y'.repeat(24)}`;
      p.apply({ seq: ++seq, type: 'granted', resource, holderId, fence: i + 1, remainingMillis: 60000, waiters: 0, at });
      for (let k = 1; k < RING; k++) p.apply({ seq: ++seq, type: 'renewed', resource, holderId, fence: i + 1, remainingMillis: 60000, at: at + k });
    }
    document.getElementById('filter').dispatchEvent(new Event('input'));
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    return p.resources.size;
  }, BIG);
  await cdp2.send('HeapProfiler.collectGarbage');
  const after = (await cdp2.send('Runtime.getHeapUsage')).usedSize;
  const nodes = await big.evaluate(() => document.getElementsByTagName('*').length);
  console.log(`${n} resources, full rings: heap after GC ${mb(after)} MB (${mb(before)} MB before them); ${nodes} DOM elements`);
} finally {
  await browser.close();
  await c.stop();
}
