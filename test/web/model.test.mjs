// The playground's model under Node, driving the real lease-fence module:
// each preset's claim, determinism, the URL codec and its hostile inputs,
// and invariants over seeded random scenarios.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as lib from 'lease-fence';
import {
  PRESETS,
  PARAMS,
  defaultScenario,
  runScenario,
  runScenarioAsync,
  parseQuery,
  toQuery,
  validateScenario,
  stateAt,
  visible,
} from '../../web/model.js';
import { rng } from '../js/helpers.mjs';

const writes = (lane) => lane.events.filter((e) => e.kind === 'write');
const landed = (lane) => writes(lane).filter((e) => e.landed).map((e) => `${e.actor}@${e.t}`);
const find = (lane, kind, pred = () => true) => lane.events.filter((e) => e.kind === kind && pred(e));
const rejection = (seq, refusedHolderId, refusedFence, admittedHolderId, admittedFence) => ({
  seq,
  resource: 'report.md',
  refusedHolderId,
  refusedFence,
  admittedHolderId,
  admittedFence,
});

test('gap: check at 950, reassignment at 1000, stale write at 1400', () => {
  const { lanes } = runScenario(lib, defaultScenario('gap'));
  for (const lane of Object.values(lanes)) {
    const check = find(lane, 'check', (e) => e.actor === 'A');
    assert.deepEqual(check.map((e) => [e.t, e.result]), [[950, 'valid']]);
    assert.deepEqual(find(lane, 'grant', (e) => e.holder === 'B').map((e) => [e.t, e.fence]), [[1000, 2]]);
    assert.deepEqual(find(lane, 'expire').map((e) => [e.t, e.holder]), [[1000, 'A']]);
  }
  assert.deepEqual(landed(lanes.naive), ['B@1000', 'A@1400']);
  assert.equal(lanes.naive.finalValue, "A's report");
  assert.deepEqual(lanes.naive.rejections, []);
  assert.deepEqual(landed(lanes.fenced), ['B@1000']);
  assert.equal(lanes.fenced.finalValue, "B's report");
  assert.deepEqual(lanes.fenced.rejections, [rejection(1, 'agent-a', 1, 'agent-b', 2)]);
  const refused = writes(lanes.fenced).find((e) => !e.landed);
  assert.equal(refused.t, 1400);
  assert.deepEqual(refused.rejection, lanes.fenced.rejections[0]);
});

test('renewal: processed at 40, reply at 900; naive dates it to 1900, fenced to the send', () => {
  const { lanes } = runScenario(lib, defaultScenario('renewal'));
  for (const lane of Object.values(lanes)) {
    assert.deepEqual(find(lane, 'extend').map((e) => [e.t, e.until]), [[40, 1040]]);
  }
  const naiveA = find(lanes.naive, 'lease', (e) => e.actor === 'A').map((e) => [e.t, e.deadline]);
  assert.deepEqual(naiveA, [[0, 1000], [900, 1900]]);
  const fencedA = find(lanes.fenced, 'lease', (e) => e.actor === 'A').map((e) => [e.t, e.deadline]);
  assert.deepEqual(fencedA, [[0, 1000], [900, 1000]]);
  assert.deepEqual(landed(lanes.naive), ['B@1100', 'A@1400']);
  assert.deepEqual(lanes.naive.rejections, []);
  assert.deepEqual(lanes.fenced.rejections, [rejection(1, 'agent-a', 1, 'agent-b', 2)]);
});

test('lost: the retry reuses the request id and gets the same grant, no new fence', () => {
  const { lanes } = runScenario(lib, defaultScenario('lost'));
  for (const lane of Object.values(lanes)) {
    const sends = find(lane, 'send', (e) => e.actor === 'A');
    assert.equal(sends.length, 2);
    assert.equal(sends[0].req, sends[1].req, 'the resend carries the same request');
    assert.equal(sends[0].sentAt, sends[1].sentAt);
    assert.equal(find(lane, 'lost').length, 1);
    const replay = find(lane, 'replay');
    assert.equal(replay.length, 1);
    assert.equal(replay[0].fence, 1);
    assert.equal(replay[0].issuedFence, 1, 'the retry minted no fence');
  }
  assert.deepEqual(find(lanes.naive, 'lease', (e) => e.actor === 'A').map((e) => e.deadline), [1300]);
  assert.deepEqual(find(lanes.fenced, 'lease', (e) => e.actor === 'A').map((e) => e.deadline), [1000]);
  assert.deepEqual(landed(lanes.naive), ['B@1100', 'A@1400']);
  assert.deepEqual(lanes.fenced.rejections, [rejection(1, 'agent-a', 1, 'agent-b', 2)]);
});

