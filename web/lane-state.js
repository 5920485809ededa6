// Reading a run of the playground's model: a lane finished (its stale
// windows, its generations' order), the state shown at a position, the
// position at a time, and milliseconds as the page writes them.

import { COORDINATOR } from './scenario.js';

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

export function plainRejection(r) {
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
