// The playground's controller: reads the scenario from the URL, runs the
// model, and renders the position the controls ask for. Every action is
// "change the position or the scenario, then render"; nothing is drawn from
// anywhere but the model's events.

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
  fmt,
  shown,
} from './model.js';
import { describe, captionAt, verdicts, warnings } from './words.js';
import { drawLane, drawRowLabels, extentOf } from './view.js';

const $ = (id) => document.getElementById(id);
const MODES = ['naive', 'fenced'];
const STEP_MS = 700; // real time per step at 1x

const ui = {
  lib: null,
  scenario: null,
  run: null,
  extent: null,
  index: 0,
  playing: false,
  timer: 0,
  speed: 1,
  embed: false,
  compact: false,
  sentHeight: 0,
  runs: 0, // counts setScenario calls: only the latest one's run is shown
};

function notice(problems) {
  const list = $('notice-list');
  for (const p of problems) {
    const li = document.createElement('li');
    li.textContent = p;
    list.append(li);
  }
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
  $('loading').hidden = true;
  for (const mode of MODES) drawRowLabels($(`rows-${mode}`), ui.compact);
  render();
  // Redraw the timelines at their new width when the window changes.
  let pending = 0;
  new ResizeObserver(() => {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(() => render(false));
  }).observe($('lanes'));
  document.body.classList.add('ready');
  performance.mark('playground-ready');
}

// --- scenario ----------------------------------------------------------------

/**
 * Runs s; on failure keeps the previous run and says why. Resolves true
 * when s is now the run shown (false also when a later change overtook it:
 * a run whose writes await takes a few macrotask turns).
 */
async function setScenario(s, keepTime = true) {
  const mine = ++ui.runs;
  document.body.classList.add('busy');
  let run;
  try {
    run = await runScenarioAsync(ui.lib, s);
  } catch (err) {
    if (mine === ui.runs) document.body.classList.remove('busy');
    notice([`That scenario could not run: ${shown(err?.message ?? err)}. The previous one is still shown.`]);
    return false;
  }
  if (mine !== ui.runs) return false;
  document.body.classList.remove('busy');
  const keepT = ui.run && keepTime && ui.index > 0 ? ui.run.positions[ui.index].t : null;
  ui.scenario = { ...s };
  ui.run = run;
  ui.extent = extentOf(run);
  ui.index = keepT === null ? 0 : indexAtTime(run.positions, keepT);
  syncSetup();
  return true;
}

function buildSetup() {
  const select = $('preset');
  for (const p of PRESETS) {
    const o = document.createElement('option');
    o.value = p.id;
    o.textContent = p.title;
    select.append(o);
  }
  const form = $('params');
  for (const def of PARAMS) {
    const id = `param-${def.key}`;
    const row = document.createElement('div');
    row.className = 'param';
    const label = document.createElement('label');
    label.htmlFor = id;
    label.textContent = def.label;
    const input = document.createElement('input');
    input.id = id;
    input.name = def.key;
    input.type = 'number';
    input.inputMode = 'numeric';
    input.min = String(def.min);
    input.max = String(def.max);
    input.step = '1';
    input.setAttribute('aria-describedby', `${id}-help`);
    const help = document.createElement('span');
    help.id = `${id}-help`;
    help.className = 'help';
    help.textContent = def.help;
    const err = document.createElement('span');
    err.id = `${id}-error`;
    err.className = 'error';
    err.setAttribute('role', 'status');
    row.append(label, input, help, err);
    form.append(row);
  }
}

function syncSetup() {
  $('preset').value = ui.scenario.preset;
  $('claim').textContent = presetById(ui.scenario.preset).claim;
  if (ui.embed) $('title').textContent = `lease-fence: ${presetById(ui.scenario.preset).title}`;
  const warn = warnings(ui.scenario);
  $('warnings').textContent = warn.join(' ');
  $('warnings').hidden = warn.length === 0;
  for (const def of PARAMS) {
    const input = $(`param-${def.key}`);
    input.value = String(ui.scenario[def.key]);
    input.removeAttribute('aria-invalid');
    $(`param-${def.key}-error`).textContent = '';
  }
}

function onParam(ev) {
  const input = ev.target;
  const def = PARAMS.find((d) => d.key === input.name);
  if (!def) return;
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
  setScenario({ ...ui.scenario, [def.key]: v }).then((ok) => ok && render());
}

// --- controls ----------------------------------------------------------------

