// gate.commit has a fast path (token strings passed to Go as interned ids)
// and a general one (every argument encoded). They must be indistinguishable.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FenceGate, InvalidArgumentError, StaleFenceError } from 'lease-fence';

const wasmCalls = () => FenceGate[Symbol.for('lease-fence.wasmCalls')];
// How many calls into wasm fn makes.
function crossings(fn) {
  const before = wasmCalls();
  fn();
  return wasmCalls() - before;
}

// Runs one write on a fresh gate whose floor is 5, either with commit (the
// fast path for a well-typed token) or as admit followed by the write (admit
// always takes the general path). commit(token, fn) must behave exactly as
// admit(token) and then fn().
function outcome(token, how = 'commit', fn = () => 'ran') {
  const gate = new FenceGate('slot');
  gate.admit({ resource: 'slot', holderId: 'floor-holder', fence: 5 });
  try {
    const value = how === 'commit' ? gate.commit(token, fn) : (gate.admit(token), fn());
    return { value, floor: gate.floor, rejections: gate.rejections };
  } catch (e) {
    return { error: e.name, message: e.message, argument: e.argument, rejection: e.rejection, floor: gate.floor };
  }
}

describe('gate.commit fast path', () => {
  const cases = {
    admitted: { resource: 'slot', holderId: 'agent-a', fence: 5 },
    raised: { resource: 'slot', holderId: 'agent-a', fence: 6 },
    stale: { resource: 'slot', holderId: 'agent-a', fence: 4 },
    'other resource': { resource: 'other', holderId: 'agent-a', fence: 9 },
    'empty holder': { resource: 'slot', holderId: '', fence: 9 },
    'empty resource': { resource: '', holderId: 'a', fence: 9 },
    'NaN fence': { resource: 'slot', holderId: 'a', fence: NaN },
    'fractional fence': { resource: 'slot', holderId: 'a', fence: 6.5 },
    'zero fence': { resource: 'slot', holderId: 'a', fence: 0 },
    'huge fence': { resource: 'slot', holderId: 'a', fence: 2 ** 60 },
    'long holder (too long to intern)': { resource: 'slot', holderId: 'h'.repeat(100), fence: 7 },
    'non-ASCII holder': { resource: 'slot', holderId: 'agent-é😀', fence: 7 },
    'lone surrogate holder': { resource: 'slot', holderId: 'x\ud800', fence: 7 },
  };

  for (const [name, token] of Object.entries(cases)) {
    test(`${name}: the same result by both paths`, () => {
      assert.deepEqual(outcome(token, 'commit'), outcome(token, 'admit'));
    });
  }

  test('expected results', () => {
    assert.equal(outcome(cases.admitted).value, 'ran');
    assert.equal(outcome(cases.raised).floor, 6);
    assert.equal(outcome(cases.stale).error, 'StaleFenceError');
    assert.equal(outcome(cases['NaN fence']).argument, 'token.fence');
    assert.equal(outcome(cases['empty holder']).argument, 'token.holderId');
    assert.equal(outcome(cases['long holder (too long to intern)']).value, 'ran');
    assert.equal(outcome(cases['non-ASCII holder']).value, 'ran');
    assert.equal(outcome(cases['lone surrogate holder']).argument, 'token.holderId');
  });

  test('more distinct holders than the intern table holds', () => {
    const gate = new FenceGate('slot');
    for (let i = 1; i <= 10_000; i++) gate.commit({ resource: 'slot', holderId: `h${i}`, fence: i }, () => {});
    assert.equal(gate.floor, 10_000);
    assert.throws(() => gate.commit({ resource: 'slot', holderId: 'h1', fence: 1 }, () => {}),
      (e) => e instanceof StaleFenceError && e.rejection.admittedHolderId === 'h10000' && e.rejection.refusedHolderId === 'h1');
  });

  test('a token of empty strings right after the intern table was reset is refused as on the general path', () => {
    // A commit whose holder cannot be interned, when the table is full,
    // resets it and leaves no last token: the ids the last token had must
    // not be taken for the next token's, even one whose strings are empty.
    const gate = new FenceGate('slot');
    const long = 'h'.repeat(100);
    for (let i = 1; i <= 4_200; i++) {
      gate.commit({ resource: 'slot', holderId: `h${i}`, fence: i }, () => {});
      gate.commit({ resource: 'slot', holderId: long, fence: i }, () => {});
      assert.throws(() => gate.commit({ resource: '', holderId: '', fence: i }, () => assert.fail('the write ran')),
        (e) => e instanceof InvalidArgumentError && e.argument === 'token.resource', `after ${i} holders`);
    }
  });

  test('a token with getters is read once', () => {
    const gate = new FenceGate('slot');
    let reads = 0;
    const token = {
      get resource() { reads++; return 'slot'; },
      get holderId() { reads++; return reads > 2 ? 'changed' : 'a'; },
      get fence() { reads++; return 1; },
    };
    gate.commit(token, () => {});
    assert.equal(reads, 3);
    assert.throws(() => gate.commit({ resource: 'slot', holderId: 'a', fence: 1 }, 'x'), InvalidArgumentError);
  });

  test('only a commit with exactly the admitted token skips Go; every refusal, reentrancy and admit goes through it', async () => {
    const gate = new FenceGate('slot');
    const uuid = '6f1c2b9e-8d4a-4c1e-9b7f-3a2d5e6f7a8b';
    const t = (holderId, fence, resource = 'slot') => ({ resource, holderId, fence });
    const ok = () => {};
    const refused = (fn, cls) => () => assert.throws(fn, cls);

    assert.ok(crossings(() => gate.commit(t(uuid, 3), ok)) >= 1, 'the first commit of a generation');
    assert.equal(crossings(() => gate.commit(t(uuid, 3), ok)), 0, 'the admitted token again, a 36-character holder');
    assert.equal(crossings(() => gate.commit({ ...t(uuid, 3) }, ok)), 0, 'an equal token object');
    const cases = {
      'same holder, newer fence': () => gate.commit(t(uuid, 4), ok),
      'same fence, another holder': () => gate.commit(t('other', 4), ok),
      'a stale fence (refused)': refused(() => gate.commit(t(uuid, 3), ok), StaleFenceError),
      'another resource (refused)': refused(() => gate.commit(t('other', 4, 'elsewhere'), ok), InvalidArgumentError),
      'fn not a function (refused)': refused(() => gate.commit(t('other', 4), 'write'), InvalidArgumentError),
      'admit of the admitted token': () => gate.admit(t('other', 4)),
      'admit of a newer fence': () => gate.admit(t('b', 5)),
      'the old generation after admit (refused)': refused(() => gate.commit(t('other', 4), ok), StaleFenceError),
      'a stale admit (refused)': refused(() => gate.admit(t('a', 1)), StaleFenceError),
      'reentrant, same token': () => gate.commit(t('b', 5), () => gate.commit(t('b', 5), ok)),
      'reentrant, older fence (refused)': () => gate.commit(t('b', 5), () => assert.throws(() => gate.commit(t('a', 2), ok), StaleFenceError)),
    };
    for (const [name, fn] of Object.entries(cases)) {
      const n = crossings(fn);
      assert.ok(n >= 1, `${name}: ${n} calls into Go`);
    }
    // The reentrant cases: the inner commit itself crosses, not only the outer.
    gate.commit(t('b', 5), ok);
    assert.equal(crossings(() => gate.commit(t('b', 5), ok)), 0);
    assert.equal(crossings(() => gate.commit(t('b', 5), () => gate.commit(t('b', 5), ok))), 1, 'the inner one');
    // commitAsync always takes the full path, even with the admitted token.
    const before = wasmCalls();
    await gate.commitAsync(t('b', 5), ok);
    assert.ok(wasmCalls() > before);
    // Refusals are logged by Go, and the admitted token still skips Go.
    assert.deepEqual(gate.rejections.map((r) => [r.refusedHolderId, r.refusedFence]), [[uuid, 3], ['other', 4], ['a', 1], ['a', 2]]);
    assert.equal(crossings(() => gate.commit(t('b', 5), ok)), 0);
    assert.equal(gate.floor, 5);
  });
});
