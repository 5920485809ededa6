// The playground's drawing: one lane's events as an SVG timeline, up to a
// cursor time. The timeline is drawn in CSS pixels at the width it is
// given, so text keeps its size on every screen; labels are measured as
// they are placed and moved (or, when there is no room at all, left out)
// so that no two overlap and none crosses a drawn line.
//
// The primitives are svg.js's: the drawing is built apart from the page as
// plain objects and written into it by patching the elements already there
// (a dragged event moves a few elements, it does not rebuild two
// timelines), labels are measured without layout, and every string goes in
// as text, so nothing from the URL or the library can become HTML. A lane
// drawn again with the same inputs (a drag going back over a value) reuses
// its drawing. The console's lane is lease-row.js, in the same marks.

import { fmt } from './lane-state.js';
import { COORDINATOR } from './scenario.js';
import { describe } from './words.js';
import { PAD_L, PAD_R, el, show, scaleOf, niceStep, leaseBar, refusedCross, placeLabels } from './svg.js';

/**
 * Row positions (px) of a timeline with these agents ('A', 'B', maybe 'C'):
 * the playground's layout, or the compact one of embeds. With two agents
 * the rows are where they always were.
 */
export function layoutOf(agents, compact) {
  const c = !!compact;
  const L = { compact: c, agents: [...agents], top: c ? 9 : 13, bar: c ? 6 : 7, floor: c ? 15 : 22, floorStep: c ? 3 : 4, font: c ? 10 : 11, line: c ? 11 : 13, minWidth: c ? 0 : 440 };
  const gap = c ? 26 : 54;
  let y = c ? 27 : 50;
  for (const k of agents) {
    L[k] = y;
    y += gap;
  }
  L.K = y - gap + (c ? 27 : 56);
  L.belief = {};
  const beliefGap = c ? 9 : 10;
  let b = L.K + (c ? 12 : 18);
  for (const k of agents) {
    L.belief[k] = b;
    b += beliefGap;
  }
  L.lastBelief = b - beliefGap;
  L.token = L.lastBelief + (c ? 16 : 30);
  L.R = L.token + (c ? 11 : 22);
  L.outcome = L.R + (c ? 19 : 38);
  L.axis = L.R + (c ? 24 : 60);
  L.H = L.axis + (c ? 16 : 20);
  return L;
}

/** The agents drawn in run (A and B, and C when the scenario has it). */
export const agentsOf = (run) => (run.scenario?.agents === 3 ? ['A', 'B', 'C'] : ['A', 'B']);

// --- the time axis -------------------------------------------------------------

/**
 * The time range both lanes share: every event, message arrival and model
 * call, and the lease ends and deadlines nearby (a far-off deadline is cut at
 * half the run again, so a long TTL does not squash the interesting part; a
 * deadline before 0, from a skew larger than the TTL, widens it to the left).
 */
export function extentOf(run) {
  let end = 1;
  let start = 0;
  for (const lane of Object.values(run.lanes)) {
    for (const e of lane.events) {
      end = Math.max(end, e.t, e.arrive ?? 0, e.until && e.kind === 'model' ? e.until : 0);
    }
  }
  const cap = end * 1.3;
  let far = end;
  for (const lane of Object.values(run.lanes)) {
    for (const e of lane.events) {
      if (e.kind !== 'lease') continue;
      far = Math.max(far, Math.min(cap, e.deadline));
      start = Math.min(start, Math.max(-end * 0.5, e.deadline));
    }
    for (const g of lane.generations) far = Math.max(far, Math.min(cap, g.end));
    for (const w of lane.windows) far = Math.max(far, Math.min(cap, w.to));
  }
  const span = far - start;
  return { t0: start < 0 ? start - span * 0.02 : 0, t1: Math.max(far + span * 0.03, 1) };
}

/** The width a timeline is drawn at, given the width it has. */
export const widthOf = (width, compact) => Math.max(width, compact ? 0 : 440, 200);

/** The row labels, drawn apart from the timeline so they stay put while it scrolls. */
export function drawRowLabels(container, compact, agents = ['A', 'B']) {
  const L = layoutOf(agents, compact);
  const w = compact ? 84 : 92;
  const svg = el('svg', { width: w, height: L.H, viewBox: `0 0 ${w} ${L.H}`, class: `tl rows${compact ? ' compact' : ''}`, 'aria-hidden': 'true' });
  const rows = agents.map((k) => [k, `Agent ${k}`, L[k], `rowlabel who-${k}`]);
  rows.push([COORDINATOR, 'Coordinator', L.K, 'rowlabel']);
  // The belief rows are close together: their names keep a line apart.
  let prev = -Infinity;
  for (const k of agents) {
    const y = Math.max(L.belief[k], prev + (compact ? 10 : 12) - 4);
    rows.push([k.toLowerCase(), `${k}'s belief`, y, `sublabel who-${k}`]);
    prev = y + 4;
  }
  rows.push(['R', 'Resource', L.R, 'rowlabel'], ['t', 'time, ms', L.axis + L.font - 1, 'sublabel']);
  for (const [key, text, y, cls] of rows) svg.append(el('text', { x: w - 6, y: y + 4, 'text-anchor': 'end', class: cls, 'data-row': key }, text));
  show(container, svg);
}

