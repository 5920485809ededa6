// The console: a live picture of the coordinator that serves this page
// (cmd/coordinator -ui). It lists the leases (POST /v1/list), follows their
// events (POST /v1/watch, Server-Sent Events read with fetch so that the
// bearer token is sent) and the gates' refusals (GET /ui/api/rejections),
// and draws one lane per resource with the playground's drawing (lease-row.js).
// It loads no wasm. Everything shown from the coordinator goes into the
// page as text (textContent, setAttribute), never as markup.

import { Picture, fmtDuration, visible } from './console-state.js';
import { drawLeaseRow, drawTimeAxis, ROW } from './lease-row.js';
import { OVERFLOW, sseFrames } from './sse.mjs';
import { h, setText } from './svg.js';

const TOKEN_KEY = 'lease-fence-console-token';
const ROW_H = ROW.H + 8; // px per table row
const OVERSCAN = 4; // rows drawn above and below the viewport
const SILENT_MS = 20_000; // the watch sends a keepalive every 15 s
const RETRY_MIN = 250;
const RETRY_MAX = 5000;
const MAX_FRAME_CHARS = 1 << 20;
const tooLong = () => new Error('a frame longer than 1 MiB');

const $ = (id) => document.getElementById(id);
const picture = new Picture();

// --- the coordinator's clock ---------------------------------------------------------
// Events carry the coordinator's wall clock; the lanes are drawn against it.
// The page's own clock may differ: the offset is the largest (at - arrival)
// seen, each event having arrived after it was made.
let skew = null;
const now = () => Date.now() + (skew ?? 0);
function sawClock(at) {
  const d = at - Date.now();
  if (skew === null || d > skew) skew = d;
}

// --- the token -------------------------------------------------------------------------
let token = sessionStorage.getItem(TOKEN_KEY) ?? '';
const headers = (extra = {}) => (token ? { ...extra, authorization: `Bearer ${token}` } : extra);

class HTTPError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function call(path, body) {
  const res = await fetch(path, { method: 'POST', headers: headers({ 'content-type': 'application/json' }), body: JSON.stringify(body) });
  const text = await res.text();
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    throw new HTTPError(res.status, 'bad_reply', `${path} answered ${res.status} with something that is not JSON`);
  }
  if (!res.ok) throw new HTTPError(res.status, v?.error?.code ?? 'error', v?.error?.message ?? `${path} answered ${res.status}`);
  return v;
}

function askToken(message) {
  const form = $('token-form');
  form.hidden = false;
  $('token-error').textContent = message ?? '';
  $('token-input').focus();
}

$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  token = $('token-input').value.trim();
  sessionStorage.setItem(TOKEN_KEY, token);
  $('token-input').value = '';
  $('token-form').hidden = true;
  $('token-open').hidden = false;
  restart('the token changed');
});
$('token-forget').addEventListener('click', () => {
  token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  $('token-input').value = '';
  askToken('The token is forgotten.');
  restart('the token was forgotten');
});
$('token-open').addEventListener('click', () => askToken(''));

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// --- the connection --------------------------------------------------------------------
const conn = {
  stream: null, // the coordinator's stream id (hello)
  seq: 0, // the last event applied
  state: 'connecting',
  lastBytes: Date.now(),
  failures: 0,
  error: '',
  note: '', // what the last (re)connection did
  abort: new AbortController(),
};
// For tests and the benchmark: what the page did, without reading the drawing.
// drawn: the last events drawn, { seq, type, resource, at, drawn } (page's
// wall clock at the end of the frame that drew it).
const stats = { events: 0, resumes: 0, reloads: 0, frames: 0, latencies: [], work: [], refusals: 0, probes: 0 };
const drawn = [];
window.__console = { stats, picture, conn, drawn };

function setState(state, error = '') {
  conn.state = state;
  conn.error = error;
  showStatus();
}

