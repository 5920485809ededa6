// The client: send-time anchoring, single-use requests, grants that do not match.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createManualClock, ClockDomainError, FenceGate, GrantMismatchError, InvalidArgumentError, LeaseClient, LeaseCoordinator,
  RequestCompletedError,
} from 'lease-fence';
import { acquire, rng, world } from './helpers.mjs';

describe('send-time anchoring', () => {
  test('deadline = sentAt + ttl - skew, however late the reply', () => {
    const { coordinator, coordClock, aClock, a } = world({ ttlMillis: 1000, skew: 50 });
    aClock.set(200);
    const req = a.beginAcquire('slot');
    assert.deepEqual({ ...req.sentAt }, { millis: 200, domain: 'agent-a' });
    coordClock.advance(40);
    const out = coordinator.acquire(req);
    aClock.advance(860); // the reply is slow
    const lease = a.completeAcquire(req, out.grant);
    assert.deepEqual({ ...lease.deadline }, { millis: 200 + 1000 - 50, domain: 'agent-a' });
  });

  test('the spec\'s slow renewal: the holder\'s deadline stays inside the coordinator\'s', () => {
    // t=0 A sends a renewal; t=40 the coordinator extends to 1040; t=900 the reply lands.
    const { coordinator, coordClock, aClock, a } = world({ ttlMillis: 1000 });
    const lease = acquire(coordinator, a);
    const req = a.beginRenewal(lease);
    coordClock.advance(40);
    const out = coordinator.renew(req);
    assert.equal(out.grant.coordinatorExpiresAt.millis, 1040);
    aClock.advance(900);
    const renewed = a.completeRenewal(req, out.grant);
    assert.equal(renewed.deadline.millis, 1000, 'anchored at the send, not at the reply (which would say 1900)');
    assert.equal(renewed.token.fence, lease.token.fence);
    assert.equal(lease.deadline.millis, 1000, 'the old lease object keeps its own deadline');
  });

  test('the holder\'s window is inside the coordinator\'s over 200 seeded round trips', () => {
    const random = rng(20260101);
    for (let i = 0; i < 200; i++) {
      // One shared timeline: both clocks read the same "true" time, offset by
      // an unknown constant, so containment can be checked in true time.
      const offset = Math.floor(random() * 1e6);
      let trueNow = 0;
      const coordClock = createManualClock('coordinator');
      const aClock = createManualClock('agent-a', { start: offset });
      const ttl = 100 + Math.floor(random() * 1000);
      const coord = new LeaseCoordinator({ clock: coordClock, ttlMillis: ttl });
      const client = new LeaseClient({ clock: aClock, holderId: 'agent-a', clockSkewMillis: 0 });
      const step = (ms) => { trueNow += ms; coordClock.advance(ms); aClock.advance(ms); };
      step(random() * 100);
      const req = client.beginAcquire('slot');
      const sentTrue = trueNow;
      step(random() * 500); // request in flight
      const out = coord.acquire(req);
      const coordEndTrue = out.grant.coordinatorExpiresAt.millis; // coordinator clock == true time
      step(random() * 2000); // reply in flight
      const lease = client.completeAcquire(req, out.grant);
      const holderEndTrue = lease.deadline.millis - offset;
      assert.ok(holderEndTrue <= coordEndTrue, `round trip ${i}: holder ends at ${holderEndTrue}, coordinator at ${coordEndTrue}`);
      assert.equal(holderEndTrue, sentTrue + ttl);
    }
  });

  test('hasExpired is advisory and reads the client\'s clock', () => {
    const { coordinator, aClock, a } = world({ ttlMillis: 100 });
    const lease = acquire(coordinator, a);
    assert.equal(lease.hasExpired(), false);
    aClock.advance(99);
    assert.equal(lease.hasExpired(), false);
    aClock.advance(1);
    assert.equal(lease.hasExpired(), true);
  });

  test('wouldAdmit answers for the instant it is called', () => {
    const { coordinator, a } = world();
    const lease = acquire(coordinator, a);
    const gate = new FenceGate('slot');
    assert.equal(lease.wouldAdmit(gate), true);
    gate.admit({ resource: 'slot', holderId: 'agent-b', fence: lease.token.fence + 1 });
    assert.equal(lease.wouldAdmit(gate), false);
    assert.throws(() => lease.wouldAdmit({ floor: 0 }), (e) => e instanceof InvalidArgumentError && e.argument === 'gate');
  });

  test('measuring the deadline against coordinatorExpiresAt throws ClockDomainError', () => {
    const { coordinator, a } = world();
    const lease = acquire(coordinator, a);
    assert.throws(() => lease.deadline.since(lease.grant.coordinatorExpiresAt), ClockDomainError);
  });
});