test('expired: a renewal after expiry is refused even though nobody holds the lease', () => {
  const { lanes } = runScenario(lib, defaultScenario('expired'));
  for (const lane of Object.values(lanes)) {
    const refused = find(lane, 'refuse-renewal');
    assert.deepEqual(refused.map((e) => e.t), [1100]);
    // Nobody held the resource when the renewal was refused.
    assert.equal(find(lane, 'grant', (e) => e.t <= 1100 && e.holder === 'B').length, 0);
    assert.deepEqual(find(lane, 'grant', (e) => e.holder === 'B').map((e) => e.fence), [2]);
  }
  assert.deepEqual(landed(lanes.naive), ['B@1150', 'A@1300']);
  assert.deepEqual(lanes.naive.rejections, []);
  assert.deepEqual(lanes.fenced.rejections, [rejection(1, 'agent-a', 1, 'agent-b', 2)]);
});

test('restart without persisting: fence 1 is issued again and refused', () => {
  const { lanes } = runScenario(lib, defaultScenario('restart'));
  for (const lane of Object.values(lanes)) {
    const grantsA = find(lane, 'grant', (e) => e.holder === 'A').map((e) => e.fence);
    assert.deepEqual(grantsA, [1, 1]);
    assert.equal(find(lane, 'restart')[0].persisted, false);
  }
  assert.equal(landed(lanes.naive).length, 3);
  assert.deepEqual(lanes.naive.rejections, []);
  assert.deepEqual(landed(lanes.fenced), ['A@200', 'B@1100']);
  assert.deepEqual(lanes.fenced.rejections, [rejection(1, 'agent-a', 1, 'agent-b', 2)]);
});

test('restart with startFence: the successor issues fence 3 and the write lands', () => {
  const { lanes } = runScenario(lib, defaultScenario('restart-kept'));
  for (const lane of Object.values(lanes)) {
    assert.deepEqual(find(lane, 'grant', (e) => e.holder === 'A').map((e) => e.fence), [1, 3]);
    assert.equal(find(lane, 'restart')[0].startFence, 2);
    assert.equal(lane.issuedFence, 3);
  }
  assert.deepEqual(landed(lanes.fenced), ['A@200', 'B@1100', 'A@1500']);
  assert.deepEqual(lanes.fenced.rejections, []);
  assert.equal(lanes.fenced.floor, 3);
});

test('early: a stale write that reaches the gate before the new holder writes is admitted', () => {
  const { lanes } = runScenario(lib, defaultScenario('early'));
  for (const lane of Object.values(lanes)) {
    assert.deepEqual(landed(lane), ['A@1100', 'B@1300']);
    assert.deepEqual(lane.rejections, []);
    assert.deepEqual(find(lane, 'grant', (e) => e.holder === 'B').map((e) => [e.t, e.fence]), [[1000, 2]]);
  }
  assert.deepEqual(writes(lanes.fenced).map((e) => e.fence), [1, 2]);
});

test('push: gate.admit at the grant raises the floor before the new holder writes', () => {
  const { lanes } = runScenario(lib, defaultScenario('push'));
  const pushes = find(lanes.fenced, 'admit').map((e) => [e.t, e.fence, e.pushed]);
  assert.deepEqual(pushes, [[0, 1, true], [1000, 2, true]]);
  assert.ok(find(lanes.naive, 'admit').every((e) => !e.pushed));
  assert.deepEqual(landed(lanes.naive), ['A@1100', 'B@1300']);
  assert.deepEqual(landed(lanes.fenced), ['B@1300']);
  assert.deepEqual(lanes.fenced.rejections, [rejection(1, 'agent-a', 1, 'agent-b', 2)]);
  // The floor shown before B's write already counts the pushed fence.
  const fenced = lanes.fenced;
  const refusal = writes(fenced).find((e) => !e.landed);
  assert.equal(stateAt(fenced, { t: refusal.t, j: refusal.rank }).floor, 2);
});

