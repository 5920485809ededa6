// The coordinator: fence ordering, denials, renewal, expiry, release, replay.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createClock, createManualClock, ClockReadingError, InvalidArgumentError, LeaseClient, LeaseCoordinator } from 'lease-fence';
import { acquire, world } from './helpers.mjs';

describe('fence ordering', () => {
  test('the first grant carries fence 1, then fences only rise', () => {
    const { coordinator, coordClock, a, b } = world();
    assert.equal(coordinator.issuedFence, 0);
    const first = acquire(coordinator, a);
    assert.equal(first.token.fence, 1);
    coordClock.advance(1000);
    const second = acquire(coordinator, b);
    assert.equal(second.token.fence, 2);
    assert.equal(coordinator.issuedFence, 2);
  });

  test('a held resource is denied, with its holder and the time left', () => {
    const { coordinator, coordClock, a, b } = world({ ttlMillis: 1000 });
    acquire(coordinator, a);
    coordClock.advance(300);
    const outcome = coordinator.acquire(b.beginAcquire('slot'));
    assert.deepEqual(outcome, { ok: false, heldBy: 'agent-a', retryAfterMillis: 700 });
  });

  test('the holder itself is denied a second acquisition', () => {
    const { coordinator, a } = world();
    acquire(coordinator, a);
    const outcome = coordinator.acquire(a.beginAcquire('slot'));
    assert.equal(outcome.ok, false);
    assert.equal(outcome.heldBy, 'agent-a');
    assert.equal(coordinator.issuedFence, 1, 'no fence was burnt');
  });

  test('resources are independent', () => {
    const { coordinator, a, b } = world();
    assert.equal(acquire(coordinator, a, 'x').token.fence, 1);
    assert.equal(acquire(coordinator, b, 'y').token.fence, 2);
  });

  test('startFence resumes above a persisted issuedFence', () => {
    const { coordinator, a } = world({ startFence: 41 });
    assert.equal(coordinator.issuedFence, 41);
    assert.equal(acquire(coordinator, a).token.fence, 42);
    const successor = new LeaseCoordinator({ clock: createManualClock('c2'), ttlMillis: 10, startFence: coordinator.issuedFence });
    const req = a.beginAcquire('slot');
    const out = successor.acquire(req);
    assert.equal(out.grant.fence, 43);
  });

  test('the constructor checks its options', () => {
    const clock = createManualClock('c');
    const cases = [
      [undefined, 'options'], [{}, 'options.clock'], [{ clock, ttlMillis: 0 }, 'options.ttlMillis'],
      [{ clock, ttlMillis: -5 }, 'options.ttlMillis'], [{ clock, ttlMillis: NaN }, 'options.ttlMillis'],
      [{ clock, ttlMillis: 10, startFence: -1 }, 'options.startFence'], [{ clock, ttlMillis: 10, startFence: 1.5 }, 'options.startFence'],
      [{ clock, ttlMillis: 10, startFence: 2 ** 53 - 1 }, 'options.startFence'],
      [{ clock: { domain: 'c', now: () => ({ millis: 0, domain: 'c' }) }, ttlMillis: 10 }, 'options.clock'],
    ];
    for (const [options, argument] of cases) {
      assert.throws(() => new LeaseCoordinator(options), (e) => e instanceof InvalidArgumentError && e.argument === argument, argument);
    }
  });
});