function showStatus() {
  const banner = $('banner');
  const silent = conn.state === 'live' && Date.now() - conn.lastBytes > SILENT_MS;
  let text = '';
  if (conn.state === 'retrying') text = `The event stream failed (${conn.error}). Reconnecting, attempt ${conn.failures}…`;
  else if (silent) text = `The event stream has sent nothing for ${Math.round((Date.now() - conn.lastBytes) / 1000)} s: the picture may be stale. Waiting for it…`;
  else if (conn.state === 'forbidden') text = conn.error;
  const gates = gateProblems();
  if (gates) text = text ? `${text} ${gates}` : gates;
  banner.hidden = !text;
  banner.dataset.state = silent ? 'silent' : conn.state;
  if (banner.textContent !== text) banner.textContent = text;
  const s = conn.state === 'live' ? `Live: event ${conn.seq} of stream ${conn.stream}.${conn.note ? ` ${conn.note}` : ''}`
    : conn.state === 'connecting' ? 'Connecting…' : conn.state === 'loading' ? 'Loading the leases…' : conn.state === 'retrying' ? 'Reconnecting…' : 'Not connected.';
  if ($('status').textContent !== s) $('status').textContent = s;
  $('status').dataset.state = conn.state;
}

async function loadList() {
  const all = [];
  let cursor;
  do {
    const body = { waiters: true };
    if (cursor !== undefined) body.cursor = cursor;
    const page = await call('/v1/list', body);
    all.push(...page.leases);
    cursor = page.cursor;
  } while (cursor !== undefined);
  picture.load(all, now());
  invalidate(true);
}

// follow connects, resumes and reconnects until the token changes.
async function follow(signal) {
  while (!signal.aborted) {
    let buffered = null; // events that arrive while the list loads
    try {
      const body = conn.stream ? { stream: conn.stream, afterSeq: conn.seq } : {};
      const res = await fetch('/v1/watch', { method: 'POST', headers: headers({ 'content-type': 'application/json', accept: 'text/event-stream' }), body: JSON.stringify(body), signal });
      if (res.status === 401) {
        setState('forbidden', 'This coordinator needs a token (or the token is not one it knows).');
        askToken('Enter a token this coordinator knows.');
        return;
      }
      if (res.status !== 200) {
        let msg = `answered ${res.status}`;
        try {
          msg = (await res.json()).error.message;
        } catch { /* keep the status */ }
        throw new Error(msg);
      }
      conn.lastBytes = Date.now();
      for await (const f of sseFrames(res.body, { maxChars: MAX_FRAME_CHARS, tooLong, onBytes: () => { conn.lastBytes = Date.now(); } })) {
        const arrived = performance.now();
        const v = JSON.parse(f.data);
        if (f.event === 'hello') {
          conn.failures = 0;
          const before = conn.stream;
          if (v.resumed) {
            stats.resumes++;
            conn.note = `Resumed after event ${conn.seq}: nothing was missed.`;
            setState('live');
            continue;
          }
          conn.stream = v.stream;
          conn.seq = v.seq;
          setState('loading');
          buffered = [];
          await loadList();
          for (const [e, at] of buffered) take(e, at);
          buffered = null;
          if (before !== null) {
            stats.reloads++;
            conn.note = before === v.stream
              ? 'Events were missed (the coordinator no longer had them): the list was reloaded.'
              : 'The coordinator restarted (a new event stream): the list was reloaded.';
          }
          setState('live');
        } else if (f.event === OVERFLOW) {
          conn.note = 'This page fell behind: resumed.';
          break;
        } else if (buffered) buffered.push([v, arrived]);
        else take(v, arrived);
      }
      if (!signal.aborted) throw new Error('the stream ended');
    } catch (e) {
      if (signal.aborted) return;
      conn.failures++;
      setState('retrying', e.message);
      await sleep(Math.min(RETRY_MAX, RETRY_MIN * 2 ** (conn.failures - 1)), signal);
    }
  }
}