test('async: commit refuses the async function, commitAsync queues B behind A and refuses A\'s stale write at its turn', async () => {
  assert.throws(() => runScenario(lib, defaultScenario('async')), TypeError);
  const { lanes } = await runScenarioAsync(lib, defaultScenario('async'));
  const { naive, fenced } = lanes;
  // Naive: no gate, no queue; A's report, begun at 950, lands at 1400, after B's newer write.
  assert.deepEqual(landed(naive), ['B@1100', 'A@1250', 'A@1400']);
  const late = writes(naive).find((e) => e.t === 1400);
  assert.equal(late.began, 950);
  assert.equal(late.overtaken, true);
  assert.equal(late.stale, true);
  assert.equal(naive.finalValue, "A's report");
  // Fenced: gate.commit refused the async function before it ran.
  assert.deepEqual(find(fenced, 'misuse').map((e) => [e.t, e.error, e.floor]), [[950, 'InvalidArgumentError', 0]]);
  // A is admitted at its call; B (at 1000) and A's follow-up (at 1200, fence 1 still at the floor) wait.
  assert.deepEqual(find(fenced, 'write-call').map((e) => [e.t, e.actor, e.fence, e.queued]), [[950, 'A', 1, false], [1000, 'B', 2, true], [1200, 'A', 1, true]]);
  assert.deepEqual(find(fenced, 'write-begin').map((e) => [e.t, e.actor, e.floorBefore, e.floor]), [[1400, 'B', 1, 2]]);
  // A's write, admitted while its lease was current, lands first; B's after it; A's next is refused at its turn.
  assert.deepEqual(landed(fenced), ['A@1400', 'B@1500']);
  assert.deepEqual(writes(fenced).map((e) => [e.t, e.actor, e.landed, e.stale]), [[1400, 'A', true, false], [1500, 'B', true, false], [1500, 'A', false, true]]);
  assert.deepEqual(fenced.rejections, [rejection(1, 'agent-a', 1, 'agent-b', 2)]);
  assert.equal(fenced.finalValue, "B's report");
  assert.equal(fenced.floor, 2);
  // The floor rose to 2 when B's turn came, before B's write landed.
  const turn = find(fenced, 'write-begin')[0];
  assert.equal(stateAt(fenced, { t: turn.t, j: turn.rank + 1 }).floor, 2);
  assert.equal(stateAt(fenced, { t: turn.t, j: turn.rank + 1 }).value, "A's report");
});

test("the async preset settles its promises on microtask turns exactly as on a macrotask turn after every action (300 seeded scenarios)", async () => {
  const rand = rng(2202);
  const pick = (max) => Math.floor(rand() * (max + 1));
  const base = defaultScenario('async');
  let refused = 0;
  for (let n = 0; n < 300; n++) {
    const s = n === 0 ? base : {
      ...base,
      ttl: 1 + pick(2000),
      checkAt: pick(2000),
      model: pick(1500),
      upA: pick(300),
      downA: pick(300),
      upB: pick(300),
      downB: pick(300),
      skew: pick(200),
      step: pick(10),
      bStart: pick(2000),
      bWork: pick(2) === 0 ? pick(800) : 0,
      floor: pick(4) === 0 ? pick(3) : 0,
      agents: 2 + pick(1),
      cStart: pick(2000),
      upC: pick(300),
      downC: pick(300),
    };
    const run = (settle) => runScenarioAsync(lib, s, { settle }).then((r) => r, (err) => `${err.name}: ${err.message}`);
    const task = await run('task');
    if (typeof task === 'string') refused++;
    assert.deepEqual(await run('microtasks'), task, JSON.stringify(s));
  }
  assert.ok(refused < 30, `${refused} of 300 scenarios did not run`);
  await assert.rejects(runScenarioAsync(lib, base, { settle: 'later' }), TypeError);
});

test('the same scenario gives the same events', async () => {
  for (const p of PRESETS) {
    const s = { ...defaultScenario(p.id), step: 3, skew: 20 };
    assert.deepEqual(await runScenarioAsync(lib, s), await runScenarioAsync(lib, s), p.id);
  }
});

