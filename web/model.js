// The playground's model: a scenario (a preset plus numbers) goes in, two
// lists of timestamped events come out, one per lane, computed by driving the
// lease-fence module exactly as a JavaScript caller would. Nothing here
// touches the DOM, reads a wall clock or draws a random number: the same
// scenario gives the same events every time, which is what lets a link,
// a step button and a scrubber all show the same run.
//
// The library is passed in (runScenario(lib, spec)) rather than imported, so
// the same code runs in the page and under `node --test`.

export const RESOURCE = 'report.md';

/** The agents' holder ids, by the key the page shows ("A", "B", "C"). */
export const HOLDERS = { A: 'agent-a', B: 'agent-b', C: 'agent-c' };
const HOLDER_KEY = { 'agent-a': 'A', 'agent-b': 'B', 'agent-c': 'C' };
/** The coordinator's actor key in events (the agents are A, B and C). */
export const COORDINATOR = 'K';

const RESTARTS = new Set(['restart', 'restart-kept']);
const hasC = (s) => s.agents === 3;
/** The agents of scenario s, by key. */
export const agentKeys = (s) => (hasC(s) ? ['A', 'B', 'C'] : ['A', 'B']);

/**
 * The numbers a visitor can change. All are whole numbers (milliseconds but
 * for agents, floor and startFence). The URL uses the same keys. `group`
 * sorts them in the form; `applies(s)` says whether a key matters to
 * scenario s (a key that does not is left out of the URL and the form).
 */
export const PARAMS = [
  { key: 'ttl', group: 'coordinator', label: 'Lease TTL', min: 1, max: 60000, help: 'how long the coordinator keeps a lease from the moment it processes a request' },
  { key: 'checkAt', group: 'A', label: "A's validity check at", min: 0, max: 60000, help: 'when agent A checks its lease before starting the model call' },
  { key: 'model', group: 'A', label: 'Model call length', min: 0, max: 60000, help: 'how long A spends between its check and its write' },
  { key: 'upA', group: 'A', label: 'A → coordinator latency', min: 0, max: 10000, help: 'one-way delay of A\'s requests' },
  { key: 'downA', group: 'A', label: 'coordinator → A latency', min: 0, max: 10000, help: 'one-way delay of replies to A' },
  { key: 'upB', group: 'B', label: 'B → coordinator latency', min: 0, max: 10000, help: 'one-way delay of B\'s requests' },
  { key: 'downB', group: 'B', label: 'coordinator → B latency', min: 0, max: 10000, help: 'one-way delay of replies to B' },
  { key: 'skew', group: 'clocks', label: 'Assumed clock skew', min: 0, max: 10000, help: 'clockSkewMillis: subtracted from every fenced deadline' },
  { key: 'step', group: 'clocks', label: 'Clock step per read', min: 0, max: 1000, help: 'stepPerRead: every clock moves on by this much each time it is read' },
  { key: 'bStart', group: 'B', label: "B's start", min: 0, max: 60000, help: 'when agent B sends its first acquisition' },
  { key: 'bWork', group: 'B', label: "B's work before writing", min: 0, max: 60000, help: 'how long B works between its check and its write' },
  { key: 'floor', group: 'resource', label: "Gate's initial floor", min: 0, max: 1000, help: 'initialFloor of the FenceGate (a persisted floor): fences below it are refused from the start' },
  { key: 'restartAt', group: 'coordinator', label: 'Coordinator restart at', min: 0, max: 60000, help: 'when the coordinator restarts (A asks for the lease again 100 ms later)', applies: (s) => RESTARTS.has(s.preset) },
  { key: 'startFence', group: 'coordinator', label: "Successor's startFence", min: 0, max: 1000, help: 'what the restarted coordinator is created with: 0 = nothing persisted (fences start over at 1); N = the next fence is N + 1', applies: (s) => RESTARTS.has(s.preset) },
  { key: 'agents', group: 'C', label: 'Add agent C', min: 2, max: 3, toggle: true, help: 'a third agent that acquires, checks, works and writes' },
  { key: 'cStart', group: 'C', label: "C's start", min: 0, max: 60000, help: 'when agent C sends its first acquisition', applies: hasC },
  { key: 'cModel', group: 'C', label: "C's work before writing", min: 0, max: 60000, help: 'how long C works between its check and its write', applies: hasC },
  { key: 'upC', group: 'C', label: 'C → coordinator latency', min: 0, max: 10000, help: 'one-way delay of C\'s requests', applies: hasC },
  { key: 'downC', group: 'C', label: 'coordinator → C latency', min: 0, max: 10000, help: 'one-way delay of replies to C', applies: hasC },
];

/** Whether parameter def matters to scenario s. */
export const applies = (def, s) => !def.applies || def.applies(s);

const BASE = {
  ttl: 1000, checkAt: 950, model: 450, upA: 0, downA: 0, upB: 0, downB: 0, skew: 0, step: 0, bStart: 1000,
  bWork: 0, floor: 0, restartAt: 1300, startFence: 0, agents: 2, cStart: 1600, cModel: 200, upC: 0, downC: 0,
};

/**
 * The presets. Each is a script (what the agents do, in order) and the
 * numbers it starts with. `claim` is the one sentence the page shows.
 */
