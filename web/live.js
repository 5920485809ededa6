// Live mode: the scenario's agents run against a real coordinator, with
// real timers, through the service client (lease-fence/service-client) and
// a real FenceGate, and the page draws what actually happened.
//
// The agents follow the same script as the model (model.js `script`). Each
// step waits for its time on the page's clock, scaled by k (one millisecond
// of the scenario lasts k real ones, so a run takes a few seconds). Each
// agent's fetch is wrapped to hold its requests and its replies for the
// scenario's latencies (and to lose a reply where the scenario loses one),
// and to note what it sends and what comes back: those notes, what the
// clients' leases say and what the gate does are the events, in the model's
// own form, so the same view draws them and the same words tell them.
//
// What live mode cannot see it estimates and says so: the coordinator's
// moment of processing is drawn at the middle of each round trip, and the
// end of its copy of a lease at that moment plus the TTL it answered with.
//
// The coordinators: cmd/coordinator -memory, one per lane, started by the dev
// server for each run (POST /live/native/start) with the scenario's TTL times
// k; a restart kills one and starts it again. Or the Worker under wrangler
// dev, behind the dev server (/live/worker/), whose lease length is fixed:
// k is then its TTL over the scenario's; each run uses resources of its own,
// and, as a Durable Object keeps its fence in storage across any restart, a
// restart that forgets is stood in for by a fresh object (a new resource
// name; the gate is told the tokens are for its resource).

import { positionsOf, fmt, presetById } from './model.js';
import { compareRuns } from './compare.js';
import { LiveLane, Meter } from './live-lane.js';
import { h } from './svg.js';

const $ = (id) => document.getElementById(id);
const MODES = ['naive', 'fenced'];
/** A run with the native coordinator lasts about this long (real milliseconds). */
const TARGET_MS = 6000;
/**
 * How many times slower than TARGET_MS a native run goes: 1, or what a
 * test on a loaded machine sets in globalThis.__liveSlowdown (1 to 4), so
 * that the scenario's gaps outgrow the delays it measured (Meter). The
 * Worker's scale is its TTL's.
 */
const slowdown = () => {
  const f = Number(globalThis.__liveSlowdown);
  return f >= 1 && f <= 4 ? f : 1;
};
/** How often the lanes are redrawn while a live run goes on (real milliseconds). */
const DRAW_EVERY = 250;

const state = {
  on: false, // the toggle
  shown: false, // a live run (finished or running) is what the lanes show
  running: false,
  run: null,
  caption: null,
  status: null, // from /live/status
  current: null, // the run in progress: { abort, ... }
  opts: null,
  timer: 0,
};

let svcModule = null;

/** What the page's server offers live mode (/live/status); never rejects. */
export async function readStatus() {
  try {
    const res = await fetch('/live/status', { cache: 'no-store' });
    if (!res.ok) throw new Error(`the server answered ${res.status}`);
    return await res.json();
  } catch (err) {
    return { error: `the page's server has no live mode (${err?.message ?? err})` };
  }
}

/**
 * Sets live mode up: opts { onChange(state), scenario(), lib, modelRun() };
 * status is readStatus()'s first answer, read while the page loads, so
 * that the box has its text (and the lanes below it their place) before
 * the page first draws.
 */
export function init(opts, status) {
  state.opts = opts;
  $('live-on').addEventListener('change', (ev) => (ev.target.checked ? turnOn() : turnOff()));
  $('live-again').addEventListener('click', () => rerun(0));
  $('live-backend').addEventListener('change', () => state.on && rerun(0));
  $('live').hidden = false;
  show(status);
}

function show(status) {
  state.status = status;
  const pending = ['checking', 'starting'].some((s) => status.native?.state === s || status.worker?.state === s);
  showAvailability();
  if (pending) setTimeout(poll, 1000);
}

async function poll() {
  show(await readStatus());
}

const BACKENDS = { native: 'cmd/coordinator -memory', worker: 'the Worker (wrangler dev)' };

