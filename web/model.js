// The playground's model: a scenario (a preset plus numbers) goes in, two
// lists of timestamped events come out, one per lane, computed by driving the
// lease-fence module exactly as a JavaScript caller would. Nothing here
// touches the DOM, reads a wall clock or draws a random number: the same
// scenario gives the same events every time, which is what lets a link,
// a step button and a scrubber all show the same run.
//
// The library is passed in (runScenario(lib, spec)) rather than imported, so
// the same code runs in the page and under `node --test`.
//
// The scenario (presets, numbers, URL) is scenario.js, the reading of a run
// lane-state.js; both are exported from here too.

import { RESOURCE, HOLDERS, HOLDER_KEY, COORDINATOR, hasC, agentKeys, PARAMS, presetById, shown, validateScenario } from './scenario.js';
import { finishLane, newer, plainRejection } from './lane-state.js';

export { RESOURCE, HOLDERS, COORDINATOR, agentKeys, PARAMS, applies, PRESETS, DEFAULT_PRESET, presetById, defaultScenario, shown, parseQuery, toQuery, validateScenario } from './scenario.js';
export { finishLane, staleWindows, newer, fmt, visible, stateAt, indexAtTime } from './lane-state.js';

/** In the async preset: B's store call, A's work between its two writes, A's follow-up's store call. */
const B_STORE = 100;
const A_GAP = 250;
const A_FOLLOW_UP = 50;

// --- the run -----------------------------------------------------------------

/**
 * The tryCommit step of a lane (model's or live's: { gate, lib, emit }):
 * gate.commit handed an async function refuses it, as
 * InvalidArgumentError, before running it; ev is the misuse event's start.
 */
export function commitMisuse(lane, token, ev) {
  try {
    lane.gate.commit(token, async () => {
      throw new Error('gate.commit ran an async function');
    });
    throw new Error('gate.commit accepted an async function');
  } catch (err) {
    if (!(err instanceof lane.lib.InvalidArgumentError)) throw err;
    lane.emit({ ...ev, kind: 'misuse', error: err.name, floor: lane.gate.floor });
  }
}

/**
 * A synchronous write of step.value by agent ag at t in a lane (model's or
 * live's: { fenced, gate, lib, resource }): naive, it lands; fenced, it goes
 * through gate.commit(token). Returns its write event; stale says whether
 * the coordinator no longer held the writer's lease.
 */
export function writeEvent(lane, ag, token, step, t, stale) {
  const r = lane.resource;
  const base = { t, actor: ag.key, kind: 'write', gen: ag.gen, value: step.value, before: r.value, beforeBy: r.by, stale };
  const apply = () => {
    r.value = step.value;
    r.by = ag.key;
  };
  if (!lane.fenced) {
    apply();
    return { ...base, landed: true, fence: null };
  }
  const floorBefore = lane.gate.floor;
  try {
    lane.gate.commit(token, apply);
    return { ...base, landed: true, fence: token.fence, floorBefore, floor: lane.gate.floor };
  } catch (err) {
    if (!(err instanceof lane.lib.StaleFenceError)) throw err;
    return { ...base, landed: false, fence: token.fence, floorBefore, floor: lane.gate.floor, rejection: plainRejection(err.rejection) };
  }
}

/** The finished lane (finishLane) of a lane run, model's or live's, with these events and generations. */
export function laneOf(lane, events, generations, issuedFence) {
  const { gate, resource } = lane;
  return finishLane({
    mode: lane.mode, events, generations, rejections: gate ? gate.rejections.map(plainRejection) : [], finalValue: resource.value, finalBy: resource.by,
    floor: gate ? gate.floor : null, initialFloor: lane.fenced ? lane.s.floor : null, issuedFence,
  });
}

/** The push preset's admit in a lane, model's or live's: grant g's token handed at t to the gate, for its resource. */
export function pushGrant(lane, resource, g, t) {
  const ev = { t, actor: 'R', kind: 'admit', holder: HOLDER_KEY[g.holderId], fence: g.fence };
  if (!lane.fenced) return lane.emit({ ...ev, pushed: false });
  try {
    lane.gate.admit({ resource, holderId: g.holderId, fence: g.fence });
    lane.emit({ ...ev, pushed: true, floor: lane.gate.floor });
  } catch (err) {
    if (!(err instanceof lane.lib.StaleFenceError)) throw err;
    lane.emit({ ...ev, pushed: false, refused: true, rejection: plainRejection(err.rejection) });
  }
}

/**
 * An agent's check at t in a lane, model's or live's: none without a lease;
 * fenced, lease.hasExpired() (advice only: the agent goes on); naive, its
 * valid() (it goes on when valid), expiresAt made a time by at.
 */
export function checkEvent(lane, ag, t, at) {
  const e = { t, actor: ag.key, kind: 'check' };
  if (!ag.lease) return { ...e, result: 'none' };
  if (lane.fenced) return { ...e, result: ag.lease.hasExpired() ? 'expired' : 'valid', advisory: true };
  return { ...e, result: ag.naive.valid() ? 'valid' : 'expired', expiresAt: at(ag.naive.expiresAt) };
}

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
    pushGrant(this, g.resource, g, t);
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
    const e = checkEvent(this, ag, t, millis);
    this.emitEdit(e, edit);
    if (e.result !== 'none' && (e.advisory || e.result === 'valid')) this.next(th, i, t);
  }

  write(ag, th, i, t, step, edit) {
    this.bring(ag.key, t);
    // A write "should not land" when the coordinator no longer holds the
    // writer's lease: it ended, or a restart forgot it.
    const stale = !(this.generations[ag.gen].end > t);
    this.emitEdit(writeEvent(this, ag, this.fenced ? ag.lease.token : null, step, t, stale), edit);
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
    if (step.tryCommit) commitMisuse(this, ag.lease.token, { t, actor: ag.key, wid, fence });
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
    return laneOf(this, this.events, this.generations, this.coordinator.issuedFence);
  }
}