test('stepPerRead moves every reading on: the naive expiresAt shows the extra reads', () => {
  const still = runScenario(lib, defaultScenario('gap')).lanes.naive;
  const stepping = runScenario(lib, { ...defaultScenario('gap'), step: 7 }).lanes.naive;
  const first = (lane) => find(lane, 'lease', (e) => e.actor === 'A')[0].deadline;
  assert.equal(first(still), 1000);
  assert.ok(first(stepping) > 1000, `expiresAt ${first(stepping)} should include the steps`);
});

test('assumed skew shortens the fenced deadline only', () => {
  const { lanes } = runScenario(lib, { ...defaultScenario('gap'), skew: 100 });
  assert.equal(find(lanes.fenced, 'lease', (e) => e.actor === 'A')[0].deadline, 900);
  assert.equal(find(lanes.fenced, 'check', (e) => e.actor === 'A')[0].result, 'expired');
  assert.equal(find(lanes.naive, 'lease', (e) => e.actor === 'A')[0].deadline, 1000);
});

test('positions: one step shows one more event per lane, and the last shows them all', async () => {
  for (const p of PRESETS) {
    const run = await runScenarioAsync(lib, defaultScenario(p.id));
    let prev = { naive: 0, fenced: 0 };
    for (const pos of run.positions.slice(1)) {
      let grew = 0;
      for (const mode of ['naive', 'fenced']) {
        const n = stateAt(run.lanes[mode], pos).events.length;
        assert.ok(n === prev[mode] || n === prev[mode] + 1, `${p.id} ${mode} at ${JSON.stringify(pos)}: ${prev[mode]} -> ${n}`);
        grew += n - prev[mode];
        prev[mode] = n;
      }
      assert.ok(grew > 0, `${p.id}: position ${JSON.stringify(pos)} shows nothing new`);
    }
    assert.equal(stateAt(run.lanes.naive, run.positions[0]).events.length, 0);
    const last = run.positions.at(-1);
    for (const mode of ['naive', 'fenced']) {
      assert.equal(run.lanes[mode].events.filter((e) => visible(e, last)).length, run.lanes[mode].events.length);
      assert.equal(stateAt(run.lanes[mode], last).value, run.lanes[mode].finalValue);
    }
  }
});

test('URL: a scenario survives toQuery and parseQuery unchanged', () => {
  const s = { ...defaultScenario('lost'), ttl: 777, checkAt: 12, model: 3456, upA: 1, downA: 2, upB: 3, downB: 4, skew: 5, step: 6, bStart: 789, bWork: 17, floor: 3 };
  const back = parseQuery('?' + toQuery(s, { at: 7, embed: true }));
  assert.deepEqual(back.problems, []);
  assert.deepEqual(back.scenario, s);
  assert.equal(back.at, 7);
  assert.equal(back.embed, true);
  // With a third agent and a restart, every key is in the link.
  const full = { ...defaultScenario('restart'), agents: 3, cStart: 10, cModel: 20, upC: 30, downC: 40, restartAt: 1700, startFence: 7 };
  const q = toQuery(full);
  for (const def of PARAMS) assert.match(q, new RegExp(`(^|&)${def.key}=${full[def.key]}(&|$)`), def.key);
  assert.deepEqual(parseQuery('?' + q).scenario, full);
});

test('URL: keys that do not apply stay out of the link', () => {
  const q = toQuery({ ...defaultScenario('gap'), cStart: 5, restartAt: 7 });
  for (const key of ['cStart', 'cModel', 'upC', 'downC', 'restartAt', 'startFence']) assert.ok(!new RegExp(`(^|&)${key}=`).test(q), `${key} in ${q}`);
  assert.match(q, /(^|&)agents=2(&|$)/);
  // Given anyway, they are accepted (and change nothing the run uses).
  assert.deepEqual(parseQuery('?p=gap&cStart=5').problems, []);
});

