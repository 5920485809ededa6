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

const HOLDER_KEY = { 'agent-a': 'A', 'agent-b': 'B' };

/**
 * The numbers a visitor can change. All are whole milliseconds. The URL uses
 * the same keys.
 */
export const PARAMS = [
  { key: 'ttl', label: 'Lease TTL', min: 1, max: 60000, help: 'how long the coordinator keeps a lease from the moment it processes a request' },
  { key: 'checkAt', label: "A's validity check at", min: 0, max: 60000, help: 'when agent A checks its lease before starting the model call' },
  { key: 'model', label: 'Model call length', min: 0, max: 60000, help: 'how long A spends between its check and its write' },
  { key: 'upA', label: 'A → coordinator latency', min: 0, max: 10000, help: 'one-way delay of A\'s requests' },
  { key: 'downA', label: 'coordinator → A latency', min: 0, max: 10000, help: 'one-way delay of replies to A' },
  { key: 'upB', label: 'B → coordinator latency', min: 0, max: 10000, help: 'one-way delay of B\'s requests' },
  { key: 'downB', label: 'coordinator → B latency', min: 0, max: 10000, help: 'one-way delay of replies to B' },
  { key: 'skew', label: 'Assumed clock skew', min: 0, max: 10000, help: 'clockSkewMillis: subtracted from every fenced deadline' },
  { key: 'step', label: 'Clock step per read', min: 0, max: 1000, help: 'stepPerRead: every clock moves on by this much each time it is read' },
  { key: 'bStart', label: "B's start", min: 0, max: 60000, help: 'when agent B sends its first acquisition' },
];

const BASE = { ttl: 1000, checkAt: 950, model: 450, upA: 0, downA: 0, upB: 0, downB: 0, skew: 0, step: 0, bStart: 1000 };

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
    params: { ...BASE, checkAt: 100, model: 100, bStart: 1100 },
  },
  {
    id: 'early',
    title: 'A stale write that reaches the gate first',
    claim: 'B is granted fence 2 at 1000 but writes only at 1300; A\'s stale write at 1100 reaches the gate while its floor is still 1, so both lanes take it: a fence can refuse a stale holder only once the new fence has reached the resource.',
    params: { ...BASE, model: 150 },
  },
  {
    id: 'push',
    title: 'The coordinator pushes the new fence (gate.admit)',
    claim: 'The same run, but the coordinator calls gate.admit with each new grant\'s token: the floor is 2 from 1000, and A\'s write at 1100 is refused and logged before B has written anything.',
    params: { ...BASE, model: 150 },
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

/** How long B works between its check and its write in the early and push presets. */
const B_WORK = 300;
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
  for (const def of PARAMS) {
    const raw = one(def.key);
    if (raw === null) continue;
    const v = INT.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(v) || v < def.min || v > def.max) {
      problems.push(`${def.label} (${def.key}) must be a whole number from ${def.min} to ${def.max}, got "${shown(raw)}"; using ${scenario[def.key]}.`);
      continue;
    }
    scenario[def.key] = v;
  }
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

/** The query string (without "?") that parseQuery turns back into scenario. */
export function toQuery(scenario, { at = null, embed = false } = {}) {
  const q = new URLSearchParams();
  q.set('p', scenario.preset);
  for (const def of PARAMS) q.set(def.key, String(scenario[def.key]));
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
 * pending promise settle before it moves on.
 */
export async function runScenarioAsync(lib, scenario) {
  const problems = validateScenario(scenario);
  if (problems.length) throw new RangeError(problems.join(' '));
  if (!presetById(scenario.preset).async) return runScenario(lib, scenario);
  const naive = await new LaneRun(lib, scenario, 'naive').runAsync();
  const fenced = await new LaneRun(lib, scenario, 'fenced').runAsync();
  return { scenario: { ...scenario }, lanes: { naive, fenced }, ...positionsOf([naive, fenced]) };
}

/** Resolves after every promise job queued so far has run (a macrotask turn). */
function settle() {
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      ch.port1.close();
      resolve();
    };
    ch.port2.postMessage(null);
  });
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

