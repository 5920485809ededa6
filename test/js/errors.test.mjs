// Error classes: exported by name, real Error subclasses, instanceof and name.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as lf from 'lease-fence';
import { acquire, world } from './helpers.mjs';

const classes = ['InvalidArgumentError', 'StaleFenceError', 'ClockDomainError', 'ClockReadingError', 'RequestCompletedError', 'GrantMismatchError',
  'SupersededError', 'GateBusyError'];

describe('errors', () => {
  test('every class is exported, extends LeaseFenceError and Error, and has its name', () => {
    assert.equal(typeof lf.LeaseFenceError, 'function');
    for (const name of classes) {
      const cls = lf[name];
      assert.equal(typeof cls, 'function', name);
      const e = new cls('message');
      assert.ok(e instanceof lf.LeaseFenceError && e instanceof Error, name);
      assert.equal(e.name, name);
      assert.equal(e.message, 'message');
      assert.match(String(e), new RegExp(`^${name}: message`));
    }
    assert.equal(new lf.LeaseFenceError('x').name, 'LeaseFenceError');
  });

  test('constructors take (message, options): cause as Error has it, the fields by name', () => {
    const cause = new Error('why');
    const invalid = new lf.InvalidArgumentError('m', { cause });
    assert.equal(invalid.cause, cause);
    assert.equal(invalid.argument, '');
    assert.equal(new lf.InvalidArgumentError('m', { argument: 'x', cause }).argument, 'x');
    assert.equal(new lf.InvalidArgumentError('m', 'token.fence').argument, 'token.fence');
    assert.equal('cause' in new lf.InvalidArgumentError('m', 'x'), false);
    assert.equal(new lf.LeaseFenceError('m', { cause }).cause, cause);
    const rejection = { seq: 1, resource: 'r', refusedHolderId: 'a', refusedFence: 1, admittedHolderId: 'b', admittedFence: 2 };
    const stale = new lf.StaleFenceError('m', { rejection, cause });
    assert.equal(stale.rejection, rejection);
    assert.equal(stale.cause, cause);
    assert.deepEqual({ ...new lf.ClockDomainError('m', { expectedDomain: 'a', actualDomain: 'b' }) }, { expectedDomain: 'a', actualDomain: 'b' });
    assert.deepEqual({ ...new lf.ClockReadingError('m', { domain: 'd', problem: 'infinite', value: Infinity, previous: 1 }) },
      { domain: 'd', problem: 'infinite', value: Infinity, previous: 1 });
    assert.deepEqual({ ...new lf.RequestCompletedError('m', { requestId: 'q' }) }, { requestId: 'q' });
    assert.deepEqual({ ...new lf.GrantMismatchError('m', { field: 'fence', expected: '1', actual: '2' }) }, { field: 'fence', expected: '1', actual: '2' });
    const sup = { resource: 'r', holderId: 'a', fence: 1, newerHolderId: 'b', newerFence: 2, newerWaiting: true };
    assert.deepEqual({ ...new lf.SupersededError('m', { ...sup, cause }) }, sup);
    assert.equal(new lf.SupersededError('m', { ...sup, cause }).cause, cause);
    const busy = { resource: 'r', holderId: 'b', fence: 2, runningHolderId: 'a', runningFence: 1, runningMillis: 1500 };
    assert.deepEqual({ ...new lf.GateBusyError('m', { ...busy, cause }) }, busy);
  });

  test('thrown errors are instances of the right class with a stack', () => {
    const gate = new lf.FenceGate('slot');
    gate.admit({ resource: 'slot', holderId: 'b', fence: 2 });
    try {
      gate.commit({ resource: 'slot', holderId: 'a', fence: 1 }, () => {});
      assert.fail('not thrown');
    } catch (e) {
      assert.ok(e instanceof lf.StaleFenceError);
      assert.equal(e.name, 'StaleFenceError');
      assert.match(e.message, /stale write to "slot" refused/);
      assert.equal(typeof e.stack, 'string');
    }
  });

  test('each failure maps to its class', () => {
    const { coordinator, a, aClock } = world();
    const req = a.beginAcquire('slot');
    const { grant } = coordinator.acquire(req);
    a.completeAcquire(req, grant);
    const cases = [
      [() => a.completeAcquire(req, grant), lf.RequestCompletedError],
      [() => a.completeAcquire(a.beginAcquire('slot'), grant), lf.GrantMismatchError],
      [() => aClock.set(-1), lf.ClockReadingError],
      [() => aClock.now().since({ millis: 0, domain: 'coordinator' }), lf.ClockDomainError],
      [() => coordinator.acquire('request'), lf.InvalidArgumentError],
    ];
    for (const [fn, cls] of cases) assert.throws(fn, cls);
  });

  test('internal classes cannot be constructed by callers', () => {
    const { coordinator, a } = world();
    const lease = acquire(coordinator, a);
    assert.throws(() => new lease.constructor(), (e) => e instanceof lf.InvalidArgumentError && /made by the library/.test(e.message));
    assert.throws(() => new (lf.createManualClock('m').constructor)(), lf.InvalidArgumentError);
  });

  test('a method called on the wrong object throws InvalidArgumentError naming this', () => {
    const gate = new lf.FenceGate('slot');
    const clock = lf.createManualClock('m');
    assert.throws(() => lf.FenceGate.prototype.commit.call({}, { resource: 'slot', holderId: 'a', fence: 1 }, () => {}), (e) => e instanceof lf.InvalidArgumentError && e.argument === 'this');
    assert.throws(() => clock.now.call(gate), (e) => e.argument === 'this' && /not a live clock/.test(e.message));
    assert.throws(() => Object.getOwnPropertyDescriptor(lf.FenceGate.prototype, 'floor').get.call(clock), (e) => e.argument === 'this');
  });

  test('the module namespace has exactly the documented exports', () => {
    assert.deepEqual(Object.keys(lf).sort(), [
      'ClockDomainError', 'ClockReadingError', 'FenceGate', 'GateBusyError', 'GrantMismatchError', 'InvalidArgumentError', 'LeaseClient',
      'LeaseCoordinator', 'LeaseFenceError', 'RequestCompletedError', 'StaleFenceError', 'SupersededError', 'createClock', 'createManualClock',
      'createMonotonicClock', 'createNaiveLease', 'init', 'isStaleFence',
    ]);
  });
});

describe('re-entry while arguments are read', () => {
  test('a getter that calls into the library makes the outer call fail without effect', () => {
    const gate = new lf.FenceGate('slot');
    const other = new lf.FenceGate('other');
    const token = {
      resource: 'slot',
      holderId: 'a',
      get fence() {
        other.admit({ resource: 'other', holderId: 'b', fence: 9 }); // runs, and is complete
        return 3;
      },
    };
    assert.throws(() => gate.admit(token), (e) => e instanceof lf.LeaseFenceError && /getter called into lease-fence/.test(e.message));
    assert.equal(gate.floor, 0, 'the outer call did nothing');
    assert.equal(other.floor, 9, 'the inner call did what it was asked');
    gate.admit({ resource: 'slot', holderId: 'a', fence: 3 });
    assert.equal(gate.floor, 3, 'the library works afterwards');
  });

  test('a getter that throws leaves the library usable', () => {
    const gate = new lf.FenceGate('slot');
    const boom = new Error('getter failed');
    assert.throws(() => gate.admit({ resource: 'slot', holderId: 'a', get fence() { throw boom; } }), (e) => e === boom);
    gate.admit({ resource: 'slot', holderId: 'a', fence: 1 });
    assert.equal(gate.floor, 1);
  });
});