export const PRESETS = [
  {
    id: 'gap',
    title: 'The check-to-write gap',
    claim: 'A checks its lease at 950 (valid), the coordinator reassigns it to B at 1000, and A\'s write lands at 1400: the naive resource takes both writes and ends with A\'s stale one; the gate refuses A\'s fence 1 after B wrote with fence 2 and logs it.',
    params: { ...BASE },
  },
  {
    id: 'renewal',
    title: 'Renewal anchored at the reply',
    claim: 'A sends a renewal at 0, the coordinator extends its copy at 40 (to 1040), the reply reaches A at 900: the naive A dates its lease to 1900 and writes over B at 1400; the fenced A\'s deadline is anchored at the send (1000) and its write is refused.',
    params: { ...BASE, upA: 40, downA: 860, checkAt: 1200, model: 200, bStart: 1100 },
  },
  {
    id: 'lost',
    title: 'A lost reply, retried with the same request id',
    claim: 'The reply to A\'s acquisition is lost and A resends the same request: the coordinator answers with the grant it already made (fence 1, no new fence), the fenced deadline stays anchored at the first send, and the naive lease, dated from the late reply, lets A\'s stale write land.',
    params: { ...BASE, upA: 50, downA: 50, checkAt: 1150, model: 250, bStart: 1100 },
  },
  {
    id: 'expired',
    title: 'An expired lease is not resurrected',
    claim: 'A renews at 1100, after its lease ran out at 1000 and while nobody else held it: the coordinator answers reason "expired" instead of extending it, B acquires fence 2, and A\'s write, started before, lands naively but is refused by the gate.',
    params: { ...BASE, checkAt: 100, model: 1200, bStart: 1150 },
  },
  {
    id: 'restart',
    title: 'Coordinator restarted without its fence',
    claim: 'The coordinator restarts at 1300 without persisting its fence and hands A fence 1 again, below the fence 2 B already wrote with: the naive resource takes every write, the gate refuses every write of the new holder.',
    params: { ...BASE, checkAt: 100, model: 100, bStart: 1100 },
  },
  {
    id: 'restart-kept',
    title: 'Coordinator restarted with startFence',
    claim: 'The same restart, but the successor is created with startFence = the old issuedFence (2): A gets fence 3 and its write lands in both lanes; the gate logs nothing.',
    params: { ...BASE, checkAt: 100, model: 100, bStart: 1100, startFence: 2 },
  },
  {
    id: 'early',
    title: 'A stale write that reaches the gate first',
    claim: 'B is granted fence 2 at 1000 but writes only at 1300; A\'s stale write at 1100 reaches the gate while its floor is still 1, so both lanes take it: a fence can refuse a stale holder only once the new fence has reached the resource.',
    params: { ...BASE, model: 150, bWork: 300 },
  },
  {
    id: 'push',
    title: 'The coordinator pushes the new fence (gate.admit)',
    claim: 'The same run, but the coordinator calls gate.admit with each new grant\'s token: the floor is 2 from 1000, and A\'s write at 1100 is refused and logged before B has written anything.',
    params: { ...BASE, model: 150, bWork: 300 },
  },
  {
    id: 'async',
    title: 'Writes that await (gate.commitAsync)',
    claim: 'A\'s write is async: admitted at 950 with fence 1, it awaits its store for 450 ms, across the handover to B at 1000, and A writes a follow-up at 1200 meanwhile. gate.commit refuses the async function before it runs; with commitAsync, B\'s write waits for A\'s report to settle and lands after it, and A\'s follow-up, queued behind B\'s, is refused when its turn comes. The naive resource lands A\'s report after B\'s newer write.',
    params: { ...BASE },
    async: true,
  },
];

export const DEFAULT_PRESET = 'gap';

/** In the async preset: B's store call, A's work between its two writes, A's follow-up's store call. */
const B_STORE = 100;
const A_GAP = 250;
const A_FOLLOW_UP = 50;

export function presetById(id) {
  return PRESETS.find((p) => p.id === id);
}

/** A fresh scenario for preset id (or the default preset). */
export function defaultScenario(id = DEFAULT_PRESET) {
  const p = presetById(id) ?? presetById(DEFAULT_PRESET);
  return { preset: p.id, ...p.params };
}

// --- the scenario in a URL ---------------------------------------------------

const MAX_SHOWN = 40;

/** Shortens a hostile value for a message; the caller renders it as text. */
export function shown(v) {
  const s = String(v);
  return s.length > MAX_SHOWN ? s.slice(0, MAX_SHOWN) + '…' : s;
}

const INT = /^[0-9]{1,9}$/;

/**
 * Reads a scenario from URL search parameters. Every value is checked; a bad
 * one is reported in `problems` (plain strings, to be shown as text) and
 * replaced by the preset's value. Returns { scenario, at, embed, problems }.
 * `at` is the position (step number) to show, or null for the page's
 * default; the caller checks it against the run's length.
 */
export function parseQuery(search) {
  const q = new URLSearchParams(search);
  const problems = [];
  const one = (key) => {
    const all = q.getAll(key);
    if (all.length > 1) problems.push(`"${key}" is given ${all.length} times; using the first.`);
    return all.length ? all[0] : null;
  };
  let presetId = one('p');
  if (presetId === null) presetId = DEFAULT_PRESET;
  if (!presetById(presetId)) {
    problems.push(`Unknown preset "${shown(presetId)}"; showing "${DEFAULT_PRESET}" instead.`);
    presetId = DEFAULT_PRESET;
  }
  const scenario = defaultScenario(presetId);
  const given = new Set();
  for (const def of PARAMS) {
    const raw = one(def.key);
    if (raw === null) continue;
    const v = INT.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(v) || v < def.min || v > def.max) {
      problems.push(`${def.label} (${def.key}) must be a whole number from ${def.min} to ${def.max}, got "${shown(raw)}"; using ${scenario[def.key]}.`);
      continue;
    }
    scenario[def.key] = v;
    given.add(def.key);
  }
  // Links made before restartAt was a parameter restart 200 ms after B's start.
  if (RESTARTS.has(presetId) && !given.has('restartAt') && given.has('bStart')) scenario.restartAt = Math.min(scenario.bStart + 200, 60000);
  let at = null;
  const rawAt = one('at');
  if (rawAt !== null) {
    if (INT.test(rawAt)) at = Number(rawAt);
    else problems.push(`The position (at) must be a whole number of steps, got "${shown(rawAt)}"; starting at the beginning.`);
  }
  let embed = false;
  const rawEmbed = one('embed');
  if (rawEmbed !== null) {
    if (rawEmbed === '1' || rawEmbed === '0') embed = rawEmbed === '1';
    else problems.push(`embed must be 1 or 0, got "${shown(rawEmbed)}"; ignoring it.`);
  }
  const known = new Set(['p', 'at', 'embed', ...PARAMS.map((d) => d.key)]);
  for (const key of new Set(q.keys())) {
    if (!known.has(key)) problems.push(`Ignored unknown parameter "${shown(key)}".`);
  }
  return { scenario, at, embed, problems };
}