function wireControls() {
  $('preset').addEventListener('change', (ev) => {
    pause();
    // A new preset starts at its beginning.
    setScenario(defaultScenario(ev.target.value), false).then((ok) => ok && render());
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
}

function onKey(ev) {
  if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const tag = ev.target?.tagName;
  // Form fields, buttons and links keep their own keys.
  if (['INPUT', 'SELECT', 'TEXTAREA', 'BUTTON', 'A', 'SUMMARY'].includes(tag)) return;
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
  if (ui.index === last) pause();
  render();
}

function play() {
  if (ui.index >= ui.run.positions.length - 1) ui.index = 0;
  ui.playing = true;
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

// --- rendering ---------------------------------------------------------------

/**
 * Shows the current position. updateUrl is false for a redraw at a new
 * window size, which changes nothing but the drawing.
 */
function render(updateUrl = true) {
  const pos = ui.run.positions[ui.index];
  const t = pos.t;
  const last = ui.run.positions.length - 1;
  if (updateUrl) {
    const query = toQuery(ui.scenario, { at: ui.index > 0 ? ui.index : null, embed: ui.embed });
    history.replaceState(null, '', `?${query}`);
    $('link').value = location.href;
    $('copy-status').textContent = '';
    $('open-full').href = `./?${toQuery(ui.scenario, { at: ui.index > 0 ? ui.index : null })}`;
  }

  const scrub = $('scrubber');
  scrub.max = String(last);
  scrub.value = String(ui.index);
  scrub.setAttribute('aria-valuetext', `t = ${fmt(t)} ms, position ${ui.index + 1} of ${ui.run.positions.length}`);
  $('clock').textContent = `t = ${fmt(t)} ms (${ui.index + 1}/${ui.run.positions.length})`;
  renderButtons();

  // An embed shows no scenario box: its first caption carries the claim.
  const caption = captionAt(ui.run, ui.index, ui.embed ? presetById(ui.scenario.preset).claim : undefined);
  const atEnd = ui.index === last;
  // An embed opens at the end, where the verdicts tell the story: its
  // caption there is one line, to keep both lanes in a small frame.
  const text = ui.embed && atEnd && ui.index > 0 ? `End of the run, t = ${fmt(t)} ms: each lane's verdict is below. Step back to replay it.` : caption.text;
  if (updateUrl) $('caption').textContent = text;
  const verdict = verdicts(ui.run);

  for (const mode of MODES) {
    const lane = ui.run.lanes[mode];
    const st = stateAt(lane, pos);
    const value = st.value === null ? '(nothing yet)' : `"${st.value}"`;
    $(`value-${mode}`).textContent = value;
    const landed = st.landed.map((w) => `${w.actor} at ${fmt(w.t)}${w.fence ? ` (fence ${w.fence})` : ''}`);
    const refused = st.rejections.length;
    $(`writes-${mode}`).textContent =
      `Writes landed: ${landed.length ? landed.join(', ') : 'none'}` + (mode === 'fenced' ? `. Refused: ${refused}.` : '.');
    const summary = `At t = ${fmt(t)} ms the resource holds ${value}; ${st.landed.length} write(s) landed${mode === 'fenced' ? `, ${refused} refused` : ''}.`;
    const plot = $(`svg-${mode}`);
    drawLane(plot, lane, { shown: st.events, cursor: t, revealed: caption.events[mode], ghost: ui.index === 0 }, {
      extent: ui.extent,
      width: plot.clientWidth,
      compact: ui.compact,
      summary,
    });
    const v = $(`verdict-${mode}`);
    v.textContent = atEnd ? verdict[mode].text : '';
    v.dataset.tone = verdict[mode].tone;
    v.hidden = !atEnd;
    $(`lane-${mode}`).classList.toggle('has-verdict', atEnd);
    if (updateUrl) renderLog($(`log-${mode}`), st.events, mode);
    $(`lane-${mode}`).dataset.value = st.value ?? '';
    $(`lane-${mode}`).dataset.landed = String(st.landed.length);
    if (mode === 'fenced') {
      $('floor-fenced').textContent = String(st.floor);
      renderRejections(st.rejections);
    }
  }
  document.body.dataset.preset = ui.scenario.preset;
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
  play.textContent = ui.playing ? 'Pause' : 'Play';
  play.setAttribute('aria-pressed', String(ui.playing));
  $('play-big').hidden = ui.index !== 0 || ui.playing;
  $('back').disabled = ui.index === 0;
  $('step').disabled = ui.index === last;
  $('to-end').disabled = ui.index === last;
}

/** The event list, with the latest event marked and scrolled into the list's view. */
function renderLog(ol, events, mode) {
  const items = events.map((e) => {
    const li = document.createElement('li');
    li.dataset.kind = e.kind;
    li.dataset.actor = e.actor;
    const time = document.createElement('span');
    time.className = 'when';
    time.textContent = `t=${fmt(e.t)}`;
    li.append(time, ` ${describe(e, mode)}`);
    return li;
  });
  const current = items.at(-1);
  if (current) current.setAttribute('aria-current', 'step');
  ol.replaceChildren(...items);
  // Follow the run: the newest event is the last one, keep it in view.
  if (current) ol.scrollTop = Math.max(0, current.offsetTop + current.offsetHeight - ol.clientHeight + 4);
}

function renderRejections(rows) {
  const body = $('rejections-body');
  if (rows.length === 0) {
    const tr = document.createElement('tr');
    const td = document.createElement('td');
    td.colSpan = 5;
    td.className = 'empty';
    td.textContent = 'No refusals yet.';
    tr.append(td);
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(
    ...rows.map((r) => {
      const tr = document.createElement('tr');
      tr.className = 'rejection';
      for (const v of [r.seq, r.refusedHolderId, r.refusedFence, r.admittedHolderId, r.admittedFence]) {
        const td = document.createElement('td');
        td.textContent = String(v);
        tr.append(td);
      }
      return tr;
    }),
  );
}

start();
