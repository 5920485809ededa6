// The playground's controller: reads the scenario from the URL, runs the
// model, and renders the position the controls ask for. Every action is
// "change the position or the scenario, then render"; nothing is drawn from
// anywhere but the model's events (or, in live mode, the events a real run
// reported, in the same form).
//
// Editing on the drawing (the handles over the timelines) is edit.js's: it
// calls editParam, which re-runs the model and redraws at once.

import {
  PARAMS,
  PRESETS,
  parseQuery,
  toQuery,
  defaultScenario,
  presetById,
  runScenarioAsync,
  stateAt,
  indexAtTime,
  applies,
  fmt,
  shown,
} from './model.js';
import { describe, captionAt, verdicts, warnings, editCaption } from './words.js';
import { drawLane, drawRowLabels, extentOf, agentsOf } from './view.js';
import * as live from './live.js';
import { h, setText } from './svg.js';
import { initEditing, renderHandles, onHandleKey, onPointerDown } from './edit.js';

const $ = (id) => document.getElementById(id);
const MODES = ['naive', 'fenced'];
const STEP_MS = 700; // real time per step at 1x
const GROUPS = [
  ['coordinator', 'Coordinator'],
  ['A', 'Agent A'],
  ['B', 'Agent B'],
  ['C', 'Agent C'],
  ['clocks', 'Clocks'],
  ['resource', 'Resource (the gate)'],
];

const ui = {
  lib: null,
  scenario: null,
  run: null, // the run shown: the model's, or a live run's
  modelRun: null, // the model's run of ui.scenario
  extent: null,
  index: 0,
  playing: false,
  timer: 0,
  speed: 1,
  embed: false,
  compact: false,
  sentHeight: 0,
  runs: 0, // counts setScenario calls: only the latest one's run is shown
  rows: '', // the agents the row labels were drawn for
  drag: null, // the drag in progress
  editNote: null, // the caption after an edit, until the position moves
  urlTimer: 0,
  drawn: {}, // per lane: what drawLane returned (scale, handles)
  live: null, // live mode's state (live.js), when on
};
initEditing(ui, { pause, editParam, render });

// A write that changes nothing still costs the browser work (a range
// input lays itself out again when its max is set, a text node is
// replaced): while an event is dragged, render makes only the writes that
// change something.
function setProp(node, key, value) {
  if (node[key] !== value) node[key] = value;
}
function setAttr(node, name, value) {
  if (node.getAttribute(name) !== value) node.setAttribute(name, value);
}
function setData(node, key, value) {
  if (node.dataset[key] !== value) node.dataset[key] = value;
}

function notice(problems) {
  const list = $('notice-list');
  for (const p of problems) list.append(h('li', { textContent: p }));
  $('notice').hidden = list.childElementCount === 0;
}

async function start() {
  const parsed = parseQuery(location.search);
  ui.embed = parsed.embed;
  ui.compact = ui.embed;
  if (ui.embed) {
    document.body.classList.add('embed');
    // A compact top row: the title beside the few controls an embed keeps.
    $('title').after($('buttons'));
  }
  $('open-full').hidden = !ui.embed;
  notice(parsed.problems);
  // Live mode's availability, read beside the module (an embed has no live mode).
  const liveStatus = ui.embed ? null : live.readStatus();
  try {
    ui.lib = await import('/lease-fence/lease-fence.mjs');
  } catch (err) {
    $('loading').textContent = `The lease-fence module did not load (${shown(err?.message ?? err)}). Run make build-wasm, then reload.`;
    $('loading').classList.add('failed');
    return;
  }
  buildSetup();
  if (!(await setScenario(parsed.scenario))) await setScenario(defaultScenario());
  const last = ui.run.positions.length - 1;
  if (parsed.at === null) ui.index = ui.embed ? last : 0;
  else if (parsed.at > last) {
    notice([`The position (at) ${parsed.at} is past the end of this run (${last}); showing the end.`]);
    ui.index = last;
  } else ui.index = parsed.at;
  wireControls();
  // Live mode's box before the first render: its text sets where the lanes are.
  if (liveStatus) live.init({ onChange: onLiveChange, scenario: () => ui.scenario, lib: ui.lib, modelRun: () => ui.modelRun }, await liveStatus);
  $('loading').hidden = true;
  render();
  // Redraw the timelines at their new width when the window changes. The
  // first render measured them: the observer's first report, of the same
  // widths, changes nothing.
  let pending = 0;
  const seen = new ResizeObserver((entries) => {
    const widths = { ...ui.widths };
    for (const entry of entries) widths[entry.target.closest('.lane').dataset.mode] = entry.target.clientWidth;
    if (MODES.every((m) => widths[m] === ui.widths?.[m])) return;
    ui.widths = widths;
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(() => render(false));
  });
  for (const mode of MODES) seen.observe($(`svg-${mode}`));
  document.body.classList.add('ready');
  performance.mark('playground-ready');
}

