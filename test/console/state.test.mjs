// The console's model (web/console-state.js), without a browser: the
// picture a listing and a stream of events make, its bounds, its order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Picture, RING, FORGET_MS, visible, whoOf } from '../../web/console-state.js';

const t0 = 1_700_000_000_000;
let seq = 0;
const ev = (type, resource, holderId, fence, extra = {}) => ({ seq: ++seq, type, resource, holderId, fence, at: t0 + seq, ...extra });

test('a lease, its renewals and its end make one bar, with the end it had', () => {
  const p = new Picture();
  p.apply(ev('granted', 'r', 'a', 1, { remainingMillis: 1000 }));
  p.apply(ev('renewed', 'r', 'a', 1, { remainingMillis: 1000 }));
  p.apply(ev('renewed', 'r', 'a', 1, { remainingMillis: 1000 }));
  p.apply(ev('revoked', 'r', 'a', 1));
  p.apply(ev('granted', 'r', 'b', 2, { remainingMillis: 1000 }));
  const r = p.resources.get('r');
  assert.equal(r.holder, 'b');
  const lane = r.lane(t0 + 100);
  assert.deepEqual(lane.gens.map((g) => [g.holder, g.fence, g.how, g.renewals.length, g.who]), [['a', 1, 'revoked', 2, whoOf(1)], ['b', 2, null, 0, whoOf(2)]]);
  assert.notEqual(whoOf(1), whoOf(2), 'a handover changes colour');
});

test('the waiters keep their order; a grant takes the first', () => {
  const p = new Picture();
  p.apply(ev('granted', 'q', 'h', 1, { remainingMillis: 1000 }));
  for (const w of ['w1', 'w2', 'w3']) p.apply(ev('waiting', 'q', w, 0, { waiters: 0 }));
  p.apply(ev('left', 'q', 'w2', 0, { waiters: 2 }));
  assert.deepEqual(p.resources.get('q').queue(), { ids: ['w1', 'w3'], more: 0 });
  p.apply(ev('released', 'q', 'h', 1, { waiters: 1 }));
  p.apply(ev('granted', 'q', 'w1', 2, { remainingMillis: 1000, waiters: 1 }));
  assert.deepEqual(p.resources.get('q').queue(), { ids: ['w3'], more: 0 });
});

test('history is a ring of RING events per resource', () => {
  const p = new Picture();
  p.apply(ev('granted', 'r', 'a', 1, { remainingMillis: 1e9 }));
  for (let i = 0; i < 3 * RING; i++) p.apply(ev('renewed', 'r', 'a', 1, { remainingMillis: 1e9 }));
  const r = p.resources.get('r');
  assert.equal(r.events().length, RING);
  assert.equal(r.events().at(-1).seq, seq);
  // The grant fell out of the ring: the lease is still drawn, from before the history kept.
  const [gen] = r.lane(t0 + seq).gens;
  assert.equal(gen.listed, true);
  assert.equal(gen.renewals.length, RING);
});

test('a listing replaces the live leases; free resources are forgotten after FORGET_MS', () => {
  const p = new Picture();
  p.apply(ev('granted', 'gone', 'a', 1, { remainingMillis: 1000 }));
  p.load([{ resource: 'kept', holderId: 'b', fence: 7, remainingMillis: 500, waiters: 2, waiterIds: ['x', 'y'] }], t0 + 10);
  assert.equal(p.resources.get('gone').holder, null);
  assert.equal(p.resources.get('kept').remaining(t0 + 110), 400);
  assert.deepEqual(p.resources.get('kept').queue(), { ids: ['x', 'y'], more: 0 });
  p.forget(t0 + 10_000 + FORGET_MS);
  assert.deepEqual([...p.resources.keys()], ['kept']);
});

test('rows: a prefix, and sorting by remaining time, fence or waiters (ties by name)', () => {
  const p = new Picture();
  p.load([
    { resource: 'a/1', holderId: 'h', fence: 5, remainingMillis: 300, waiters: 0 },
    { resource: 'a/2', holderId: 'h', fence: 9, remainingMillis: 100, waiters: 3 },
    { resource: 'a/3', holderId: 'h', fence: 1, remainingMillis: 200, waiters: 3 },
    { resource: 'b/1', holderId: 'h', fence: 99, remainingMillis: 999, waiters: 9 },
  ], t0);
  const names = (...a) => p.rows(...a).map((r) => r.name);
  assert.deepEqual(names('a/', 'name', false, t0), ['a/1', 'a/2', 'a/3']);
  assert.deepEqual(names('a/', 'remaining', false, t0), ['a/2', 'a/3', 'a/1']);
  assert.deepEqual(names('a/', 'fence', true, t0), ['a/2', 'a/1', 'a/3']);
  assert.deepEqual(names('a/', 'waiters', true, t0), ['a/2', 'a/3', 'a/1']);
  assert.deepEqual(names('', 'fence', true, t0)[0], 'b/1');
});

test('visible: bidi and other invisible controls are written out', () => {
  assert.equal(visible('w\u202Eevil'), 'w⟨U+202E⟩evil');
  assert.equal(visible('a\u2067b\u2069\u200Bc\u0000'), 'a⟨U+2067⟩b⟨U+2069⟩⟨U+200B⟩c⟨U+0000⟩');
  assert.equal(visible('<img src=x onerror=alert(1)>'), '<img src=x onerror=alert(1)>');
  assert.equal(visible('żółw 漢字'), 'żółw 漢字');
});