/**
 * The query string (without "?") that parseQuery turns back into scenario:
 * the preset and every key that applies to it (see `applies`).
 */
export function toQuery(scenario, { at = null, embed = false } = {}) {
  const q = new URLSearchParams();
  q.set('p', scenario.preset);
  for (const def of PARAMS) if (applies(def, scenario)) q.set(def.key, String(scenario[def.key]));
  if (at !== null) q.set('at', String(at));
  if (embed) q.set('embed', '1');
  return q.toString();
}

/**
 * Checks a scenario built in code or from a form. Returns a list of problems
 * (empty when it is fine).
 */
export function validateScenario(s) {
  const problems = [];
  if (!presetById(s?.preset)) problems.push(`Unknown preset "${shown(s?.preset)}".`);
  for (const def of PARAMS) {
    const v = s?.[def.key];
    if (!Number.isSafeInteger(v) || v < def.min || v > def.max) {
      problems.push(`${def.label} must be a whole number from ${def.min} to ${def.max}, got "${shown(v)}".`);
    }
  }
  return problems;
}

// --- the run -----------------------------------------------------------------

/** Bounds every run, whatever numbers it was given. */
const MAX_ACTIONS = 400;
const MAX_ATTEMPTS = 6;

const millis = (x) => (typeof x === 'number' ? x : x?.millis);

/**
 * Runs the scenario in both lanes and returns
 * { scenario, lanes: { naive, fenced }, positions, end }.
 * Each lane is { mode, events, generations, windows, rejections, finalValue,
 * floor, issuedFence }; each event is plain data (no sentences: words.js
 * words them) with t (virtual milliseconds), seq (its place in the lane) and
 * rank (its place among the lane's events at the same t).
 * `positions` are the places the step button and the scrubber move through:
 * { t, j } shows every event before t and the first j events at t, so one
 * step reveals one event per lane. Position 0 shows nothing yet.
 */
export function runScenario(lib, scenario) {
  const problems = validateScenario(scenario);
  if (problems.length) throw new RangeError(problems.join(' '));
  if (presetById(scenario.preset).async) throw new TypeError(`preset ${scenario.preset} awaits real promises: use runScenarioAsync`);
  const naive = new LaneRun(lib, scenario, 'naive').run();
  const fenced = new LaneRun(lib, scenario, 'fenced').run();
  return { scenario: { ...scenario }, lanes: { naive, fenced }, ...positionsOf([naive, fenced]) };
}

/**
 * runScenario for every preset, including those whose writes await (the
 * async preset drives gate.commitAsync, whose promises settle as the
 * virtual clock reaches the end of each store call). Resolves with the same
 * shape; still deterministic: between two virtual instants the run lets every
 * pending promise settle before it moves on. options.settle: 'microtasks'
 * (the default, see settleJobs) or 'task' (a macrotask turn after every
 * action, which lets every job run whatever its depth: the tests compare
 * the two).
 */
export async function runScenarioAsync(lib, scenario, { settle = 'microtasks' } = {}) {
  const problems = validateScenario(scenario);
  if (problems.length) throw new RangeError(problems.join(' '));
  if (!presetById(scenario.preset).async) return runScenario(lib, scenario);
  if (settle !== 'microtasks' && settle !== 'task') throw new TypeError(`settle must be 'microtasks' or 'task', not ${shown(settle)}`);
  const wait = settle === 'task' ? settleTask : settleJobs;
  const naive = await new LaneRun(lib, scenario, 'naive').runAsync(wait);
  const fenced = await new LaneRun(lib, scenario, 'fenced').runAsync(wait);
  return { scenario: { ...scenario }, lanes: { naive, fenced }, ...positionsOf([naive, fenced]) };
}

/** Resolves after every promise job queued so far has run (a macrotask turn). */
function settleTask() {
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      ch.port1.close();
      resolve();
    };
    ch.port2.postMessage(null);
  });
}

/**
 * Resolves after SETTLE_TURNS turns of the microtask queue: each `await`
 * goes to the back of the queue, so every job queued before the call has
 * run by the end of the first turn, and a job queued by one of those by the
 * end of the second. The model's chains are two jobs deep (a store call's
 * end resumes the write, whose end the gate hands on to the waiting write
 * and to the thread's next step); 16 turns leave room. With a macrotask
 * turn after each of its 27 actions (settleTask) a run of the async preset
 * took 4.7 ms (median, Chromium, load 5-6), with microtask turns 1.4 ms: the
 * page reruns the model at every step of a drag, within a frame. The model
 * tests check that both give the same runs for 300 seeded scenarios of the
 * async preset (with one turn instead of 16, about half of them differ).
 */
const SETTLE_TURNS = 16;
async function settleJobs() {
  for (let i = 0; i < SETTLE_TURNS; i++) await null;
}

/** The positions shared by lanes: one more event per lane per step. */
export function positionsOf(lanes) {
  const counts = new Map();
  for (const lane of lanes) {
    const here = new Map();
    for (const e of lane.events) here.set(e.t, (here.get(e.t) ?? 0) + 1);
    for (const [t, n] of here) counts.set(t, Math.max(counts.get(t) ?? 0, n));
  }
  const times = [...counts.keys()].sort((a, b) => a - b);
  const positions = [{ t: times.length ? Math.min(0, times[0]) : 0, j: 0 }];
  for (const t of times) for (let j = 1; j <= counts.get(t); j++) positions.push({ t, j });
  return { positions, end: positions[positions.length - 1].t };
}

/**
 * The script of a scenario: a list of threads, each a list of steps, run by
 * LaneRun here and by the page's live mode against a real coordinator.
 * Steps name the parameter that places them (`edit`, `upKey`, `downKey`,
 * `editMs`), so an event can say which number moves it.
 */