describe('protocol misuse', () => {
  test('completing a request twice throws RequestCompletedError', () => {
    const { coordinator, a } = world();
    const req = a.beginAcquire('slot');
    const out = coordinator.acquire(req);
    a.completeAcquire(req, out.grant);
    assert.throws(() => a.completeAcquire(req, out.grant), (e) => e instanceof RequestCompletedError && e.requestId === req.requestId);
  });

  test('a grant for another request, resource or holder throws GrantMismatchError and leaves the request open', () => {
    const { coordinator, a } = world();
    const req = a.beginAcquire('slot');
    const { grant } = coordinator.acquire(req);
    for (const [field, bad] of [['requestId', 'zzz'], ['resource', 'other'], ['holderId', 'agent-b']]) {
      assert.throws(() => a.completeAcquire(req, { ...grant, [field]: bad }),
        (e) => e instanceof GrantMismatchError && e.field === field && e.actual === bad && e.expected === req[field]);
    }
    assert.equal(a.completeAcquire(req, grant).token.fence, grant.fence);
  });

  test('a renewal grant with another fence is a mismatch', () => {
    const { coordinator, a } = world();
    const lease = acquire(coordinator, a);
    const req = a.beginRenewal(lease);
    const { grant } = coordinator.renew(req);
    assert.throws(() => a.completeRenewal(req, { ...grant, fence: grant.fence + 1 }), (e) => e instanceof GrantMismatchError && e.field === 'fence');
  });

  test('an altered or foreign request is refused', () => {
    const { coordinator, a, b } = world();
    const req = a.beginAcquire('slot');
    const { grant } = coordinator.acquire(req);
    assert.throws(() => a.completeAcquire({ ...req, sentAt: { millis: -5, domain: 'agent-a' } }, grant), (e) => e instanceof InvalidArgumentError && /altered/.test(e.message));
    assert.throws(() => b.completeAcquire(req, grant), InvalidArgumentError);
  });

  test('beginRenewal refuses another client\'s lease and non-leases', () => {
    const { coordinator, a, b } = world();
    const lease = acquire(coordinator, a);
    assert.throws(() => b.beginRenewal(lease), (e) => e instanceof InvalidArgumentError && /another client/.test(e.message));
    assert.throws(() => a.beginRenewal({ ...lease }), (e) => e.argument === 'lease');
    assert.throws(() => a.beginRenewal(undefined), (e) => e.argument === 'lease');
  });

  test('a lease is plain data that cannot be forged: only completeAcquire/completeRenewal make one', () => {
    const { coordinator, aClock, a } = world({ ttlMillis: 1000 });
    const gate = new FenceGate('slot');
    const lease = acquire(coordinator, a);
    assert.ok(Object.isFrozen(lease) && Object.isFrozen(lease.token));
    const Lease = lease.constructor;
    assert.throws(() => new Lease(undefined, lease.token, lease.deadline, lease.grant, a.clock), (e) => e instanceof InvalidArgumentError);
    const forged = [
      Object.create(Object.getPrototypeOf(lease)),
      Object.assign(Object.create(Object.getPrototypeOf(lease)), lease),
      { ...lease, token: { ...lease.token, fence: lease.token.fence + 1 } },
    ];
    for (const f of forged) {
      assert.throws(() => a.beginRenewal(f), (e) => e instanceof InvalidArgumentError && e.argument === 'lease');
      assert.throws(() => lease.hasExpired.call(f), (e) => e instanceof InvalidArgumentError && e.argument === 'this');
      assert.throws(() => lease.wouldAdmit.call(f, gate), (e) => e instanceof InvalidArgumentError && e.argument === 'this');
    }
    // Changing what the caller can change (the deadline object is not
    // frozen) does not change what the lease is.
    lease.deadline.millis += 1e9;
    lease.deadline.domain = 'elsewhere';
    aClock.advance(1000);
    assert.equal(lease.hasExpired(), true);
    const req = a.beginRenewal(lease);
    assert.equal(req.fence, lease.token.fence);
    assert.equal(lease.wouldAdmit(gate), true);
  });

  test('the client constructor and beginAcquire check their arguments', () => {
    const clock = createManualClock('c');
    assert.throws(() => new LeaseClient({ clock, holderId: '' }), (e) => e.argument === 'options.holderId');
    assert.throws(() => new LeaseClient({ clock, holderId: 'h', clockSkewMillis: -1 }), (e) => e.argument === 'options.clockSkewMillis');
    assert.throws(() => new LeaseClient(null), (e) => e.argument === 'options');
    const c = new LeaseClient({ clock, holderId: 'h' });
    assert.throws(() => c.beginAcquire(''), (e) => e.argument === 'resource');
    assert.throws(() => c.beginAcquire(['slot']), (e) => e.argument === 'resource');
    assert.equal(c.holderId, 'h');
    assert.equal(c.clock, clock);
  });

  test('request ids are unique', () => {
    const { a } = world();
    const ids = new Set();
    for (let i = 0; i < 1000; i++) ids.add(a.beginAcquire('slot').requestId);
    assert.equal(ids.size, 1000);
  });
});