function take(ev, arrived) {
  if (typeof ev.seq === 'number') conn.seq = ev.seq;
  sawClock(ev.at);
  const r = picture.apply(ev);
  stats.events++;
  pending.push(arrived);
  pendingEvents.push({ seq: ev.seq, type: ev.type, resource: ev.resource, at: ev.at });
  dirty.add(r);
  schedule();
}

// --- the gates' refusals -------------------------------------------------------------
const gates = { stream: '', after: 0, status: new Map(), none: false };

function gateProblems() {
  const down = [...gates.status.values()].filter((s) => !s.up);
  if (!down.length) return '';
  return `No refusals from ${down.map((s) => `${s.gate} (${s.error ?? 'down'})`).join(', ')}.`;
}

async function followGates(signal) {
  let failures = 0;
  while (!signal.aborted) {
    try {
      const q = gates.after ? `?after=${gates.after}&stream=${encodeURIComponent(gates.stream)}` : '';
      const res = await fetch(`/ui/api/rejections${q}`, { headers: headers({ accept: 'text/event-stream' }), signal });
      if (res.status === 501) {
        gates.none = true;
        $('gates').textContent = 'No gate is connected (start the coordinator with -ui-gates to draw their refusals).';
        return;
      }
      if (res.status !== 200) throw new Error(`answered ${res.status}`);
      failures = 0;
      for await (const f of sseFrames(res.body, { maxChars: MAX_FRAME_CHARS, tooLong })) {
        const v = JSON.parse(f.data);
        if (f.event === 'hello') gates.stream = v.stream;
        else if (f.event === 'status') {
          gates.status.set(v.gate, v);
          $('gates').textContent = `Gates: ${[...gates.status.values()].map((s) => `${s.gate} ${s.up ? 'connected' : 'not connected'}`).join('; ')}.`;
          showStatus();
        } else if (f.event === 'rejected') {
          gates.after = v.seq;
          sawClock(v.at);
          stats.refusals++;
          dirty.add(picture.refused(v));
          pending.push(performance.now());
          pendingEvents.push({ seq: `r${v.seq}`, type: 'refused', resource: v.resource, at: v.at });
          schedule();
        } else if (f.event === OVERFLOW) break;
      }
    } catch (e) {
      if (signal.aborted) return;
      failures++;
      await sleep(Math.min(RETRY_MAX, RETRY_MIN * 2 ** failures), signal);
    }
  }
}

function restart(why) {
  rights.reset();
  conn.abort.abort(why);
  conn.abort = new AbortController();
  conn.stream = null;
  conn.seq = 0;
  conn.failures = 0;
  gates.after = 0;
  picture.resources.clear();
  picture.version++;
  invalidate(true);
  setState('connecting');
  follow(conn.abort.signal);
  followGates(conn.abort.signal);
}

// --- the table -------------------------------------------------------------------------
const view = { prefix: '', sort: 'name', desc: false, span: 120_000, rows: [], rowsVersion: -1, rowsAt: 0, laneWidth: 480, selected: null };
const viewport = $('viewport');
const spacer = $('spacer');
const pool = []; // row elements, reused as the viewport scrolls
const dirty = new Set();
let pending = []; // arrival times of the events not yet drawn
let pendingEvents = []; // and the events
let scheduled = false;
let all = true; // every visible row must be drawn again

function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(frame);
}

function invalidate(rows) {
  if (rows) view.rowsVersion = -1;
  all = true;
  schedule();
}

function makeRow() {
  const tr = h('div', { className: 'tr' });
  tr.setAttribute('role', 'row');
  const cell = (cls) => {
    const c = h('div', { className: `cell ${cls}` });
    c.setAttribute('role', 'cell');
    tr.append(c);
    return c;
  };
  const name = h('button', { type: 'button', className: 'name' });
  cell('c-name').append(name);
  const holder = cell('c-holder');
  const fence = cell('c-fence');
  const left = cell('c-left');
  const lane = cell('c-lane');
  const wait = cell('c-wait');
  const count = h('span', { className: 'wcount' });
  const queue = h('ol', { className: 'queue' });
  wait.append(count, queue);
  name.addEventListener('click', () => select(tr._r?.name ?? null));
  name.addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
    e.preventDefault();
    moveFocus(tr._i + (e.key === 'ArrowDown' ? 1 : -1));
  });
  const row = { tr, name, holder, fence, left, lane, count, queue };
  tr._row = row;
  spacer.append(tr);
  return row;
}

