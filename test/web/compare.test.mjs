// compareRuns under Node: a live run set beside the model's run of the same
// scenario. The "live" runs here are model runs changed the way real timing
// changes them: shifted, with an extra denial, or with another verdict.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as lib from 'lease-fence';
import { defaultScenario, runScenarioAsync, finishLane, positionsOf } from '../../web/model.js';
import { compareRuns, nameOf, ON_TIME } from '../../web/compare.js';

const copy = (run) => structuredClone(run);

// Rebuilds a run from lanes whose events were edited (as live mode builds one).
function rebuilt(run, edit) {
  const lanes = {};
  for (const [mode, lane] of Object.entries(run.lanes)) {
    const events = lane.events.filter((e) => e.kind !== 'expire').map((e) => ({ ...e }));
    edit(mode, events);
    lanes[mode] = finishLane({ ...lane, events, generations: lane.generations.map((g) => ({ ...g, from: undefined })) });
  }
  return { scenario: run.scenario, lanes, ...positionsOf([lanes.naive, lanes.fenced]) };
}

test('a run beside itself: same verdicts, nothing differs', async () => {
  const model = await runScenarioAsync(lib, defaultScenario('gap'));
  const c = compareRuns(model, copy(model));
  assert.equal(c.same, true);
  assert.equal(c.summary, 'Same verdicts as the model in both lanes.');
  assert.deepEqual(c.diffs, []);
  assert.deepEqual(c.orders, []);
  const compared = model.lanes.naive.events.length + model.lanes.fenced.events.length;
  assert.ok(c.onTime > compared / 2 && c.onTime <= compared, `${c.onTime} of ${compared}`);
});

test('later events are listed with how much later, largest first; within 2 ms is on time', async () => {
  const model = await runScenarioAsync(lib, defaultScenario('gap'));
  const live = rebuilt(model, (mode, events) => {
    for (const e of events) {
      if (e.actor === 'B' || e.from === 'B' || e.holder === 'B') e.t += mode === 'fenced' ? 30 : 1;
    }
  });
  const c = compareRuns(model, live);
  assert.equal(c.same, true, c.summary);
  assert.ok(c.diffs.length > 3);
  assert.ok(c.diffs.every((d) => d.mode === 'fenced' && d.delta === 30), JSON.stringify(c.diffs));
  assert.ok(c.diffs.some((d) => d.text === "Fenced: B's write (fence 2) at 1030, 1000 in the model (+30 ms)"), c.diffs.map((d) => d.text).join('\n'));
  assert.ok(c.diffs.some((d) => d.text === 'Fenced: grant to B (fence 2) at 1030, 1000 in the model (+30 ms)'));
  assert.equal(ON_TIME, 2);
});

test('an event in one run only is named, before any shift', async () => {
  const model = await runScenarioAsync(lib, defaultScenario('gap'));
  const live = rebuilt(model, (mode, events) => {
    if (mode !== 'naive') return;
    events.push({ seq: events.length, t: 1000, actor: 'K', kind: 'deny', from: 'B', req: 'r2', heldBy: 'agent-a', retryAfter: 2 });
    const check = events.find((e) => e.kind === 'check' && e.actor === 'B');
    check.t = 1003;
  });
  const c = compareRuns(model, live);
  assert.equal(c.diffs[0].text, 'Naive: B denied at 1000 happened only in the live run');
  assert.equal(c.diffs[1].text, "Naive: B's check at 1003, 1000 in the model (+3 ms)");
  const missing = rebuilt(model, (mode, events) => {
    if (mode === 'fenced') events.splice(events.findIndex((e) => e.kind === 'check' && e.actor === 'A'), 1);
  });
  assert.deepEqual(compareRuns(model, missing).diffs.map((d) => d.text), ["Fenced: A's check, at 950 in the model, did not happen in the live run"]);
});

test('another verdict is said, with the order the writes landed in', async () => {
  // The gap with A's write at 1000, before B's: the early preset's verdict.
  const model = await runScenarioAsync(lib, defaultScenario('gap'));
  const live = await runScenarioAsync(lib, { ...defaultScenario('gap'), model: 50 });
  const c = compareRuns(model, live);
  assert.equal(c.same, false);
  assert.equal(c.lanes.fenced.same, false);
  assert.match(c.lanes.fenced.live, /^Fenced: admitted: the stale write reached the gate first\./);
  assert.equal(c.lanes.fenced.model, 'Fenced: fence 1 < floor 2, refused and logged (rejection #1); the resource keeps "B\'s report".');
  assert.match(c.summary, /^The naive and fenced verdicts differ from the model's: Naive: the writes reached the resource in the order A, B live, B, A in the model\. Fenced: the writes reached the resource in the order A, B live, B, A \(refused\) in the model\.$/);
});

test('every kind of event the model makes has a name', async () => {
  for (const id of ['gap', 'renewal', 'lost', 'expired', 'restart', 'push', 'async']) {
    const run = await runScenarioAsync(lib, { ...defaultScenario(id), agents: 3 });
    for (const lane of Object.values(run.lanes)) {
      for (const e of lane.events) assert.ok(!/undefined/.test(nameOf(e)), `${id} ${e.kind}: ${nameOf(e)}`);
    }
  }
});
