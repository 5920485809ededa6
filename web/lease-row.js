// A resource's lane in the console (cmd/coordinator -ui): its leases,
// renewals, ends, waiters' handovers and gates' refusals, live, drawn with
// the playground's primitives and marks (svg.js, style.css) so that one
// lease looks the same on both pages.

import { PAD_L, PAD_R, el, show, scaleOf, niceStep, leaseBar, refusedCross, placeLabels } from './svg.js';

/** Row positions (px) of a console lane: the lease bars on K, the fence line under them on R. */
export const ROW = Object.freeze({ K: 15, bar: 7, R: 37, floorStep: 3, H: 50, line: 13, font: 11 });

const HOW_WORDS = { expired: 'expired', released: 'released', revoked: 'revoked' };

/**
 * Draws one resource's recent history into container as a lane, in the
 * playground's marks: each lease a bar labelled holder and fence (the
 * coordinator's copy, as on the playground's coordinator row), a grant's
 * dot, renewal ticks on the bar's top edge, its end marked as it came
 * (an expiry's line, a release's short bar, a revocation's red square);
 * under the bars the fence line, rising at each handover ("fence 8"); a
 * gate's refusal a cross on it, as a refused write is on the playground.
 * lane: { name, gens: [{ holder, fence, who ('A'|'B'|'C', the colour),
 * start, end, how ('expired'|'released'|'revoked'|null: live), listed
 * (granted before the history kept), renewals: [t] }], refusals: [{ t,
 * holder, fence, admittedHolder, admittedFence, gate }] }, times in one
 * clock's milliseconds. opts: { extent: { t0, t1 } (t1 is now), width,
 * label (the lane's accessible name) }. Strings go in as text only.
 */