// --- scenario ----------------------------------------------------------------

/**
 * Runs s; on failure keeps the previous run and says why. Resolves true
 * when s is now the run shown (false also when a later change overtook it:
 * a run whose writes await takes a few macrotask turns). keep: 'time' keeps
 * the position by time, 'start' goes to the beginning; an edit keeps the
 * end at the end.
 */
async function setScenario(s, keep = 'time') {
  const mine = ++ui.runs;
  document.body.classList.add('busy');
  let run;
  try {
    run = await runOf(s);
  } catch (err) {
    if (mine === ui.runs) document.body.classList.remove('busy');
    notice([`That scenario could not run: ${shown(err?.message ?? err)}. The previous one is still shown.`]);
    return false;
  }
  if (mine !== ui.runs) return false;
  document.body.classList.remove('busy');
  const before = ui.run;
  const atEnd = before && ui.index === before.positions.length - 1;
  const keepT = before && keep === 'time' && ui.index > 0 ? before.positions[ui.index].t : null;
  const changed = ui.scenario ? Object.keys(s).filter((k) => s[k] !== ui.scenario[k]) : null;
  ui.scenario = { ...s };
  ui.modelRun = run;
  if (!ui.live?.shown) {
    ui.run = run;
    // While an event is dragged the time axis stays put under the pointer.
    ui.extent = ui.drag ? ui.drag.extent : extentOf(run);
    if (keep === 'time' && atEnd && before.positions.length > 1) ui.index = run.positions.length - 1;
    else ui.index = keepT === null ? 0 : indexAtTime(run.positions, keepT);
  }
  syncSetup(ui.drag && changed?.length === 1 ? changed[0] : null);
  return true;
}

// The runs of the scenarios seen last: a run is a pure function of its
// scenario, and a drag goes back and forth over the same values.
const runs = new Map();
async function runOf(s) {
  const key = JSON.stringify(s);
  let run = runs.get(key);
  ui.cached = !!run;
  if (!run) {
    run = await runScenarioAsync(ui.lib, s);
    runs.set(key, run);
    if (runs.size > 64) runs.delete(runs.keys().next().value);
  }
  return run;
}

function buildSetup() {
  const select = $('preset');
  for (const p of PRESETS) select.append(h('option', { value: p.id, textContent: p.title }));
  for (const [group, legendText] of GROUPS) {
    const rows = PARAMS.filter((d) => d.group === group).map(paramRow);
    $('params').append(h('fieldset', { className: 'group', id: `group-${group}` }, h('legend', { textContent: legendText }), ...rows));
  }
}

