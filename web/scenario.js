// The playground's scenario: the agents and their holder ids, the numbers a
// visitor can change (PARAMS), the presets, and the scenario in a URL
// (parseQuery, toQuery, validateScenario). Plain data and checks: no DOM,
// no clock, no library (model.js runs it).

export const RESOURCE = 'report.md';

/** The agents' holder ids, by the key the page shows ("A", "B", "C"). */
export const HOLDERS = { A: 'agent-a', B: 'agent-b', C: 'agent-c' };
export const HOLDER_KEY = { 'agent-a': 'A', 'agent-b': 'B', 'agent-c': 'C' };
/** The coordinator's actor key in events (the agents are A, B and C). */
export const COORDINATOR = 'K';

const RESTARTS = new Set(['restart', 'restart-kept']);
export const hasC = (s) => s.agents === 3;
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
