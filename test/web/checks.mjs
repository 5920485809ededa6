// Checks the browser tests run inside the page: labels that collide, and
// axe-core. labelProblems is passed to page.evaluate, so it is
// self-contained.

import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';

// axe-core's source, read at the first run and shared by every page after.
let axeSource;

/**
 * In the page: every problem with the labels of the timelines shown, as
 * strings (none is good):
 * - two SVG texts overlapping (their boxes share more than half a pixel),
 * - a text crossing a drawn line or an arrowhead: a message, a write's
 *   arrow, an expiry, a restart, a push, a deadline, a store call or a wait,
 *   or the gate's floor (the cursor and the row rules are background),
 * - a key label left out: a write's token and (stale or refused) outcome,
 *   a stale window's label, the label of a refused renewal, of gate.commit
 *   refusing an async function and of a restart.
 */
export function labelProblems() {
  const problems = [];
  const crosses = (s, r) => {
    // Liang-Barsky: does segment s pass through rect r?
    const dx = s.x2 - s.x1;
    const dy = s.y2 - s.y1;
    let lo = 0;
    let hi = 1;
    for (const [p, q] of [[-dx, s.x1 - r.left], [dx, r.right - s.x1], [-dy, s.y1 - r.top], [dy, r.bottom - s.y1]]) {
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
  };
  for (const svg of document.querySelectorAll('.lane svg.tl:not(.rows)')) {
    const lane = svg.closest('.lane').id;
    const texts = [...svg.querySelectorAll('text')].filter((t) => t.getClientRects().length);
    const boxes = texts.map((t) => ({ t: t.textContent, r: t.getBoundingClientRect() }));
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i].r;
        const b = boxes[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 0.5 && h > 0.5) problems.push(`${lane}: overlap: "${boxes[i].t}" and "${boxes[j].t}"`);
      }
    }
    // The lines, in page coordinates, each as segments (an arrowhead as its
    // triangle: the markers are 7 stroke widths long and wide).
    const m = svg.getScreenCTM();
    const at = (x, y) => ({ x: m.a * x + m.c * y + m.e, y: m.b * x + m.d * y + m.f });
    const segs = [];
    const add = (p, q, what, width) => segs.push({ x1: p.x, y1: p.y, x2: q.x, y2: q.y, what, width });
    const lines = svg.querySelectorAll(
      'g.events line.msg, g.events line.write, g.events line.expire, g.events line.restart, g.events line.push, g.events line.deadline, g.events line.flight, g.events line.wait',
    );
    for (const l of lines) {
      const n = (k) => Number(l.getAttribute(k));
      const p = { x: n('x1'), y: n('y1') };
      const q = { x: n('x2'), y: n('y2') };
      const sw = Number.parseFloat(getComputedStyle(l).strokeWidth) || 1;
      const what = `${l.getAttribute('class')} of ${l.closest('g.ev')?.dataset.kind ?? '?'} ${l.closest('g.ev')?.dataset.seq ?? ''}`;
      add(at(p.x, p.y), at(q.x, q.y), what, sw);
      const len = Math.hypot(q.x - p.x, q.y - p.y);
      if (l.hasAttribute('marker-end') && len > 0) {
        const ux = (q.x - p.x) / len;
        const uy = (q.y - p.y) / len;
        const size = 7 * sw;
        const tip = { x: q.x + ux * size * 0.1, y: q.y + uy * size * 0.1 };
        const bx = q.x - ux * size * 0.9;
        const by = q.y - uy * size * 0.9;
        const c1 = { x: bx - uy * size * 0.5, y: by + ux * size * 0.5 };
        const c2 = { x: bx + uy * size * 0.5, y: by - ux * size * 0.5 };
        for (const [a, b] of [[tip, c1], [tip, c2], [c1, c2]]) add(at(a.x, a.y), at(b.x, b.y), `arrowhead of ${what}`, 0.5);
      }
    }
    for (const pl of svg.querySelectorAll('g.events polyline.floor-line')) {
      const pts = pl.getAttribute('points').trim().split(/\s+/).map((s) => s.split(',').map(Number));
      for (let i = 1; i < pts.length; i++) add(at(...pts[i - 1]), at(...pts[i]), 'the floor', 1.6);
    }
    for (const { t, r } of boxes) {
      for (const s of segs) {
        // Half the stroke (less half a pixel of anti-aliasing) around the line.
        const g = Math.max(0, s.width / 2 - 0.5);
        const box = { left: r.left - g + 0.5, right: r.right + g - 0.5, top: r.top - g + 0.5, bottom: r.bottom + g - 0.5 };
        if (crosses(s, box)) problems.push(`${lane}: "${t}" crosses the ${s.what}`);
      }
    }
    for (const g of svg.querySelectorAll('g.events g.ev-write, g.events g.ev-write-call')) {
      // A synchronous write carries its token and outcome; an async one its
      // token at its call and its outcome where it ends.
      const async = g.dataset.async === 'true' || g.classList.contains('ev-write-call');
      // (A write that landed as it should may lose its "lands" to a lack of
      // room: its green dot says it. A stale or refused one may not.)
      const outcome = g.dataset.status === 'ok' ? [] : ['outcome'];
      const kinds = g.classList.contains('ev-write-call') ? ['token'] : async ? outcome : ['token', ...outcome];
      for (const kind of kinds) {
        if (!svg.querySelector(`text[data-kind="${kind}"][data-seq="${g.dataset.seq}"]`)) problems.push(`${lane}: ${g.dataset.kind} ${g.dataset.seq} has no ${kind} label`);
      }
    }
    // The coordinator refusing a renewal, gate.commit refusing an async
    // function and a restart are each the point of their preset.
    for (const g of svg.querySelectorAll('g.events g.ev-refuse-renewal, g.events g.ev-misuse, g.events g.ev-restart')) {
      if (!svg.querySelector(`text[data-seq="${g.dataset.seq}"]`)) problems.push(`${lane}: ${g.dataset.kind} ${g.dataset.seq} has no label`);
    }
    const windows = svg.querySelectorAll('rect.window').length;
    const windowLabels = svg.querySelectorAll('text[data-kind="window"]').length;
    if (windowLabels !== windows) problems.push(`${lane}: ${windows} windows, ${windowLabels} labels`);
  }
  return problems;
}