function paramRow(def) {
  const id = `param-${def.key}`;
  const label = h('label', { htmlFor: id, textContent: def.label });
  const input = h('input', def.toggle ? { id, name: def.key, type: 'checkbox' }
    : { id, name: def.key, type: 'number', inputMode: 'numeric', min: String(def.min), max: String(def.max), step: '1' });
  input.setAttribute('aria-describedby', `${id}-help`);
  const help = h('span', { id: `${id}-help`, className: 'help', textContent: def.help });
  const err = h('span', { id: `${id}-error`, className: 'error' });
  err.setAttribute('role', 'status');
  const row = h('div', { className: def.toggle ? 'param toggle' : 'param', id: `row-${def.key}` });
  if (def.toggle) row.append(input, label, help, err);
  else row.append(label, input, help, err);
  return row;
}

function syncSetup(only = null) {
  if (only) {
    // During a drag only the moved parameter's field follows.
    const input = $(`param-${only}`);
    if (input && document.activeElement !== input) input.value = String(ui.scenario[only]);
    return;
  }
  $('preset').value = ui.scenario.preset;
  // The claim tells the preset's own numbers: an edited run says so.
  const base = defaultScenario(ui.scenario.preset);
  const edited = PARAMS.filter((d) => applies(d, ui.scenario) && ui.scenario[d.key] !== base[d.key]).map((d) => d.label);
  $('claim').textContent = presetById(ui.scenario.preset).claim + (edited.length ? ` (As the preset comes. This run is edited: ${edited.join(', ')}.)` : '');
  if (ui.embed) $('title').textContent = `lease-fence: ${presetById(ui.scenario.preset).title}`;
  const warn = warnings(ui.scenario);
  $('warnings').textContent = warn.join(' ');
  $('warnings').hidden = warn.length === 0;
  for (const def of PARAMS) {
    const input = $(`param-${def.key}`);
    // The field being typed into keeps what is typed until it is committed.
    if (def.toggle) input.checked = ui.scenario[def.key] === def.max;
    else if (document.activeElement !== input || input.getAttribute('aria-invalid') !== 'true') input.value = String(ui.scenario[def.key]);
    if (document.activeElement !== input) {
      input.removeAttribute('aria-invalid');
      $(`param-${def.key}-error`).textContent = '';
    }
    $(`row-${def.key}`).hidden = !applies(def, ui.scenario);
  }
  $('group-C').classList.toggle('off', ui.scenario.agents !== 3);
}

function onParam(ev) {
  const input = ev.target;
  const def = PARAMS.find((d) => d.key === input.name);
  if (!def) return;
  if (def.toggle) {
    editParam(def.key, input.checked ? def.max : def.min);
    return;
  }
  const raw = input.value.trim();
  const v = /^[0-9]{1,9}$/.test(raw) ? Number(raw) : NaN;
  const err = $(`param-${def.key}-error`);
  if (!Number.isSafeInteger(v) || v < def.min || v > def.max) {
    input.setAttribute('aria-invalid', 'true');
    err.textContent = `Whole number from ${def.min} to ${def.max}; the run still uses ${ui.scenario[def.key]}.`;
    return;
  }
  input.removeAttribute('aria-invalid');
  err.textContent = '';
  editParam(def.key, v);
}

/** Sets one parameter and shows the new run; note is the caption's edit, if the drawing made it. */
async function editParam(key, value, note = null) {
  if (ui.scenario[key] === value) return false;
  const before = ui.modelRun;
  const ok = await setScenario({ ...ui.scenario, [key]: value });
  if (!ok) return false;
  ui.editNote = note ? editCaption(ui.modelRun, before, { ...note, value }) : null;
  if (ui.live?.on) live.rerun();
  render();
  return true;
}

// --- controls ----------------------------------------------------------------

