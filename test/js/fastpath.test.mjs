// gate.commit has a fast path (token strings passed to Go as interned ids)
// and a general one (every argument encoded). They must be indistinguishable.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FenceGate, InvalidArgumentError, StaleFenceError } from 'lease-fence';

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
});
