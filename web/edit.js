// The playground's editing on the drawing: every event a parameter places
// (an `edit` from the model) gets a handle over the timeline, a slider for
// assistive technology. Dragging it or pressing the arrow keys sets that
// parameter to the event's new time minus its offset; app.js re-runs the
// model and redraws at once (editParam), the form and the URL follow.

import { PARAMS, fmt } from './model.js';
import { editedWhat } from './words.js';
import { extentOf } from './view.js';

const $ = (id) => document.getElementById(id);

// app.js's state (ui) and the actions editing takes: { pause, editParam, render }.
let ui = null;
let app = null;

/** Ties editing to the page: app.js's state and actions. */
export function initEditing(state, actions) {
  ui = state;
  app = actions;
}

/** Which of several handles at one place is on top (the higher). */
const RANK = { expire: 0, restart: 1, grant: 2, deny: 2, extend: 2, replay: 2, 'refuse-renewal': 2, reply: 3, lost: 3, send: 4, check: 5, 'write-call': 6, write: 6 };

/** The parameter definition an edit sets. */
const defOf = (key) => PARAMS.find((d) => d.key === key);

// The handle elements of a lane, kept from one render to the next (so focus
// and a drag survive the redraw), keyed by what they move: actor, kind,
// parameter and the event's place among the lane's events with those three.
const handleKeys = new WeakMap(); // lane -> Map(seq -> key)
function handleKey(lane, e) {
  let keys = handleKeys.get(lane);
  if (!keys) {
    keys = new Map();
    const n = new Map();
    for (const o of lane.events) {
      if (!o.edit) continue;
      const base = `${o.actor}.${o.kind}.${o.edit.key}`;
      const i = n.get(base) ?? 0;
      n.set(base, i + 1);
      keys.set(o.seq, `${base}.${i}`);
    }
    handleKeys.set(lane, keys);
  }
  return keys.get(e.seq);
}

// Sets what differs from what was set last: a handle's attributes change
// little from one redraw to the next.
function put(el, name, value) {
  const memo = (el._memo ??= {});
  if (memo[name] === value) return;
  memo[name] = value;
  if (name.startsWith('data-')) el.dataset[name.slice(5)] = value;
  else if (name === 'left' || name === 'top') el.style[name] = value;
  else if (name === 'title') el.title = value;
  else el.setAttribute(name, value);
}