export function script(s) {
  const A = (at = 0) => ({ op: 'acquire', at, up: s.upA, down: s.downA, upKey: 'upA', downKey: 'downA' });
  const writeA = [{ op: 'check', at: s.checkAt, edit: 'checkAt' }, { op: 'model', ms: s.model, edit: 'model' }, { op: 'write', value: "A's report" }];
  // B (and C) work `bWork` (`cModel`) between the check and the write; with
  // 0 there is no model call, and dragging the write sets it.
  const acqB = { op: 'acquire', at: s.bStart, up: s.upB, down: s.downB, upKey: 'upB', downKey: 'downB', edit: 'bStart' };
  const workB = { op: 'model', ms: s.bWork, edit: 'bWork', quiet0: true };
  const B = { actor: 'B', steps: [acqB, { op: 'check' }, workB, { op: 'write', value: "B's report" }] };
  const threads = (...th) => (hasC(s) ? [...th, agentC(s)] : th);
  switch (s.preset) {
    case 'gap':
    case 'early':
    case 'push':
      return threads({ actor: 'A', steps: [A(), ...writeA] }, B);
    case 'renewal':
      return threads(
        {
          actor: 'A',
          steps: [
            // A already holds the lease when the run starts.
            { op: 'acquire', at: 0, up: 0, down: 0 },
            { op: 'renew', at: 0, up: s.upA, down: s.downA, upKey: 'upA', downKey: 'downA' },
            ...writeA,
          ],
        },
        B,
      );
    case 'lost':
      return threads({ actor: 'A', steps: [{ ...A(), lose: 1, timeout: s.upA + s.downA + 100 }, ...writeA] }, B);
    case 'expired':
      return threads(
        { actor: 'A', steps: [A(), ...writeA] },
        { actor: 'A', steps: [{ op: 'renew', at: s.ttl + 100, up: s.upA, down: s.downA, upKey: 'upA', downKey: 'downA', heartbeat: true }] },
        B,
      );
    case 'async':
      // A's store call lasts `model` ms; it first tries gate.commit with its
      // async function, then uses commitAsync.
      return threads(
        {
          actor: 'A',
          steps: [
            A(),
            { op: 'check', at: s.checkAt, edit: 'checkAt' },
            // A does not wait for its report to be stored: it works on and
            // writes a follow-up while the report's write is still running.
            { op: 'awrite', value: "A's report", ms: s.model, editMs: 'model', tryCommit: true, detach: true },
            { op: 'model', ms: A_GAP },
            { op: 'awrite', value: "A's follow-up", ms: A_FOLLOW_UP },
          ],
        },
        { actor: 'B', steps: [acqB, { op: 'check' }, workB, { op: 'awrite', value: "B's report", ms: B_STORE }] },
      );
    case 'restart':
    case 'restart-kept':
      return threads(
        {
          actor: 'A',
          steps: [
            A(),
            ...writeA,
            { ...A(s.restartAt + 100), edit: null },
            { op: 'check' },
            { op: 'model', ms: s.model },
            { op: 'write', value: "A's second report" },
          ],
        },
        B,
        { actor: COORDINATOR, steps: [{ op: 'restart', at: s.restartAt, edit: 'restartAt', startFence: s.startFence }] },
      );
    default:
      throw new RangeError(`unknown preset ${shown(s.preset)}`);
  }
}

/** The third agent: acquires at cStart, checks, works cModel, writes. */
function agentC(s) {
  const write = s.preset === 'async' ? { op: 'awrite', value: "C's report", ms: B_STORE } : { op: 'write', value: "C's report" };
  return {
    actor: 'C',
    steps: [
      { op: 'acquire', at: s.cStart, up: s.upC, down: s.downC, upKey: 'upC', downKey: 'downC', edit: 'cStart' },
      { op: 'check' },
      { op: 'model', ms: s.cModel, edit: 'cModel', quiet0: true },
      write,
    ],
  };
}

/**
 * One lane of a scenario. mode 'naive': holders date their lease from the
 * reply's arrival (createNaiveLease, renewed()), check it right before the
 * model call, and write to a plain, unguarded resource. mode 'fenced':
 * holders turn grants into leases with completeAcquire/completeRenewal
 * (anchored at the send), look at hasExpired() only as advice, and write
 * through FenceGate.commit. Both lanes send the same requests to the same
 * kind of coordinator.
 *
 * The run is a queue of actions in virtual time; each method below is one
 * step of an agent or the coordinator and records what it did as an event.
 */
class LaneRun {
  constructor(lib, s, mode) {
    this.lib = lib;
    this.s = s;
    this.mode = mode;
    this.fenced = mode === 'fenced';
    const keys = agentKeys(s);
    this.clocks = { [COORDINATOR]: lib.createManualClock('coordinator', { start: 0, stepPerRead: s.step }) };
    for (const key of keys) this.clocks[key] = lib.createManualClock(HOLDERS[key], { start: 0, stepPerRead: s.step });
    this.coordinator = new lib.LeaseCoordinator({ clock: this.clocks[COORDINATOR], ttlMillis: s.ttl });
    this.gate = this.fenced ? new lib.FenceGate(RESOURCE, s.floor > 0 ? { initialFloor: s.floor } : undefined) : null;
    this.resource = { value: null, by: null };
    this.agents = {};
    for (const key of keys) {
      const id = HOLDERS[key];
      this.agents[key] = {
        key,
        id,
        client: new lib.LeaseClient({ clock: this.clocks[key], holderId: id, clockSkewMillis: s.skew }),
        lease: null, // the library's lease (fenced lane; the naive lane keeps it only to form renewals)
        naive: null, // the naive lease (naive lane)
      };
    }
    this.events = [];
    this.reqNames = new Map();
    // The coordinator's lease generations, to draw their spans and expiries.
    this.generations = [];
    this.epoch = 0; // bumps on restart
    this.genOfReq = new Map(); // requestId -> index in generations
    this.queue = [];
    this.order = 0;
    this.now = 0; // the virtual time of the action being run
    this.wids = 0; // numbers the writes, to tie a write's call, start and end together
    this.failure = null; // an unexpected error inside a promise, rethrown by runAsync
    this.lastFloor = 0; // the gate's floor as last recorded in an event (async writes)
  }

  emit(e) {
    const ev = { seq: this.events.length, ...e };
    this.events.push(ev);
    return ev;
  }

