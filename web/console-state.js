// The console's picture of a coordinator: one entry per resource, built
// from a listing (POST /v1/list) and the events of a watch (POST
// /v1/watch), plus the gates' refusals (GET /ui/api/rejections). Nothing
// here reads the DOM or the clock: every change takes the time it happens
// at (the coordinator's wall clock, Unix ms), so the model can be driven by
// a test or a benchmark at any pace.
//
// Memory is bounded per resource: the last RING events (a ring), and the
// waiters' ids (bounded by the coordinator's -max-waiters). A resource
// nobody holds, waits for, or touched within the forget time is dropped.

/** Events kept per resource. */
export const RING = 32;

/** A resource free and untouched this long (ms) is dropped from the picture. */
export const FORGET_MS = 15 * 60 * 1000;

const WHO = ['A', 'B', 'C'];
/** The colour of a lease: the playground's agents' colours, by fence, so that a handover changes colour. */
export const whoOf = (fence) => WHO[fence % 3];

/** One resource: its live lease (holder null when free), its waiters in order, its recent events. */
export class Resource {
  constructor(name) {
    this.name = name;
    this.holder = null;
    this.fence = 0;
    this.expiresAt = 0; // the coordinator's wall clock, ms
    this.value = undefined;
    this.waiters = []; // holder ids, in queue order (those this page saw join)
    this.waiterCount = 0; // the coordinator's count, when it says
    this.ring = new Array(RING);
    this.head = 0; // the next slot
    this.size = 0;
    this.touched = 0; // the time of the last event
    this.version = 0; // bumped at each change (for redraws)
  }

  /** The events kept, oldest first. */
  events() {
    const out = [];
    for (let i = 0; i < this.size; i++) out.push(this.ring[(this.head - this.size + i + RING) % RING]);
    return out;
  }

  push(e) {
    this.ring[this.head] = e;
    this.head = (this.head + 1) % RING;
    if (this.size < RING) this.size++;
    this.touched = Math.max(this.touched, e.t);
    this.version++;
  }

  /** The waiters to show: the ids known, in order, and how many more the coordinator counts. */
  queue() {
    return { ids: this.waiters, more: Math.max(0, this.waiterCount - this.waiters.length) };
  }

  /** Time left (ms) at now, 0 when free. */
  remaining(now) {
    return this.holder === null ? 0 : Math.max(0, this.expiresAt - now);
  }

  /**
   * The lane to draw (view.js drawLeaseRow): the leases of the events
   * kept, each from its grant to its end (or now), and the refusals.
   */
  lane(now) {
    const gens = [];
    const refusals = [];
    let open = null;
    const close = (t, how) => {
      open.end = t;
      open.how = how;
      open = null;
    };
    for (const e of this.events()) {
      switch (e.type) {
        case 'listed':
        case 'granted':
          if (open) close(e.t, open.fence === e.fence ? null : 'expired');
          open = { holder: e.holder, fence: e.fence, who: whoOf(e.fence), start: e.t, end: now, how: null, listed: e.type === 'listed', renewals: [] };
          gens.push(open);
          break;
        case 'renewed':
          if (open && open.fence === e.fence) open.renewals.push(e.t);
          else {
            // Its grant is older than the events kept.
            if (open) close(e.t, 'expired');
            open = { holder: e.holder, fence: e.fence, who: whoOf(e.fence), start: -Infinity, end: now, how: null, listed: true, renewals: [e.t] };
            gens.push(open);
          }
          break;
        case 'released':
        case 'expired':
        case 'revoked':
          if (open && open.fence === e.fence) close(e.t, e.type);
          else if (!open) gens.push({ holder: e.holder, fence: e.fence, who: whoOf(e.fence), start: -Infinity, end: e.t, how: e.type, listed: true, renewals: [] });
          break;
        case 'refused':
          refusals.push(e);
          break;
        default:
          break;
      }
    }
    // A lease past its time that the coordinator has not yet said expired
    // ends (for the drawing) where it ran out.
    if (open && this.holder === open.holder && this.fence === open.fence) open.end = Math.max(open.start, Math.min(now, this.expiresAt));
    else if (open) open.end = now;
    return { name: this.name, gens, refusals };
  }
}

/**
 * The picture: resources by name. apply() takes a watch event, refused() a
 * gate's refusal, load() a whole listing (after a connection that could
 * not resume).
 */
export class Picture {
  constructor() {
    this.resources = new Map();
    this.version = 0; // bumped when a resource is added or dropped
    this.changes = 0; // bumped at every change (a sort by fence or waiters may have to be redone)
  }

  get(name) {
    let r = this.resources.get(name);
    if (!r) {
      r = new Resource(name);
      this.resources.set(name, r);
      this.version++;
    }
    return r;
  }