// The viewport's scroll position and height, as its scroll and resize
// events last said: a frame that read them from the page after writing to
// it would make the browser lay the page out twice.
const geo = { top: 0, height: 0 };
function scrollViewport(top) {
  viewport.scrollTop = top;
  geo.top = viewport.scrollTop;
}

function moveFocus(i) {
  if (i < 0 || i >= view.rows.length) return;
  const top = i * ROW_H;
  if (top < geo.top) scrollViewport(top);
  else if (top + ROW_H > geo.top + geo.height) scrollViewport(top + ROW_H - geo.height);
  render(); // the row must exist before it can take focus
  const row = pool.find((p) => p.tr._r && p.tr._i === i);
  row?.name.focus();
}

function laneLabel(r, t) {
  const parts = [`Lane of resource ${visible(r.name)}`];
  parts.push(r.holder === null ? 'free' : `held by ${visible(r.holder)}, fence ${r.fence}, ${fmtDuration(r.remaining(t))} left`);
  const q = r.queue();
  if (q.ids.length || q.more) parts.push(`waiters in order: ${[...q.ids.map(visible), ...(q.more ? [`${q.more} more`] : [])].join(', ')}`);
  return parts.join('; ');
}

// A row's place and names are written only when they change: a write of
// the same value still makes the browser restyle the row and update its
// accessibility tree, at each event on a resource in view.
function place(row, i) {
  if (row.tr._i === i) return;
  row.tr._i = i;
  row.tr.setAttribute('aria-rowindex', String(i + 2));
  row.tr.style.transform = `translateY(${i * ROW_H}px)`;
}

function fill(row, r, i, t, extent) {
  row.tr._r = r;
  row.tr._t = t;
  place(row, i);
  if (row.tr.dataset.resource !== r.name) {
    row.tr.dataset.resource = r.name;
    setText(row.name, visible(r.name));
    row.name.setAttribute('aria-label', `${visible(r.name)}: details`);
  }
  const selected = view.selected === r.name;
  if (row.tr.classList.contains('selected') !== selected) row.tr.classList.toggle('selected', selected);
  setText(row.holder, r.holder === null ? '—' : visible(r.holder));
  setText(row.fence, r.holder === null ? (r.fence ? `(${r.fence})` : '—') : String(r.fence));
  setText(row.left, fmtDuration(r.remaining(t)));
  const q = r.queue();
  setText(row.count, String(Math.max(q.ids.length + q.more, 0)));
  // The queue beside the lane: the first few, in order.
  const ids = q.ids.slice(0, 3);
  while (row.queue.children.length > ids.length) row.queue.lastChild.remove();
  ids.forEach((id, k) => {
    let li = row.queue.children[k];
    if (!li) row.queue.append((li = h('li')));
    setText(li, visible(id));
  });
  const more = q.ids.length - ids.length + q.more;
  row.queue.dataset.more = more > 0 ? `+${more}` : '';
  drawLeaseRow(row.lane, shownLane(r.lane(t)), { extent, width: view.laneWidth, label: laneLabel(r, t) });
}

// The lane with its names as shown (visible): the drawing writes them as text.
function shownLane(lane) {
  for (const g of lane.gens) g.holder = visible(g.holder);
  lane.refusals = lane.refusals.map((e) => ({ ...e, holder: visible(e.holder), admittedHolder: visible(e.admittedHolder), gate: visible(e.gate) }));
  return lane;
}

// Rows redrawn per frame only because time moved (the others wait for the
// next frame): a frame stays short whatever the number of rows in view.
const STALE_PER_FRAME = 6;