  // Ties event e to the parameter that places it: e.t - offset is that
  // parameter's value; min and max bound it (in the parameter's units).
  editable(e, key, offset, min) {
    if (!key) return e;
    const def = PARAMS.find((d) => d.key === key);
    e.edit = { key, offset, min: Math.max(def.min, min ?? def.min), max: def.max };
    return e;
  }

  reqName(req) {
    if (!this.reqNames.has(req.requestId)) this.reqNames.set(req.requestId, `r${this.reqNames.size + 1}`);
    return this.reqNames.get(req.requestId);
  }

  /** Queues fn at virtual time t. */
  at(t, fn) {
    this.queue.push({ t, order: this.order++, fn });
  }

  // Moves a clock to virtual time t. A manual clock never goes backwards, and
  // stepPerRead may already have carried it past t: then it stays where it is.
  bring(key, t) {
    try {
      this.clocks[key].set(t);
    } catch (err) {
      if (!(err instanceof this.lib.ClockReadingError)) throw err;
    }
  }


  run() {
    for (const th of script(this.s)) this.thread(th, 0, 0);
    let actions = 0;
    while (this.queue.length) {
      if (++actions > MAX_ACTIONS) throw new RangeError('the scenario did not settle within ' + MAX_ACTIONS + ' steps');
      this.step();
    }
    return this.finish();
  }

  /** run for scripts whose writes await: lets promises settle (settle()) after every action. */
  async runAsync(settle) {
    for (const th of script(this.s)) this.thread(th, 0, 0);
    await settle();
    let actions = 0;
    while (this.queue.length) {
      if (++actions > MAX_ACTIONS) throw new RangeError('the scenario did not settle within ' + MAX_ACTIONS + ' steps');
      this.step();
      await settle();
      if (this.failure) throw this.failure;
    }
    return this.finish();
  }

  /** Runs the earliest queued action. */
  step() {
    const queue = this.queue;
    let k = 0;
    for (let j = 1; j < queue.length; j++) {
      if (queue[j].t < queue[k].t || (queue[j].t === queue[k].t && queue[j].order < queue[k].order)) k = j;
    }
    const [item] = queue.splice(k, 1);
    this.now = item.t;
    item.fn();
  }

  // Runs thread th from step i at time t. A step placed by a parameter
  // (step.at) can move no earlier than t, when the thread is ready for it.
  thread(th, i, t) {
    if (i >= th.steps.length) return;
    const step = th.steps[i];
    const start = Math.max(t, step.at ?? t);
    th.ready = t;
    if (start > t) this.at(start, () => this.exec(th, i, start));
    else this.exec(th, i, t);
  }

  // The edit of the event a step makes at t: its own `edit` (the step's
  // start), or the one a model call before it handed on (its length).
  stepEdit(th, step) {
    const handed = th.handed;
    th.handed = null;
    if (step.edit) return { key: step.edit, offset: 0, min: th.ready };
    return handed;
  }

  next(th, i, t) {
    this.thread(th, i + 1, t);
  }

  exec(th, i, t) {
    const step = th.steps[i];
    if (th.actor === COORDINATOR) {
      this.restart(step, t, this.stepEdit(th, step));
      return this.next(th, i, t);
    }
    const ag = this.agents[th.actor];
    switch (step.op) {
      case 'acquire':
        return this.acquire(ag, th, i, t, step, 1, this.stepEdit(th, step));
      case 'renew':
        return this.renew(ag, th, i, t, step, this.stepEdit(th, step));
      case 'check':
        return this.check(ag, th, i, t, this.stepEdit(th, step));
      case 'model': {
        this.stepEdit(th, {});
        // The event after the call (the write) is placed by its length.
        const hand = () => {
          if (step.edit) th.handed = { key: step.edit, offset: t, min: 0 };
        };
        if (step.ms === 0 && step.quiet0) {
          hand();
          return this.next(th, i, t);
        }
        this.emit({ t, actor: ag.key, kind: 'model', until: t + step.ms, ms: step.ms });
        return this.at(t + step.ms, () => {
          hand();
          this.next(th, i, t + step.ms);
        });
      }
      case 'write':
        return this.write(ag, th, i, t, step, this.stepEdit(th, step));
      case 'awrite':
        return this.writeAsync(ag, th, i, t, step, this.stepEdit(th, step));
      default:
        throw new Error(`unknown step ${step.op}`);
    }
  }

  // The coordinator restarts: its successor is created with step.startFence
  // (0: nothing was persisted, and fences start over at 1).
  restart(step, t, edit) {
    this.bring(COORDINATOR, t);
    const issued = this.coordinator.issuedFence;
    const startFence = step.startFence;
    const opts = { clock: this.clocks[COORDINATOR], ttlMillis: this.s.ttl };
    this.coordinator = new this.lib.LeaseCoordinator(startFence > 0 ? { ...opts, startFence } : opts);
    this.epoch++;
    for (const g of this.generations) {
      if (g.epoch < this.epoch && g.end > t) {
        g.end = t;
        g.forgotten = true;
      }
    }
    const e = this.emit({ t, actor: COORDINATOR, kind: 'restart', persisted: startFence > 0, startFence, issuedBefore: issued });
    if (edit) this.editable(e, edit.key, edit.offset, edit.min);
  }

  // Sends req (already begun) to the coordinator; handle(outcome, t) gets
  // the answer. edit: the send's own (a start time), if any; the arrival is
  // placed by step.upKey, the answer by step.downKey.
  send(ag, t, req, step, handle, what, again, loseReply, edit) {
    const name = this.reqName(req);
    const arrive = t + step.up;
    const sent = this.emit({ t, actor: ag.key, kind: 'send', to: COORDINATOR, arrive, what, req: name, again, sentAt: millis(req.sentAt) });
    if (edit) this.editable(sent, edit.key, edit.offset, edit.min);
    this.at(arrive, () => {
      const outcome = this.process(ag, req, what, arrive, step.upKey ? { key: step.upKey, offset: t } : null);
      const back = arrive + step.down;
      if (loseReply) {
        this.editable(this.emit({ t: back, actor: ag.key, kind: 'lost', from: COORDINATOR, departed: arrive, req: name }), step.downKey, arrive);
        return;
      }
      this.at(back, () => {
        this.bring(ag.key, back);
        this.editable(this.emit({ t: back, actor: ag.key, kind: 'reply', from: COORDINATOR, departed: arrive, req: name, ok: !!outcome.ok }), step.downKey, arrive);
        handle(outcome, back);
      });
    });
  }

