// The words under Node: the verdict of each lane in every preset, a caption
// for every step, every event worded, the stale windows the captions and
// the drawing rely on, and the warning about skew.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as lib from 'lease-fence';
import { PRESETS, defaultScenario, runScenarioAsync, presetById } from '../../web/model.js';
import { describe, plain, captionAt, verdicts, warnings, editCaption } from '../../web/words.js';
import { rng } from '../js/helpers.mjs';

const VERDICTS = {
  gap: [
    ['bad', "Naive: A's write from an expired lease overwrote B's, and nothing noticed."],
    ['good', 'Fenced: fence 1 < floor 2, refused and logged (rejection #1); the resource keeps "B\'s report".'],
  ],
  renewal: [
    ['bad', "Naive: A's write from an expired lease overwrote B's, and nothing noticed."],
    ['good', 'Fenced: fence 1 < floor 2, refused and logged (rejection #1); the resource keeps "B\'s report".'],
  ],
  lost: [
    ['bad', "Naive: A's write from an expired lease overwrote B's, and nothing noticed."],
    ['good', 'Fenced: fence 1 < floor 2, refused and logged (rejection #1); the resource keeps "B\'s report".'],
  ],
  expired: [
    ['bad', "Naive: A's write from an expired lease overwrote B's, and nothing noticed."],
    ['good', 'Fenced: fence 1 < floor 2, refused and logged (rejection #1); the resource keeps "B\'s report".'],
  ],
  restart: [
    ['neutral', 'Naive: all 3 writes came from current leases, but nothing checked them; had one been stale it would have landed too.'],
    ['limit', "Fenced: the restarted coordinator issued fence 1 again, below the floor 2, so A's current lease was refused and logged; persist issuedFence (startFence) to avoid it."],
  ],
  'restart-kept': [
    ['neutral', 'Naive: all 3 writes came from current leases, but nothing checked them; had one been stale it would have landed too.'],
    ['good', 'Fenced: every write carried the highest fence so far (1, 2, 3) and landed; there was nothing to refuse.'],
  ],
  early: [
    ['bad', "Naive: A's write from an expired lease landed before B's, and nothing recorded it."],
    ['limit', "Fenced: admitted: the stale write reached the gate first. A's write (fence 1) arrived before any write with a newer fence, so the gate could not refuse it: a fence refuses only once the newer one has reached the resource."],
  ],
  push: [
    ['bad', "Naive: A's write from an expired lease landed before B's, and nothing recorded it."],
    ['good', 'Fenced: fence 1 < floor 2, refused and logged (rejection #1) before anything was written.'],
  ],
  async: [
    ['bad', "Naive: A's write awaited across the handover and landed after B's newer one, and nothing noticed."],
    ['good', "Fenced: commitAsync ran the writes one at a time: B's write waited for the one in flight and landed after it; A's stale write was checked when its turn came and refused (fence 1 < floor 2, rejection #1)."],
  ],
};

const runs = new Map();
const runOf = async (id) => {
  if (!runs.has(id)) runs.set(id, await runScenarioAsync(lib, defaultScenario(id)));
  return runs.get(id);
};

test('each preset ends with the verdict it teaches, per lane', async () => {
  for (const p of PRESETS) {
    assert.ok(VERDICTS[p.id], `no verdict written down for ${p.id}`);
    const v = verdicts(await runOf(p.id));
    assert.deepEqual([[v.naive.tone, v.naive.text], [v.fenced.tone, v.fenced.text]], VERDICTS[p.id], p.id);
  }
});

test('every step has a caption of its own; the first invites to play', async () => {
  for (const p of PRESETS) {
    const run = await runOf(p.id);
    const first = captionAt(run, 0, presetById(p.id).claim);
    assert.equal(first.text, `Press Play (or Step) to watch it happen, one event at a time. ${p.claim}`);
    assert.equal(captionAt(run, 0).text, 'Press Play (or Step) to watch it happen, one event at a time. The faint drawing shows where the run ends up: drag a ringed event along its row to change the scenario.');
    assert.deepEqual(first.events, { naive: [], fenced: [] });
    for (let i = 1; i < run.positions.length; i++) {
      const c = captionAt(run, i);
      const prev = captionAt(run, i - 1);
      assert.ok(c.text.length > 20 && c.text.length < 500, `${p.id} ${i}: ${c.text}`);
      assert.notEqual(c.text, prev.text, `${p.id}: step ${i} repeats step ${i - 1}`);
      assert.ok(c.events.naive.length + c.events.fenced.length >= 1, `${p.id} ${i}: nothing highlighted`);
      assert.ok(!/undefined|NaN|null/.test(c.text), `${p.id} ${i}: ${c.text}`);
    }
  }
});