function render() {
  const t = now();
  const resort = view.sort !== 'name' && t - view.rowsAt > 500 && (view.sort === 'remaining' || view.rowsChanges !== picture.changes);
  if (view.rowsVersion !== picture.version || resort) {
    view.rows = picture.rows(view.prefix, view.sort, view.desc, t);
    view.rowsVersion = picture.version;
    view.rowsChanges = picture.changes;
    view.rowsAt = t;
    spacer.style.height = `${view.rows.length * ROW_H}px`;
    $('table').setAttribute('aria-rowcount', String(view.rows.length + 1));
    setText($('count'), `${view.rows.length} of ${picture.resources.size} resources`);
  }
  const first = Math.max(0, Math.floor(geo.top / ROW_H) - OVERSCAN);
  const last = Math.min(view.rows.length, Math.ceil((geo.top + geo.height) / ROW_H) + OVERSCAN);
  // A resource still in view keeps its row element; the rows of those that
  // left take the newcomers.
  const want = new Map();
  for (let i = first; i < last; i++) want.set(view.rows[i], i);
  const free = [];
  for (const row of pool) {
    if (row.tr._r && want.has(row.tr._r)) continue;
    row.tr._r = null;
    free.push(row);
  }
  const extent = { t0: t - view.span, t1: t };
  let staleBudget = all ? Infinity : STALE_PER_FRAME;
  const byRes = new Map();
  for (const row of pool) if (row.tr._r) byRes.set(row.tr._r, row);
  for (const [r, i] of want) {
    let row = byRes.get(r);
    if (!row) {
      row = free.pop() ?? makeRow();
      if (!pool.includes(row)) pool.push(row);
      row.tr.hidden = false;
      fill(row, r, i, t, extent);
      continue;
    }
    if (row.tr._i !== i) place(row, i);
    if (dirty.has(r) || all) fill(row, r, i, t, extent);
    else if (row.tr._t < t - 999 && staleBudget > 0) {
      staleBudget--;
      fill(row, r, i, t, extent);
    }
  }
  for (const row of free) if (!row.tr._r) row.tr.hidden = true;
  all = false;
  dirty.clear();
  if (view.selected) showDetail(t);
  // Rows whose time has moved on and that waited: the next frame.
  if (pool.some((row) => row.tr._r && row.tr._t < t - 999)) schedule();
}

function frame() {
  scheduled = false;
  const start = performance.now();
  render();
  stats.frames++;
  const done = performance.now();
  stats.work.push(done - start);
  if (stats.work.length > 100_000) stats.work.splice(0, stats.work.length - 100_000);
  for (const a of pending) stats.latencies.push(done - a);
  if (stats.latencies.length > 100_000) stats.latencies.splice(0, stats.latencies.length - 100_000);
  pending = [];
  const wall = Date.now();
  for (const e of pendingEvents) drawn.push({ ...e, drawn: wall });
  if (drawn.length > 512) drawn.splice(0, drawn.length - 512);
  pendingEvents = [];
}

viewport.addEventListener('scroll', () => {
  geo.top = viewport.scrollTop;
  schedule();
}, { passive: true });
// Called after layout: reading sizes here costs no extra layout.
new ResizeObserver(() => {
  if (geo.height !== viewport.clientHeight) {
    geo.height = viewport.clientHeight;
    schedule();
  }
  const w = Math.floor($('axis').parentElement.getBoundingClientRect().width) - 8;
  if (w > 0 && w !== view.laneWidth) {
    view.laneWidth = w;
    invalidate(false);
  }
}).observe(viewport);