function wireControls() {
  $('preset').addEventListener('change', (ev) => {
    pause();
    // A new preset starts at its beginning.
    setScenario(defaultScenario(ev.target.value), 'start').then((ok) => {
      if (!ok) return;
      ui.editNote = null;
      if (ui.live?.on) live.rerun();
      render();
    });
  });
  $('params').addEventListener('change', onParam);
  $('params').addEventListener('submit', (ev) => ev.preventDefault());
  $('play').addEventListener('click', () => (ui.playing ? pause() : play()));
  $('play-big').addEventListener('click', () => {
    play();
    $('play').focus();
  });
  $('step').addEventListener('click', () => go(ui.index + 1));
  $('back').addEventListener('click', () => go(ui.index - 1));
  $('reset').addEventListener('click', () => {
    pause();
    go(0);
  });
  $('to-end').addEventListener('click', () => go(ui.run.positions.length - 1));
  $('scrubber').addEventListener('input', (ev) => go(Number(ev.target.value)));
  $('speed').addEventListener('change', (ev) => {
    const v = Number(ev.target.value);
    ui.speed = [0.5, 1, 2, 4].includes(v) ? v : 1;
    if (ui.playing) {
      clearTimeout(ui.timer);
      tick();
    }
  });
  $('copy').addEventListener('click', copyLink);
  $('notice-close').addEventListener('click', () => {
    $('notice').hidden = true;
    $('notice-list').replaceChildren();
  });
  document.addEventListener('keydown', onKey);
  for (const mode of MODES) {
    const layer = $(`handles-${mode}`);
    layer.addEventListener('pointerdown', onPointerDown);
    layer.addEventListener('keydown', onHandleKey);
  }
}

function onKey(ev) {
  if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const tag = ev.target?.tagName;
  // Form fields, buttons, links and the handles keep their own keys.
  if (['INPUT', 'SELECT', 'TEXTAREA', 'BUTTON', 'A', 'SUMMARY'].includes(tag) || ev.target?.classList?.contains('handle')) return;
  const act = {
    ' ': () => (ui.playing ? pause() : play()),
    k: () => (ui.playing ? pause() : play()),
    ArrowRight: () => go(ui.index + 1),
    ArrowLeft: () => go(ui.index - 1),
    Home: () => {
      pause();
      go(0);
    },
    End: () => go(ui.run.positions.length - 1),
  }[ev.key];
  if (act) {
    ev.preventDefault();
    act();
  }
}

function go(i) {
  const last = ui.run.positions.length - 1;
  ui.index = Math.min(Math.max(0, i), last);
  ui.editNote = null;
  if (ui.index === last) pause();
  render();
}

function play() {
  if (ui.index >= ui.run.positions.length - 1) ui.index = 0;
  ui.playing = true;
  ui.editNote = null;
  render();
  tick();
}

function tick() {
  ui.timer = setTimeout(() => {
    if (!ui.playing) return;
    go(ui.index + 1);
    if (ui.playing) tick();
  }, STEP_MS / ui.speed);
}

function pause() {
  ui.playing = false;
  clearTimeout(ui.timer);
  if (ui.run) renderButtons();
}

async function copyLink() {
  const link = $('link');
  const status = $('copy-status');
  try {
    await navigator.clipboard.writeText(link.value);
    status.textContent = 'Copied.';
  } catch {
    link.focus();
    link.select();
    status.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
  }
}

// --- live mode ---------------------------------------------------------------------

function onLiveChange(state) {
  ui.live = state;
  pause();
  if (state.shown && state.run) {
    ui.run = state.run;
    // The model's axis, grown to what the live run reached: it does not
    // jump as the run goes on.
    const a = extentOf(ui.modelRun);
    const b = extentOf(state.run);
    ui.extent = { t0: Math.min(a.t0, b.t0), t1: Math.max(a.t1, b.t1) };
    ui.index = state.run.positions.length - 1;
  } else {
    ui.run = ui.modelRun;
    ui.extent = extentOf(ui.run);
    ui.index = ui.run.positions.length - 1;
  }
  ui.editNote = null;
  document.body.classList.toggle('live-shown', !!state.shown);
  render();
}

// --- rendering ---------------------------------------------------------------

