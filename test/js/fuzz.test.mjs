// No input kills the instance: every export and method is called at least
// 100,000 times in total with random wrong values, each call either works or
// throws a LeaseFenceError, and afterwards a correct round trip still works.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as lf from 'lease-fence';
import { rng } from './helpers.mjs';

const CALLS = 120_000;

test(`${CALLS} calls with random wrong values, then a correct call`, () => {
  const random = rng(0xfeed);
  const pick = (xs) => xs[Math.floor(random() * xs.length)];

  // Live objects to call methods on and to pass in the wrong places.
  const mclock = lf.createManualClock('fuzz-m', { stepPerRead: 1 });
  const coordinator = new lf.LeaseCoordinator({ clock: lf.createManualClock('fuzz-c'), ttlMillis: 100 });
  const client = new lf.LeaseClient({ clock: mclock, holderId: 'fuzz-a' });
  const gate = new lf.FenceGate('fuzz-slot');
  const req = client.beginAcquire('fuzz-slot');
  const { grant } = coordinator.acquire(req);
  const lease = client.completeAcquire(req, grant);
  const naive = lf.createNaiveLease(mclock, 10);
  const instant = mclock.now();
  const longString = 'x'.repeat(100_000);

  const wrong = [
    undefined, null, NaN, Infinity, -Infinity, 0, -0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308, Number.MAX_VALUE,
    Number.MIN_VALUE, '', 'fuzz-slot', 'x'.repeat(300), longString, '\ud800', 'é✓😀', true, false, Symbol('s'), 10n,
    [], [1, 2, 3], ['fuzz-slot'], {}, Object.create(null), { resource: 5, holderId: [], fence: '1' },
    { millis: 'x', domain: 3 }, { millis: 1, domain: '' }, { kind: 'renew' }, { clock: 5, ttlMillis: -1 },
    { ...req, sentAt: null }, { ...req, kind: 'acquire', fence: 3 }, { ...grant, ttlMillis: 0 },
    { ...grant, coordinatorExpiresAt: 'later' }, { ...lease.token, fence: -1 }, { start: NaN, stepPerRead: -1 },
    { initialFloor: 1.5 }, () => {}, function named() { return 'not a number'; }, () => { throw new Error('from a callback'); },
    Math.max, mclock, coordinator, client, gate, lease, naive, instant, new Date(0), /re/, new Map(),
  ];
  const arg = () => pick(wrong);
  const args = () => Array.from({ length: Math.floor(random() * 4) }, arg);

  const getter = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
  const targets = {
    createMonotonicClock: () => lf.createMonotonicClock(...args()),
    createManualClock: () => lf.createManualClock(...args()),
    createClock: () => lf.createClock(...args()),
    createNaiveLease: () => lf.createNaiveLease(...args()),
    LeaseCoordinator: () => new lf.LeaseCoordinator(...args()),
    LeaseClient: () => new lf.LeaseClient(...args()),
    FenceGate: () => new lf.FenceGate(...args()),
    'clock.now': () => mclock.now.call(pick([mclock, arg()])),
    'clock.advance': () => mclock.advance(arg()),
    'clock.set': () => mclock.set(arg()),
    'instant.since': () => instant.since.call(pick([instant, arg()]), arg()),
    'coordinator.acquire': () => coordinator.acquire(arg()),
    'coordinator.renew': () => coordinator.renew(arg()),
    'coordinator.release': () => coordinator.release(arg()),
    'coordinator.issuedFence': () => getter(lf.LeaseCoordinator.prototype, 'issuedFence').call(pick([coordinator, arg()])),
    'client.beginAcquire': () => client.beginAcquire(arg()),
    'client.completeAcquire': () => client.completeAcquire(arg(), arg()),
    'client.beginRenewal': () => client.beginRenewal(arg()),
    'client.completeRenewal': () => client.completeRenewal(arg(), arg()),
    'lease.hasExpired': () => lease.hasExpired.call(pick([lease, arg()])),
    'lease.wouldAdmit': () => lease.wouldAdmit(arg()),
    'gate.commit': () => gate.commit(arg(), arg()),
    'gate.admit': () => gate.admit(arg()),
    'gate.floor': () => getter(lf.FenceGate.prototype, 'floor').call(pick([gate, arg()])),
    'gate.rejections': () => getter(lf.FenceGate.prototype, 'rejections').call(pick([gate, arg()])),
    'naive.valid': () => naive.valid.call(pick([naive, arg()])),
    'naive.renewed': () => naive.renewed.call(pick([naive, arg()])),
    'clock.domain': () => getter(Object.getPrototypeOf(lf.createManualClock('d').constructor.prototype), 'domain').call(pick([mclock, arg()])),
    'coordinator.clock': () => getter(lf.LeaseCoordinator.prototype, 'clock').call(pick([coordinator, arg()])),
    'coordinator.ttlMillis': () => getter(lf.LeaseCoordinator.prototype, 'ttlMillis').call(pick([coordinator, arg()])),
    'client.holderId': () => getter(lf.LeaseClient.prototype, 'holderId').call(pick([client, arg()])),
    'client.clock': () => getter(lf.LeaseClient.prototype, 'clock').call(pick([client, arg()])),
    'client.completeAcquire(this)': () => client.completeAcquire.call(arg(), req, grant),
    'gate.resource': () => getter(lf.FenceGate.prototype, 'resource').call(pick([gate, arg()])),
    'naive.expiresAt': () => getter(Object.getPrototypeOf(naive), 'expiresAt').call(pick([naive, arg()])),
  };
  const names = Object.keys(targets);
  const calls = Object.fromEntries(names.map((n) => [n, 0]));
  const outcomes = { returned: 0, threw: 0 };
  const foreign = [];

  for (let i = 0; i < CALLS; i++) {
    const name = names[i % names.length];
    calls[name]++;
    try {
      targets[name]();
      outcomes.returned++;
    } catch (e) {
      outcomes.threw++;
      // Everything the library refuses is a LeaseFenceError; an error thrown
      // by a callback passed as an argument reaches the caller unchanged.
      const ours = e instanceof lf.LeaseFenceError && !/internal error/.test(e.message);
      if (!ours && !(e instanceof Error && e.message === 'from a callback')) {
        foreign.push(`${name}: ${e && e.name}: ${e && e.message}`);
      }
    }
  }

  assert.deepEqual(foreign.slice(0, 5), [], `${foreign.length} calls threw something other than a LeaseFenceError (or an internal error)`);
  assert.equal(Object.values(calls).reduce((x, y) => x + y), CALLS);
  for (const name of names) assert.ok(calls[name] >= CALLS / names.length - 1, `${name} called ${calls[name]} times`);
  assert.ok(outcomes.threw > CALLS / 2, `most calls must be refused (${JSON.stringify(outcomes)})`);

  // The instance is alive and correct: the spec's round trip on fresh objects.
  const c2 = new lf.LeaseCoordinator({ clock: lf.createManualClock('after-c'), ttlMillis: 1000 });
  const a2 = new lf.LeaseClient({ clock: lf.createManualClock('after-a'), holderId: 'after-a', clockSkewMillis: 10 });
  const g2 = new lf.FenceGate('after-slot');
  const r2 = a2.beginAcquire('after-slot');
  const o2 = c2.acquire(r2);
  assert.equal(o2.ok, true);
  const l2 = a2.completeAcquire(r2, o2.grant);
  assert.equal(l2.deadline.millis, 990);
  assert.equal(g2.commit(l2.token, () => 'still works'), 'still works');
  assert.equal(g2.floor, 1);
  // And the objects the fuzz hammered still answer.
  assert.equal(typeof gate.floor, 'number');
  assert.ok(coordinator.issuedFence >= 1);
});