$('filter').addEventListener('input', () => {
  view.prefix = $('filter').value;
  scrollViewport(0);
  invalidate(true);
});
$('span').addEventListener('change', () => {
  view.span = Number($('span').value);
  invalidate(false);
});
for (const b of document.querySelectorAll('[data-sort]')) {
  b.addEventListener('click', () => {
    const key = b.dataset.sort;
    view.desc = view.sort === key ? !view.desc : key !== 'name';
    view.sort = key;
    for (const o of document.querySelectorAll('[data-sort]')) {
      o.parentElement.setAttribute('aria-sort', o === b ? (view.desc ? 'descending' : 'ascending') : 'none');
    }
    invalidate(true);
  });
}

// Time moves: every lane in view is drawn again each second (a few per
// frame: render's STALE_PER_FRAME).
setInterval(() => {
  drawTimeAxis($('axis'), { t0: -view.span, t1: 0 }, view.laneWidth, (t) => (t === 0 ? 'now' : `${t / 1000} s`));
  picture.forget(now());
  showStatus();
  schedule();
}, 1000);

// --- may this token revoke? --------------------------------------------------------------
// Revoke is offered only to a token the coordinator lets revoke: an admin
// token with -auth, a page on a loopback address without. The page does not
// guess: it asks the coordinator with a revoke that cannot match anything.
// The coordinator checks a call's shape, then its authorization (403), and
// only then decides it (service/httpapi): the probe names the fence of the
// lease the page shows and a holder id other than that lease's. A fence is
// issued once per resource, so no lease has both: a revoke the token may
// make is answered 409 not_held and changes nothing (no write, no event);
// one it may not make, 403. A 403 to a real revoke later (the token was
// downgraded) takes the button away too.
const PROBE_HOLDER = 'lease-fence-console-probe';
const rights = {
  state: 'unknown', // 'yes', 'no', or 'unknown' (not asked yet, or the answer said nothing)
  why: '', // the coordinator's word for 'no'
  busy: false,
  failed: false, // the last probe said nothing: asked again at the next select
  gen: 0, // the token's generation: an answer for a previous token is dropped
  reset() {
    this.gen++;
    this.state = 'unknown';
    this.why = '';
    this.busy = false;
    this.failed = false;
  },
  refuse(why) {
    this.state = 'no';
    this.why = why;
  },
};

// probeHolder returns a holder id that is not holder.
const probeHolder = (holder) => (holder === PROBE_HOLDER ? `${PROBE_HOLDER}-2` : PROBE_HOLDER);

async function probeRevoke(r) {
  const gen = rights.gen;
  rights.busy = true;
  let state = 'unknown';
  let why = '';
  try {
    await call('/v1/revoke', { resource: r.name, holderId: probeHolder(r.holder), fence: r.fence });
    // Answered 200: the coordinator revoked something the page did not
    // show. It does not happen (the fence is that holder's); say nothing.
  } catch (e) {
    if (e.status === 409 && e.code === 'not_held') state = 'yes';
    else if (e.status === 403) {
      state = 'no';
      why = e.message;
    } else if (e.status === 401) {
      askToken('Enter a token this coordinator knows.');
    }
  }
  if (gen !== rights.gen) return;
  rights.busy = false;
  if (state === 'unknown') rights.failed = true;
  else if (state === 'no') rights.refuse(why);
  else rights.state = state;
  stats.probes++;
  invalidate(false);
}

// showRevoke shows the Revoke button if the token may revoke, asking the
// coordinator first (with the lease r shows) if the page does not know.
function showRevoke(r) {
  if (rights.state === 'unknown' && !rights.busy && !rights.failed && r.holder !== null && r.fence > 0) probeRevoke(r);
  const box = $('revoke-box');
  if (box.dataset.may !== rights.state) box.dataset.may = rights.state;
  $('revoke').hidden = rights.state !== 'yes';
  $('revoke').disabled = r.holder === null;
  const note = rights.state === 'no' ? `Revoke is not offered: ${rights.why}` : '';
  setText($('revoke-none'), note);
  $('revoke-none').hidden = !note;
}

// --- the detail pane -------------------------------------------------------------------
const WORDS = { listed: 'held (listed)', granted: 'granted', renewed: 'renewed', released: 'released', expired: 'expired', revoked: 'revoked', waiting: 'waits', left: 'left the queue', proclaimed: 'value set', refused: 'write refused' };

