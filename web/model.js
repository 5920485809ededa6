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
];

export const DEFAULT_PRESET = 'gap';

/** How long B works between its check and its write in the early and push presets. */
const B_WORK = 300;

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
 * Each lane is { mode, events, generations, rejections, finalValue, floor,
 * issuedFence }; each event has t (virtual milliseconds) and rank (its place
 * among the lane's events at the same t).
 * `positions` are the places the step button and the scrubber move through:
 * { t, j } shows every event before t and the first j events at t, so one
 * step reveals one event per lane. Position 0 shows nothing yet.
 */
export function runScenario(lib, scenario) {
  const problems = validateScenario(scenario);
  if (problems.length) throw new RangeError(problems.join(' '));
  const naive = runLane(lib, scenario, 'naive');
  const fenced = runLane(lib, scenario, 'fenced');
  const counts = new Map();
  for (const lane of [naive, fenced]) {
    const here = new Map();
    for (const e of lane.events) here.set(e.t, (here.get(e.t) ?? 0) + 1);
    for (const [t, n] of here) counts.set(t, Math.max(counts.get(t) ?? 0, n));
  }
  const times = [...counts.keys()].sort((a, b) => a - b);
  const positions = [{ t: times.length ? Math.min(0, times[0]) : 0, j: 0 }];
  for (const t of times) for (let j = 1; j <= counts.get(t); j++) positions.push({ t, j });
  return { scenario: { ...scenario }, lanes: { naive, fenced }, positions, end: positions[positions.length - 1].t };
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
 * Runs one lane. mode 'naive': holders date their lease from the reply's
 * arrival (createNaiveLease, renewed()), check it right before the model
 * call, and write to a plain, unguarded resource. mode 'fenced': holders turn
 * grants into leases with completeAcquire/completeRenewal (anchored at the
 * send), look at hasExpired() only as advice, and write through
 * FenceGate.commit. Both lanes send the same requests to the same kind of
 * coordinator.
 */
export function runLane(lib, s, mode) {
  const fenced = mode === 'fenced';
  const clocks = {
    A: lib.createManualClock('agent-a', { start: 0, stepPerRead: s.step }),
    B: lib.createManualClock('agent-b', { start: 0, stepPerRead: s.step }),
    C: lib.createManualClock('coordinator', { start: 0, stepPerRead: s.step }),
  };
  let coordinator = new lib.LeaseCoordinator({ clock: clocks.C, ttlMillis: s.ttl });
  const gate = fenced ? new lib.FenceGate(RESOURCE) : null;
  const resource = { value: null, by: null };
  const agents = {};
  for (const key of ['A', 'B']) {
    const id = key === 'A' ? 'agent-a' : 'agent-b';
    agents[key] = {
      key,
      id,
      client: new lib.LeaseClient({ clock: clocks[key], holderId: id, clockSkewMillis: s.skew }),
      lease: null, // the library's lease (fenced lane; the naive lane keeps it only to form renewals)
      naive: null, // the naive lease (naive lane)
    };
  }

  const events = [];
  const reqNames = new Map();
  const reqName = (req) => {
    if (!reqNames.has(req.requestId)) reqNames.set(req.requestId, `r${reqNames.size + 1}`);
    return reqNames.get(req.requestId);
  };
  // Coordinator lease generations, to draw their spans and expiries.
  const generations = [];
  let epoch = 0; // bumps on restart
  const emit = (e) => events.push({ seq: events.length, ...e });

  // Moves a clock to virtual time t. A manual clock never goes backwards, and
  // stepPerRead may already have carried it past t: then it stays where it is.
  const bring = (key, t) => {
    try {
      clocks[key].set(t);
    } catch (err) {
      if (!(err instanceof lib.ClockReadingError)) throw err;
    }
  };

  const queue = [];
  let order = 0;
  const at = (t, fn) => queue.push({ t, order: order++, fn });

  // Runs thread th from step i at time t.
  const run = (th, i, t) => {
    if (i >= th.steps.length) return;
    const step = th.steps[i];
    const start = Math.max(t, step.at ?? t);
    if (start > t) {
      at(start, () => exec(th, i, start));
    } else {
      exec(th, i, t);
    }
  };
  const next = (th, i, t) => run(th, i + 1, t);

  const exec = (th, i, t) => {
    const step = th.steps[i];
    if (th.actor === 'C') {
      restart(step, t);
      return next(th, i, t);
    }
    const ag = agents[th.actor];
    switch (step.op) {
      case 'acquire':
        return acquire(ag, th, i, t, step, 1);
      case 'renew':
        return renew(ag, th, i, t, step);
      case 'check':
        return check(ag, th, i, t);
      case 'model':
        emit({ t, actor: ag.key, kind: 'model', until: t + step.ms, text: `${ag.key} calls the model (${step.ms} ms)` });
        return at(t + step.ms, () => next(th, i, t + step.ms));
      case 'write':
        return write(ag, th, i, t, step);
      default:
        throw new Error(`unknown step ${step.op}`);
    }
  };

  const restart = (step, t) => {
    bring('C', t);
    const issued = coordinator.issuedFence;
    const startFence = step.persist ? issued : undefined;
    coordinator = new lib.LeaseCoordinator(
      step.persist ? { clock: clocks.C, ttlMillis: s.ttl, startFence } : { clock: clocks.C, ttlMillis: s.ttl },
    );
    epoch++;
    for (const g of generations) {
      if (g.epoch < epoch && g.end > t) {
        g.end = t;
        g.forgotten = true;
      }
    }
    emit({
      t,
      actor: 'C',
      kind: 'restart',
      persisted: !!step.persist,
      startFence: startFence ?? 0,
      issuedBefore: issued,
      text: step.persist
        ? `The coordinator restarts; its successor gets startFence = ${issued} (the old issuedFence)`
        : `The coordinator restarts and forgets everything: the old issuedFence (${issued}) was not persisted`,
    });
  };

  // Sends req (already begun) to the coordinator and handles the answer.
  const send = (ag, t, req, step, handle, what, again, loseReply) => {
    const name = reqName(req);
    const arrive = t + step.up;
    emit({
      t,
      actor: ag.key,
      kind: 'send',
      to: 'C',
      arrive,
      what,
      req: name,
      sentAt: millis(req.sentAt),
      text: `${ag.key} ${again ? 'resends' : 'sends'} ${what} ${name}${again ? ' (same request id, same sentAt)' : ''}, stamped sentAt = ${fmt(millis(req.sentAt))}`,
    });
    at(arrive, () => {
      bring('C', arrive);
      // The request crosses the wire as JSON, as it would between processes.
      const wire = JSON.parse(JSON.stringify(req));
      const outcome = what === 'renewal' ? coordinator.renew(wire) : coordinator.acquire(wire);
      const back = arrive + step.down;
      const ev = { t: arrive, actor: 'C', from: ag.key, req: name, what, issuedFence: coordinator.issuedFence };
      if (outcome.ok) {
        const g = outcome.grant;
        const until = millis(g.coordinatorExpiresAt);
        const holder = HOLDER_KEY[g.holderId];
        let gen = generations.find((x) => x.epoch === epoch && x.fence === g.fence && x.holder === holder);
        const prev = generations.filter((x) => x.epoch === epoch).at(-1);
        if (!gen) {
          gen = { epoch, holder, fence: g.fence, start: arrive, end: until };
          generations.push(gen);
          const reassigned = prev && prev.holder !== holder ? `; reassigned from ${prev.holder}` : '';
          emit({
            ...ev,
            kind: 'grant',
            holder,
            fence: g.fence,
            until,
            text: `The coordinator grants ${name} to ${holder}: fence ${g.fence}, until ${fmt(until)} on its clock${reassigned}`,
          });
          if (s.preset === 'push') push(g, arrive);
        } else if (what === 'renewal') {
          gen.end = until;
          emit({
            ...ev,
            kind: 'extend',
            holder,
            fence: g.fence,
            until,
            text: `The coordinator renews ${holder}'s lease from its own reading: fence ${g.fence} now ends at ${fmt(until)}`,
          });
        } else {
          emit({
            ...ev,
            kind: 'replay',
            holder,
            fence: g.fence,
            until,
            text: `The coordinator has seen ${name} before and answers with the same grant: fence ${g.fence} (issuedFence still ${coordinator.issuedFence})`,
          });
        }
      } else if (outcome.reason === 'expired') {
        emit({ ...ev, kind: 'refuse-renewal', text: `The coordinator refuses renewal ${name}: reason "expired" (an expired lease is never extended)` });
      } else {
        emit({
          ...ev,
          kind: 'deny',
          heldBy: outcome.heldBy,
          retryAfter: outcome.retryAfterMillis,
          text: `The coordinator denies ${name}: held by ${outcome.heldBy}, free in ${fmt(outcome.retryAfterMillis)} ms`,
        });
      }
      if (loseReply) {
        emit({ t: back, actor: ag.key, kind: 'lost', from: 'C', departed: arrive, req: name, text: `The reply to ${name} is lost on its way to ${ag.key}` });
        return;
      }
      at(back, () => {
        bring(ag.key, back);
        emit({ t: back, actor: ag.key, kind: 'reply', from: 'C', departed: arrive, req: name, ok: !!outcome.ok, text: `${ag.key} receives the answer to ${name}` });
        handle(outcome, back);
      });
    });
  };

  // The push preset: the coordinator hands each new token to the resource
  // with gate.admit as it grants, so the floor rises before the holder writes.
  const push = (g, t) => {
    const holder = HOLDER_KEY[g.holderId];
    if (!fenced) {
      emit({ t, actor: 'R', kind: 'admit', holder, fence: g.fence, pushed: false, text: `The naive resource has no gate: there is nothing to push ${holder}'s grant to` });
      return;
    }
    const token = { resource: g.resource, holderId: g.holderId, fence: g.fence };
    try {
      gate.admit(token);
      emit({ t, actor: 'R', kind: 'admit', holder, fence: g.fence, pushed: true, floor: gate.floor, text: `The coordinator pushes ${holder}'s fence ${g.fence} to the gate (gate.admit): floor now ${gate.floor}` });
    } catch (err) {
      if (!(err instanceof lib.StaleFenceError)) throw err;
      emit({ t, actor: 'R', kind: 'admit', holder, fence: g.fence, pushed: false, rejection: plainRejection(err.rejection), text: `The gate refuses the pushed fence ${g.fence}: it is below its floor` });
    }
  };

  const acquire = (ag, th, i, t, step, attempt) => {
    bring(ag.key, t);
    const req = ag.client.beginAcquire(RESOURCE);
    let sends = 0;
    const handle = (outcome, tr) => {
      if (outcome.ok) {
        took(ag, req, outcome.grant, tr, 'acquire', step);
        return next(th, i, tr);
      }
      if (outcome.heldBy !== undefined && attempt < MAX_ATTEMPTS) {
        const retry = tr + Math.max(1, Math.ceil(outcome.retryAfterMillis));
        return at(retry, () => acquire(ag, th, i, retry, { ...step, lose: 0 }, attempt + 1));
      }
      emit({ t: tr, actor: ag.key, kind: 'give-up', text: `${ag.key} gives up acquiring` });
    };
    const lose = step.lose ?? 0;
    const attemptSend = (ts) => {
      sends++;
      const loseReply = sends <= lose;
      send(ag, ts, req, step, handle, 'acquire', sends > 1, loseReply);
      if (loseReply) {
        // No answer within the timeout: resend the very same request.
        const again = ts + step.timeout;
        at(again, () => {
          bring(ag.key, again);
          emit({ t: again, actor: ag.key, kind: 'timeout', req: reqName(req), text: `${ag.key} has had no answer to ${reqName(req)} after ${step.timeout} ms and resends it unchanged` });
          attemptSend(again);
        });
      }
    };
    attemptSend(t);
  };

  const renew = (ag, th, i, t, step) => {
    bring(ag.key, t);
    if (!ag.lease) {
      emit({ t, actor: ag.key, kind: 'give-up', text: `${ag.key} has no lease to renew` });
      return;
    }
    const req = ag.client.beginRenewal(ag.lease);
    send(ag, t, req, step, (outcome, tr) => {
      if (outcome.ok) {
        took(ag, req, outcome.grant, tr, 'renewal', step);
      } else {
        emit({
          t: tr,
          actor: ag.key,
          kind: 'renewal-refused',
          text: fenced
            ? `${ag.key} learns its lease expired; it must re-acquire (and would get a higher fence)`
            : `${ag.key} learns the renewal failed; its expiresAt stays ${fmt(millis(ag.naive.expiresAt))}`,
        });
      }
      next(th, i, tr);
    }, 'renewal', false, false);
  };

  // A grant arrived at tr: make the lease.
  const took = (ag, req, grant, tr, what) => {
    bring(ag.key, tr);
    const lease = what === 'renewal' ? ag.client.completeRenewal(req, grant) : ag.client.completeAcquire(req, grant);
    ag.lease = lease;
    if (fenced) {
      const deadline = millis(lease.deadline);
      emit({
        t: tr,
        actor: ag.key,
        kind: 'lease',
        fence: lease.token.fence,
        deadline,
        text: `${ag.key} holds fence ${lease.token.fence}; deadline = sentAt ${fmt(millis(req.sentAt))} + ttl ${fmt(grant.ttlMillis)} − skew ${fmt(s.skew)} = ${fmt(deadline)}`,
      });
    } else {
      if (what === 'renewal' && ag.naive) ag.naive.renewed();
      else ag.naive = lib.createNaiveLease(clocks[ag.key], grant.ttlMillis);
      const exp = millis(ag.naive.expiresAt);
      emit({
        t: tr,
        actor: ag.key,
        kind: 'lease',
        deadline: exp,
        text: `${ag.key} sets expiresAt = now + ttl = ${fmt(exp)} (dated from the reply, not the send)`,
      });
    }
  };

  const check = (ag, th, i, t) => {
    bring(ag.key, t);
    if (!ag.lease) {
      emit({ t, actor: ag.key, kind: 'check', result: 'none', text: `${ag.key} has no lease and does not write` });
      return;
    }
    if (fenced) {
      const expired = ag.lease.hasExpired();
      emit({
        t,
        actor: ag.key,
        kind: 'check',
        result: expired ? 'expired' : 'valid',
        advisory: true,
        text: `${ag.key} asks lease.hasExpired(): ${expired} (advice only; the write goes through the gate either way)`,
      });
      return next(th, i, t);
    }
    const exp = millis(ag.naive.expiresAt);
    const valid = ag.naive.valid();
    emit({
      t,
      actor: ag.key,
      kind: 'check',
      result: valid ? 'valid' : 'expired',
      text: valid ? `${ag.key} checks now < expiresAt (${fmt(exp)}): valid, so it goes ahead` : `${ag.key} checks now < expiresAt (${fmt(exp)}): expired, so it stands down`,
    });
    if (valid) next(th, i, t);
  };

  const write = (ag, th, i, t, step) => {
    bring(ag.key, t);
    const before = resource.value;
    const apply = () => {
      resource.value = step.value;
      resource.by = ag.key;
    };
    if (!fenced) {
      apply();
      emit({
        t,
        actor: ag.key,
        kind: 'write',
        landed: true,
        value: step.value,
        text: `${ag.key}'s write lands: the resource now holds "${step.value}"${before !== null ? ` (it held "${before}")` : ''}`,
      });
      return next(th, i, t);
    }
    const token = ag.lease.token;
    try {
      gate.commit(token, apply);
      emit({
        t,
        actor: ag.key,
        kind: 'write',
        landed: true,
        value: step.value,
        fence: token.fence,
        floor: gate.floor,
        text: `The gate admits ${ag.key}'s write with fence ${token.fence} (floor now ${gate.floor}): the resource holds "${step.value}"`,
      });
    } catch (err) {
      if (!(err instanceof lib.StaleFenceError)) throw err;
      const r = err.rejection;
      emit({
        t,
        actor: ag.key,
        kind: 'write',
        landed: false,
        value: step.value,
        fence: token.fence,
        floor: gate.floor,
        rejection: plainRejection(r),
        text: `The gate refuses ${ag.key}'s write: fence ${r.refusedFence} is below ${r.admittedHolderId}'s ${r.admittedFence} (rejection #${r.seq})`,
      });
    }
    next(th, i, t);
  };

  for (const th of script(s)) run(th, 0, 0);
  let actions = 0;
  while (queue.length) {
    if (++actions > MAX_ACTIONS) throw new RangeError('the scenario did not settle within ' + MAX_ACTIONS + ' steps');
    let k = 0;
    for (let j = 1; j < queue.length; j++) {
      if (queue[j].t < queue[k].t || (queue[j].t === queue[k].t && queue[j].order < queue[k].order)) k = j;
    }
    const [item] = queue.splice(k, 1);
    item.fn();
  }

  // The coordinator never announces an expiry; it just stops honouring the
  // lease. Draw each generation's end where it fell.
  const last = events.reduce((m, e) => Math.max(m, e.t), 0);
  for (const g of generations) {
    if (g.end <= last) {
      emit({
        t: g.end,
        actor: 'C',
        kind: 'expire',
        forgotten: !!g.forgotten,
        holder: g.holder,
        fence: g.fence,
        prio: g.forgotten ? 1 : -1,
        text: g.forgotten
          ? `The restarted coordinator has forgotten ${g.holder}'s lease (fence ${g.fence})`
          : `${g.holder}'s lease (fence ${g.fence}) ends on the coordinator's clock: it is free to be reassigned`,
      });
    }
  }
  events.sort((a, b) => a.t - b.t || (a.prio ?? 0) - (b.prio ?? 0) || a.seq - b.seq);
  events.forEach((e, n) => {
    e.seq = n;
    e.rank = n > 0 && events[n - 1].t === e.t ? events[n - 1].rank + 1 : 0;
    delete e.prio;
  });

  return {
    mode,
    events,
    generations: generations.map((g) => ({ ...g })),
    rejections: gate ? gate.rejections.map(plainRejection) : [],
    finalValue: resource.value,
    finalBy: resource.by,
    floor: gate ? gate.floor : null,
    issuedFence: coordinator.issuedFence,
  };
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