function scheduleUrl() {
  clearTimeout(ui.urlTimer);
  // During a drag the address is written once the drag ends (browsers
  // throttle history updates); otherwise at once.
  if (ui.drag) return;
  const query = toQuery(ui.scenario, { at: ui.index > 0 && !ui.live?.shown ? ui.index : null, embed: ui.embed });
  history.replaceState(null, '', `?${query}`);
  $('link').value = location.href;
  $('copy-status').textContent = '';
  $('open-full').href = `./?${toQuery(ui.scenario, { at: ui.index > 0 ? ui.index : null })}`;
}

/**
 * Shows the current position. updateUrl is false for a redraw at a new
 * window size, which changes nothing but the drawing.
 */
function render(updateUrl = true) {
  const pos = ui.run.positions[ui.index];
  const t = pos.t;
  const last = ui.run.positions.length - 1;
  // While an event is dragged or a live run goes on, only the lanes are
  // redrawn: the lists under them, the URL and the event lists wait.
  const dragging = !!ui.drag || !!ui.live?.running;
  if (updateUrl && !ui.live?.running) scheduleUrl();

  // The row labels first: they take their width from beside the timeline.
  const agents = agentsOf(ui.run);
  if (ui.rows !== `${agents}|${ui.compact}`) {
    ui.rows = `${agents}|${ui.compact}`;
    for (const mode of MODES) drawRowLabels($(`rows-${mode}`), ui.compact, agents);
  }
  // The timelines' widths: measured once, beside the row labels, then kept
  // by the ResizeObserver (measuring at every render would make the
  // browser lay the page out in the middle of a drag).
  ui.widths ??= Object.fromEntries(MODES.map((m) => [m, $(`svg-${m}`).clientWidth]));
  const widths = ui.widths;

  const scrub = $('scrubber');
  setProp(scrub, 'max', String(last));
  setProp(scrub, 'value', String(ui.index));
  setAttr(scrub, 'aria-valuetext', `t = ${fmt(t)} ms, position ${ui.index + 1} of ${ui.run.positions.length}`);
  setText($('clock'), `t = ${fmt(t)} ms (${ui.index + 1}/${ui.run.positions.length})`);
  renderButtons();

  // An embed shows no scenario box: its first caption carries the claim.
  const caption = captionAt(ui.run, ui.index, ui.embed ? presetById(ui.scenario.preset).claim : undefined);
  const atEnd = ui.index === last;
  // An embed opens at the end, where the verdicts tell the story: its
  // caption there is one line, to keep both lanes in a small frame.
  let text = ui.embed && atEnd && ui.index > 0 ? `End of the run, t = ${fmt(t)} ms: each lane's verdict is below. Step back to replay it.` : caption.text;
  if (ui.editNote) text = ui.editNote;
  if (ui.live?.shown && ui.live.running) text = `Live run in progress: t = ${fmt(t)} ms (the model's run ends at ${fmt(ui.modelRun.end)}). The lanes draw what the clients and the gate report as it happens.`;
  else if (ui.live?.shown && ui.live.caption && atEnd) text = ui.live.caption;
  // The caption is a live region: a drag writes it once, when it ends.
  if (updateUrl && !ui.drag && $('caption').textContent !== text) $('caption').textContent = text;
  const verdict = verdicts(ui.run);
  // A live run's verdicts wait for its end.
  const showVerdict = atEnd && !ui.live?.running;

  for (const mode of MODES) {
    const lane = ui.run.lanes[mode];
    const st = stateAt(lane, pos);
    const value = st.value === null ? '(nothing yet)' : `"${st.value}"`;
    const plot = $(`draw-${mode}`);
    const summary = `At t = ${fmt(t)} ms the resource holds ${value}; ${st.landed.length} write(s) landed${mode === 'fenced' ? `, ${st.rejections.length} refused` : ''}.`;
    const drawn = drawLane(plot, lane, { shown: st.events, cursor: t, revealed: ui.editNote ? [] : caption.events[mode], ghost: ui.index === 0 && !ui.live?.shown }, {
      extent: ui.extent,
      width: widths[mode],
      compact: ui.compact,
      summary,
      agents,
      scroller: $(`svg-${mode}`),
      keepScroll: dragging,
    });
    ui.drawn[mode] = drawn;
    renderHandles(mode, lane, drawn);
    const v = $(`verdict-${mode}`);
    setText(v, showVerdict ? verdict[mode].text : '');
    setData(v, 'tone', verdict[mode].tone);
    setProp(v, 'hidden', !showVerdict);
    const laneBox = $(`lane-${mode}`);
    laneBox.classList.toggle('has-verdict', showVerdict);
    setData(laneBox, 'value', st.value ?? '');
    setData(laneBox, 'landed', String(st.landed.length));
    // The lists under the lanes wait for the end of a drag.
    if (dragging) continue;
    $(`value-${mode}`).textContent = value;
    const landed = st.landed.map((w) => `${w.actor} at ${fmt(w.t)}${w.fence ? ` (fence ${w.fence})` : ''}`);
    const refused = st.rejections.length;
    $(`writes-${mode}`).textContent = `Writes landed: ${landed.length ? landed.join(', ') : 'none'}` + (mode === 'fenced' ? `. Refused: ${refused}.` : '.');
    if (updateUrl) renderLog($(`log-${mode}`), st.events, mode);
    if (mode === 'fenced') {
      $('floor-fenced').textContent = String(st.floor);
      renderRejections(st.rejections);
    }
  }
  setData(document.body, 'preset', ui.scenario.preset);
  setData(document.body, 'agents', String(agents.length));
  tellHost();
}