test('URL: links made before the new keys load as they did', () => {
  // A link of the earlier page: ten keys, no floor, bWork, agents or restart time.
  const old = '?p=restart&ttl=1000&checkAt=100&model=100&upA=0&downA=0&upB=0&downB=0&skew=0&step=0&bStart=1500&at=3';
  const { scenario, problems, at } = parseQuery(old);
  assert.deepEqual(problems, []);
  assert.equal(at, 3);
  // The restart came 200 ms after B's start; restart-kept's successor started at the old issuedFence (2).
  assert.equal(scenario.restartAt, 1700);
  assert.equal(parseQuery('?p=restart-kept').scenario.startFence, 2);
  assert.deepEqual({ agents: scenario.agents, floor: scenario.floor, bWork: scenario.bWork, startFence: scenario.startFence }, { agents: 2, floor: 0, bWork: 0, startFence: 0 });
  // early and push keep B's 300 ms of work; gap has none.
  assert.equal(parseQuery('?p=early&ttl=1000').scenario.bWork, 300);
  assert.equal(parseQuery('?p=gap&ttl=1000').scenario.bWork, 0);
});

test('URL: hostile and malformed values are reported and replaced by defaults', () => {
  const cases = [
    ['?p=%3Cscript%3Ealert(1)%3C/script%3E', 'preset'],
    ['?ttl=%3Cimg%20src=x%20onerror=alert(1)%3E', 'ttl'],
    ['?ttl=1e400', 'ttl'],
    ['?ttl=99999999999999999999', 'ttl'],
    ['?ttl=NaN', 'ttl'],
    ['?ttl=-5', 'ttl'],
    ['?ttl=0', 'ttl'],
    ['?model=1.5', 'model'],
    ['?step=Infinity', 'step'],
    ['?bStart=', 'bStart'],
    ['?skew=0x10', 'skew'],
    ['?at=-1', 'at'],
    ['?embed=yes', 'embed'],
    ['?%3Cb%3E=1', 'unknown'],
    ['?ttl=5&ttl=6', 'twice'],
  ];
  for (const [q, what] of cases) {
    const { scenario, problems } = parseQuery(q);
    assert.equal(problems.length, 1, `${q}: ${JSON.stringify(problems)}`);
    assert.deepEqual(validateScenario(scenario), [], q);
    if (what === 'ttl') assert.equal(scenario.ttl, 1000, q);
    if (what === 'preset') assert.equal(scenario.preset, 'gap');
    if (what === 'twice') assert.equal(scenario.ttl, 5);
    for (const p of problems) assert.ok(p.length < 300, `message too long: ${p}`);
  }
  const long = parseQuery('?p=' + 'x'.repeat(100000));
  assert.ok(long.problems[0].length < 300);
});

test('every parameter rejects one past its bounds', () => {
  for (const def of PARAMS) {
    for (const bad of [def.min - 1, def.max + 1]) {
      if (bad < 0) continue;
      const { scenario, problems } = parseQuery(`?${def.key}=${bad}`);
      assert.equal(problems.length, 1, `${def.key}=${bad}`);
      assert.equal(scenario[def.key], defaultScenario()[def.key]);
    }
    for (const good of [def.min, def.max]) {
      const { scenario, problems } = parseQuery(`?${def.key}=${good}`);
      assert.deepEqual(problems, [], `${def.key}=${good}`);
      assert.equal(scenario[def.key], good);
    }
  }
});

test('runScenario refuses a scenario that fails validation, before touching the library', () => {
  assert.throws(() => runScenario(lib, { ...defaultScenario(), ttl: -1 }), RangeError);
  assert.throws(() => runScenario(lib, { ...defaultScenario(), preset: 'nope' }), RangeError);
  assert.throws(() => runScenario(lib, { ...defaultScenario(), model: Number.NaN }), RangeError);
});

