// isStaleFence: a gate's refusal recognised however it is wrapped, from
// every entry that exports it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as lf from 'lease-fence';
import * as sql from 'lease-fence/sql';
import * as redis from 'lease-fence/redis';
import * as client from 'lease-fence/service-client';

const rejection = { seq: 1, resource: 'r', refusedHolderId: 'a', refusedFence: 1, admittedHolderId: 'b', admittedFence: 2 };

test('isStaleFence is one function, exported by lease-fence, lease-fence/sql, lease-fence/redis and lease-fence/service-client', () => {
  assert.equal(typeof lf.isStaleFence, 'function');
  for (const m of [sql, redis, client]) assert.equal(m.isStaleFence, lf.isStaleFence);
});

test('isStaleFence finds the refusal through cause chains, AggregateError and SuppressedError, however deep', () => {
  const { isStaleFence, StaleFenceError, LeaseFenceError } = lf;
  const stale = new StaleFenceError('stale', { rejection });
  let deep = stale;
  for (let i = 0; i < 50; i++) {
    deep = i % 2 === 0 ? new Error(`wrap ${i}`, { cause: deep }) : new AggregateError([new Error('other'), deep], `agg ${i}`);
  }
  const suppressed = { name: 'SuppressedError', error: new Error('x'), suppressed: new Error('y', { cause: stale }) };
  const cyclic = new Error('a');
  cyclic.cause = new Error('b', { cause: cyclic });
  for (const [err, want, what] of [
    [stale, true, 'the error itself'],
    [new Error('outer', { cause: stale }), true, 'a cause'],
    [new AggregateError([new Error('x'), stale]), true, 'an AggregateError'],
    [deep, true, '50 levels of causes and aggregates'],
    [{ cause: { errors: [stale] } }, true, 'plain objects with cause and errors'],
    [suppressed, true, 'a SuppressedError'],
    [new Error('plain'), false, 'a plain Error'],
    [new LeaseFenceError('other', { cause: new Error('no') }), false, 'another lease-fence error'],
    [new AggregateError([new Error('x'), new TypeError('y')]), false, 'an AggregateError without one'],
    [cyclic, false, 'a cycle of causes'],
    [null, false, 'null'], [undefined, false, 'undefined'], ['StaleFenceError', false, 'a string'],
    [{ name: 'StaleFenceError', rejection }, false, 'a look-alike object'],
  ]) {
    assert.equal(isStaleFence(err), want, what);
  }
});

test('isStaleFence recognises a real gate refusal wrapped by the caller', () => {
  const gate = new lf.FenceGate('r');
  gate.admit({ resource: 'r', holderId: 'b', fence: 2 });
  let caught;
  try {
    gate.commit({ resource: 'r', holderId: 'a', fence: 1 }, () => {});
  } catch (e) {
    caught = e;
  }
  assert.equal(lf.isStaleFence(new Error('saving the order failed', { cause: caught })), true);
  assert.equal(lf.isStaleFence(AggregateError.prototype), false);
});