export function drawLeaseRow(container, lane, opts) {
  const L = ROW;
  const W = Math.max(opts.width, 200);
  const { t0, t1 } = opts.extent;
  const { x } = scaleOf(opts.extent, W);
  const svg = el('svg', { width: W, height: L.H, viewBox: `0 0 ${W} ${L.H}`, class: 'tl lease-row', role: 'img', 'aria-label': opts.label });
  const back = el('g', { class: 'back' });
  const shapes = el('g', { class: 'events' });
  const texts = el('g', { class: 'labels' });
  svg.append(back, shapes, texts);
  const labels = [];
  const obstacles = [];
  const segments = [];
  const seg = (x1, y1, x2, y2) => segments.push({ x1, y1, x2, y2 });
  back.append(el('line', { x1: PAD_L, x2: W - PAD_R, y1: L.K, y2: L.K, class: 'row' }));
  back.append(el('line', { x1: x(t1), x2: x(t1), y1: 2, y2: L.H - 2, class: 'cursor' }));
  const mark = (kind, attrs, title) => {
    const g = el('g', { class: `ev ev-${kind}`, 'data-kind': kind, ...attrs });
    g.append(el('title', {}, title));
    shapes.append(g);
    return g;
  };

  // The fence line: one step up at each handover in view.
  const level = (k) => L.R + 6 - L.floorStep * Math.min(k, 4);
  const pts = [];
  let rises = 0;
  const gens = lane.gens.filter((g) => g.end >= t0 && g.start <= t1);
  if (gens.length) pts.push([PAD_L, level(0)]);
  for (const gen of gens) {
    if (gen.listed || gen.start < t0) {
      if (!rises) labels.push({ prio: 5, x: PAD_L + 2, y: level(0) + 11, text: `fence ${gen.fence}`, anchor: 'start', cls: 'small floor-label', kind: 'floor', dys: [0, -2] });
      continue;
    }
    const px = x(gen.start);
    pts.push([px, level(rises)], [px, level(rises + 1)]);
    rises++;
    labels.push({ prio: 1, x: px + 3, y: level(rises) + 11, text: `fence ${gen.fence}`, alts: [`${gen.fence}`], anchor: 'start', cls: 'small floor-label', kind: 'floor', dys: [0, -2], dxs: [0, { w: -1, px: -6 }] });
  }
  if (pts.length) {
    pts.push([x(t1), level(rises)]);
    for (let i = 1; i < pts.length; i++) seg(pts[i - 1][0], pts[i - 1][1], pts[i][0], pts[i][1]);
    const g = el('g', { class: 'floor', 'data-floor': gens[gens.length - 1].fence });
    g.append(el('polyline', { points: pts.map((p) => p.join(',')).join(' '), class: 'floor-line' }));
    back.append(g);
  }

  for (const gen of gens) {
    const x0 = x(Math.max(gen.start, t0));
    const x1 = x(Math.min(gen.end, t1));
    const bar = leaseBar(shapes, obstacles, labels, { x0, x1, y: L.K, half: L.bar, who: gen.who, holder: gen.holder, fence: gen.fence, attrs: { 'data-how': gen.how ?? 'live' } });
    bar.append(el('title', {}, `${gen.holder}, fence ${gen.fence}${gen.how ? `, ${HOW_WORDS[gen.how]}` : ', holds it'}`));
    if (!gen.listed && gen.start >= t0) {
      const g = mark('granted', { 'data-holder': gen.holder, 'data-fence': gen.fence }, `granted to ${gen.holder}, fence ${gen.fence}`);
      g.append(el('circle', { cx: x0, cy: L.K, r: 4, class: `mark who-${gen.who}` }));
    }
    for (const t of gen.renewals) {
      if (t < t0 || t > t1) continue;
      const g = mark('renewed', { 'data-holder': gen.holder, 'data-fence': gen.fence }, `${gen.holder} renewed fence ${gen.fence}`);
      g.append(el('line', { x1: x(t), x2: x(t), y1: L.K - L.bar - 3, y2: L.K - L.bar + 3, class: 'renew-tick' }));
    }
    if (!gen.how || gen.end > t1) continue;
    const g = mark(gen.how, { 'data-holder': gen.holder, 'data-fence': gen.fence }, `${gen.holder}'s lease, fence ${gen.fence}, ${HOW_WORDS[gen.how]}`);
    if (gen.how === 'revoked') {
      g.append(el('rect', { x: x1 - 4, y: L.K - 4, width: 8, height: 8, class: 'deny' }));
      obstacles.push({ x: x1 - 4, y: L.K - 4, width: 8, height: 8 });
    } else {
      const h = gen.how === 'expired' ? 10 : 8;
      g.append(el('line', { x1, x2: x1, y1: L.K - h, y2: L.K + h, class: gen.how === 'expired' ? 'expire' : 'release' }));
      seg(x1, L.K - h, x1, L.K + h);
    }
    labels.push({ prio: 3, x: x1 + 4, y: L.K + 4, text: HOW_WORDS[gen.how], anchor: 'start', cls: gen.how === 'revoked' ? 'small bad-text' : 'small', kind: 'event', dys: [0], dxs: [0, { w: -1, px: -8 }] });
  }

  for (const r of lane.refusals) {
    if (r.t < t0 || r.t > t1) continue;
    const cx = x(r.t);
    const g = mark('refused', { 'data-holder': r.holder, 'data-fence': r.fence, 'data-admitted-fence': r.admittedFence },
      `${r.gate}: a write of ${r.holder} with fence ${r.fence} refused; ${r.admittedHolder} had written with fence ${r.admittedFence}`);
    g.append(refusedCross(cx, L.R));
    obstacles.push({ x: cx - 7, y: L.R - 7, width: 14, height: 14 });
    labels.push({ prio: 0, x: cx + 9, y: L.R + 4, text: `${r.holder} #${r.fence} < ${r.admittedFence}: refused`, alts: [`#${r.fence} refused`, '✕'], anchor: 'start', cls: 'small refused-text', kind: 'outcome', dys: [0, -1], dxs: [0, { w: -1, px: -18 }] });
  }

  placeLabels(svg, texts, labels, obstacles, segments, W, L, false);
  show(container, svg);
}

/** Draws the time axis of the console's lanes into container: extent as drawLeaseRow's, each tick written by format(t). */
export function drawTimeAxis(container, extent, width, format) {
  const W = Math.max(width, 200);
  const H = 22;
  const { x } = scaleOf(extent, W);
  const svg = el('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: 'tl', 'aria-hidden': 'true' });
  const axis = el('g', { class: 'axis' });
  axis.append(el('line', { x1: PAD_L, x2: W - PAD_R, y1: 4, y2: 4 }));
  const step = niceStep(extent.t1 - extent.t0, Math.floor((W - PAD_L - PAD_R) / 80));
  for (let t = Math.ceil(extent.t0 / step) * step; t <= extent.t1; t += step) {
    axis.append(el('line', { x1: x(t), x2: x(t), y1: 4, y2: 8 }));
    // Near an edge, a tick's label keeps inside the drawing.
    const anchor = x(t) < PAD_L + 20 ? 'start' : x(t) > W - PAD_R - 20 ? 'end' : 'middle';
    axis.append(el('text', { x: x(t), y: 19, 'text-anchor': anchor, class: 'tick' }, format(t)));
  }
  svg.append(axis);
  show(container, svg);
}
