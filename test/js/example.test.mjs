// The spec's usage example, verbatim, importing the package by name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMonotonicClock, FenceGate, LeaseClient, LeaseCoordinator } from 'lease-fence';

const applied = [];
function applyTheChange() {
  applied.push('deploy');
  return 'applied';
}

test('the usage example runs as written', () => {
  const coordinator = new LeaseCoordinator({
    clock: createMonotonicClock('coordinator'),
    ttlMillis: 30_000,
  });

  const client = new LeaseClient({
    clock: createMonotonicClock('agent-a'),
    holderId: 'agent-a',
    clockSkewMillis: 500,
  });

  const gate = new FenceGate('deploy-slot');

  const request = client.beginAcquire('deploy-slot'); // stamps the instant this was sent
  const outcome = coordinator.acquire(request); // the far side of the wire

  if (!outcome.ok) {
    console.log(`held by ${outcome.heldBy}, free in ${outcome.retryAfterMillis}ms`);
  } else {
    const lease = client.completeAcquire(request, outcome.grant);
    gate.commit(lease.token, () => applyTheChange()); // throws StaleFenceError if reassigned
  }

  assert.equal(outcome.ok, true);
  assert.deepEqual(applied, ['deploy']);
  assert.equal(gate.floor, 1);
  assert.equal(coordinator.issuedFence, 1);
});
