// The fence gate: floor, commit, admit, the rejections log, reentrancy.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FenceGate, InvalidArgumentError, StaleFenceError } from 'lease-fence';

const tok = (holderId, fence, resource = 'slot') => ({ resource, holderId, fence });

describe('fence gate', () => {
  test('commit runs fn and returns what it returns', () => {
    const gate = new FenceGate('slot');
    const calls = [];
    assert.equal(gate.commit(tok('a', 1), () => { calls.push('write'); return 'done'; }), 'done');
    assert.deepEqual(calls, ['write']);
    assert.equal(gate.floor, 1);
    assert.equal(gate.resource, 'slot');
  });

  test('a stale token is refused, fn does not run, and the refusal is logged', () => {
    const gate = new FenceGate('slot');
    gate.commit(tok('b', 2), () => {});
    let ran = false;
    assert.throws(() => gate.commit(tok('a', 1), () => { ran = true; }), (e) => {
      assert.ok(e instanceof StaleFenceError);
      assert.deepEqual(e.rejection, { seq: 1, resource: 'slot', refusedHolderId: 'a', refusedFence: 1, admittedHolderId: 'b', admittedFence: 2 });
      return true;
    });
    assert.equal(ran, false);
    assert.deepEqual(gate.rejections, [{ seq: 1, resource: 'slot', refusedHolderId: 'a', refusedFence: 1, admittedHolderId: 'b', admittedFence: 2 }]);
  });

  test('sequence numbers count refusals', () => {
    const gate = new FenceGate('slot');
    gate.admit(tok('z', 10));
    for (let f = 1; f <= 3; f++) assert.throws(() => gate.commit(tok(`h${f}`, f), () => {}), StaleFenceError);
    assert.deepEqual(gate.rejections.map((r) => [r.seq, r.refusedHolderId]), [[1, 'h1'], [2, 'h2'], [3, 'h3']]);
  });

  test('rejections is a copy', () => {
    const gate = new FenceGate('slot');
    gate.admit(tok('b', 2));
    assert.throws(() => gate.admit(tok('a', 1)), StaleFenceError);
    const log = gate.rejections;
    log.pop();
    assert.equal(gate.rejections.length, 1);
    assert.ok(Object.isFrozen(gate.rejections[0]));
  });

  test('the same fence writes again; a higher one raises the floor', () => {
    const gate = new FenceGate('slot');
    gate.commit(tok('a', 1), () => {});
    gate.commit(tok('a', 1), () => {});
    gate.commit(tok('b', 5), () => {});
    assert.equal(gate.floor, 5);
    assert.equal(gate.rejections.length, 0);
  });

  test('if fn throws, the same error reaches the caller and the floor stays raised', () => {
    const gate = new FenceGate('slot');
    const boom = new Error('half written');
    assert.throws(() => gate.commit(tok('b', 3), () => { throw boom; }), (e) => e === boom);
    assert.equal(gate.floor, 3);
    assert.throws(() => gate.commit(tok('a', 2), () => {}), StaleFenceError);
  });

  test('a thrown non-Error value also passes through unchanged', () => {
    const gate = new FenceGate('slot');
    const value = { not: 'an error' };
    assert.throws(() => gate.commit(tok('a', 1), () => { throw value; }), (e) => e === value);
  });

  test('inside fn, a reentrant commit with an older fence is refused', () => {
    const gate = new FenceGate('slot');
    gate.commit(tok('a', 1), () => {});
    let inner;
    gate.commit(tok('b', 2), () => {
      try {
        gate.commit(tok('a', 1), () => { inner = 'ran'; });
      } catch (e) {
        inner = e;
      }
    });
    assert.ok(inner instanceof StaleFenceError);
    assert.equal(inner.rejection.admittedFence, 2);
  });

  test('inside fn, a reentrant commit with the same or a higher fence runs (no deadlock)', () => {
    const gate = new FenceGate('slot');
    const order = [];
    const result = gate.commit(tok('a', 1), () => {
      order.push('outer');
      gate.commit(tok('a', 1), () => order.push('same'));
      return gate.commit(tok('b', 2), () => { order.push('higher'); return 'inner result'; });
    });
    assert.equal(result, 'inner result');
    assert.deepEqual(order, ['outer', 'same', 'higher']);
    assert.equal(gate.floor, 2);
  });

  test('initialFloor refuses fences below it, logged with no admitted holder', () => {
    const gate = new FenceGate('slot', { initialFloor: 7 });
    assert.equal(gate.floor, 7);
    assert.throws(() => gate.commit(tok('a', 6), () => {}), (e) => e instanceof StaleFenceError && e.rejection.admittedHolderId === null && e.rejection.admittedFence === 7);
    gate.commit(tok('a', 7), () => {});
  });

  test('admit pushes a new generation before it writes', () => {
    const gate = new FenceGate('slot');
    gate.commit(tok('a', 1), () => {});
    gate.admit(tok('b', 2));
    assert.throws(() => gate.commit(tok('a', 1), () => {}), StaleFenceError);
    assert.throws(() => gate.admit(tok('a', 1)), StaleFenceError);
    assert.equal(gate.rejections.length, 2);
  });

  test('a token for another resource is refused without logging or moving the floor', () => {
    const gate = new FenceGate('slot');
    assert.throws(() => gate.commit(tok('a', 9, 'other'), () => {}), (e) => e instanceof InvalidArgumentError && /presented to the gate/.test(e.message));
    assert.equal(gate.floor, 0);
    assert.equal(gate.rejections.length, 0);
  });

  test('bad tokens and callbacks are refused before the floor moves', () => {
    const gate = new FenceGate('slot');
    const cases = [
      [[tok('a', 3), 'not a function'], 'fn'], [[tok('a', 3)], 'fn'], [[null, () => {}], 'token'],
      [[tok('', 3), () => {}], 'token.holderId'], [[tok('a', 0), () => {}], 'token.fence'],
      [[tok('a', -1), () => {}], 'token.fence'], [[tok('a', 1.5), () => {}], 'token.fence'],
      [[tok('a', 2 ** 53), () => {}], 'token.fence'], [[{ resource: 'slot', holderId: 'a', fence: '3' }, () => {}], 'token.fence'],
    ];
    for (const [args, argument] of cases) {
      assert.throws(() => gate.commit(...args), (e) => e instanceof InvalidArgumentError && e.argument === argument, argument);
    }
    assert.equal(gate.floor, 0);
  });

  test('the constructor checks its arguments', () => {
    assert.throws(() => new FenceGate(''), (e) => e instanceof InvalidArgumentError && e.argument === 'resource');
    assert.throws(() => new FenceGate('slot', { initialFloor: -1 }), (e) => e.argument === 'options.initialFloor');
    assert.throws(() => new FenceGate('slot', 3), (e) => e.argument === 'options');
  });

  test('an async fn is refused before it runs, pointing to commitAsync', () => {
    const gate = new FenceGate('slot');
    let ran = false;
    assert.throws(() => gate.commit(tok('a', 4), async () => { ran = true; }),
      (e) => e instanceof InvalidArgumentError && e.argument === 'fn' && /commitAsync/.test(e.message));
    assert.equal(ran, false);
    assert.equal(gate.floor, 0);
    assert.equal(gate.rejections.length, 0);
  });
  test('the log keeps the newest maxRejections refusals (1000 by default); rejectionCount counts all', () => {
    const gate = new FenceGate('slot');
    gate.admit(tok('b', 5000));
    for (let f = 1; f <= 1500; f++) assert.throws(() => gate.commit(tok('a', f), () => {}), StaleFenceError);
    const log = gate.rejections;
    assert.equal(log.length, 1000);
    assert.equal(log[0].seq, 501);
    assert.equal(log[999].seq, 1500);
    assert.equal(log[999].refusedFence, 1500);
    assert.equal(gate.rejectionCount, 1500);

    const small = new FenceGate('slot', { maxRejections: 3 });
    small.admit(tok('b', 100));
    assert.deepEqual(small.rejections, []);
    assert.equal(small.rejectionCount, 0);
    for (let f = 1; f <= 2; f++) assert.throws(() => small.admit(tok('a', f)), StaleFenceError);
    assert.deepEqual(small.rejections.map((r) => r.seq), [1, 2]);
    for (let f = 3; f <= 10; f++) assert.throws(() => small.admit(tok('a', f)), StaleFenceError);
    assert.deepEqual(small.rejections.map((r) => [r.seq, r.refusedFence]), [[8, 8], [9, 9], [10, 10]]);
    assert.equal(small.rejectionCount, 10);
    assert.throws(() => small.admit(tok('a', 11)), StaleFenceError);
    assert.deepEqual(small.rejections.map((r) => r.seq), [9, 10, 11], 'entries read before and new ones, trimmed to 3');
  });

  test('maxRejections is checked', () => {
    for (const bad of [-1, 1.5, 2 ** 20 + 1, '3', NaN]) {
      assert.throws(() => new FenceGate('slot', { maxRejections: bad }), (e) => e instanceof InvalidArgumentError && e.argument === 'options.maxRejections', String(bad));
    }
    assert.equal(new FenceGate('slot', { maxRejections: 2 ** 20 }).rejectionCount, 0);
  });

  test('holder ids and resources are at most 1024 bytes (UTF-8)', async () => {
    const gate = new FenceGate('slot');
    const ok = 'é'.repeat(512); // 1024 bytes
    const long = 'é'.repeat(513); // 1026 bytes
    gate.commit(tok(ok, 1), () => {});
    assert.throws(() => gate.commit(tok(long, 2), () => {}), (e) => e instanceof InvalidArgumentError && e.argument === 'token.holderId' && /1024 bytes/.test(e.message));
    assert.throws(() => gate.admit(tok(long, 2)), (e) => e instanceof InvalidArgumentError && e.argument === 'token.holderId');
    await assert.rejects(gate.commitAsync(tok(long, 2), async () => {}), (e) => e instanceof InvalidArgumentError && e.argument === 'token.holderId');
    assert.throws(() => new FenceGate('r'.repeat(1025)), (e) => e instanceof InvalidArgumentError && e.argument === 'resource');
    assert.equal(gate.floor, 1);
    assert.equal(gate.rejectionCount, 0);
  });
});