function showAvailability() {
  const st = state.status;
  const select = $('live-backend');
  const ready = [];
  const why = [];
  for (const [key, b] of Object.entries(BACKENDS)) {
    const s = st[key];
    const option = select.querySelector(`option[value="${key}"]`);
    const ok = s?.state === 'ready';
    const starting = s?.state === 'checking' || s?.state === 'starting';
    option.disabled = !ok;
    option.textContent = ok ? b : `${b}: ${starting ? 'starting…' : 'unavailable'}`;
    if (ok) ready.push(key);
    else if (starting) why.push(`${b} is starting`);
    else if (s && s.state !== 'off') why.push(`${b} is unavailable: ${s.reason || s.state}`);
  }
  if (!ready.includes(select.value) && ready.length) select.value = ready[0];
  $('live-on').disabled = ready.length === 0;
  $('live').dataset.available = ready.join(' ');
  if (!ready.length) {
    const off = Object.entries(BACKENDS).filter(([key]) => st[key]?.state === 'off').map(([key, b]) => `${b}: ${st[key].reason}`);
    const reason = st.error ?? [...why, ...off].join('; ');
    $('live-status').textContent = `Live mode is unavailable: ${reason}. Everything else works as before; make playground starts a coordinator for it.`;
  } else if (!state.on) {
    $('live-status').textContent = `Ready: ${ready.map((k) => BACKENDS[k]).join(' and ')}.${why.length ? ` ${why.join('; ')}.` : ''}`;
  }
}

function turnOn() {
  state.on = true;
  $('live-again').hidden = false;
  rerun(0);
}

function turnOff() {
  state.on = false;
  abortCurrent();
  state.shown = false;
  state.running = false;
  state.run = null;
  state.caption = null;
  $('live-again').hidden = true;
  $('live-compare').hidden = true;
  $('live-status').textContent = 'Live mode is off: the lanes show the model again.';
  document.body.classList.remove('live-running');
  document.body.dataset.live = '';
  state.opts.onChange({ ...state, left: false });
}

function abortCurrent() {
  clearTimeout(state.timer);
  if (state.current) {
    state.current.abort.abort(new Error('superseded'));
    state.current = null;
  }
}

/** Runs the current scenario live again (after delay ms; edits wait a moment). */
export function rerun(delay = 300) {
  if (!state.on) return;
  abortCurrent();
  state.timer = setTimeout(() => start().catch((err) => fail(err)), delay);
}

function fail(err) {
  if (err?.message === 'superseded') return;
  state.running = false;
  document.body.classList.remove('live-running');
  document.body.dataset.live = 'failed';
  $('live-status').textContent = `The live run failed: ${String(err?.message ?? err).slice(0, 300)}`;
  state.opts.onChange({ ...state });
}

async function start() {
  const scenario = state.opts.scenario();
  const model = state.opts.modelRun();
  const backend = $('live-backend').value;
  const lib = state.opts.lib;
  if (!svcModule) svcModule = await import('lease-fence/service-client');
  // The scale: the native coordinator takes any TTL, the Worker has its own.
  let k;
  if (backend === 'worker') {
    k = state.status.worker.ttlMillis / scenario.ttl;
    if (!(k >= 0.5 && k <= 20)) {
      throw new Error(`the Worker's leases last ${state.status.worker.ttlMillis} ms, which would make this scenario's ${scenario.ttl} ms one ${fmt(k)} times as long; use cmd/coordinator, or a TTL from ${Math.ceil(state.status.worker.ttlMillis / 20)} to ${state.status.worker.ttlMillis * 2} ms`);
    }
  } else {
    k = Math.min(6, Math.max(2.5, Math.round((TARGET_MS / Math.max(1, model.end)) * 4) / 4)) * slowdown();
  }
  const abort = new AbortController();
  const me = { abort, backend, k };
  state.current = me;
  state.on = true;
  state.shown = true;
  state.running = true;
  state.caption = null;
  document.body.classList.add('live-running');
  document.body.dataset.live = 'running';
  delete document.body.dataset.liveDelay;
  delete document.body.dataset.liveScale;
  $('live-compare').hidden = true;
  const where = BACKENDS[backend];
  $('live-status').textContent = `Starting ${where}…`;

  const runId = Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, '0')).join('');
  const lanes = {};
  const meter = new Meter();
  for (const mode of MODES) lanes[mode] = new LiveLane({ lib, svc: svcModule, scenario, mode, k, signal: abort.signal, runId, backend, meter });
  try {
    await Promise.all(MODES.map((m) => lanes[m].connect()));
    // Open the connections (page to server, server to coordinator) before
    // the clock starts, so the first request is not the slow one.
    await Promise.all(MODES.map((m) => lanes[m].warm()));
  } catch (err) {
    for (const m of MODES) lanes[m].close();
    throw err;
  }
  const t0 = performance.now() + 100;
  meter.max = 0; // from the clock's start: the connections opened before it
  const end = model.end;
  $('live-status').textContent = `Running against ${where}: 1 ms of the scenario lasts ${fmt(k)} ms here (about ${fmt(Math.round((end * k) / 100) / 10)} s).`;
  // Drawing takes the page's one thread, which the agents' timers and
  // replies share: the lanes are redrawn a few times a second, not on
  // every event.
  const draw = () => {
    if (state.current !== me || performance.now() < t0) return;
    state.run = snapshot(scenario, lanes, (performance.now() - t0) / k);
    state.opts.onChange({ ...state });
  };
  const ticking = setInterval(draw, DRAW_EVERY);
  try {
    await Promise.all(MODES.map((m) => lanes[m].run(t0)));
  } finally {
    clearInterval(ticking);
    for (const m of MODES) lanes[m].close();
  }
  if (state.current !== me) return;
  state.current = null;
  const run = snapshot(scenario, lanes, null);
  const cmp = compareRuns(model, run);
  state.run = run;
  state.running = false;
  state.caption = captionOf(cmp, scenario, k, backend);
  document.body.classList.remove('live-running');
  document.body.dataset.liveDelay = String(Math.round(meter.max));
  document.body.dataset.liveScale = String(k);
  document.body.dataset.live = cmp.same ? 'same' : 'differs';
  showComparison(cmp, scenario, k, backend, lanes, meter);
  $('live-status').textContent = `Live run done against ${where} in ${fmt(Math.round((performance.now() - t0) / 100) / 10)} s. ${cmp.summary}`;
  state.opts.onChange({ ...state });
}