test('the gap, step by step: the captions that carry the lesson', async () => {
  const run = await runOf('gap');
  const all = run.positions.map((_, i) => captionAt(run, i).text);
  const has = (re) => assert.ok(all.some((c) => re.test(c)), `no caption matches ${re}:\n${all.join('\n')}`);
  has(/^Both lanes: A's lease \(fence 1\) ends on the coordinator's clock\. A is not told/);
  has(/^Both lanes: A's lease is over on the coordinator's clock, so it grants the lease to B with fence 2\. From here two agents may act as holder/);
  has(/^Naive: A checks now < expiresAt: valid, so it goes ahead\. Nothing re-checks the lease/);
  has(/^Naive: A's write \(no token\) lands over B's\. A's lease ended at 1000: a write that should not have landed, and nothing noticed\. Fenced: The gate refuses A's write: fence 1 < floor 2\. Refused and logged as rejection #1/);
});

test('every event of every preset is worded, in the list and in the caption', async () => {
  for (const p of PRESETS) {
    const run = await runOf(p.id);
    for (const lane of Object.values(run.lanes)) {
      for (const e of lane.events) {
        const d = describe(e, lane.mode);
        assert.ok(!d.startsWith(`${e.actor}: `), `${p.id}: no words for ${e.kind}`);
        assert.ok(!/undefined|NaN/.test(d), `${p.id} ${e.kind}: ${d}`);
        const c = plain(e, lane);
        assert.ok(c.what.length > 5 && !/undefined|NaN/.test(c.what + c.why), `${p.id} ${e.kind}: ${JSON.stringify(c)}`);
      }
    }
  }
});

test('stale windows: 1000-1400 in the gap, 1040-1900 naive in the renewal', async () => {
  const win = (run, mode) => run.lanes[mode].windows.map((w) => [w.holder, w.from, w.to]);
  assert.deepEqual(win(await runOf('gap'), 'naive'), [['A', 1000, 1400]]);
  assert.deepEqual(win(await runOf('gap'), 'fenced'), [['A', 1000, 1400]]);
  assert.deepEqual(win(await runOf('renewal'), 'naive'), [['A', 1040, 1900]]);
  assert.deepEqual(win(await runOf('renewal'), 'fenced'), [['A', 1040, 1400]]);
  assert.deepEqual(win(await runOf('restart'), 'naive'), [['B', 1300, 2100]]);
  assert.deepEqual(win(await runOf('restart'), 'naive').length, 1);
});

test('a skew at least the TTL is warned about; a smaller one is not', () => {
  assert.deepEqual(warnings({ ...defaultScenario('gap'), skew: 999 }), []);
  for (const skew of [1000, 5000]) {
    const w = warnings({ ...defaultScenario('gap'), skew });
    assert.equal(w.length, 1);
    assert.match(w[0], new RegExp(`skew \\(${skew} ms\\) is at least the TTL \\(1000 ms\\)`));
  }
});

test("async: a write that lands with an older holder's is not taken as overtaken by it", async () => {
  // B's write (bWork 300: called at 1300, 100 ms) lands at 1400 with A's report.
  const run = await runScenarioAsync(lib, { ...defaultScenario('async'), bWork: 300 });
  const landings = run.lanes.naive.events.filter((e) => e.kind === 'write').map((e) => [e.t, e.actor, e.overtaken]);
  assert.deepEqual(landings, [[1250, 'A', false], [1400, 'A', false], [1400, 'B', false]]);
  assert.equal(verdicts(run).naive.text, "Naive: A's write from an expired lease landed before B's, and nothing recorded it.");
});

test('400 seeded random scenarios: every verdict, caption, event and edit caption is worded', async () => {
  const rand = rng(2212);
  const pick = (n) => Math.floor(rand() * (n + 1));
  let prev = null;
  for (let n = 0; n < 400; n++) {
    const s = {
      ...defaultScenario(PRESETS[pick(PRESETS.length - 1)].id),
      ttl: 1 + pick(3000), checkAt: pick(3000), model: pick(3000), upA: pick(600), downA: pick(600), upB: pick(600), downB: pick(600),
      skew: pick(300), step: pick(20), bStart: pick(3000), bWork: pick(1) ? pick(800) : 0, floor: pick(2) ? 0 : pick(3),
      restartAt: pick(3000), startFence: pick(1) ? 0 : pick(4), agents: 2 + pick(1), cStart: pick(3000), cModel: pick(800), upC: pick(600), downC: pick(600),
    };
    const run = await runScenarioAsync(lib, s);
    const why = JSON.stringify(s);
    const v = verdicts(run);
    for (const mode of ['naive', 'fenced']) assert.ok(!/undefined|NaN|null/.test(v[mode].text), `${why}: ${v[mode].text}`);
    for (let i = 0; i < run.positions.length; i++) assert.ok(!/undefined|NaN/.test(captionAt(run, i).text), why);
    for (const lane of Object.values(run.lanes)) for (const e of lane.events) assert.ok(!/undefined|NaN/.test(describe(e, lane.mode)), `${why}: ${e.kind}`);
    const moved = run.lanes.fenced.events.find((e) => e.edit);
    if (moved) {
      const c = editCaption(run, prev, { key: moved.edit.key, label: 'x', value: moved.t - moved.edit.offset, actor: moved.actor, kind: moved.kind, occurrence: 0 });
      assert.ok(!/undefined|NaN/.test(c), `${why}: ${c}`);
    }
    prev = run;
  }
});
