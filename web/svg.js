// The drawing's primitives, shared by the playground's lanes (view.js) and
// the console's (lease-row.js): an SVG drawing built apart from the page as
// plain objects (V) and written into it by patching what is there (show);
// text measured with a canvas, so drawing forces no layout; the time scale;
// and label placement, where no two labels overlap and none crosses a drawn
// line. Every element is made with createElementNS and every string goes in
// through textContent or setAttribute, never markup.

const NS = 'http://www.w3.org/2000/svg';
/** The timeline's margins (px) left and right of the time scale. */
export const PAD_L = 10;
export const PAD_R = 14;

// --- the drawing as data, and writing it into the page ---------------------------

/**
 * An SVG element to be: its tag, its attributes in the order they are set
 * (as the DOM keeps them), its text or its children. Built by the drawing
 * code through the few DOM methods it uses (append, setAttribute), never
 * changed once drawn, so a drawing can be kept and drawn again. Attribute
 * values are kept as given (numbers mostly) and made text only when set:
 * printing a number is the costliest part of building a drawing, and two
 * values that differ as given differ as text or are set again harmlessly.
 */
class V {
  constructor(name, attrs, text) {
    this.name = name;
    this.keys = [];
    this.vals = [];
    for (const k in attrs) {
      this.keys.push(k);
      this.vals.push(attrs[k]);
    }
    this.text = text === undefined ? undefined : String(text);
    this.kids = [];
    this.sig = null;
  }

  append(...kids) {
    for (const k of kids) this.kids.push(k);
  }

  setAttribute(k, v) {
    const i = this.keys.indexOf(k);
    if (i < 0) {
      this.keys.push(k);
      this.vals.push(v);
    } else this.vals[i] = v;
    this.sig = null;
  }

  getAttribute(k) {
    const i = this.keys.indexOf(k);
    return i < 0 ? null : String(this.vals[i]);
  }

  /** classList.add: the class attribute's words, then cls (set as the DOM serializes them). */
  addClass(cls) {
    const words = (this.getAttribute('class') ?? '').split(/\s+/).filter(Boolean);
    if (!words.includes(cls)) words.push(cls);
    this.setAttribute('class', [...new Set(words)].join(' '));
  }

  /** What an element must share with another to be updated into it: tag, attribute names, text or children. */
  shape() {
    return (this.sig ??= `${this.name}|${this.keys.join(' ')}|${this.text === undefined ? '' : 't'}`);
  }
}

// a.shape() === b.shape(), without making the strings.
function sameShape(a, b) {
  if (a.name !== b.name || a.keys.length !== b.keys.length || (a.text === undefined) !== (b.text === undefined)) return false;
  for (let i = 0; i < a.keys.length; i++) if (a.keys[i] !== b.keys[i]) return false;
  return true;
}

export function el(name, attrs = {}, text) {
  return new V(name, attrs, text);
}

/** Sets node's text when it differs: a write that changes nothing still costs the browser work. */
export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/** An HTML element (not drawn through V): tag with props assigned (id, className, textContent, ...) and children appended. */
export function h(tag, props, ...children) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...children);
  return e;
}

// A new node for v and its children.
export function make(v) {
  const n = document.createElementNS(NS, v.name);
  for (let i = 0; i < v.keys.length; i++) n.setAttribute(v.keys[i], String(v.vals[i]));
  if (v.text !== undefined) n.textContent = v.text;
  for (const k of v.kids) n.appendChild(make(k));
  return n;
}

// Turns node n, which shows old, into one that shows v (same shape).
function patch(n, old, v) {
  if (old === v) return;
  for (let i = 0; i < v.keys.length; i++) if (old.vals[i] !== v.vals[i]) n.setAttribute(v.keys[i], String(v.vals[i]));
  if (v.text !== undefined) {
    if (v.text !== old.text) n.textContent = v.text;
    return;
  }
  patchKids(n, old.kids, v.kids);
}