  /**
   * Replaces the live leases with a listing made at time at: each lease
   * listed is held (a resource missing from it is free), with its waiters.
   */
  load(leases, at) {
    const listed = new Set();
    for (const l of leases) {
      listed.add(l.resource);
      const r = this.get(l.resource);
      if (r.holder !== l.holderId || r.fence !== l.fence) r.push({ type: 'listed', t: at, holder: l.holderId, fence: l.fence });
      r.holder = l.holderId;
      r.fence = l.fence;
      r.expiresAt = at + l.remainingMillis;
      r.value = l.value;
      r.waiters = Array.isArray(l.waiterIds) ? [...l.waiterIds] : [];
      r.waiterCount = l.waiters;
      r.version++;
    }
    for (const r of this.resources.values()) {
      if (listed.has(r.name) || r.holder === null) continue;
      r.push({ type: 'expired', t: at, holder: r.holder, fence: r.fence, unseen: true });
      r.holder = null;
      r.waiters = [];
      r.waiterCount = 0;
    }
    this.version++;
  }

  /** Takes one watch event (its data); returns the resource it changed. */
  apply(ev) {
    const r = this.get(ev.resource);
    const t = ev.at;
    const e = { type: ev.type, t, seq: ev.seq, holder: ev.holderId ?? '', fence: ev.fence ?? 0 };
    switch (ev.type) {
      case 'granted':
        r.holder = e.holder;
        r.fence = e.fence;
        r.expiresAt = t + (ev.remainingMillis ?? 0);
        r.value = ev.value;
        removeFirst(r.waiters, e.holder);
        break;
      case 'renewed':
        if (r.fence === e.fence) r.expiresAt = t + (ev.remainingMillis ?? 0);
        break;
      case 'released':
      case 'expired':
      case 'revoked':
        if (r.fence === e.fence) r.holder = null;
        break;
      case 'waiting':
        if (!r.waiters.includes(e.holder)) r.waiters.push(e.holder);
        break;
      case 'left':
        removeFirst(r.waiters, e.holder);
        break;
      case 'proclaimed':
        if (r.fence === e.fence) r.value = ev.value;
        break;
      default:
        return r;
    }
    // The ids come from the events (waiting, left, granted); the count from
    // the coordinator (a released or expired lease's count already
    // excludes the waiter it is handed to, whose grant follows).
    r.waiterCount = typeof ev.waiters === 'number' ? ev.waiters : r.waiters.length;
    r.push(e);
    this.changes++;
    return r;
  }

  /** Takes one refusal of a gate; returns the resource it is about. */
  refused(rf) {
    const r = this.get(rf.resource);
    r.push({ type: 'refused', t: rf.at, holder: rf.refusedHolderId, fence: rf.refusedFence, admittedHolder: rf.admittedHolderId, admittedFence: rf.admittedFence, gate: rf.gate });
    this.changes++;
    return r;
  }

  /** Drops the resources free, with nobody waiting, untouched since now - FORGET_MS. */
  forget(now) {
    for (const [name, r] of this.resources) {
      if (r.holder === null && r.waiters.length === 0 && r.waiterCount === 0 && r.touched < now - FORGET_MS) {
        this.resources.delete(name);
        this.version++;
      }
    }
  }

  /**
   * The resources whose name starts with prefix, sorted by key ('name',
   * 'remaining', 'fence' or 'waiters'; ties by name), descending if desc.
   */
  rows(prefix, key, desc, now) {
    const out = [];
    for (const r of this.resources.values()) if (r.name.startsWith(prefix)) out.push(r);
    const val = key === 'remaining' ? (r) => r.remaining(now) : key === 'fence' ? (r) => r.fence : key === 'waiters' ? (r) => Math.max(r.waiterCount, r.waiters.length) : null;
    const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    const sign = desc ? -1 : 1;
    out.sort(val ? (a, b) => sign * (val(a) - val(b)) || byName(a, b) : (a, b) => sign * byName(a, b));
    return out;
  }
}

function removeFirst(list, id) {
  const i = list.indexOf(id);
  if (i >= 0) list.splice(i, 1);
}

/** A duration in words for the table: "12.3 s", "4 min 05 s". */
export function fmtDuration(ms) {
  if (ms <= 0) return '—';
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
}

// Characters that change the direction or the joining of the text around
// them, and the other invisible format and control characters: a name
// holding one could pass for another ("w\u202Eevil" reads "wlive").
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

/** s as shown: each invisible control or bidi character written as its code point, ⟨U+202E⟩. */
export const visible = (s) => String(s).replace(HIDDEN, (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}⟩`);