  // The coordinator processes req at time t and answers.
  process(ag, req, what, t, edit) {
    this.bring(COORDINATOR, t);
    const name = this.reqName(req);
    // The request crosses the wire as JSON, as it would between processes.
    const wire = JSON.parse(JSON.stringify(req));
    const outcome = what === 'renewal' ? this.coordinator.renew(wire) : this.coordinator.acquire(wire);
    const ev = { t, actor: COORDINATOR, from: ag.key, req: name, what, issuedFence: this.coordinator.issuedFence };
    const emit = (e) => {
      const out = this.emit(e);
      if (edit) this.editable(out, edit.key, edit.offset);
      return out;
    };
    if (outcome.ok) {
      const g = outcome.grant;
      const until = millis(g.coordinatorExpiresAt);
      const holder = HOLDER_KEY[g.holderId];
      let gen = this.generations.find((x) => x.epoch === this.epoch && x.fence === g.fence && x.holder === holder);
      const prev = this.generations.filter((x) => x.epoch === this.epoch).at(-1);
      if (!gen) {
        gen = { id: this.generations.length, epoch: this.epoch, holder, fence: g.fence, start: t, end: until, from: until - this.s.ttl };
        this.generations.push(gen);
        const reassignedFrom = prev && prev.holder !== holder ? prev.holder : null;
        emit({ ...ev, kind: 'grant', holder, fence: g.fence, until, reassignedFrom });
        if (this.s.preset === 'push') this.push(g, t);
      } else if (what === 'renewal') {
        gen.end = until;
        gen.from = until - this.s.ttl;
        emit({ ...ev, kind: 'extend', holder, fence: g.fence, until });
      } else {
        emit({ ...ev, kind: 'replay', holder, fence: g.fence, until });
      }
      this.genOfReq.set(req.requestId, gen.id);
    } else if (outcome.reason === 'expired') {
      emit({ ...ev, kind: 'refuse-renewal' });
    } else {
      emit({ ...ev, kind: 'deny', heldBy: outcome.heldBy, retryAfter: outcome.retryAfterMillis });
    }
    return outcome;
  }

  // The push preset: the coordinator hands each new token to the resource
  // with gate.admit as it grants, so the floor rises before the holder writes.
  push(g, t) {
    const holder = HOLDER_KEY[g.holderId];
    if (!this.fenced) {
      this.emit({ t, actor: 'R', kind: 'admit', holder, fence: g.fence, pushed: false });
      return;
    }
    const token = { resource: g.resource, holderId: g.holderId, fence: g.fence };
    try {
      this.gate.admit(token);
      this.emit({ t, actor: 'R', kind: 'admit', holder, fence: g.fence, pushed: true, floor: this.gate.floor });
    } catch (err) {
      if (!(err instanceof this.lib.StaleFenceError)) throw err;
      this.emit({ t, actor: 'R', kind: 'admit', holder, fence: g.fence, pushed: false, refused: true, rejection: plainRejection(err.rejection) });
    }
  }

  acquire(ag, th, i, t, step, attempt, edit) {
    this.bring(ag.key, t);
    const req = ag.client.beginAcquire(RESOURCE);
    let sends = 0;
    const handle = (outcome, tr) => {
      if (outcome.ok) {
        this.took(ag, req, outcome.grant, tr, 'acquire');
        return this.next(th, i, tr);
      }
      if (outcome.heldBy !== undefined && attempt < MAX_ATTEMPTS) {
        const retry = tr + Math.max(1, Math.ceil(outcome.retryAfterMillis));
        return this.at(retry, () => this.acquire(ag, th, i, retry, { ...step, lose: 0 }, attempt + 1));
      }
      this.emit({ t: tr, actor: ag.key, kind: 'give-up', what: 'acquire' });
    };
    const lose = step.lose ?? 0;
    const attemptSend = (ts) => {
      sends++;
      const loseReply = sends <= lose;
      this.send(ag, ts, req, step, handle, 'acquire', sends > 1, loseReply, sends === 1 ? edit : null);
      if (loseReply) {
        // No answer within the timeout: resend the very same request.
        const again = ts + step.timeout;
        this.at(again, () => {
          this.bring(ag.key, again);
          this.emit({ t: again, actor: ag.key, kind: 'timeout', req: this.reqName(req), after: step.timeout });
          attemptSend(again);
        });
      }
    };
    attemptSend(t);
  }

  renew(ag, th, i, t, step, edit) {
    this.bring(ag.key, t);
    if (!ag.lease) {
      this.emit({ t, actor: ag.key, kind: 'give-up', what: 'renewal' });
      return;
    }
    const req = ag.client.beginRenewal(ag.lease);
    const handle = (outcome, tr) => {
      if (outcome.ok) this.took(ag, req, outcome.grant, tr, 'renewal');
      else this.emit({ t: tr, actor: ag.key, kind: 'renewal-refused', expiresAt: this.fenced ? null : millis(ag.naive.expiresAt) });
      this.next(th, i, tr);
    };
    this.send(ag, t, req, step, handle, 'renewal', false, false, edit);
  }

  // A grant arrived at tr: make the lease.
  took(ag, req, grant, tr, what) {
    this.bring(ag.key, tr);
    const lease = what === 'renewal' ? ag.client.completeRenewal(req, grant) : ag.client.completeAcquire(req, grant);
    ag.lease = lease;
    ag.gen = this.genOfReq.get(req.requestId);
    const base = { t: tr, actor: ag.key, kind: 'lease', what, gen: ag.gen, fence: lease.token.fence, coordinatorUntil: millis(grant.coordinatorExpiresAt) };
    if (this.fenced) {
      const deadline = millis(lease.deadline);
      this.emit({ ...base, deadline, sentAt: millis(req.sentAt), ttl: grant.ttlMillis, skew: this.s.skew });
    } else {
      if (what === 'renewal' && ag.naive) ag.naive.renewed();
      else ag.naive = this.lib.createNaiveLease(this.clocks[ag.key], grant.ttlMillis);
      this.emit({ ...base, deadline: millis(ag.naive.expiresAt), ttl: grant.ttlMillis });
    }
  }

