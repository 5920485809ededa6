// A live run beside the model's run of the same scenario: whether they
// reach the same verdicts, and where real timing made them differ. Pure
// functions over the two runs' events (no DOM, no clock), tested under Node.

import { fmt } from './model.js';
import { verdicts } from './words.js';

const MODES = ['naive', 'fenced'];
const LANE = { naive: 'Naive', fenced: 'Fenced' };

/** Below this many (scenario) milliseconds, a live event is on time. */
export const ON_TIME = 2;

// The kinds of event compared, and how one is named in a difference.
const NAMES = {
  send: (e) => `${e.actor} ${e.again ? 'resends' : 'sends'} ${e.what}`,
  grant: (e) => `grant to ${e.holder} (fence ${e.fence})`,
  extend: (e) => `renewal of ${e.holder}'s lease`,
  replay: (e) => `same grant to ${e.holder}`,
  deny: (e) => `${e.from} denied`,
  'refuse-renewal': (e) => `${e.from}'s renewal refused`,
  reply: (e) => `reply reaching ${e.actor}`,
  lost: (e) => `lost reply to ${e.actor}`,
  timeout: (e) => `${e.actor}'s timeout`,
  lease: (e) => `${e.actor}'s lease (fence ${e.fence})`,
  check: (e) => `${e.actor}'s check`,
  model: (e) => `${e.actor}'s model call`,
  write: (e) => `${e.actor}'s write${e.fence ? ` (fence ${e.fence})` : ''}`,
  'write-call': (e) => `${e.actor}'s write call`,
  'write-begin': (e) => `${e.actor}'s turn at the gate`,
  restart: () => 'the coordinator restart',
  admit: (e) => `push of fence ${e.fence}`,
  expire: (e) => `end of ${e.holder}'s lease (fence ${e.fence})`,
  'renewal-refused': (e) => `${e.actor} learning its renewal failed`,
  'give-up': (e) => `${e.actor} giving up`,
  misuse: (e) => `${e.actor}'s gate.commit(async fn)`,
};

/** The name of event e in a difference ("grant to B (fence 2)"). */
export const nameOf = (e) => (NAMES[e.kind] ?? ((x) => `${x.actor} ${x.kind}`))(e);

// Each compared event of a lane by key: kind, actor, holder and its place
// among the events with the same three.
function keyed(lane) {
  const seen = new Map();
  const out = new Map();
  for (const e of lane.events) {
    if (!NAMES[e.kind]) continue;
    const base = `${e.kind}|${e.actor}|${e.holder ?? e.from ?? ''}`;
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.set(`${base}|${n}`, e);
  }
  return out;
}

// The order in which the writes landed (or were refused): "A, B".
const writeOrder = (lane) => lane.events.filter((e) => e.kind === 'write').map((e) => `${e.actor}${e.landed ? '' : ' (refused)'}`);

/**
 * Compares a live run with the model's run of the same scenario. Returns
 * { same, lanes: { naive, fenced } with { model, live, same } verdicts,
 * diffs: [{ mode, text, delta }] (largest first: events that happened at
 * another time, or only in one of the runs), onTime (events within ON_TIME),
 * orders: sentences where the writes landed in another order, summary }.
 */
export function compareRuns(model, live) {
  const vm = verdicts(model);
  const vl = verdicts(live);
  const lanes = {};
  const diffs = [];
  const orders = [];
  let onTime = 0;
  for (const mode of MODES) {
    lanes[mode] = { model: vm[mode].text, live: vl[mode].text, same: vm[mode].text === vl[mode].text };
    const m = keyed(model.lanes[mode]);
    const l = keyed(live.lanes[mode]);
    for (const [key, e] of l) {
      const o = m.get(key);
      if (!o) {
        diffs.push({ mode, delta: Infinity, text: `${LANE[mode]}: ${nameOf(e)} at ${fmt(e.t)} happened only in the live run` });
        continue;
      }
      const d = e.t - o.t;
      if (Math.abs(d) < ON_TIME) onTime++;
      else diffs.push({ mode, delta: Math.abs(d), text: `${LANE[mode]}: ${nameOf(e)} at ${fmt(e.t)}, ${fmt(o.t)} in the model (${d > 0 ? '+' : '−'}${fmt(Math.abs(d))} ms)` });
    }
    for (const [key, o] of m) {
      if (!l.has(key)) diffs.push({ mode, delta: Infinity, text: `${LANE[mode]}: ${nameOf(o)}, at ${fmt(o.t)} in the model, did not happen in the live run` });
    }
    const wm = writeOrder(model.lanes[mode]);
    const wl = writeOrder(live.lanes[mode]);
    if (wm.join() !== wl.join()) orders.push(`${LANE[mode]}: the writes reached the resource in the order ${wl.join(', ') || 'none'} live, ${wm.join(', ') || 'none'} in the model.`);
  }
  diffs.sort((a, b) => b.delta - a.delta);
  const same = lanes.naive.same && lanes.fenced.same;
  let summary;
  if (same) summary = 'Same verdicts as the model in both lanes.';
  else {
    const which = MODES.filter((m) => !lanes[m].same).map((m) => LANE[m].toLowerCase());
    summary = `The ${which.join(' and ')} verdict${which.length > 1 ? 's differ' : ' differs'} from the model's${orders.length ? `: ${orders.join(' ')}` : '.'}`;
  }
  return { same, lanes, diffs, onTime, orders, summary };
}