function select(name) {
  view.selected = name;
  $('detail').hidden = name === null;
  $('revoke-confirm').hidden = true;
  $('revoke-result').textContent = '';
  rights.failed = false;
  if (name !== null) {
    showDetail(now());
    $('detail-h').focus();
  }
  invalidate(false);
}

function showDetail(t) {
  const r = picture.resources.get(view.selected);
  if (!r) return;
  setText($('detail-h'), visible(r.name));
  setText($('d-holder'), r.holder === null ? 'nobody' : visible(r.holder));
  setText($('d-fence'), r.fence ? String(r.fence) : '—');
  setText($('d-left'), fmtDuration(r.remaining(t)));
  setText($('d-value'), r.value === undefined ? '—' : visible(r.value));
  showRevoke(r);
  const ol = $('d-waiters');
  const q = r.queue();
  const items = [...q.ids.map(visible), ...(q.more ? [`and ${q.more} more (waiting on another replica, or before this page connected)`] : [])];
  if (ol._key !== items.join('\u0000')) {
    ol.replaceChildren(...items.map((id) => h('li', { textContent: id })));
    ol._key = items.join('\u0000');
  }
  const hist = $('d-history');
  if (hist._v !== r.version) {
    hist._v = r.version;
    const evs = r.events().reverse();
    hist.replaceChildren(...evs.map((e) => {
      const when = h('time', { textContent: new Date(e.t).toISOString().slice(11, 23) });
      const what = e.type === 'refused'
        ? ` ${visible(e.gate)}: ${visible(e.holder)} #${e.fence} refused, after ${visible(e.admittedHolder)} #${e.admittedFence}`
        : ` ${WORDS[e.type] ?? e.type}${e.holder ? `: ${visible(e.holder)}` : ''}${e.fence ? ` #${e.fence}` : ''}`;
      const li = h('li', {}, when, what);
      li.dataset.type = e.type;
      return li;
    }));
  }
}

$('detail-close').addEventListener('click', () => {
  const name = view.selected;
  select(null);
  pool.find((p) => p.tr._r?.name === name)?.name.focus();
});
$('revoke').addEventListener('click', () => {
  const r = picture.resources.get(view.selected);
  if (!r || r.holder === null) return;
  $('revoke-q').textContent = `Revoke ${visible(r.holder)}'s lease on ${visible(r.name)} (fence ${r.fence})? It ends at once; its holder's next renewal is refused, and the first waiter is granted.`;
  $('revoke-confirm').hidden = false;
  $('revoke-confirm').dataset.fence = String(r.fence);
  $('revoke-no').focus();
});
$('revoke-no').addEventListener('click', () => {
  $('revoke-confirm').hidden = true;
  $('revoke').focus();
});
$('revoke-yes').addEventListener('click', async () => {
  const name = view.selected;
  const fence = Number($('revoke-confirm').dataset.fence);
  $('revoke-confirm').hidden = true;
  try {
    const v = await call('/v1/revoke', { resource: name, fence });
    $('revoke-result').textContent = `Revoked: ${v.revoked.holderId}, fence ${v.revoked.fence}.`;
  } catch (e) {
    $('revoke-result').textContent = `Not revoked: ${e.message}`;
    // The token may no longer revoke (downgraded since the probe): the
    // button goes.
    if (e.status === 403) rights.refuse(e.message);
    else if (e.status === 401) askToken('Enter a token this coordinator knows.');
  }
  if (rights.state === 'yes') $('revoke').focus();
  else {
    invalidate(false);
    $('detail-h').focus();
  }
});

// --- start -----------------------------------------------------------------------------
setText($('where'), location.host);
$('token-open').hidden = !token;
drawTimeAxis($('axis'), { t0: -view.span, t1: 0 }, view.laneWidth, (t) => (t === 0 ? 'now' : `${t / 1000} s`));
restart('start');