describe('renewal and expiry', () => {
  test('a renewal keeps the fence and extends from the coordinator\'s reading', () => {
    const { coordinator, coordClock, a } = world({ ttlMillis: 1000 });
    const lease = acquire(coordinator, a);
    coordClock.advance(600);
    const req = a.beginRenewal(lease);
    assert.equal(req.kind, 'renew');
    assert.equal(req.fence, lease.token.fence);
    const out = coordinator.renew(req);
    assert.equal(out.ok, true);
    assert.equal(out.grant.fence, lease.token.fence);
    assert.deepEqual({ ...out.grant.coordinatorExpiresAt }, { millis: 1600, domain: 'coordinator' });
  });

  test('an expired lease is never resurrected, even when nobody took the resource', () => {
    const { coordinator, coordClock, a } = world({ ttlMillis: 1000 });
    const lease = acquire(coordinator, a);
    coordClock.advance(1000);
    assert.deepEqual(coordinator.renew(a.beginRenewal(lease)), { ok: false, reason: 'expired' });
    const again = acquire(coordinator, a);
    assert.ok(again.token.fence > lease.token.fence, 're-acquiring mints a higher fence');
  });

  test('after expiry another holder gets a strictly higher fence', () => {
    const { coordinator, coordClock, a, b } = world({ ttlMillis: 100 });
    const la = acquire(coordinator, a);
    coordClock.advance(100);
    const lb = acquire(coordinator, b);
    assert.ok(lb.token.fence > la.token.fence);
    assert.deepEqual(coordinator.renew(a.beginRenewal(la)), { ok: false, reason: 'expired' });
  });

  test('release frees the resource once; the next grant has a higher fence', () => {
    const { coordinator, a, b } = world();
    const la = acquire(coordinator, a);
    assert.equal(coordinator.release({ ...la.token, holderId: 'agent-b' }), false, 'only the holder releases');
    assert.equal(coordinator.release(la.token), true);
    assert.equal(coordinator.release(la.token), false, 'a second release changes nothing');
    assert.equal(acquire(coordinator, b).token.fence, la.token.fence + 1);
  });

  test('release checks the token on both paths (strings sent as interned ids, or in full)', () => {
    const { coordinator, a } = world();
    const la = acquire(coordinator, a);
    const bad = (token, arg) => assert.throws(() => coordinator.release(token),
      (e) => e instanceof InvalidArgumentError && e.argument === arg);
    bad({ ...la.token, fence: 1.5 }, 'token.fence');
    bad({ ...la.token, fence: 0 }, 'token.fence');
    bad({ ...la.token, holderId: '' }, 'token.holderId');
    bad({ ...la.token, resource: 7 }, 'token.resource');
    bad({ ...la.token, fence: '1' }, 'token.fence');
    bad(null, 'token');
    assert.equal(coordinator.release({ ...la.token, resource: 'r'.repeat(100) }), false, 'a long resource goes in full');
    let reads = 0;
    const token = { get resource() { reads++; return la.token.resource; }, holderId: la.token.holderId, fence: la.token.fence };
    assert.equal(coordinator.release(token), true);
    assert.equal(reads, 1, 'each field is read once');
  });

  test('renew refuses an acquisition request and acquire a renewal', () => {
    const { coordinator, a } = world();
    const lease = acquire(coordinator, a);
    assert.throws(() => coordinator.renew(a.beginAcquire('slot')), (e) => e instanceof InvalidArgumentError && e.argument === 'request.kind');
    assert.throws(() => coordinator.acquire(a.beginRenewal(lease)), (e) => e.argument === 'request.kind');
  });
});

describe('retries', () => {
  test('a retried requestId gets the same grant, not a new fence', () => {
    const { coordinator, coordClock, a } = world();
    const req = a.beginAcquire('slot');
    const first = coordinator.acquire(req);
    coordClock.advance(10);
    const retry = coordinator.acquire(req);
    assert.deepEqual(retry, first);
    assert.equal(coordinator.issuedFence, 1);
  });

  test('a retry after the lease ended is a new acquisition', () => {
    const { coordinator, coordClock, a } = world({ ttlMillis: 100 });
    const req = a.beginAcquire('slot');
    const first = coordinator.acquire(req);
    coordClock.advance(100);
    const late = coordinator.acquire(req);
    assert.equal(late.ok, true);
    assert.equal(late.grant.fence, first.grant.fence + 1);
  });

  test('a requestId reused for another resource is refused', () => {
    const { coordinator, a } = world();
    const req = a.beginAcquire('slot');
    coordinator.acquire(req);
    assert.throws(() => coordinator.acquire({ ...req, resource: 'other' }), (e) => e instanceof InvalidArgumentError && e.argument === 'requestId');
  });
});

describe('the coordinator\'s clock', () => {
  test('a backwards reading fails the call and changes nothing', () => {
    const readings = [100, 50, 200];
    const coordinator = new LeaseCoordinator({ clock: createClock('ntp', () => readings.shift()), ttlMillis: 1000 });
    const a = new LeaseClient({ clock: createManualClock('agent-a'), holderId: 'agent-a' });
    assert.equal(coordinator.acquire(a.beginAcquire('x')).ok, true); // read 100
    assert.throws(() => coordinator.acquire(a.beginAcquire('y')), ClockReadingError); // read 50
    assert.equal(coordinator.issuedFence, 1, 'no fence issued for the failed call');
    const out = coordinator.acquire(a.beginAcquire('y')); // read 200
    assert.equal(out.grant.fence, 2);
    assert.equal(out.grant.coordinatorExpiresAt.millis, 1200);
  });

  test('an exception from the coordinator\'s clock source reaches the caller unchanged', () => {
    const failure = new Error('clock unavailable');
    const coordinator = new LeaseCoordinator({ clock: createClock('src', () => { throw failure; }), ttlMillis: 1000 });
    const a = new LeaseClient({ clock: createManualClock('agent-a'), holderId: 'agent-a' });
    assert.throws(() => coordinator.acquire(a.beginAcquire('x')), (e) => e === failure);
    assert.equal(coordinator.issuedFence, 0);
  });

  test('a stepping manual clock moves on every call the coordinator makes', () => {
    const { coordinator, coordClock, a } = world({ ttlMillis: 100, stepPerRead: 10 });
    const lease = acquire(coordinator, a); // the coordinator reads 0
    assert.equal(lease.grant.coordinatorExpiresAt.millis, 100);
    assert.equal(coordClock.now().millis, 10, 'one read by acquire, this is the second');
  });
});