/**
 * Runs axe-core in the page and its frames, over the whole document or the
 * elements of include (CSS selectors), and returns the serious and critical
 * violations as strings.
 */
export async function axe(page, include = null) {
  axeSource ??= await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  for (const f of page.frames()) {
    if (!(await f.evaluate(() => typeof window.axe === 'object').catch(() => true))) await f.evaluate(axeSource);
  }
  const res = await page.evaluate((include) => window.axe.run(include ? { include: include.map((s) => [s]) } : document, { resultTypes: ['violations'] }), include);
  return res.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/**
 * In the page: the kinds of element under the selectors of include (null:
 * the whole document), as short hashes, so that a test can run axe-core
 * only on the states that show a kind of element no earlier state showed,
 * rather than on every state. An element's kind is what axe-core's rules
 * look at: its tag, whether it is rendered, whether it has text of its
 * own, its attributes that bear on roles, names, labels, focus and contrast
 * (id, class, role, tabindex, hidden, for, type, name, alt, title, lang,
 * href, disabled, style and every aria-*), and its parent's tag, role and
 * class. Each number counts as 0 (aria-valuenow="450" and "50",
 * style="left: 12.5px" and "left: 3px" are the same kind; "" and "5" are
 * not); positions, sizes and the words of texts are not part of it. An id
 * used twice in the document is a kind of its own. Self-contained
 * (page.evaluate).
 */
export function a11yKinds(include) {
  const roots = include ? include.flatMap((s) => [...document.querySelectorAll(s)]) : [document.documentElement];
  const keep = /^(id|class|role|tabindex|hidden|for|type|name|alt|title|lang|href|disabled|style|aria-.*)$/;
  const digits = (v) => (v ?? '').replace(/\d+(\.\d+)?/g, '0');
  const kinds = new Set();
  const ids = new Set();
  for (const el of document.querySelectorAll('[id]')) {
    if (ids.has(el.id)) kinds.add(`an id used twice: ${el.id}`);
    ids.add(el.id);
  }
  for (const [r, root] of roots.entries()) {
    for (const el of [root, ...root.querySelectorAll('*')]) {
      const attrs = [];
      for (const a of el.attributes) if (keep.test(a.name)) attrs.push(`${a.name}=${digits(a.value)}`);
      const own = [...el.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim() !== '');
      const p = el.parentElement;
      const parent = p ? `${p.tagName}|${p.getAttribute('role')}|${digits(p.getAttribute('class'))}` : '';
      kinds.add(`${r}|${parent}>${el.tagName}|${el.getClientRects().length > 0}|${own}|${attrs.sort().join('|')}`);
    }
  }
  // cyrb53: 53 bits, enough to tell a few thousand kinds apart.
  const hash = (s) => {
    let h1 = 0xdeadbeef;
    let h2 = 0x41c6ce57;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      h1 = Math.imul(h1 ^ c, 2654435761);
      h2 = Math.imul(h2 ^ c, 1597334677);
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
    h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
    return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
  };
  return [...kinds].map(hash);
}