export function renderHandles(mode, lane, drawn) {
  const layer = $(`handles-${mode}`);
  const editable = !ui.live?.shown;
  layer.hidden = !editable || ui.embed;
  if (layer._w !== drawn.W || layer._h !== drawn.L.H) {
    layer._w = drawn.W;
    layer._h = drawn.L.H;
    layer.style.width = `${drawn.W}px`;
    layer.style.height = `${drawn.L.H}px`;
  }
  if (layer.hidden) return;
  const keep = new Map();
  for (const h of layer.children) keep.set(h._id ?? h.dataset.id, h);
  const order = [];
  for (const h of drawn.handles) {
    const e = h.e;
    const id = handleKey(lane, e);
    let el = keep.get(id);
    keep.delete(id);
    if (!el) {
      el = document.createElement('div');
      el.className = 'handle';
      el.dataset.id = id;
      el._id = id;
      el.tabIndex = 0;
      el.setAttribute('role', 'slider');
      el.setAttribute('aria-orientation', 'horizontal');
    }
    const def = defOf(e.edit.key);
    const value = e.t - e.edit.offset;
    const what = editedWhat(e);
    put(el, 'data-key', e.edit.key);
    put(el, 'data-actor', e.actor);
    put(el, 'data-kind', e.kind);
    put(el, 'data-seq', String(e.seq));
    put(el, 'data-t', String(e.t));
    put(el, 'data-occurrence', id.split('.').at(-1));
    put(el, 'left', `${h.x}px`);
    put(el, 'top', `${h.y}px`);
    put(el, 'aria-label', `${mode === 'naive' ? 'Naive' : 'Fenced'} lane: ${what}; sets ${def.label}`);
    put(el, 'aria-valuemin', String(e.edit.min));
    put(el, 'aria-valuemax', String(e.edit.max));
    put(el, 'aria-valuenow', String(value));
    put(el, 'aria-valuetext', `${what} at ${fmt(e.t)} ms; ${def.label} ${fmt(value)}`);
    put(el, 'title', `Drag, or focus and press ← →: ${what} (${def.label} ${fmt(value)} ms)`);
    if (el.classList.contains('dragging') !== (ui.drag?.el === el)) el.classList.toggle('dragging', ui.drag?.el === el);
    if (el.classList.contains('gone')) el.classList.remove('gone');
    el._t = e.t;
    el._rank = RANK[e.kind] ?? 0;
    order.push(el);
  }
  for (const el of keep.values()) {
    // A handle being dragged or focused stays (hidden) until its event is back.
    if (el === ui.drag?.el || el === document.activeElement) {
      el.classList.add('gone');
      order.push(el);
    } else el.remove();
  }
  // In time order, so Tab moves along the timeline; the pointer takes the
  // most specific event where several coincide (later in the list is on top).
  order.sort((a, b) => (a._t ?? 0) - (b._t ?? 0) || (a._rank ?? 0) - (b._rank ?? 0));
  // A drag keeps the order it started with: moving the dragged element
  // would end its pointer capture. Otherwise reorder, and give the focus
  // back to the handle that had it (moving an element takes its focus).
  const active = layer.contains(document.activeElement) ? document.activeElement : null;
  if (ui.drag) {
    for (const el of order) if (el.parentNode !== layer) layer.append(el);
  } else {
    order.forEach((el, i) => {
      if (layer.children[i] !== el) layer.insertBefore(el, layer.children[i] ?? null);
    });
  }
  if (active && active.isConnected && document.activeElement !== active) active.focus({ preventScroll: true });
}

// The event a handle stands for, in the run shown now.
function eventOfHandle(mode, el) {
  const lane = ui.run.lanes[mode];
  return lane.events.find((e) => e.edit && handleKey(lane, e) === el.dataset.id) ?? null;
}

function noteOf(el) {
  return { key: el.dataset.key, label: defOf(el.dataset.key).label, actor: el.dataset.actor, kind: el.dataset.kind, occurrence: Number(el.dataset.occurrence) };
}

export function onHandleKey(ev) {
  const el = ev.target.closest?.('.handle');
  if (!el || ev.ctrlKey || ev.metaKey) return;
  const mode = el.closest('.lane').dataset.mode;
  const e = eventOfHandle(mode, el);
  if (!e) return;
  const value = e.t - e.edit.offset;
  const unit = ev.altKey ? 1 : ev.shiftKey ? 100 : 10;
  const to = {
    ArrowRight: value + unit,
    ArrowUp: value + unit,
    ArrowLeft: value - unit,
    ArrowDown: value - unit,
    PageUp: value + 100,
    PageDown: value - 100,
    Home: e.edit.min,
    End: e.edit.max,
  }[ev.key];
  if (to === undefined) return;
  ev.preventDefault();
  ev.stopPropagation();
  const v = Math.min(Math.max(Math.round(to), e.edit.min), e.edit.max);
  app.pause();
  app.editParam(e.edit.key, v, noteOf(el));
}

// A pointer's moves as they come: pointerrawupdate where the browser has it
// (Chromium, in a secure context such as 127.0.0.1 or https). pointermove
// is held until the next frame begins (up to 16 ms, more under load), and
// the redraw would start only then; a raw move starts it at once, so the
// lanes are ready when the frame is. drain then redraws at most once a
// frame: moves that come faster wait for the next one, newest value first.
const MOVE = typeof window !== 'undefined' && 'onpointerrawupdate' in window ? 'pointerrawupdate' : 'pointermove';