test('300 seeded random scenarios: runs finish and the fence rules hold', async () => {
  const rand = rng(20261130);
  const pick = (max) => Math.floor(rand() * (max + 1));
  for (let n = 0; n < 300; n++) {
    const s = {
      ...defaultScenario(PRESETS[pick(PRESETS.length - 1)].id),
      ttl: 1 + pick(3000),
      checkAt: pick(3000),
      model: pick(3000),
      upA: pick(600),
      downA: pick(600),
      upB: pick(600),
      downB: pick(600),
      skew: pick(300),
      step: pick(20),
      bStart: pick(3000),
      bWork: pick(3) === 0 ? pick(800) : 0,
      floor: pick(4) === 0 ? pick(3) : 0,
      restartAt: pick(3000),
      startFence: pick(3) === 0 ? pick(4) : 0,
      agents: 2 + pick(1),
      cStart: pick(3000),
      cModel: pick(800),
      upC: pick(600),
      downC: pick(600),
    };
    const run = await runScenarioAsync(lib, s);
    const { naive, fenced } = run.lanes;
    const why = JSON.stringify(s);
    // The naive lane never refuses anything.
    assert.equal(naive.rejections.length, 0, why);
    assert.ok(writes(naive).every((e) => e.landed), why);
    // Every refusal names a fence below the one it lost to, and each refused
    // write is in the log.
    for (const r of fenced.rejections) assert.ok(r.refusedFence < r.admittedFence, why);
    const refusedAdmits = find(fenced, 'admit', (e) => e.rejection).length;
    assert.equal(writes(fenced).filter((e) => !e.landed).length + refusedAdmits, fenced.rejections.length, why);
    // The fences of the writes the gate admitted never go down, restart or not.
    const fences = writes(fenced).filter((e) => e.landed).map((e) => e.fence);
    for (let i = 1; i < fences.length; i++) assert.ok(fences[i] >= fences[i - 1], why);
    // A fenced holder's deadline never outlasts the coordinator's copy.
    for (const e of find(fenced, 'lease')) {
      const grants = fenced.events.filter((g) => ['grant', 'extend', 'replay'].includes(g.kind) && g.holder === e.actor && g.t <= e.t);
      const last = grants.at(-1);
      assert.ok(e.deadline <= last.until, `${why}: deadline ${e.deadline} > coordinator ${last.until}`);
    }
    // Every event a parameter places sits where that parameter says:
    // t = offset + value (or at its earliest, when the value asks for less).
    for (const lane of [naive, fenced]) {
      for (const e of lane.events.filter((x) => x.edit)) {
        const { key, offset, min, max } = e.edit;
        const v = Math.min(Math.max(s[key], min), max);
        assert.equal(e.t, offset + v, `${why}: ${lane.mode} ${e.actor} ${e.kind} at ${e.t}, ${key} = ${s[key]} from ${offset} (min ${min})`);
      }
    }
    // Positions cover every event exactly once, in order.
    const lastPos = run.positions.at(-1);
    assert.equal(stateAt(fenced, lastPos).events.length, fenced.events.length, why);
  }
});

test('a third agent: C is denied while B holds the lease, retries, and writes with fence 3', () => {
  const { lanes } = runScenario(lib, { ...defaultScenario('gap'), agents: 3 });
  for (const lane of Object.values(lanes)) {
    assert.deepEqual(find(lane, 'deny', (e) => e.from === 'C').map((e) => [e.t, e.heldBy, e.retryAfter]), [[1600, 'agent-b', 400]]);
    assert.deepEqual(find(lane, 'grant', (e) => e.holder === 'C').map((e) => [e.t, e.fence, e.reassignedFrom]), [[2000, 3, 'B']]);
    assert.deepEqual(find(lane, 'model', (e) => e.actor === 'C').map((e) => [e.t, e.ms]), [[2000, 200]]);
  }
  assert.deepEqual(landed(lanes.naive), ['B@1000', 'A@1400', 'C@2200']);
  assert.deepEqual(landed(lanes.fenced), ['B@1000', 'C@2200']);
  assert.equal(lanes.fenced.finalValue, "C's report");
  assert.equal(lanes.fenced.floor, 3);
  // Two agents: no trace of C.
  const two = runScenario(lib, defaultScenario('gap'));
  assert.ok(two.lanes.fenced.events.every((e) => e.actor !== 'C' && e.holder !== 'C'));
});