  // Emits e with edit (from stepEdit) attached.
  emitEdit(e, edit) {
    const out = this.emit(e);
    if (edit) this.editable(out, edit.key, edit.offset, edit.min);
    return out;
  }

  check(ag, th, i, t, edit) {
    this.bring(ag.key, t);
    if (!ag.lease) {
      this.emitEdit({ t, actor: ag.key, kind: 'check', result: 'none' }, edit);
      return;
    }
    if (this.fenced) {
      const expired = ag.lease.hasExpired();
      this.emitEdit({ t, actor: ag.key, kind: 'check', result: expired ? 'expired' : 'valid', advisory: true }, edit);
      return this.next(th, i, t);
    }
    const valid = ag.naive.valid();
    this.emitEdit({ t, actor: ag.key, kind: 'check', result: valid ? 'valid' : 'expired', expiresAt: millis(ag.naive.expiresAt) }, edit);
    if (valid) this.next(th, i, t);
  }

  write(ag, th, i, t, step, edit) {
    this.bring(ag.key, t);
    const before = this.resource.value;
    const beforeBy = this.resource.by;
    const fence = ag.lease.token.fence;
    // A write "should not land" when the coordinator no longer holds the
    // writer's lease: it ended, or a restart forgot it.
    const stale = !(this.generations[ag.gen].end > t);
    const apply = () => {
      this.resource.value = step.value;
      this.resource.by = ag.key;
    };
    const base = { t, actor: ag.key, kind: 'write', gen: ag.gen, value: step.value, before, beforeBy, stale };
    if (!this.fenced) {
      apply();
      this.emitEdit({ ...base, landed: true, fence: null }, edit);
      return this.next(th, i, t);
    }
    const floorBefore = this.gate.floor;
    try {
      this.gate.commit(ag.lease.token, apply);
      this.emitEdit({ ...base, landed: true, fence, floorBefore, floor: this.gate.floor }, edit);
    } catch (err) {
      if (!(err instanceof this.lib.StaleFenceError)) throw err;
      this.emitEdit({ ...base, landed: false, fence, floorBefore, floor: this.gate.floor, rejection: plainRejection(err.rejection) }, edit);
    }
    this.next(th, i, t);
  }

  // A write whose store call takes step.ms: naive, it just runs; fenced, it
  // goes through gate.commitAsync (after showing gate.commit refuse the
  // async function, when step.tryCommit). The write's value lands when its
  // store call ends; events: write-call (the call, and whether it had to
  // queue), write-begin (its turn came later), write (landed or refused).
  writeAsync(ag, th, i, t, step, edit) {
    this.bring(ag.key, t);
    const wid = this.wids++;
    const fence = ag.lease.token.fence;
    const base = { actor: ag.key, wid, gen: ag.gen, value: step.value, async: true, ms: step.ms, calledAt: t };
    let began = null;
    const store = () => new Promise((resolve) => this.at(this.now + step.ms, resolve));
    const land = (floorBefore) => {
      const before = this.resource.value;
      const beforeBy = this.resource.by;
      this.resource.value = step.value;
      this.resource.by = ag.key;
      // It should not have landed if the lease had ended before the write
      // began, or if a newer holder's write landed while it was under way.
      const overtaken = this.events.some((e) => e.kind === 'write' && e.landed && e.actor !== ag.key && e.t > began && newer(this.generations, e.gen, ag.gen));
      const stale = !(this.generations[ag.gen].end > began) || overtaken;
      const floor = this.fenced ? this.gate.floor : undefined;
      const e = this.emit({ ...base, t: this.now, kind: 'write', landed: true, fence: this.fenced ? fence : null, began, before, beforeBy, stale, overtaken, floorBefore, floor });
      // The landing is placed by the store call's length, when it has one.
      if (step.editMs) this.editable(e, step.editMs, began, 0);
    };
    if (!this.fenced) {
      began = t;
      this.emitEdit({ ...base, t, kind: 'write-call', fence: null, queued: false }, edit);
      (async () => {
        await store();
        land(undefined);
        if (!step.detach) this.next(th, i, this.now);
      })().catch((err) => (this.failure ??= err));
      if (step.detach) this.next(th, i, t);
      return;
    }
    if (step.tryCommit) {
      try {
        this.gate.commit(ag.lease.token, async () => {
          throw new Error('gate.commit ran an async function');
        });
        throw new Error('gate.commit accepted an async function');
      } catch (err) {
        if (!(err instanceof this.lib.InvalidArgumentError)) throw err;
        this.emit({ t, actor: ag.key, kind: 'misuse', wid, fence, error: err.name, floor: this.gate.floor });
      }
    }
    const floorAtCall = this.gate.floor;
    const fn = async () => {
      began = this.now;
      if (began !== t) {
        // Its turn came after a wait: the gate checked it only now.
        const floorBefore = this.lastFloor;
        this.lastFloor = this.gate.floor;
        this.emit({ ...base, t: began, kind: 'write-begin', fence, floorBefore, floor: this.gate.floor });
      }
      await store();
      // The floor rose when the write was admitted, not when it lands.
      land(this.gate.floor);
    };
    const done = this.gate.commitAsync(ag.lease.token, fn);
    this.emitEdit({ ...base, t, kind: 'write-call', fence, queued: began === null, floorBefore: floorAtCall, floor: this.gate.floor }, edit);
    this.lastFloor = this.gate.floor;
    // A detached write lets its thread go on at once; otherwise the thread
    // waits for the write to settle.
    const after = () => {
      if (!step.detach) this.next(th, i, this.now);
    };
    done.then(after, (err) => {
      if (!(err instanceof this.lib.StaleFenceError)) throw err;
      const floor = this.gate.floor;
      this.emit({ ...base, t: this.now, kind: 'write', landed: false, fence, began: null, stale: !(this.generations[ag.gen].end > this.now), floorBefore: floor, floor, rejection: plainRejection(err.rejection) });
      after();
    }).catch((err) => (this.failure ??= err));
    if (step.detach) this.next(th, i, t);
  }

