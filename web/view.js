// Drawing: one lane's events as an SVG timeline, up to a cursor time. Every
// element is made with createElementNS and every string goes in through
// textContent or setAttribute, never markup, so nothing from the URL or the
// library can become HTML.

import { fmt } from './model.js';

const NS = 'http://www.w3.org/2000/svg';
export const W = 640;
const H = 284;
const LEFT = 96;
const RIGHT = 18;
const ROWS = { A: 44, B: 100, C: 160, R: 214 };
const AXIS = 264;
const NAMES = { A: 'Agent A', B: 'Agent B', C: 'Coordinator', R: 'Resource' };

function el(name, attrs = {}, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * The time range both lanes share: every event, message arrival and model
 * call, and the lease ends and deadlines nearby (a far-off deadline is cut at
 * half the run again, so a long TTL does not squash the interesting part).
 */
export function extentOf(run) {
  let end = 1;
  for (const lane of Object.values(run.lanes)) {
    for (const e of lane.events) {
      end = Math.max(end, e.t, e.arrive ?? 0, e.until && e.kind === 'model' ? e.until : 0);
    }
  }
  const cap = end * 1.5;
  let far = end;
  for (const lane of Object.values(run.lanes)) {
    for (const e of lane.events) if (e.kind === 'lease') far = Math.max(far, Math.min(cap, e.deadline));
    for (const g of lane.generations) far = Math.max(far, Math.min(cap, g.end));
  }
  return { t0: 0, t1: Math.max(far * 1.02, 1) };
}

function niceStep(span) {
  const raw = span / 6;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

/**
 * Draws lane into container (replacing what was there), showing the events
 * in shownEvents; `cursor` is the virtual time of the position, up to which
 * spans are filled. Messages in flight are drawn part way.
 */
export function drawLane(container, lane, shownEvents, cursor, extent, summary) {
  const vis = new Set(shownEvents.map((e) => e.seq));
  const grants = shownEvents.filter((e) => e.kind === 'grant');
  const { t0, t1 } = extent;
  const x = (t) => LEFT + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * (W - LEFT - RIGHT);
  const id = `tl-${lane.mode}`;
  const svg = el('svg', {
    viewBox: `0 0 ${W} ${H}`,
    class: 'tl',
    role: 'img',
    'aria-labelledby': `${id}-title ${id}-desc`,
    'data-cursor': cursor,
  });
  svg.append(el('title', { id: `${id}-title` }, `${lane.mode === 'naive' ? 'Naive' : 'Fenced'} lane timeline`));
  svg.append(el('desc', { id: `${id}-desc` }, summary));

  const defs = el('defs');
  const marker = el('marker', { id: `${id}-arrow`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(el('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }));
  defs.append(marker);
  svg.append(defs);

  // Rows and axis.
  for (const [key, y] of Object.entries(ROWS)) {
    svg.append(el('line', { x1: LEFT, x2: W - RIGHT, y1: y, y2: y, class: 'row' }));
    svg.append(el('text', { x: 8, y: y + 4, class: `rowlabel who-${key}` }, NAMES[key]));
  }
  const step = niceStep(t1 - t0);
  const axis = el('g', { class: 'axis' });
  axis.append(el('line', { x1: LEFT, x2: W - RIGHT, y1: AXIS, y2: AXIS }));
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
    axis.append(el('line', { x1: x(t), x2: x(t), y1: AXIS, y2: AXIS + 4 }));
    axis.append(el('text', { x: x(t), y: AXIS + 15, 'text-anchor': 'middle' }, fmt(t)));
  }
  axis.append(el('text', { x: 8, y: AXIS + 15 }, 'ms'));
  svg.append(axis);

  // Small labels on the same row move up a line (or two) rather than overlap.
  const placed = [];
  const label = (g, lx, ly, text, anchor = 'middle', cls = 'small', dir = -1) => {
    const w = text.length * 5.6;
    const left = anchor === 'middle' ? lx - w / 2 : anchor === 'end' ? lx - w : lx;
    let y = ly;
    for (let tries = 0; tries < 3; tries++) {
      const clash = placed.some((b) => Math.abs(b.y - y) < 10 && left < b.right + 3 && b.left < left + w + 3);
      if (!clash) break;
      y += 11 * dir;
    }
    placed.push({ left, right: left + w, y });
    g.append(el('text', { x: lx, y, 'text-anchor': anchor, class: cls }, text));
  };

  const layer = el('g', { class: 'events' });
  svg.append(layer);
  const group = (e, extra = {}) => {
    const g = el('g', { class: `ev ev-${e.kind} who-${e.actor}`, 'data-kind': e.kind, 'data-actor': e.actor, 'data-t': e.t, ...extra });
    g.append(el('title', {}, `t=${fmt(e.t)}: ${e.text}`));
    layer.append(g);
    return g;
  };

  // The coordinator's own copy of each lease generation.
  for (const gen of lane.generations) {
    if (!grants.some((e) => e.holder === gen.holder && e.fence === gen.fence && e.t === gen.start)) continue;
    const end = Math.min(gen.end, cursor);
    const g = el('g', { class: `gen who-${gen.holder}`, 'data-holder': gen.holder, 'data-fence': gen.fence });
    g.append(el('rect', { x: x(gen.start), y: ROWS.C - 9, width: Math.max(1, x(end) - x(gen.start)), height: 18, rx: 3 }));
    if (x(end) - x(gen.start) > 34) {
      g.append(el('text', { x: x(gen.start) + 4, y: ROWS.C + 4, class: 'inbar' }, `${gen.holder} #${gen.fence}`));
    }
    layer.append(g);
  }

  // What each holder believes: from a lease event to its deadline, or to the
  // next lease event of the same holder (a renewal replaces it).
  const leases = lane.events.filter((e) => e.kind === 'lease');
  for (const e of leases) {
    if (!vis.has(e.seq)) continue;
    const later = leases.find((o) => o.actor === e.actor && o.seq > e.seq);
    const stop = later && vis.has(later.seq) ? later.t : null;
    const y = ROWS[e.actor] + 12;
    const g = group(e, { 'data-deadline': e.deadline });
    // A renewal's lease replaces this one; otherwise it runs to its deadline.
    const endAll = stop === null ? e.deadline : Math.min(stop, e.deadline);
    g.append(el('rect', { x: x(e.t), y, width: Math.max(1, x(endAll) - x(e.t)), height: 6, class: 'belief-outline' }));
    g.append(el('rect', { x: x(e.t), y, width: Math.max(0, x(Math.min(endAll, cursor)) - x(e.t)), height: 6, class: 'belief' }));
    if ((stop === null || e.deadline <= stop) && e.deadline <= t1) {
      g.append(el('line', { x1: x(e.deadline), x2: x(e.deadline), y1: y - 5, y2: y + 11, class: 'deadline' }));
      const nearEnd = x(e.deadline) > W - RIGHT - 90;
      label(g, x(e.deadline) + (nearEnd ? -4 : 4), y + 16, `${lane.mode === 'naive' ? 'expiresAt' : 'deadline'} ${fmt(e.deadline)}`, nearEnd ? 'end' : 'start');
    }
  }

  for (const e of lane.events) {
    const yA = ROWS[e.actor];
    const shown = vis.has(e.seq);
    switch (e.kind) {
      case 'model': {
        if (!shown) break;
        const g = group(e);
        g.append(el('rect', { x: x(e.t), y: yA - 8, width: Math.max(1, x(Math.min(e.until, cursor)) - x(e.t)), height: 14, rx: 3, class: 'model' }));
        if (x(e.until) - x(e.t) > 62) g.append(el('text', { x: x(e.t) + 4, y: yA + 3, class: 'inbar' }, 'model call'));
        break;
      }
      case 'send':
        if (shown) message(group(e), x, e.t, yA, e.arrive, ROWS.C, cursor, `${e.what} ${e.req}`, id);
        break;
      case 'reply':
        if (shown || e.departed < cursor) message(group(e), x, e.departed, ROWS.C, e.t, yA, shown ? e.t : cursor, '', id);
        break;
      case 'lost':
        if (shown || e.departed < cursor) {
          const g = group(e);
          const mid = e.departed + (e.t - e.departed) * 0.6;
          message(g, x, e.departed, ROWS.C, e.t, yA, Math.min(cursor, mid), '', id, true);
          if (cursor >= mid) {
            const yy = ROWS.C + (yA - ROWS.C) * 0.6;
            g.append(el('text', { x: x(mid), y: yy + 4, 'text-anchor': 'middle', class: 'lost' }, '✕ lost'));
          }
        }
        break;
      case 'check': {
        if (!shown) break;
        const g = group(e, { 'data-result': e.result });
        const cx = x(e.t);
        const ok = e.result === 'valid';
        g.append(el('path', { d: `M${cx},${yA - 7} l7,7 l-7,7 l-7,-7 z`, class: ok ? 'check ok' : 'check bad' }));
        label(g, cx, yA - 12, `${e.advisory ? 'hasExpired ' : 'check '}${ok ? (e.advisory ? 'false' : 'valid') : e.advisory ? 'true' : 'expired'}`);
        break;
      }
      case 'write': {
        if (!shown) break;
        const g = group(e, { 'data-landed': e.landed });
        const cx = x(e.t);
        g.append(el('line', { x1: cx, x2: cx, y1: yA + 8, y2: ROWS.R - 8, class: e.landed ? 'write ok' : 'write bad', 'marker-end': `url(#${id}-arrow)` }));
        if (e.landed) {
          g.append(el('circle', { cx, cy: ROWS.R, r: 6, class: 'landed' }));
          label(g, cx, ROWS.R + 19, `${e.actor} lands${e.fence ? ` (#${e.fence})` : ''}`, 'middle', 'small', 1);
        } else {
          g.append(el('path', { d: `M${cx - 6},${ROWS.R - 6} l12,12 m0,-12 l-12,12`, class: 'refused' }));
          label(g, cx, ROWS.R + 19, `${e.actor} #${e.fence} refused`, 'middle', 'small bad-text', 1);
        }
        break;
      }
      case 'grant':
      case 'extend':
      case 'replay': {
        if (!shown) break;
        const g = group(e, { 'data-fence': e.fence, 'data-holder': e.holder });
        g.append(el('circle', { cx: x(e.t), cy: ROWS.C, r: 4.5, class: `mark who-${e.holder}` }));
        const word = e.kind === 'grant' ? `grant ${e.holder} #${e.fence}` : e.kind === 'extend' ? `extend to ${fmt(e.until)}` : `same grant #${e.fence}`;
        label(g, x(e.t), ROWS.C - 14, word);
        break;
      }
      case 'deny':
      case 'refuse-renewal': {
        if (!shown) break;
        const g = group(e);
        g.append(el('rect', { x: x(e.t) - 4, y: ROWS.C - 4, width: 8, height: 8, class: 'deny' }));
        label(g, x(e.t), ROWS.C - 14, e.kind === 'deny' ? `denied (${e.heldBy})` : 'renew: "expired"', 'middle', 'small bad-text');
        break;
      }
      case 'expire': {
        if (!shown) break;
        const g = group(e, { 'data-fence': e.fence, 'data-holder': e.holder });
        g.append(el('line', { x1: x(e.t), x2: x(e.t), y1: ROWS.C - 13, y2: ROWS.C + 13, class: 'expire' }));
        label(g, x(e.t), ROWS.C + 25, `${e.holder} #${e.fence} ${e.forgotten ? 'forgotten' : 'ends'}`, 'middle', 'small', 1);
        break;
      }
      case 'admit': {
        if (!shown) break;
        const g = group(e, { 'data-fence': e.fence, 'data-pushed': e.pushed });
        g.append(el('line', { x1: x(e.t), x2: x(e.t), y1: ROWS.C + 9, y2: ROWS.R - 8, class: e.pushed ? 'push' : 'push none' }));
        label(g, x(e.t) + 4, ROWS.R - 12, e.pushed ? `admit #${e.fence}` : 'no gate', 'start', 'small', -1);
        break;
      }
      case 'restart': {
        if (!shown) break;
        const g = group(e);
        g.append(el('line', { x1: x(e.t), x2: x(e.t), y1: ROWS.C - 22, y2: ROWS.C + 22, class: 'restart' }));
        label(g, x(e.t), ROWS.C + 25, e.persisted ? `restart (startFence ${e.startFence})` : 'restart (fence lost)', 'middle', 'small bad-text', 1);
        break;
      }
      default:
        break;
    }
  }

  svg.append(el('line', { x1: x(cursor), x2: x(cursor), y1: 18, y2: AXIS, class: 'cursor' }));
  const scroll = container.scrollLeft;
  container.replaceChildren(svg);
  // On a narrow screen the timeline scrolls sideways: keep the cursor in view.
  const shown = container.clientWidth;
  const full = container.scrollWidth;
  if (full > shown) {
    const cx = (x(cursor) / W) * full;
    container.scrollLeft = cx < scroll + 40 || cx > scroll + shown - 40 ? Math.max(0, cx - shown * 0.6) : scroll;
  }
}

// A message from (t0, y0) to (t1, y1), drawn up to the cursor.
function message(g, x, ta, ya, tb, yb, cursor, label, id, lost = false) {
  const frac = tb === ta ? 1 : Math.min(1, Math.max(0, (cursor - ta) / (tb - ta)));
  const xa = x(ta);
  const xb = xa + (x(tb) - xa) * frac;
  const yb2 = ya + (yb - ya) * frac;
  const attrs = { x1: xa, y1: ya, x2: xb, y2: yb2, class: lost ? 'msg lost' : 'msg' };
  if (frac === 1 && !lost) attrs['marker-end'] = `url(#${id}-arrow)`;
  g.append(el('line', attrs));
  if (label && frac > 0.2 && Math.abs(x(tb) - xa) > 50) {
    g.append(el('text', { x: (xa + xb) / 2 + 4, y: (ya + yb2) / 2, class: 'small' }, label));
  }
}