// --- one lane -------------------------------------------------------------------

/**
 * Draws lane into container (replacing what was there) at position state:
 * { shown: events shown, cursor: virtual time, revealed: seqs this step
 * revealed, ghost: draw the whole run faintly behind (the first frame) }.
 * opts: { extent, width (px), compact, summary, agents }.
 * Returns { W, scale, handles }: handles are the events shown that a
 * parameter places (those with an `edit`), with where to grab them.
 */
export function drawLane(container, lane, state, opts) {
  // A lane drawn again as it was drawn last (a drag back over a value whose
  // run is kept) shows the drawing it made then.
  const key = JSON.stringify([
    state.shown.map((e) => e.seq),
    state.cursor,
    state.revealed ?? [],
    !!state.ghost,
    opts.extent.t0,
    opts.extent.t1,
    opts.width,
    !!opts.compact,
    opts.summary,
    opts.agents ?? null,
  ]);
  const kept = drawings.get(lane);
  if (kept?.key === key) {
    showLane(container, kept.svg, state, opts, kept.result);
    return kept.result;
  }
  const L = layoutOf(opts.agents ?? ['A', 'B'], opts.compact);
  const W = widthOf(opts.width, opts.compact);
  const scale = scaleOf(opts.extent, W);
  const { x } = scale;
  const { t1 } = opts.extent;
  const id = `tl-${lane.mode}`;
  const svg = el('svg', {
    width: W,
    height: L.H,
    viewBox: `0 0 ${W} ${L.H}`,
    class: `tl${opts.compact ? ' compact' : ''}`,
    role: 'img',
    'aria-labelledby': `${id}-title ${id}-desc`,
    'data-cursor': state.cursor,
  });
  svg.append(el('title', { id: `${id}-title` }, `${lane.mode === 'naive' ? 'Naive' : 'Fenced'} lane timeline`));
  svg.append(el('desc', { id: `${id}-desc` }, opts.summary));
  const defs = el('defs');
  for (const [name, cls] of [['arrow', 'arrowhead'], ['arrow-ok', 'arrowhead ok'], ['arrow-stale', 'arrowhead stale'], ['arrow-refused', 'arrowhead refused']]) {
    const marker = el('marker', { id: `${id}-${name}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
    marker.append(el('path', { d: 'M0,0 L10,5 L0,10 z', class: cls }));
    defs.append(marker);
  }
  svg.append(defs);

  const back = el('g', { class: 'back' });
  const marks = el('g', { class: 'highlights' });
  const ghost = el('g', { class: 'ghost', 'aria-hidden': 'true' });
  const shapes = el('g', { class: 'events' });
  const texts = el('g', { class: 'labels' });
  svg.append(back, marks, ghost, shapes, texts);

  const ctx = { lane, L, W, x, id, t1, compact: !!opts.compact };
  const labels = [];
  const obstacles = [];
  const segments = [];

  // Rows, axis, the stale windows and the cursor: behind everything else.
  for (const key of [...L.agents, 'K', 'R']) back.append(el('line', { x1: PAD_L, x2: W - PAD_R, y1: L[key], y2: L[key], class: 'row' }));
  for (const w of lane.windows) {
    if (state.cursor <= w.from) continue;
    const to = Math.min(w.to, state.cursor);
    back.append(el('rect', { x: x(w.from), y: 2, width: Math.max(1, x(to) - x(w.from)), height: L.axis - 2, class: 'window', 'data-holder': w.holder, 'data-from': w.from, 'data-to': w.to }));
    const text = w.forgotten
      ? `${w.holder} still believes; the restarted coordinator forgot it at ${fmt(w.from)}`
      : `${w.holder} still believes in fence ${w.fence}; the coordinator let it go at ${fmt(w.from)}`;
    labels.push({ prio: 0, x: x(w.from) + 3, y: L.top, text: opts.compact ? `${w.holder} still believes; let go at ${fmt(w.from)}` : text, alts: [`${w.holder} still believes`, `${w.holder} believes`], anchor: 'start', cls: 'window-label', kind: 'window', dys: [0, 1, 2], dxs: [0, { w: -1, px: -6 }] });
  }
  const axis = el('g', { class: 'axis' });
  axis.append(el('line', { x1: PAD_L, x2: W - PAD_R, y1: L.axis, y2: L.axis }));
  const step = niceStep(t1 - opts.extent.t0, Math.floor((W - PAD_L - PAD_R) / 70));
  for (let t = Math.ceil(opts.extent.t0 / step) * step; t <= t1; t += step) {
    axis.append(el('line', { x1: x(t), x2: x(t), y1: L.axis, y2: L.axis + 4 }));
    labels.push({ prio: 1, x: x(t), y: L.axis + L.font + 3, text: fmt(t), anchor: 'middle', cls: 'tick', kind: 'tick', dys: [0] });
  }
  back.append(axis);
  back.append(el('line', { x1: x(state.cursor), x2: x(state.cursor), y1: 2, y2: L.axis, class: 'cursor' }));

  if (state.ghost) {
    const all = new Set(lane.events.map((e) => e.seq));
    drawEvents({ ...ctx, layer: ghost, vis: all, cursor: Infinity, labels: [], obstacles: [], segments: [], bounds: new Map() });
  }
  const bounds = new Map();
  drawEvents({ ...ctx, layer: shapes, vis: new Set(state.shown.map((e) => e.seq)), cursor: state.cursor, labels, obstacles, segments, bounds });

  // The changed elements of this step, marked by a halo behind them.
  for (const seq of state.revealed ?? []) {
    const b = bounds.get(seq);
    const g = shapes.kids.find((k) => k.name === 'g' && k.getAttribute('data-seq') === String(seq) && k.getAttribute('class').split(' ').includes('ev'));
    if (!b || !g) continue;
    g.addClass('changed');
    marks.append(el('rect', { x: b.x - 4, y: b.y - 4, width: b.width + 8, height: b.height + 8, rx: 4, class: 'hl', 'data-seq': seq }));
  }

  placeLabels(svg, texts, labels, obstacles, segments, W, L, ctx.compact);

  // The events a parameter places, where to grab each: those shown, or on
  // the first frame (state.ghost) every one of the faint whole run.
  const result = { W, L, scale, handles: handlesOf(state.ghost ? lane.events : state.shown, L, x) };
  drawings.set(lane, { key, svg, result });
  showLane(container, svg, state, opts, result);
  return result;
}

// The drawing last made of each lane, with its inputs (key) and what drawLane returned.
const drawings = new WeakMap();

// Shows a lane's drawing svg in container. On a narrow screen the timeline
// scrolls sideways (opts.scroller, or container): keep the cursor in view.
// (The scroll position is read only when the timeline is wider than its
// box: reading it makes the browser lay the page out.)
function showLane(container, svg, state, opts, { W, scale }) {
  const scroller = opts.scroller ?? container;
  const shown = opts.width;
  const scrolls = W > shown + 0.5 && !opts.keepScroll;
  const scroll = scrolls ? scroller.scrollLeft : 0;
  show(container, svg);
  if (scrolls) {
    const cx = scale.x(Math.min(state.cursor, opts.extent.t1));
    scroller.scrollLeft = cx < scroll + 40 || cx > scroll + shown - 40 ? Math.max(0, cx - shown * 0.6) : scroll;
  }
}

/** Where to grab each event of events that a parameter places: [{ seq, e, x, y }]. */
export function handlesOf(events, L, x) {
  const out = [];
  for (const e of events) {
    if (!e.edit) continue;
    const at = grabPoint(e, L, x);
    if (at) out.push({ seq: e.seq, e, ...at });
  }
  return out;
}

// Where the pointer grabs an event to move it along its row.
function grabPoint(e, L, x) {
  const cx = x(e.t);
  const row = L[e.actor];
  switch (e.kind) {
    case 'check':
    case 'write-call':
      return { x: cx, y: row };
    case 'send':
      return { x: cx, y: row + 12 };
    case 'reply':
    case 'lost':
      return { x: cx, y: row + 12 };
    case 'write':
      return { x: cx, y: L.R };
    case 'grant':
    case 'deny':
    case 'extend':
    case 'replay':
    case 'refuse-renewal':
    case 'expire':
      return { x: cx, y: L.K };
    case 'restart':
      return { x: cx, y: L.K - 18 };
    default:
      return null;
  }
}

function drawEvents(c) {
  const { lane, L, x, id, layer, vis, cursor, labels, obstacles, segments, bounds } = c;
  const grants = lane.events.filter((e) => e.kind === 'grant' && vis.has(e.seq));
  let current = null; // the event whose shapes are being drawn, for its bounds
  const grow = (x0, y0, w, h) => {
    if (current === null) return;
    const b = bounds.get(current);
    if (!b) bounds.set(current, { x: x0, y: y0, width: w, height: h });
    else {
      const x1 = Math.max(b.x + b.width, x0 + w);
      const y1 = Math.max(b.y + b.height, y0 + h);
      b.x = Math.min(b.x, x0);
      b.y = Math.min(b.y, y0);
      b.width = x1 - b.x;
      b.height = y1 - b.y;
    }
  };
  const group = (e, extra = {}) => {
    current = e.seq;
    const g = el('g', { class: `ev ev-${e.kind} who-${e.actor}`, 'data-seq': e.seq, 'data-kind': e.kind, 'data-actor': e.actor, 'data-t': e.t, ...extra });
    g.append(el('title', {}, `t=${fmt(e.t)}: ${describe(e, lane.mode)}`));
    layer.append(g);
    return g;
  };
  const label = (e, spec) => labels.push({ seq: e.seq, ...spec });
  const box = (x0, y0, w, h) => {
    obstacles.push({ x: x0, y: y0, width: w, height: h });
    grow(x0, y0, w, h);
  };
  // A line labels keep clear of.
  const seg = (x1, y1, x2, y2) => {
    segments.push({ x1, y1, x2, y2 });
    grow(Math.min(x1, x2) - 1, Math.min(y1, y2) - 1, Math.abs(x2 - x1) + 2, Math.abs(y2 - y1) + 2);
  };
  // An arrowhead (the markers above: 7 stroke widths long and wide) at
  // (xb, yb), pointing away from (xa, ya): its outline is kept clear too.
  const head = (xa, ya, xb, yb, sw) => {
    const len = Math.hypot(xb - xa, yb - ya);
    if (len === 0) return;
    const ux = (xb - xa) / len;
    const uy = (yb - ya) / len;
    const size = 7 * sw;
    // The marker's tip is 0.1 of its length past the line's end (refX 9 of 10).
    const tx = xb + ux * size * 0.1;
    const ty = yb + uy * size * 0.1;
    const bx = xb - ux * size * 0.9;
    const by = yb - uy * size * 0.9;
    const px = -uy * size * 0.5;
    const py = ux * size * 0.5;
    seg(tx, ty, bx + px, by + py);
    seg(tx, ty, bx - px, by - py);
    seg(bx + px, by + py, bx - px, by - py);
  };
  // The token a write carries, beside its arrow.
  const writeToken = (e, cx, status) => {
    const token = e.fence === null ? 'write, no token' : `write, fence ${e.fence}`;
    // Clear of the arrowhead, which is as wide as 3.5 stroke widths either side.
    label(e, { prio: 0, x: cx + 8, y: L.token, text: token, alts: e.fence === null ? ['no token', '∅'] : [`fence ${e.fence}`, `#${e.fence}`], anchor: 'start', cls: `small write-label ${status}-text`, kind: 'token', wid: e.wid, dys: [0, -1, 1, -2, 2], dxs: [0, LEFT_OF_ARROW] });
  };
  // An async write in flight along the resource row, from its start to its
  // landing (or the cursor).
  const flight = (g, e, end, cx) => {
    const stop = Math.min(end ? end.t : Infinity, cursor);
    if (stop > e.t) {
      g.append(el('line', { x1: cx, x2: x(stop), y1: L.R, y2: L.R, class: `flight who-${e.actor}` }));
      box(cx, L.R - 3, x(stop) - cx, 6);
    }
  };
  const beliefY = (k) => L.belief[k] ?? L.lastBelief;

  // The coordinator's own copy of each lease generation.
  current = null;
  for (const gen of lane.generations) {
    if (!grants.some((e) => e.holder === gen.holder && e.fence === gen.fence && e.t === gen.start)) continue;
    const end = Math.min(gen.end, cursor);
    leaseBar(layer, obstacles, labels, { x0: x(gen.start), x1: x(end), y: L.K, half: L.bar, who: gen.holder, holder: gen.holder, fence: gen.fence });
  }

  // What each holder believes, under the coordinator's copy: from a lease
  // event to its deadline, or to the next lease event of the same holder (a
  // renewal replaces it). The last belief of a generation is labelled with
  // how far it is from the coordinator's end.
  const leases = lane.events.filter((e) => e.kind === 'lease');
  for (const e of leases) {
    if (!vis.has(e.seq)) continue;
    const later = leases.find((o) => o.actor === e.actor && o.seq > e.seq);
    const stop = later && vis.has(later.seq) ? later.t : null;
    const y = beliefY(e.actor);
    const g = group(e, { 'data-deadline': e.deadline });
    const endAll = stop === null ? e.deadline : Math.min(stop, e.deadline);
    const x0 = x(e.t);
    g.append(el('rect', { x: x0, y: y - 3, width: Math.max(1, x(endAll) - x0), height: 6, class: 'belief-outline' }));
    const filled = Math.max(0, x(Math.min(endAll, cursor)) - x0);
    g.append(el('rect', { x: x0, y: y - 3, width: filled, height: 6, class: 'belief' }));
    // No label on a belief bar, filled (contrast) or not (legibility).
    box(x0, y - 3, Math.max(1, x(endAll) - x0), 6);
    if (stop !== null && stop < e.deadline) continue;
    const gen = lane.generations[e.gen];
    if (e.deadline <= e.t) {
      // Born expired (the assumed skew is at least the TTL): the deadline
      // lies before the lease even arrived.
      const xd = x(e.deadline);
      g.append(el('line', { x1: xd, x2: xd, y1: y - 6, y2: y + 6, class: 'deadline dead', 'data-deadline': e.deadline }));
      g.append(el('line', { x1: xd, x2: x0, y1: y, y2: y, class: 'deadline dead' }));
      seg(xd, y - 6, xd, y + 6);
      seg(xd, y, x0, y);
      label(e, { prio: 1, x: x0 + 4, y: y + 4, text: `dead on arrival (deadline ${fmt(e.deadline)})`, alts: [`dead on arrival`], anchor: 'start', cls: 'small bad-text', kind: 'belief', dys: [0, 1, -1, 2], dxs: [0, -2] });
      continue;
    }
    if (e.deadline <= c.t1) {
      g.append(el('line', { x1: x(e.deadline), x2: x(e.deadline), y1: y - 6, y2: y + 6, class: 'deadline' }));
      seg(x(e.deadline), y - 6, x(e.deadline), y + 6);
    }
    const diff = gen ? e.deadline - gen.end : 0;
    if (gen && diff !== 0 && cursor >= Math.min(e.deadline, gen.end)) {
      const text = diff > 0 ? `${e.actor} believes ${fmt(diff)} ms too long` : `${fmt(-diff)} ms inside the coordinator's`;
      const alts = diff > 0 ? [`${e.actor}: ${fmt(diff)} ms too long`, `+${fmt(diff)} ms`] : [`${fmt(-diff)} ms inside`, `−${fmt(-diff)} ms`];
      label(e, { prio: 1, x: x(Math.max(e.deadline, gen.end)) + 4, y: y + 4, text, alts, anchor: 'start', cls: diff > 0 ? 'small bad-text' : 'small', kind: 'belief', dys: [0, 1, 2, -1, 3], dxs: [0, -2, 1, 2] });
    }
  }

  // The gate's floor, as a step line under the resource row (fenced lane).
  current = null;
  if (lane.mode === 'fenced') {
    const level = (f) => L.R + L.floor - L.floorStep * Math.min(f, 4);
    const f0 = lane.initialFloor ?? 0;
    let f = f0;
    let px = PAD_L;
    const pts = [[PAD_L, level(f0)]];
    const rises = [];
    for (const e of lane.events) {
      if (!vis.has(e.seq) || e.t > cursor) continue;
      let nf = f;
      if (e.kind === 'write' && e.landed) nf = Math.max(f, e.fence);
      else if (e.kind === 'admit' && e.pushed) nf = Math.max(f, e.fence);
      else if ((e.kind === 'write-call' || e.kind === 'write-begin') && e.floor !== undefined) nf = Math.max(f, e.floor);
      if (nf !== f) {
        px = x(e.t);
        pts.push([px, level(f)], [px, level(nf)]);
        rises.push({ x: px, f: nf, seq: e.seq });
        f = nf;
      }
    }
    pts.push([x(Math.min(cursor, c.t1)), level(f)]);
    for (let i = 1; i < pts.length; i++) segments.push({ x1: pts[i - 1][0], y1: pts[i - 1][1], x2: pts[i][0], y2: pts[i][1] });
    const g = el('g', { class: 'floor', 'data-floor': f });
    g.append(el('title', {}, `The gate's floor: ${f}`));
    g.append(el('polyline', { points: pts.map((p) => p.join(',')).join(' '), class: 'floor-line' }));
    layer.append(g);
    for (const r of rises) labels.push({ seq: r.seq, prio: 0, x: r.x + 3, y: level(r.f) + 11, text: `floor ${r.f}`, alts: [`${r.f}`], anchor: 'start', cls: 'small floor-label', kind: 'floor', dys: [0, 1, 2, -2], dxs: [0, { w: -1, px: -8 }, 1, 2] });
    if (!rises.length && cursor > 0) labels.push({ prio: 5, x: PAD_L + 2, y: level(f0) + 11, text: `floor ${f0}`, anchor: 'start', cls: 'small floor-label', kind: 'floor', dys: [0, 1] });
  }

  for (const e of lane.events) {
    const yA = L[e.actor];
    const shown = vis.has(e.seq);
    switch (e.kind) {
      case 'model': {
        if (!shown) break;
        const g = group(e);
        const w = Math.max(1, x(Math.min(e.until, cursor)) - x(e.t));
        g.append(el('rect', { x: x(e.t), y: yA - 7, width: w, height: 14, rx: 3, class: 'model' }));
        obstacles.push({ x: x(e.t), y: yA - 7, width: w, height: 14, bar: true });
        grow(x(e.t), yA - 7, w, 14);
        labels.push({ seq: e.seq, prio: 3, x: x(e.t) + 9, y: yA + 4, text: 'model call', anchor: 'start', cls: 'inbar', kind: 'inbar', dys: [0], within: [x(e.t), x(e.t) + w] });
        break;
      }
      case 'send':
        if (shown) message(c, group(e), e.t, yA + 7, e.arrive, L.K - L.bar, cursor, e, `${e.what} ${e.req}`, false, seg, head);
        break;
      case 'reply':
        if (shown || e.departed < cursor) message(c, group(e), e.departed, L.K - L.bar, e.t, yA + 7, shown ? e.t : cursor, e, '', false, seg, head);
        break;
      case 'lost':
        if (shown || e.departed < cursor) {
          const g = group(e);
          const mid = e.departed + (e.t - e.departed) * 0.6;
          message(c, g, e.departed, L.K - L.bar, e.t, yA + 7, Math.min(cursor, mid), e, '', true, seg, head);
          if (cursor >= mid) {
            const yy = L.K - L.bar + (yA + 7 - (L.K - L.bar)) * 0.6;
            label(e, { prio: 1, x: x(mid), y: yy + 4, text: '✕ lost', anchor: 'middle', cls: 'lost', kind: 'event', dys: [0, -1, 1], dxs: [0, 1, -1] });
          }
        }
        break;
      case 'check': {
        if (!shown) break;
        const g = group(e, { 'data-result': e.result });
        const cx = x(e.t);
        const ok = e.result === 'valid';
        g.append(el('path', { d: `M${cx},${yA - 6} l6,6 l-6,6 l-6,-6 z`, class: ok ? 'check ok' : 'check bad' }));
        box(cx - 6, yA - 6, 12, 12);
        const word = e.result === 'none' ? 'no lease' : e.advisory ? `hasExpired ${ok ? 'false' : 'true'}` : `check ${ok ? 'valid' : 'expired'}`;
        label(e, { prio: 2, x: cx, y: yA - 10, text: word, anchor: 'middle', cls: 'small', kind: 'event', dys: [0, -1, 1], dxs: [0, 1, -1] });
        break;
      }
      case 'write': {
        if (!shown) break;
        const status = !e.landed ? 'refused' : e.stale ? 'stale' : 'ok';
        const g = group(e, { 'data-landed': e.landed, 'data-stale': e.stale, 'data-status': status, 'data-async': !!e.async, 'data-wid': e.wid ?? '' });
        const cx = x(e.t);
        // An async write's arrow is drawn at its call (write-call); a
        // synchronous one goes from the writer to the resource here.
        if (!e.async) {
          g.append(el('line', { x1: cx, x2: cx, y1: yA + 8, y2: L.R - 8, class: `write ${status}`, 'marker-end': `url(#${id}-arrow-${status})` }));
          box(cx - 2, yA + 8, 4, L.R - 8 - yA - 8);
          head(cx, yA + 8, cx, L.R - 8, status === 'stale' || status === 'refused' ? 3 : 2);
          writeToken(e, cx, status);
        }
        if (e.landed) {
          g.append(el('circle', { cx, cy: L.R, r: 6, class: `landed ${status}` }));
          box(cx - 6, L.R - 6, 12, 12);
          label(e, { prio: e.stale ? -1 : 0, x: cx, y: L.outcome, text: e.stale ? `⚠ ${e.actor} lands, stale` : `${e.actor} lands`, alts: e.stale ? ['⚠ stale', '⚠'] : ['lands', '✓'], anchor: 'middle', cls: e.stale ? 'small stale-text' : 'small', kind: 'outcome', wid: e.wid, dys: [0, 1, -1], dxs: [0, 1, -1, 2, -2] });
        } else {
          g.append(refusedCross(cx, L.R));
          box(cx - 7, L.R - 7, 14, 14);
          label(e, { prio: -1, x: cx, y: L.outcome, text: `${e.fence} < ${e.floorBefore} → refused`, alts: [`${e.fence} < ${e.floorBefore}`], anchor: 'middle', cls: 'small refused-text', kind: 'outcome', wid: e.wid, dys: [0, 1, -1], dxs: [0, 1, -1, 2, -2] });
        }
        break;
      }
      case 'write-call': {
        if (!shown) break;
        const end = lane.events.find((o) => o.kind === 'write' && o.wid === e.wid);
        const known = end && vis.has(end.seq);
        const status = !known ? 'pending' : !end.landed ? 'refused' : end.stale ? 'stale' : 'ok';
        const g = group(e, { 'data-wid': e.wid, 'data-queued': e.queued, 'data-status': status });
        const cx = x(e.t);
        g.append(el('line', { x1: cx, x2: cx, y1: yA + 8, y2: L.R - 8, class: `write ${status}`, 'marker-end': `url(#${id}-arrow-${status === 'pending' ? 'ok' : status})` }));
        box(cx - 2, yA + 8, 4, L.R - 8 - yA - 8);
        head(cx, yA + 8, cx, L.R - 8, status === 'stale' || status === 'refused' ? 3 : 2);
        writeToken(e, cx, status);
        if (e.queued) {
          const turn = lane.events.find((o) => (o.kind === 'write-begin' || (o.kind === 'write' && !o.landed)) && o.wid === e.wid);
          const stop = Math.min(turn ? turn.t : Infinity, cursor);
          g.append(el('line', { x1: cx, x2: x(stop), y1: L.R, y2: L.R, class: 'wait' }));
          box(cx, L.R - 2, Math.max(0, x(stop) - cx), 4);
          g.append(el('circle', { cx, cy: L.R, r: 4, class: 'queued' }));
          box(cx - 4, L.R - 4, 8, 8);
          label(e, { prio: 1, x: cx + 6, y: L.R - 6, text: 'waits its turn', alts: ['waits'], anchor: 'start', cls: 'small', kind: 'event', dys: [0, -1, 2, 1], dxs: [0, { w: -1, px: -12 }] });
        } else {
          flight(g, e, end, cx);
        }
        break;
      }
      case 'write-begin': {
        if (!shown) break;
        const end = lane.events.find((o) => o.kind === 'write' && o.wid === e.wid);
        const g = group(e, { 'data-wid': e.wid });
        const cx = x(e.t);
        g.append(el('path', { d: `M${cx - 5},${L.R - 6} l10,6 l-10,6 z`, class: `turn who-${e.actor}` }));
        box(cx - 5, L.R - 6, 10, 12);
        flight(g, e, end, cx);
        label(e, { prio: 1, x: cx + 6, y: L.R - 6, text: `turn: ${e.fence} ≥ ${e.floorBefore}`, alts: [`${e.fence} ≥ ${e.floorBefore}`], anchor: 'start', cls: 'small', kind: 'event', dys: [0, -1, 2, 1], dxs: [0, { w: -1, px: -12 }] });
        break;
      }
      case 'misuse': {
        if (!shown) break;
        const g = group(e);
        const cx = x(e.t);
        g.append(el('circle', { cx, cy: yA, r: 5, class: 'misuse' }));
        g.append(el('line', { x1: cx - 3.5, y1: yA + 3.5, x2: cx + 3.5, y2: yA - 3.5, class: 'misuse-bar' }));
        box(cx - 6, yA - 6, 12, 12);
        label(e, { prio: 0, key: true, x: cx - 8, y: yA + 4, text: 'commit(async fn) refused', alts: ['commit refused'], anchor: 'end', cls: 'small bad-text', kind: 'event', dys: [0, -1, 1], dxs: [0, 2] });
        break;
      }
      case 'grant':
      case 'extend':
      case 'replay': {
        if (!shown) break;
        const g = group(e, { 'data-fence': e.fence, 'data-holder': e.holder });
        g.append(el('circle', { cx: x(e.t), cy: L.K, r: 4, class: `mark who-${e.holder}` }));
        box(x(e.t) - 4, L.K - 4, 8, 8);
        const word = e.kind === 'grant' ? `grant ${e.holder} #${e.fence}` : e.kind === 'extend' ? `extend to ${fmt(e.until)}` : `same grant #${e.fence}`;
        label(e, { prio: 1, x: x(e.t), y: L.K - 11, text: word, anchor: 'middle', cls: 'small', kind: 'event', dys: [0, -1, -2, -3], dxs: [0, 1, -1, 2, -2] });
        break;
      }
      case 'deny':
      case 'refuse-renewal': {
        if (!shown) break;
        const g = group(e);
        g.append(el('rect', { x: x(e.t) - 4, y: L.K - 4, width: 8, height: 8, class: 'deny' }));
        box(x(e.t) - 4, L.K - 4, 8, 8);
        label(e, { prio: e.kind === 'deny' ? 2 : 0, key: e.kind !== 'deny', x: x(e.t), y: L.K - 11, text: e.kind === 'deny' ? `denied (${e.heldBy})` : 'renew: "expired"', alts: e.kind === 'deny' ? ['denied'] : ['"expired"'], anchor: 'middle', cls: 'small bad-text', kind: 'event', dys: [0, -1, -2, -3, 3], dxs: [0, 1, -1, 2, -2] });
        break;
      }
      case 'expire': {
        if (!shown) break;
        const g = group(e, { 'data-fence': e.fence, 'data-holder': e.holder });
        g.append(el('line', { x1: x(e.t), x2: x(e.t), y1: L.K - 10, y2: L.K + 10, class: 'expire' }));
        seg(x(e.t), L.K - 10, x(e.t), L.K + 10);
        label(e, { prio: 1, x: x(e.t), y: L.lastBelief + L.line + 2, text: `${e.holder} #${e.fence} ${e.forgotten ? 'forgotten' : 'ends'}`, anchor: 'middle', cls: 'small', kind: 'event', dys: [0, 1, -5, -6], dxs: [0, -1, 1] });
        break;
      }
      case 'admit': {
        if (!shown) break;
        const g = group(e, { 'data-fence': e.fence, 'data-pushed': e.pushed });
        g.append(el('line', { x1: x(e.t), x2: x(e.t), y1: L.K + 8, y2: L.R - 8, class: e.pushed ? 'push' : 'push none' }));
        seg(x(e.t), L.K + 8, x(e.t), L.R - 8);
        label(e, { prio: 2, x: x(e.t) - 4, y: L.R - 10, text: e.pushed ? `admit #${e.fence}` : 'no gate', anchor: 'end', cls: 'small', kind: 'event', dys: [0, -1, 1] });
        break;
      }
      case 'restart': {
        if (!shown) break;
        const g = group(e);
        g.append(el('line', { x1: x(e.t), x2: x(e.t), y1: L.K - 18, y2: L.lastBelief + 6, class: 'restart' }));
        seg(x(e.t), L.K - 18, x(e.t), L.lastBelief + 6);
        label(e, { prio: 0, x: x(e.t), y: L.K - 22, key: true, text: e.persisted ? `restart, startFence ${e.startFence}` : 'restart, fence lost', alts: [e.persisted ? `startFence ${e.startFence}` : 'fence lost', 'restart'], anchor: 'middle', cls: 'small bad-text', kind: 'event', dys: [0, -1, -2, -3, 1], dxs: [0, 1, -1, 2, -2] });
        break;
      }
      default:
        break;
    }
  }
  current = null;
}

// A message from (ta, ya) to (tb, yb), drawn up to the cursor.
function message(c, g, ta, ya, tb, yb, cursor, e, text, lost, seg, head) {
  const { x, id } = c;
  const frac = tb === ta ? 1 : Math.min(1, Math.max(0, (cursor - ta) / (tb - ta)));
  const xa = x(ta);
  const xb = xa + (x(tb) - xa) * frac;
  const yb2 = ya + (yb - ya) * frac;
  const attrs = { x1: xa, y1: ya, x2: xb, y2: yb2, class: lost ? 'msg lost' : 'msg' };
  if (frac === 1 && !lost) attrs['marker-end'] = `url(#${id}-arrow)`;
  g.append(el('line', attrs));
  seg(xa, ya, xb, yb2);
  if (frac === 1 && !lost) head(xa, ya, xb, yb2, 1.4);
  if (text && frac > 0.2 && c.labels) {
    c.labels.push({ seq: e.seq, prio: 4, x: (xa + xb) / 2 + 5, y: (ya + yb2) / 2 + 4, text, anchor: 'start', cls: 'small', kind: 'message', dys: [0, -1, 1], dxs: [0, 1, 2] });
  }
}

// The spot left of an arrow for a label placed at its right (x + 8).
const LEFT_OF_ARROW = { w: -1, px: -16 };