  finish() {
    return finishLane({
      mode: this.mode,
      events: this.events,
      generations: this.generations,
      rejections: this.gate ? this.gate.rejections.map(plainRejection) : [],
      finalValue: this.resource.value,
      finalBy: this.resource.by,
      floor: this.gate ? this.gate.floor : null,
      initialFloor: this.fenced ? this.s.floor : null,
      issuedFence: this.coordinator.issuedFence,
    });
  }
}

/**
 * Completes a lane from what happened in it (the model's LaneRun, or the
 * page's live mode): adds an expiry event at the end of each generation the
 * run reached (the coordinator never announces one; its edit is the TTL),
 * sorts the events by time (an expiry before what happens at the same
 * instant, a forgetting restart's end after), numbers them (seq, and rank
 * among events at the same t) and finds the stale windows.
 * lane: { mode, events, generations, rejections, finalValue, finalBy, floor,
 * initialFloor, issuedFence }; generations: { id, holder, fence, start, end,
 * from, forgotten }, `from` being the coordinator's reading its end counts
 * the TTL from. Returns the lane (a new object; events are changed in place).
 */
export function finishLane(lane) {
  const events = lane.events;
  const last = events.reduce((m, e) => Math.max(m, e.t), 0);
  for (const g of lane.generations) {
    if (g.end <= last) {
      const e = { seq: events.length, t: g.end, actor: COORDINATOR, kind: 'expire', forgotten: !!g.forgotten, holder: g.holder, fence: g.fence, prio: g.forgotten ? 1 : -1 };
      if (!g.forgotten && g.from !== undefined) e.edit = { key: 'ttl', offset: g.from, min: 1, max: 60000 };
      events.push(e);
    }
  }
  events.sort((a, b) => a.t - b.t || (a.prio ?? 0) - (b.prio ?? 0) || a.seq - b.seq);
  events.forEach((e, n) => {
    e.seq = n;
    e.rank = n > 0 && events[n - 1].t === e.t ? events[n - 1].rank + 1 : 0;
    delete e.prio;
  });
  const generations = lane.generations.map((g) => ({ ...g }));
  return { ...lane, events, generations, windows: staleWindows(events, generations) };
}

/**
 * The windows in which a holder believes it holds a lease the coordinator
 * has already let go: from the generation's end (expiry or a forgetting
 * restart) to the later of the holder's own deadline for it and the last
 * write it makes under it. { holder, fence, from, to, believed, wrote }.
 */
export function staleWindows(events, generations) {
  const out = [];
  for (const g of generations) {
    const leases = events.filter((e) => e.kind === 'lease' && e.gen === g.id);
    if (!leases.length) continue;
    // The holder's belief at the end: its last lease for this generation,
    // until it takes a lease of another generation.
    const believed = leases.at(-1).deadline;
    const nextGrant = events.find((e) => e.kind === 'lease' && e.actor === g.holder && e.t > leases.at(-1).t && e.gen !== g.id);
    const until = nextGrant ? nextGrant.t : Infinity;
    const writes = events.filter((e) => e.kind === 'write' && e.gen === g.id && e.t >= g.end);
    const wrote = writes.length ? writes.at(-1).t : null;
    const to = Math.max(Math.min(believed, until), wrote ?? -Infinity);
    if (to > g.end) out.push({ holder: g.holder, fence: g.fence, from: g.end, to, believed, wrote, forgotten: !!g.forgotten });
  }
  return out;
}

/** Whether generation a (an index into generations) was granted after generation b. */
export function newer(generations, a, b) {
  const ga = generations[a];
  const gb = generations[b];
  return !!ga && !!gb && (ga.epoch > gb.epoch || (ga.epoch === gb.epoch && ga.start > gb.start) || (ga.epoch === gb.epoch && ga.start === gb.start && ga.id > gb.id));
}

function plainRejection(r) {
  return {
    seq: r.seq,
    resource: r.resource,
    refusedHolderId: r.refusedHolderId,
    refusedFence: r.refusedFence,
    admittedHolderId: r.admittedHolderId,
    admittedFence: r.admittedFence,
  };
}

/** Formats milliseconds for text: whole numbers as is, others to 3 places. */
export function fmt(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return String(ms);
  return Number.isInteger(ms) ? String(ms) : ms.toFixed(3).replace(/\.?0+$/, '');
}

/** Whether event e is shown at position pos. */
export function visible(e, pos) {
  return e.t < pos.t || (e.t === pos.t && e.rank < pos.j);
}

/**
 * The state of a lane at position pos ({ t, j }): the events shown, what the
 * resource holds, which writes landed, what the gate refused. A pure fold
 * over the events, so a step, a scrub and a fresh load that reach the same
 * position show the same thing.
 */
export function stateAt(lane, pos) {
  const shownEvents = lane.events.filter((e) => visible(e, pos));
  let value = null;
  let by = null;
  let floor = lane.mode === 'fenced' ? lane.initialFloor ?? 0 : null;
  const landed = [];
  const rejections = [];
  for (const e of shownEvents) {
    if (e.kind === 'admit' && e.pushed && floor !== null) floor = Math.max(floor, e.fence);
    if (e.kind === 'admit' && e.rejection) rejections.push(e.rejection);
    // An async write raises the floor when the gate admits it (at its call,
    // or when its turn comes), before it lands.
    if ((e.kind === 'write-call' || e.kind === 'write-begin') && floor !== null && e.floor !== undefined) floor = Math.max(floor, e.floor);
    if (e.kind !== 'write') continue;
    if (e.landed) {
      value = e.value;
      by = e.actor;
      landed.push({ t: e.t, actor: e.actor, value: e.value, fence: e.fence });
      if (floor !== null) floor = Math.max(floor, e.fence);
    } else {
      rejections.push(e.rejection);
    }
  }
  return { pos, events: shownEvents, value, by, floor, landed, rejections };
}

/** The index of the last position at or before virtual time t. */
export function indexAtTime(positions, t) {
  let k = 0;
  for (let j = 0; j < positions.length; j++) if (positions[j].t <= t) k = j;
  return k;
}