// The same for the children of parent (which show olds, in order): each new
// child takes the node of an old one that is exactly the same if there is
// one, else of one of the same class and shape, else of the same shape, in
// order; the nodes left over go, and new ones are made for the rest.
function patchKids(parent, olds, news) {
  const nodes = parent.childNodes;
  if (olds.length === news.length) {
    let same = true;
    for (let i = 0; i < news.length && same; i++) same = sameShape(olds[i], news[i]);
    if (same) {
      // The usual redraw: the same elements, some moved.
      for (let i = 0; i < news.length; i++) patch(nodes[i], olds[i], news[i]);
      return;
    }
  }
  const was = [...nodes];
  const taken = new Array(olds.length).fill(false);
  const match = new Array(news.length).fill(-1);
  const exact = (v) => `${v.shape()}|${v.vals.join('\u0000')}|${v.text ?? ''}|${v.kids.length}`;
  const classed = (v) => `${v.shape()}|${v.getAttribute('class') ?? ''}`;
  for (const key of [exact, classed, (v) => v.shape()]) {
    const free = new Map();
    for (let i = 0; i < olds.length; i++) {
      if (taken[i]) continue;
      const k = key(olds[i]);
      const list = free.get(k);
      if (list) list.push(i);
      else free.set(k, [i]);
    }
    for (let j = 0; j < news.length; j++) {
      if (match[j] >= 0) continue;
      const list = free.get(key(news[j]));
      if (!list?.length) continue;
      const i = list.shift();
      taken[i] = true;
      match[j] = i;
    }
  }
  for (let i = 0; i < olds.length; i++) if (!taken[i]) was[i].remove();
  let ref = parent.firstChild;
  for (let j = 0; j < news.length; j++) {
    let n;
    if (match[j] >= 0) {
      n = was[match[j]];
      patch(n, olds[match[j]], news[j]);
    } else n = make(news[j]);
    if (n === ref) ref = ref.nextSibling;
    else parent.insertBefore(n, ref);
  }
}

/** Shows drawing v (an svg) in container: updates what container shows, if it shows a drawing of ours. */
export function show(container, v) {
  const shown = container._drawn;
  if (shown && container.childNodes.length === 1 && container.firstChild === shown.node && sameShape(shown.v, v)) {
    patch(shown.node, shown.v, v);
    shown.v = v;
    return;
  }
  const node = make(v);
  container.replaceChildren(node);
  container._drawn = { node, v };
}

// --- measuring text without layout -------------------------------------------

let probe = null;
let canvas = null;
const fonts = new Map();
const widths = new Map();

// The CSS font of an SVG text of class cls, read once from a hidden probe.
function fontOf(cls, compact) {
  const key = `${compact ? 'c' : 'n'} ${cls}`;
  let f = fonts.get(key);
  if (f) return f;
  if (!probe) {
    probe = make(el('svg', { class: 'tl', 'aria-hidden': 'true', width: 0, height: 0 }));
    // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    Object.assign(probe.style, { position: 'absolute', left: '-9999px', top: '0', visibility: 'hidden' });
    probe.append(make(el('text', {}, 'x')));
    document.body.append(probe);
  }
  probe.setAttribute('class', `tl${compact ? ' compact' : ''}`);
  const t = probe.firstChild;
  t.setAttribute('class', cls);
  const cs = getComputedStyle(t);
  f = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
  fonts.set(key, f);
  return f;
}

// The box of text drawn at (x, y) with anchor, in the font of its class:
// canvas metrics, the same the SVG text uses (its box is the font's ascent
// and descent high), plus half a pixel left and right.
export function measure(text, cls, compact, x, y, anchor) {
  const font = fontOf(cls, compact);
  const key = `${font}\u0000${text}`;
  let m = widths.get(key);
  if (!m) {
    canvas ??= document.createElement('canvas').getContext('2d');
    canvas.font = font;
    const r = canvas.measureText(text);
    m = { w: r.width, asc: r.fontBoundingBoxAscent, desc: r.fontBoundingBoxDescent };
    widths.set(key, m);
  }
  const x0 = anchor === 'middle' ? x - m.w / 2 : anchor === 'end' ? x - m.w : x;
  return { x: x0 - 0.5, y: y - m.asc, width: m.w + 1, height: m.asc + m.desc };
}