test("the gate's initial floor refuses fences below it, logged against no holder", () => {
  const { lanes } = runScenario(lib, { ...defaultScenario('gap'), floor: 2 });
  // B's fence 2 is not below the floor 2; A's fence 1 is.
  assert.deepEqual(landed(lanes.fenced), ['B@1000']);
  const { lanes: high } = runScenario(lib, { ...defaultScenario('gap'), floor: 5 });
  assert.deepEqual(landed(high.fenced), []);
  assert.deepEqual(high.fenced.rejections.map((r) => [r.refusedHolderId, r.refusedFence, r.admittedHolderId, r.admittedFence]), [['agent-b', 2, null, 5], ['agent-a', 1, null, 5]]);
  assert.equal(stateAt(high.fenced, { t: 0, j: 0 }).floor, 5);
  assert.equal(high.fenced.initialFloor, 5);
  // The naive resource has no gate: the floor changes nothing there.
  assert.deepEqual(landed(high.naive), landed(runScenario(lib, defaultScenario('gap')).lanes.naive));
});

test('restart: its time and the successor\'s startFence are parameters', () => {
  const later = runScenario(lib, { ...defaultScenario('restart'), restartAt: 1600 });
  for (const lane of Object.values(later.lanes)) {
    assert.deepEqual(find(lane, 'restart').map((e) => e.t), [1600]);
    assert.deepEqual(find(lane, 'send', (e) => e.actor === 'A').map((e) => e.t), [0, 1700]);
  }
  // startFence 1: the successor issues fence 2 again, equal to B's: the gate admits it.
  const { lanes } = runScenario(lib, { ...defaultScenario('restart'), startFence: 1 });
  assert.deepEqual(find(lanes.fenced, 'grant', (e) => e.holder === 'A').map((e) => e.fence), [1, 2]);
  assert.deepEqual(find(lanes.fenced, 'restart').map((e) => [e.persisted, e.startFence, e.issuedBefore]), [[true, 1, 2]]);
  assert.deepEqual(landed(lanes.fenced), ['A@200', 'B@1100', 'A@1500']);
  // startFence 10: fence 11.
  const ten = runScenario(lib, { ...defaultScenario('restart-kept'), startFence: 10 });
  assert.deepEqual(find(ten.lanes.fenced, 'grant', (e) => e.holder === 'A').map((e) => e.fence), [1, 11]);
});

test("B's work before writing: early and push keep 300 ms, gap has none, and it places B's write", () => {
  for (const id of ['early', 'push']) {
    const { lanes } = runScenario(lib, defaultScenario(id));
    assert.deepEqual(find(lanes.naive, 'model', (e) => e.actor === 'B').map((e) => [e.t, e.ms]), [[1000, 300]]);
  }
  const gap = runScenario(lib, defaultScenario('gap')).lanes.naive;
  assert.equal(find(gap, 'model', (e) => e.actor === 'B').length, 0);
  const w = find(gap, 'write', (e) => e.actor === 'B')[0];
  assert.deepEqual(w.edit, { key: 'bWork', offset: 1000, min: 0, max: 60000 });
  const moved = runScenario(lib, { ...defaultScenario('gap'), bWork: 250 }).lanes.naive;
  assert.deepEqual(find(moved, 'write', (e) => e.actor === 'B').map((e) => e.t), [1250]);
});

test("edits: moving A's write to B's in the gap makes the stale write reach the gate first", () => {
  const base = runScenario(lib, defaultScenario('gap'));
  const aWrite = find(base.lanes.fenced, 'write', (e) => e.actor === 'A')[0];
  assert.deepEqual(aWrite.edit, { key: 'model', offset: 950, min: 0, max: 60000 });
  // Dragged to 1000, where B writes: model = 1000 - 950.
  const { lanes } = runScenario(lib, { ...defaultScenario('gap'), model: 1000 - aWrite.edit.offset });
  assert.deepEqual(writes(lanes.fenced).map((e) => [e.t, e.actor, e.landed, e.stale]), [[1000, 'A', true, true], [1000, 'B', true, false]]);
  assert.deepEqual(lanes.fenced.rejections, []);
  // Every event that a parameter places says which one.
  const keys = new Set(base.lanes.fenced.events.filter((e) => e.edit).map((e) => `${e.actor} ${e.kind} ${e.edit.key}`));
  assert.deepEqual([...keys].sort(), ['A check checkAt', 'A reply downA', 'A write model', 'B reply downB', 'B send bStart', 'B write bWork', 'K expire ttl', 'K grant upA', 'K grant upB']);
});