/** The script of each preset: a list of threads, each a list of steps. */
function script(s) {
  const writeA = [{ op: 'check', at: s.checkAt }, { op: 'model', ms: s.model }, { op: 'write', value: "A's report" }];
  const writeB = [{ op: 'check' }, { op: 'write', value: "B's report" }];
  const acqB = { op: 'acquire', at: s.bStart, up: s.upB, down: s.downB };
  const B = { actor: 'B', steps: [acqB, ...writeB] };
  switch (s.preset) {
    case 'gap':
      return [{ actor: 'A', steps: [{ op: 'acquire', at: 0, up: s.upA, down: s.downA }, ...writeA] }, B];
    case 'renewal':
      return [
        {
          actor: 'A',
          steps: [
            // A already holds the lease when the run starts.
            { op: 'acquire', at: 0, up: 0, down: 0 },
            { op: 'renew', at: 0, up: s.upA, down: s.downA },
            ...writeA,
          ],
        },
        B,
      ];
    case 'lost':
      return [
        {
          actor: 'A',
          steps: [{ op: 'acquire', at: 0, up: s.upA, down: s.downA, lose: 1, timeout: s.upA + s.downA + 100 }, ...writeA],
        },
        B,
      ];
    case 'expired':
      return [
        { actor: 'A', steps: [{ op: 'acquire', at: 0, up: s.upA, down: s.downA }, ...writeA] },
        { actor: 'A', steps: [{ op: 'renew', at: s.ttl + 100, up: s.upA, down: s.downA, heartbeat: true }] },
        B,
      ];
    case 'early':
    case 'push':
      return [
        { actor: 'A', steps: [{ op: 'acquire', at: 0, up: s.upA, down: s.downA }, ...writeA] },
        { actor: 'B', steps: [acqB, { op: 'check' }, { op: 'model', ms: B_WORK }, { op: 'write', value: "B's report" }] },
      ];
    case 'async':
      // A's store call lasts `model` ms; it first tries gate.commit with its
      // async function, then uses commitAsync.
      return [
        {
          actor: 'A',
          steps: [
            { op: 'acquire', at: 0, up: s.upA, down: s.downA },
            { op: 'check', at: s.checkAt },
            // A does not wait for its report to be stored: it works on and
            // writes a follow-up while the report's write is still running.
            { op: 'awrite', value: "A's report", ms: s.model, tryCommit: true, detach: true },
            { op: 'model', ms: A_GAP },
            { op: 'awrite', value: "A's follow-up", ms: A_FOLLOW_UP },
          ],
        },
        { actor: 'B', steps: [acqB, { op: 'check' }, { op: 'awrite', value: "B's report", ms: B_STORE }] },
      ];
    case 'restart':
    case 'restart-kept': {
      const restartAt = s.bStart + 200;
      return [
        {
          actor: 'A',
          steps: [
            { op: 'acquire', at: 0, up: s.upA, down: s.downA },
            ...writeA,
            { op: 'acquire', at: restartAt + 100, up: s.upA, down: s.downA },
            { op: 'check' },
            { op: 'model', ms: s.model },
            { op: 'write', value: "A's second report" },
          ],
        },
        B,
        { actor: 'C', steps: [{ op: 'restart', at: restartAt, persist: s.preset === 'restart-kept' }] },
      ];
    }
    default:
      throw new RangeError(`unknown preset ${shown(s.preset)}`);
  }
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
    this.clocks = {
      A: lib.createManualClock('agent-a', { start: 0, stepPerRead: s.step }),
      B: lib.createManualClock('agent-b', { start: 0, stepPerRead: s.step }),
      C: lib.createManualClock('coordinator', { start: 0, stepPerRead: s.step }),
    };
    this.coordinator = new lib.LeaseCoordinator({ clock: this.clocks.C, ttlMillis: s.ttl });
    this.gate = this.fenced ? new lib.FenceGate(RESOURCE) : null;
    this.resource = { value: null, by: null };
    this.agents = {};
    for (const key of ['A', 'B']) {
      const id = key === 'A' ? 'agent-a' : 'agent-b';
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
    this.events.push({ seq: this.events.length, ...e });
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

  /** run for scripts whose writes await: lets promises settle after every action. */
  async runAsync() {
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

  // Runs thread th from step i at time t.
  thread(th, i, t) {
    if (i >= th.steps.length) return;
    const step = th.steps[i];
    const start = Math.max(t, step.at ?? t);
    if (start > t) this.at(start, () => this.exec(th, i, start));
    else this.exec(th, i, t);
  }

  next(th, i, t) {
    this.thread(th, i + 1, t);
  }

  exec(th, i, t) {
    const step = th.steps[i];
    if (th.actor === 'C') {
      this.restart(step, t);
      return this.next(th, i, t);
    }
    const ag = this.agents[th.actor];
    switch (step.op) {
      case 'acquire':
        return this.acquire(ag, th, i, t, step, 1);
      case 'renew':
        return this.renew(ag, th, i, t, step);
      case 'check':
        return this.check(ag, th, i, t);
      case 'model':
        this.emit({ t, actor: ag.key, kind: 'model', until: t + step.ms, ms: step.ms });
        return this.at(t + step.ms, () => this.next(th, i, t + step.ms));
      case 'write':
        return this.write(ag, th, i, t, step);
      case 'awrite':
        return this.writeAsync(ag, th, i, t, step);
      default:
        throw new Error(`unknown step ${step.op}`);
    }
  }

  restart(step, t) {
    this.bring('C', t);
    const issued = this.coordinator.issuedFence;
    const startFence = step.persist ? issued : undefined;
    const opts = { clock: this.clocks.C, ttlMillis: this.s.ttl };
    this.coordinator = new this.lib.LeaseCoordinator(step.persist ? { ...opts, startFence } : opts);
    this.epoch++;
    for (const g of this.generations) {
      if (g.epoch < this.epoch && g.end > t) {
        g.end = t;
        g.forgotten = true;
      }
    }
    this.emit({ t, actor: 'C', kind: 'restart', persisted: !!step.persist, startFence: startFence ?? 0, issuedBefore: issued });
  }

  // Sends req (already begun) to the coordinator; handle(outcome, t) gets the answer.
  send(ag, t, req, step, handle, what, again, loseReply) {
    const name = this.reqName(req);
    const arrive = t + step.up;
    this.emit({ t, actor: ag.key, kind: 'send', to: 'C', arrive, what, req: name, again, sentAt: millis(req.sentAt) });
    this.at(arrive, () => {
      const outcome = this.process(ag, req, what, arrive);
      const back = arrive + step.down;
      if (loseReply) {
        this.emit({ t: back, actor: ag.key, kind: 'lost', from: 'C', departed: arrive, req: name });
        return;
      }
      this.at(back, () => {
        this.bring(ag.key, back);
        this.emit({ t: back, actor: ag.key, kind: 'reply', from: 'C', departed: arrive, req: name, ok: !!outcome.ok });
        handle(outcome, back);
      });
    });
  }

  // The coordinator processes req at time t and answers.
  process(ag, req, what, t) {
    this.bring('C', t);
    const name = this.reqName(req);
    // The request crosses the wire as JSON, as it would between processes.
    const wire = JSON.parse(JSON.stringify(req));
    const outcome = what === 'renewal' ? this.coordinator.renew(wire) : this.coordinator.acquire(wire);
    const ev = { t, actor: 'C', from: ag.key, req: name, what, issuedFence: this.coordinator.issuedFence };
    if (outcome.ok) {
      const g = outcome.grant;
      const until = millis(g.coordinatorExpiresAt);
      const holder = HOLDER_KEY[g.holderId];
      let gen = this.generations.find((x) => x.epoch === this.epoch && x.fence === g.fence && x.holder === holder);
      const prev = this.generations.filter((x) => x.epoch === this.epoch).at(-1);
      if (!gen) {
        gen = { id: this.generations.length, epoch: this.epoch, holder, fence: g.fence, start: t, end: until };
        this.generations.push(gen);
        const reassignedFrom = prev && prev.holder !== holder ? prev.holder : null;
        this.emit({ ...ev, kind: 'grant', holder, fence: g.fence, until, reassignedFrom });
        if (this.s.preset === 'push') this.push(g, t);
      } else if (what === 'renewal') {
        gen.end = until;
        this.emit({ ...ev, kind: 'extend', holder, fence: g.fence, until });
      } else {
        this.emit({ ...ev, kind: 'replay', holder, fence: g.fence, until });
      }
      this.genOfReq.set(req.requestId, gen.id);
    } else if (outcome.reason === 'expired') {
      this.emit({ ...ev, kind: 'refuse-renewal' });
    } else {
      this.emit({ ...ev, kind: 'deny', heldBy: outcome.heldBy, retryAfter: outcome.retryAfterMillis });
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

  acquire(ag, th, i, t, step, attempt) {
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
      this.send(ag, ts, req, step, handle, 'acquire', sends > 1, loseReply);
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

  renew(ag, th, i, t, step) {
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
    this.send(ag, t, req, step, handle, 'renewal', false, false);
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

  check(ag, th, i, t) {
    this.bring(ag.key, t);
    if (!ag.lease) {
      this.emit({ t, actor: ag.key, kind: 'check', result: 'none' });
      return;
    }
    if (this.fenced) {
      const expired = ag.lease.hasExpired();
      this.emit({ t, actor: ag.key, kind: 'check', result: expired ? 'expired' : 'valid', advisory: true });
      return this.next(th, i, t);
    }
    const valid = ag.naive.valid();
    this.emit({ t, actor: ag.key, kind: 'check', result: valid ? 'valid' : 'expired', expiresAt: millis(ag.naive.expiresAt) });
    if (valid) this.next(th, i, t);
  }

  write(ag, th, i, t, step) {
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
      this.emit({ ...base, landed: true, fence: null });
      return this.next(th, i, t);
    }
    const floorBefore = this.gate.floor;
    try {
      this.gate.commit(ag.lease.token, apply);
      this.emit({ ...base, landed: true, fence, floorBefore, floor: this.gate.floor });
    } catch (err) {
      if (!(err instanceof this.lib.StaleFenceError)) throw err;
      this.emit({ ...base, landed: false, fence, floorBefore, floor: this.gate.floor, rejection: plainRejection(err.rejection) });
    }
    this.next(th, i, t);
  }

  // A write whose store call takes step.ms: naive, it just runs; fenced, it
  // goes through gate.commitAsync (after showing gate.commit refuse the
  // async function, when step.tryCommit). The write's value lands when its
  // store call ends; events: write-call (the call, and whether it had to
  // queue), write-begin (its turn came later), write (landed or refused).
  writeAsync(ag, th, i, t, step) {
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
      const overtaken = this.events.some((e) => e.kind === 'write' && e.landed && e.actor !== ag.key && e.t > began);
      const stale = !(this.generations[ag.gen].end > began) || overtaken;
      const floor = this.fenced ? this.gate.floor : undefined;
      this.emit({ ...base, t: this.now, kind: 'write', landed: true, fence: this.fenced ? fence : null, began, before, beforeBy, stale, overtaken, floorBefore, floor });
    };
    if (!this.fenced) {
      began = t;
      this.emit({ ...base, t, kind: 'write-call', fence: null, queued: false });
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
    this.emit({ ...base, t, kind: 'write-call', fence, queued: began === null, floorBefore: floorAtCall, floor: this.gate.floor });
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
    const events = this.events;
    // The coordinator never announces an expiry; it just stops honouring the
    // lease. Draw each generation's end where it fell.
    const last = events.reduce((m, e) => Math.max(m, e.t), 0);
    for (const g of this.generations) {
      if (g.end <= last) {
        events.push({ seq: events.length, t: g.end, actor: 'C', kind: 'expire', forgotten: !!g.forgotten, holder: g.holder, fence: g.fence, prio: g.forgotten ? 1 : -1 });
      }
    }
    events.sort((a, b) => a.t - b.t || (a.prio ?? 0) - (b.prio ?? 0) || a.seq - b.seq);
    events.forEach((e, n) => {
      e.seq = n;
      e.rank = n > 0 && events[n - 1].t === e.t ? events[n - 1].rank + 1 : 0;
      delete e.prio;
    });
    const generations = this.generations.map((g) => ({ ...g }));
    return {
      mode: this.mode,
      events,
      generations,
      windows: staleWindows(events, generations),
      rejections: this.gate ? this.gate.rejections.map(plainRejection) : [],
      finalValue: this.resource.value,
      finalBy: this.resource.by,
      floor: this.gate ? this.gate.floor : null,
      issuedFence: this.coordinator.issuedFence,
    };
  }
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
  let floor = lane.mode === 'fenced' ? 0 : null;
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