/** In an iframe, tells the host page how tall the page is, so it can size the frame. */
function tellHost() {
  if (!ui.embed || window.parent === window) return;
  const height = Math.ceil(document.documentElement.getBoundingClientRect().height);
  if (height === ui.sentHeight) return;
  ui.sentHeight = height;
  window.parent.postMessage({ type: 'lease-fence:height', height }, '*');
}

function renderButtons() {
  const last = ui.run.positions.length - 1;
  const play = $('play');
  setText(play, ui.playing ? 'Pause' : 'Play');
  setAttr(play, 'aria-pressed', String(ui.playing));
  setProp($('play-big'), 'hidden', ui.index !== 0 || ui.playing || !!ui.live?.shown);
  setProp($('back'), 'disabled', ui.index === 0);
  setProp($('step'), 'disabled', ui.index === last);
  setProp($('to-end'), 'disabled', ui.index === last);
}

/** The event list, with the latest event marked and scrolled into the list's view. */
function renderLog(ol, events, mode) {
  const items = events.map((e) => {
    const li = h('li', {}, h('span', { className: 'when', textContent: `t=${fmt(e.t)}` }), ` ${describe(e, mode)}`);
    Object.assign(li.dataset, { kind: e.kind, actor: e.actor });
    return li;
  });
  const current = items.at(-1);
  if (current) current.setAttribute('aria-current', 'step');
  ol.replaceChildren(...items);
  // Follow the run: the newest event is the last one, keep it in view.
  if (current) ol.scrollTop = ol.scrollHeight;
}

function renderRejections(rows) {
  const body = $('rejections-body');
  if (rows.length === 0) {
    body.replaceChildren(h('tr', {}, h('td', { colSpan: 5, className: 'empty', textContent: 'No refusals yet.' })));
    return;
  }
  const cells = (r) => [r.seq, r.refusedHolderId, r.refusedFence, r.admittedHolderId ?? '(initial floor)', r.admittedFence].map((v) => h('td', { textContent: String(v) }));
  body.replaceChildren(...rows.map((r) => h('tr', { className: 'rejection' }, ...cells(r))));
}

start();