export function onPointerDown(ev) {
  const el = ev.target.closest?.('.handle');
  if (!el || ev.button !== 0 || ui.live?.shown) return;
  const mode = el.closest('.lane').dataset.mode;
  const e = eventOfHandle(mode, el);
  if (!e) return;
  ev.preventDefault();
  el.focus({ preventScroll: true });
  el.setPointerCapture(ev.pointerId);
  app.pause();
  const scale = ui.drawn[mode].scale;
  ui.drag = { el, mode, startX: ev.clientX, t: e.t, edit: { ...e.edit }, note: noteOf(el), scale, extent: ui.extent, last: e.t - e.edit.offset, pending: null, busy: false, drawn: false, waiting: false };
  el.classList.add('dragging');
  const move = (m) => onDragMove(m);
  const up = () => {
    el.removeEventListener(MOVE, move);
    el.removeEventListener('pointerup', up);
    el.removeEventListener('pointercancel', up);
    endDrag();
  };
  el.addEventListener(MOVE, move);
  el.addEventListener('pointerup', up);
  el.addEventListener('pointercancel', up);
}

// The times a dragged event snaps to: every other event's time in the
// lanes shown, when the pointer comes within a few pixels of one.
function snapped(t, drag) {
  const near = 5 * drag.scale.msPerPx;
  let best = null;
  for (const lane of Object.values(ui.run.lanes)) {
    for (const e of lane.events) {
      if (Math.abs(e.t - drag.t) < 1e-9 && e.edit?.key === drag.edit.key) continue;
      const d = Math.abs(e.t - t);
      if (d <= near && (best === null || d < Math.abs(best - t))) best = e.t;
    }
  }
  if (best !== null) return best;
  // Otherwise whole steps that suit the zoom: 1, 5 or 10 ms.
  const unit = drag.scale.msPerPx >= 2 ? 10 : drag.scale.msPerPx >= 0.8 ? 5 : 1;
  return drag.edit.offset + Math.round((t - drag.edit.offset) / unit) * unit;
}

function onDragMove(ev) {
  const d = ui.drag;
  if (!d) return;
  const t = snapped(d.t + (ev.clientX - d.startX) * d.scale.msPerPx, d);
  const v = Math.min(Math.max(Math.round(t - d.edit.offset), d.edit.min), d.edit.max);
  if (v === d.last) return;
  d.last = v;
  // One run at a time: a move that comes while one runs (or after this
  // frame's redraw) replaces any move still waiting, and waits.
  d.pending = { v, at: ev.timeStamp };
  drain();
}

async function drain() {
  const d = ui.drag;
  if (!d || d.busy) return;
  while (d.pending) {
    if (d.drawn) {
      // Redrawn in this frame already: the newest move waits for the next.
      d.waiting = true;
      return;
    }
    const { v, at } = d.pending;
    const began = performance.now();
    d.pending = null;
    d.busy = true;
    await app.editParam(d.edit.key, v, d.note);
    d.busy = false;
    d.drawn = true;
    requestAnimationFrame(() => {
      d.drawn = false;
      if (d.waiting) {
        d.waiting = false;
        drain();
      }
    });
    // scripts/bench-drag.mjs sets window.__benchDrag to an array: the time
    // from the pointer event to the lanes redrawn and laid out, and its
    // parts (waiting for its redraw to start, the script, the layout).
    if (Array.isArray(window.__benchDrag)) {
      const script = performance.now();
      void document.body.offsetHeight;
      const done = performance.now();
      window.__benchDrag.push({ total: done - at, queued: began - at, script: script - began, layout: done - script, cached: ui.cached });
    }
  }
}

async function endDrag() {
  const d = ui.drag;
  if (!d) return;
  // The last move is drawn now, whatever the frame.
  for (;;) {
    d.drawn = false;
    d.waiting = false;
    if (!d.busy && d.pending) drain();
    if (!d.busy && !d.pending) break;
    await new Promise((r) => setTimeout(r, 0));
  }
  d.el.classList.remove('dragging');
  ui.drag = null;
  // The axis fits the new run again.
  ui.extent = extentOf(ui.run);
  app.render();
}