// The run so far as the model's shape; `now` (scenario ms) while running.
function snapshot(scenario, lanes, now) {
  const out = {};
  for (const mode of MODES) out[mode] = lanes[mode].lane(now);
  const { positions, end } = positionsOf([out.naive, out.fenced]);
  if (now !== null && now > end) positions.push({ t: Math.round(now), j: 1e9 });
  return { scenario: { ...scenario }, lanes: out, positions, end: positions.at(-1).t, live: true };
}

function captionOf(cmp, scenario, k, backend) {
  const v = cmp.same ? 'It reached the same verdicts as the model.' : cmp.summary;
  const biggest = cmp.diffs.filter((d) => d.delta !== Infinity)[0];
  const extra = cmp.diffs.filter((d) => d.delta === Infinity);
  const timing = extra.length ? ` Real timing changed what happened: ${extra.slice(0, 2).map((d) => d.text).join('; ')}.` : biggest ? ` The furthest from the model: ${biggest.text}.` : ' Every event came within 2 ms of the model.';
  return `Live run against ${BACKENDS[backend]} (1 ms here is ${fmt(k)} ms of real time). ${v}${timing} Step back to replay what happened.`;
}

function showComparison(cmp, scenario, k, backend, lanes, meter) {
  const box = $('live-compare');
  box.hidden = false;
  const li = (text) => h('li', { textContent: text });
  $('live-verdicts').replaceChildren(...MODES.map((mode) => {
    const l = cmp.lanes[mode];
    const item = li(l.same ? `${l.live} (the model says the same)` : `Live: ${l.live} Model: ${l.model}`);
    item.dataset.same = String(l.same);
    return item;
  }));
  const items = [...cmp.orders];
  for (const d of cmp.diffs.slice(0, 10)) items.push(d.text);
  if (cmp.diffs.length > 10) items.push(`… and ${cmp.diffs.length - 10} more.`);
  items.push(`${cmp.onTime} event${cmp.onTime === 1 ? '' : 's'} within 2 ms of the model.`);
  items.push(`The longest delay in this run: ${fmt(Math.round(meter.max))} ms of real time (${fmt(Math.round(meter.max / k))} ms of the scenario), a timer that woke late, a reply or a restart.`);
  const notes = [];
  if (scenario.step > 0) notes.push(`real clocks do not step on reads: the model's stepPerRead (${scenario.step} ms) has no part here`);
  if (scenario.preset === 'push') notes.push("the push is made by the page the moment the coordinator's grant comes back (the coordinator has no push channel)");
  if (backend === 'worker' && presetById(scenario.preset) && scenario.preset.startsWith('restart')) notes.push("the Worker keeps its fences in durable storage: a restart is stood in for by a fresh Durable Object (a new resource name), given its startFence by acquiring and releasing the resource that many times");
  if (backend === 'native' && scenario.preset.startsWith('restart') && scenario.startFence > 0) notes.push(`cmd/coordinator -memory has no startFence: after the restart the page acquires and releases the resource ${scenario.startFence} times, so the next fence is ${scenario.startFence + 1}`);
  notes.push("the coordinator's moment of processing is drawn at the middle of each round trip, and the end of its copy of a lease that moment plus the TTL it answered with");
  for (const e of MODES.flatMap((m) => lanes[m].errors)) items.push(`Error: ${e}`);
  $('live-diffs').replaceChildren(...items.map(li));
  $('live-notes').textContent = `Note: ${notes.join('; ')}.`;
}