/** The x of time t and the time at x, for a timeline W px wide over extent. */
export function scaleOf(extent, W) {
  const { t0, t1 } = extent;
  const span = W - PAD_L - PAD_R;
  return {
    x: (t) => PAD_L + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * span,
    t: (x) => t0 + ((x - PAD_L) / span) * (t1 - t0),
    msPerPx: (t1 - t0) / span,
  };
}

export function niceStep(span, count) {
  const raw = span / Math.max(2, count);
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// A lease as the coordinator holds it: a bar on row y from x0 to x1 in the
// colour of who (A, B or C), its holder and fence inside it where they fit
// (only the bar's own name goes inside it). Returns the bar's group.
export function leaseBar(layer, obstacles, labels, { x0, x1, y, half, who, holder, fence, attrs }) {
  const g = el('g', { class: `gen who-${who}`, 'data-holder': holder, 'data-fence': fence, ...attrs });
  const w = Math.max(1, x1 - x0);
  g.append(el('rect', { x: x0, y: y - half, width: w, height: 2 * half, rx: 3 }));
  layer.append(g);
  obstacles.push({ x: x0, y: y - half, width: w, height: 2 * half, bar: true });
  labels.push({ prio: 2, x: x0 + 6, y: y + 4, text: `${holder} #${fence}`, anchor: 'start', cls: 'inbar', kind: 'inbar', dys: [0], dxs: [0, 1, 2], within: [x0, x0 + w] });
  return g;
}

// The cross of a refused write, centred on (cx, y).
export const refusedCross = (cx, y) => el('path', { d: `M${cx - 6},${y - 6} l12,12 m0,-12 l-12,12`, class: 'refused' });

const overlaps = (a, b, pad = 1) => a.x < b.x + b.width + pad && b.x < a.x + a.width + pad && a.y < b.y + b.height + pad && b.y < a.y + a.height + pad;

// Whether segment s passes through box r grown by pad (Liang-Barsky clipping).
function crosses(s, r, pad = 1.5) {
  const x0 = r.x - pad;
  const x1 = r.x + r.width + pad;
  const y0 = r.y - pad;
  const y1 = r.y + r.height + pad;
  // Apart at a glance: the segment's own box misses the rectangle.
  if (Math.max(s.x1, s.x2) < x0 || Math.min(s.x1, s.x2) > x1 || Math.max(s.y1, s.y2) < y0 || Math.min(s.y1, s.y2) > y1) return false;
  const dx = s.x2 - s.x1;
  const dy = s.y2 - s.y1;
  let lo = 0;
  let hi = 1;
  for (const [p, q] of [[-dx, s.x1 - x0], [dx, x1 - s.x1], [-dy, s.y1 - y0], [dy, y1 - s.y1]]) {
    if (p === 0) {
      if (q < 0) return false;
    } else {
      const t = q / p;
      if (p < 0) lo = Math.max(lo, t);
      else hi = Math.min(hi, t);
      if (lo > hi) return false;
    }
  }
  return true;
}

/**
 * Places labels in order of priority (0 first): each at the first of its
 * candidate spots (moved by whole lines up or down, `dys`, and by its own
 * width left or right, `dxs`) where it overlaps no placed label and no
 * obstacle, crosses no drawn line, and stays inside the drawing, trying its
 * shorter forms (`alts`, the full text then kept in data-full) when the full
 * one fits nowhere; a label with no free spot at all is left out and listed
 * in data-dropped-labels. In-bar labels must also fit their bar.
 */
function findSpot(b, l, placed, obstacles, segments, W, L) {
  for (const dxUnit of l.dxs ?? [0]) {
    for (const dyUnit of l.dys ?? [0]) {
      // A number: half widths (plus 4 px) right or left; { w, px }: w whole
      // widths plus px pixels (e.g. to the left of what the label is beside).
      let dx = typeof dxUnit === 'number' ? dxUnit * (b.width / 2 + 4) : dxUnit.w * b.width + dxUnit.px;
      const dy = dyUnit * L.line;
      // Keep it inside the drawing horizontally.
      if (b.x + dx < 1) dx = 1 - b.x;
      if (b.x + dx + b.width > W - 1) dx = W - 1 - b.x - b.width;
      const cand = { x: b.x + dx, y: b.y + dy, width: b.width, height: b.height };
      if (cand.y < 0 || cand.y + cand.height > L.H) continue;
      if (l.within && (cand.x < l.within[0] + 1 || cand.x + cand.width > l.within[1] - 1)) continue;
      if (placed.some((p) => overlaps(p, cand))) continue;
      if (obstacles.some((o) => !(o.bar && l.kind === 'inbar') && overlaps(o, cand, 0))) continue;
      if (segments.some((s) => crosses(s, cand))) continue;
      return { dx, dy, cand };
    }
  }
  return null;
}

// For a key label that fits none of its own spots: every spot within six
// lines up or down and two widths left or right, nearest first.
const WIDE = (() => {
  const out = [];
  for (let dy = -6; dy <= 6; dy++) for (let dx = -4; dx <= 4; dx++) out.push([dx, dy]);
  return out.sort((a, b) => Math.abs(a[0]) + Math.abs(a[1]) - (Math.abs(b[0]) + Math.abs(b[1])));
})();
const KEY_KINDS = new Set(['window', 'token', 'outcome', 'key']);

function findWide(b, l, placed, obstacles, segments, W, L) {
  for (const [dx, dy] of WIDE) {
    const spot = findSpot(b, { ...l, dxs: [dx / 2], dys: [dy] }, placed, obstacles, segments, W, L);
    if (spot) return spot;
  }
  return null;
}

export function placeLabels(svg, layer, labels, obstacles, segments, W, L, compact) {
  const placed = [];
  const dropped = [];
  const order = labels.map((l, i) => ({ l, i })).sort((a, b) => a.l.prio - b.l.prio || a.i - b.i);
  for (const { l } of order) {
    let spot = null;
    let text = l.text;
    const texts = [l.text, ...(l.alts ?? [])];
    // The full text first, then its shorter forms; a key label then looks further.
    const tries = [l];
    if (KEY_KINDS.has(l.kind) || l.key) tries.push({ wide: true });
    for (const attempt of tries) {
      for (const t of texts) {
        const b = measure(t, l.cls, compact, l.x, l.y, l.anchor);
        spot = attempt.wide ? findWide(b, l, placed, obstacles, segments, W, L) : findSpot(b, l, placed, obstacles, segments, W, L);
        text = t;
        if (spot) break;
      }
      if (spot) break;
    }
    if (!spot) {
      if (l.kind !== 'inbar' && l.kind !== 'tick') dropped.push(`${l.kind}: ${l.text}`);
      continue;
    }
    const t = el('text', { x: l.x + spot.dx, y: l.y + spot.dy, 'text-anchor': l.anchor, class: l.cls, 'data-kind': l.kind }, text);
    if (l.seq !== undefined) t.setAttribute('data-seq', l.seq);
    if (l.wid !== undefined) t.setAttribute('data-wid', l.wid);
    if (text !== l.text) t.setAttribute('data-full', l.text);
    layer.append(t);
    placed.push(spot.cand);
  }
  // What had no room, for the tests (and for anyone inspecting the page).
  svg.setAttribute('data-dropped', dropped.length);
  svg.setAttribute('data-dropped-labels', dropped.join(' | '));
}
