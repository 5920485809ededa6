// Requests, grants and outcomes are plain data: a JSON round trip works
// wherever the original does.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FenceGate } from 'lease-fence';
import { acquire, world } from './helpers.mjs';

const wire = (x) => JSON.parse(JSON.stringify(x));

describe('JSON round trip', () => {
  test('an acquisition request and its grant survive JSON on both legs', () => {
    const { coordinator, a } = world();
    const req = a.beginAcquire('slot');
    assert.deepEqual(Object.keys(wire(req)).sort(), ['holderId', 'kind', 'requestId', 'resource', 'sentAt']);
    const out = wire(coordinator.acquire(wire(req)));
    assert.equal(out.ok, true);
    const lease = a.completeAcquire(wire(req), out.grant);
    assert.equal(lease.token.fence, 1);
    assert.deepEqual(wire(lease.token), { resource: 'slot', holderId: 'agent-a', fence: 1 });
  });

  test('a renewal request carries its fence through JSON', () => {
    const { coordinator, a } = world();
    const lease = acquire(coordinator, a);
    const req = wire(a.beginRenewal(lease));
    assert.equal(req.fence, lease.token.fence);
    const out = wire(coordinator.renew(req));
    assert.equal(a.completeRenewal(req, out.grant).token.fence, lease.token.fence);
  });

  test('a JSON copy of a request completes once, like the original', () => {
    const { coordinator, a } = world();
    const req = a.beginAcquire('slot');
    const { grant } = coordinator.acquire(req);
    a.completeAcquire(wire(req), wire(grant));
    assert.throws(() => a.completeAcquire(req, grant), { name: 'RequestCompletedError' });
  });

  test('denials, expiries and tokens are plain data too', () => {
    const { coordinator, coordClock, a, b } = world({ ttlMillis: 100 });
    const lease = acquire(coordinator, a);
    const denied = coordinator.acquire(b.beginAcquire('slot'));
    assert.deepEqual(wire(denied), denied);
    coordClock.advance(100);
    const expired = coordinator.renew(wire(a.beginRenewal(lease)));
    assert.deepEqual(wire(expired), { ok: false, reason: 'expired' });
    const gate = new FenceGate('slot');
    assert.equal(gate.commit(wire(lease.token), () => 'ok'), 'ok');
    assert.equal(coordinator.release(wire(lease.token)), false);
  });

  test('a grant serialized with an explicit fence 0 on an acquisition request is accepted', () => {
    const { coordinator, a } = world();
    const req = { ...wire(a.beginAcquire('slot')), fence: 0 };
    assert.equal(coordinator.acquire(req).ok, true);
  });
});
